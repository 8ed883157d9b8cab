#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>

#include "common/util.h"
#include "server/meta.h"

static int
validate(const char *json)
{
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    sbx_error *err = NULL;
    int r = sbx_meta_validate(j, &err);
    sbx_error_clear(&err);
    json_decref(j);
    return r;
}

static void
test_labels(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "{}",
        "{\"a\":\"b\"}",
        "{\"app\":\"\"}",
        "{\"a.b-c_d\":\"X-1.y_z\"}",
        "{\"example.com/name\":\"v\"}",
        "{\"a.b.c/n\":\"v\"}",
        "{\"k\":\"123456789012345678901234567890123456789012345678901234567890123\"}",
    };
    static const char *const bad[] = {
        "[]",
        "{\"a\":1}",
        "{\"\":\"v\"}",
        "{\"-a\":\"v\"}",
        "{\"a-\":\"v\"}",
        "{\"a b\":\"v\"}",
        "{\"a\":\"v w\"}",
        "{\"a\":\"-v\"}",
        "{\"Example.com/a\":\"v\"}",
        "{\"/a\":\"v\"}",
        "{\"x/\":\"v\"}",
        "{\"opensandbox.io/x\":\"v\"}",
        "{\"k\":\"1234567890123456789012345678901234567890123456789012345678901234\"}",
        "{\"k1234567890123456789012345678901234567890123456789012345678901234\":\"v\"}",
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ok); i++) {
        if (validate(ok[i]) != 0)
            fail_msg("should be valid: %s", ok[i]);
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        if (validate(bad[i]) != -SBX_EINVAL)
            fail_msg("should be invalid: %s", bad[i]);
    }
}

static void
patch_case(const char *target, const char *patch, const char *want)
{
    json_t *t = json_loads(target, 0, NULL);
    json_t *p = json_loads(patch, 0, NULL);
    json_t *w = json_loads(want, 0, NULL);
    sbx_merge_patch(t, p);
    if (!json_equal(t, w)) {
        char *got = json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("%s + %s = %s, want %s", target, patch, got, want);
    }
    json_decref(t);
    json_decref(p);
    json_decref(w);
}

static void
test_merge_patch(void **state)
{
    (void)state;
    /* RFC 7396 appendix A, the object cases */
    patch_case("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    patch_case("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
    patch_case("{\"a\":\"b\"}", "{\"a\":null}", "{}");
    patch_case("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
    patch_case("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    patch_case("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}",
               "{\"a\":{\"b\":\"d\"}}");
    patch_case("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
    patch_case("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
    patch_case("{\"a\":\"b\"}", "{}", "{\"a\":\"b\"}");
}

static void
test_pages(void **state)
{
    (void)state;
    struct sbx_page pg;
    sbx_page_calc(0, 1, 20, &pg);
    assert_int_equal(pg.total_pages, 0);
    assert_int_equal(pg.count, 0);
    assert_false(pg.has_next);
    sbx_page_calc(45, 1, 20, &pg);
    assert_int_equal(pg.total_pages, 3);
    assert_int_equal(pg.start, 0);
    assert_int_equal(pg.count, 20);
    assert_true(pg.has_next);
    sbx_page_calc(45, 3, 20, &pg);
    assert_int_equal(pg.start, 40);
    assert_int_equal(pg.count, 5);
    assert_false(pg.has_next);
    sbx_page_calc(45, 4, 20, &pg);
    assert_int_equal(pg.count, 0);
    assert_false(pg.has_next);
    sbx_page_calc(40, 2, 20, &pg);
    assert_int_equal(pg.total_pages, 2);
    assert_int_equal(pg.count, 20);
    assert_false(pg.has_next);
    sbx_page_calc(5, 1000000, 200, &pg);
    assert_int_equal(pg.count, 0);
}

static void
test_filter(void **state)
{
    (void)state;
    json_t *f = NULL;
    sbx_error *err = NULL;
    /* after the HTTP layer's decode: "project=Apollo&note=Demo%2520Test" */
    assert_int_equal(sbx_meta_filter_parse("project=Apollo&note=Demo%2520Test", &f, &err), 0);
    assert_string_equal(json_string_value(json_object_get(f, "project")), "Apollo");
    assert_string_equal(json_string_value(json_object_get(f, "note")), "Demo%20Test");
    json_t *meta =
        json_pack("{s:s, s:s, s:s}", "project", "Apollo", "note", "Demo%20Test", "x", "y");
    assert_true(sbx_meta_matches(meta, f));
    (void)json_object_set_new(meta, "project", json_string("Other"));
    assert_false(sbx_meta_matches(meta, f));
    json_decref(meta);
    json_decref(f);
    assert_int_equal(sbx_meta_filter_parse("a+b=c%26d", &f, &err), 0);
    assert_string_equal(json_string_value(json_object_get(f, "a b")), "c&d");
    json_decref(f);
    assert_int_equal(sbx_meta_filter_parse("", &f, &err), 0);
    assert_int_equal(json_object_size(f), 0);
    json_decref(f);
    assert_int_equal(sbx_meta_filter_parse("noequals", &f, &err), -SBX_EINVAL);
    sbx_error_clear(&err);
    assert_int_equal(sbx_meta_filter_parse("a=%zz", &f, &err), -SBX_EINVAL);
    sbx_error_clear(&err);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_merge_patch),
        cmocka_unit_test(test_pages),
        cmocka_unit_test(test_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
