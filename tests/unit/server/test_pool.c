#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "server/pool.h"

static int
parse(const char *text, int64_t max_total, struct sbx_pool_capacity *c, char *why)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    int r = sbx_pool_capacity_parse(j, max_total, c, why, 200);
    json_decref(j);
    return r;
}

static void
test_capacity(void **state)
{
    (void)state;
    struct sbx_pool_capacity c;
    char why[200];
    assert_int_equal(
        parse("{\"bufferMax\":3,\"bufferMin\":1,\"poolMax\":10,\"poolMin\":2}", 100, &c, why), 0);
    assert_int_equal(c.buffer_max, 3);
    assert_int_equal(c.buffer_min, 1);
    assert_int_equal(c.pool_max, 10);
    assert_int_equal(c.pool_min, 2);
    static const struct {
        const char *json;
        const char *why; /* a word the message holds */
    } bad[] = {
        {"{\"bufferMax\":1,\"bufferMin\":2,\"poolMax\":10,\"poolMin\":0}", "bufferMin"},
        {"{\"bufferMax\":1,\"bufferMin\":0,\"poolMax\":1,\"poolMin\":2}", "poolMin"},
        {"{\"bufferMax\":5,\"bufferMin\":3,\"poolMax\":2,\"poolMin\":0}", "poolMax"},
        {"{\"bufferMax\":-1,\"bufferMin\":0,\"poolMax\":1,\"poolMin\":0}", "bufferMax"},
        {"{\"bufferMax\":1,\"bufferMin\":0,\"poolMax\":9223372036854775807,\"poolMin\":0}",
         "poolMax"},
        {"{\"bufferMax\":1.5,\"bufferMin\":0,\"poolMax\":1,\"poolMin\":0}", "bufferMax"},
        {"{\"bufferMax\":\"1\",\"bufferMin\":0,\"poolMax\":1,\"poolMin\":0}", "bufferMax"},
        {"{\"bufferMax\":1,\"bufferMin\":0,\"poolMax\":1}", "poolMin"},
        {"{\"bufferMax\":1,\"bufferMin\":0,\"poolMax\":101,\"poolMin\":0}", "max_sandboxes"},
        {"[1]", "object"},
        {"null", "object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(parse(bad[i].json, 100, &c, why), -1);
        assert_non_null(strstr(why, bad[i].why));
    }
    /* a capacity of zeros is a pool that makes nothing */
    assert_int_equal(
        parse("{\"bufferMax\":0,\"bufferMin\":0,\"poolMax\":0,\"poolMin\":0}", 100, &c, why), 0);
}

static void
plan(const struct sbx_pool_capacity *c, struct sbx_pool_counts n, size_t want_create,
     size_t want_trim)
{
    size_t create = 99;
    size_t trim = 99;
    sbx_pool_plan(c, &n, &create, &trim);
    assert_int_equal(create, want_create);
    assert_int_equal(trim, want_trim);
}

/* counts: available, allocated, creating, taking */
#define N(a, b, c, d) ((struct sbx_pool_counts){a, b, c, d})

static void
test_plan(void **state)
{
    (void)state;
    struct sbx_pool_capacity c = {.buffer_max = 3, .buffer_min = 2, .pool_max = 5, .pool_min = 0};
    plan(&c, N(0, 0, 0, 0), 2, 0); /* empty: fill to bufferMin */
    plan(&c, N(1, 0, 1, 0), 0, 0); /* one being made counts */
    plan(&c, N(2, 0, 0, 0), 0, 0);
    plan(&c, N(0, 4, 0, 0), 1, 0); /* poolMax caps the refill */
    plan(&c, N(0, 5, 0, 0), 0, 0); /* full */
    plan(&c, N(0, 4, 0, 1), 0, 0); /* a take's own create counts toward the total */
    plan(&c, N(5, 0, 0, 0), 0, 2); /* above bufferMax: trim */
    plan(&c, N(2, 4, 0, 0), 0, 1); /* above poolMax (a lowered capacity): trim warm ones */
    plan(&c, N(0, 7, 0, 0), 0, 0); /* taken ones are never trimmed */
    struct sbx_pool_capacity m = {.buffer_max = 2, .buffer_min = 0, .pool_max = 10, .pool_min = 4};
    plan(&m, N(0, 0, 0, 0), 2, 0); /* poolMin, within bufferMax */
    plan(&m, N(0, 3, 0, 0), 1, 0);
    plan(&m, N(2, 2, 0, 0), 0, 0);
    struct sbx_pool_capacity z = {0};
    plan(&z, N(0, 0, 0, 0), 0, 0);
    /* room for a take's create: total below poolMax */
    struct sbx_pool_counts n = {.allocated = 4, .creating = 0};
    assert_true(sbx_pool_room(&c, &n));
    n.taking = 1;
    assert_false(sbx_pool_room(&c, &n));
}

static void
test_names(void **state)
{
    (void)state;
    assert_true(sbx_pool_name_valid("a"));
    assert_true(sbx_pool_name_valid("pool-1"));
    assert_true(sbx_pool_name_valid("0x"));
    const char *bad[] = {"", "-a", "a-", "A", "a_b", "a.b", "a/b", "é", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(sbx_pool_name_valid(bad[i]));
    char long_name[SBX_POOL_NAME_MAX + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_false(sbx_pool_name_valid(long_name));
    long_name[SBX_POOL_NAME_MAX] = '\0';
    assert_true(sbx_pool_name_valid(long_name));
}

static void
test_pool_of(void **state)
{
    (void)state;
    struct sbx_record *sb = sbx_record_new();
    bool warm = true;
    const char *uid = "x";
    assert_null(sbx_pool_of(sb, &warm, &uid));
    assert_false(warm);
    assert_null(uid);
    (void)json_object_set_new(sb->priv, SBX_POOL_PRIV,
                              json_pack("{s:s, s:s, s:b}", "name", "p", "uid", "u1", "warm", 1));
    assert_string_equal(sbx_pool_of(sb, &warm, &uid), "p");
    assert_true(warm);
    assert_string_equal(uid, "u1");
    sbx_record_free(sb);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_pool_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
