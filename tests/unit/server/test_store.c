#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "server/store.h"

struct seen {
    int n;
    struct sbx_record *last;
};

static void
collect(struct sbx_record *sb, void *ud)
{
    struct seen *s = ud;
    s->n++;
    sbx_record_free(s->last);
    s->last = sb;
}

static void
test_roundtrip(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-store-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof path, "%s/sbx.db", dir);
    struct sbx_store *st = NULL;
    assert_int_equal(sbx_store_open(path, &st, NULL), 0);
    assert_int_equal(sbx_store_version(st), 1);
    struct sbx_record *sb = sbx_record_new();
    sbx_srv_uuid4(sb->id);
    (void)snprintf(sb->provider, sizeof sb->provider, "process");
    sbx_record_set_state(sb, "Running", "SANDBOX_RUNNING", "hi");
    sb->created_ms = 1000;
    sb->image = json_pack("{s:s}", "uri", "python");
    (void)json_array_append_new(sb->entrypoint, json_string("sleep"));
    (void)json_object_set_new(sb->priv, "pid", json_integer(42));
    assert_int_equal(sbx_store_put(st, sb, NULL), 0);
    sbx_record_set_state(sb, "Paused", NULL, NULL);
    assert_int_equal(sbx_store_put(st, sb, NULL), 0); /* replace, not a second row */
    sbx_store_close(st);

    assert_int_equal(sbx_store_open(path, &st, NULL), 0); /* reopen: no second migration */
    struct seen seen = {0};
    assert_int_equal(sbx_store_load(st, collect, &seen, NULL), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.last->id, sb->id);
    assert_string_equal(seen.last->state, "Paused");
    assert_int_equal(seen.last->expires_ms, 0);
    assert_null(seen.last->message);
    assert_true(json_equal(seen.last->image, sb->image));
    assert_true(json_equal(seen.last->entrypoint, sb->entrypoint));
    assert_int_equal(json_integer_value(json_object_get(seen.last->priv, "pid")), 42);
    assert_int_equal(sbx_store_delete(st, sb->id, NULL), 0);
    sbx_record_free(seen.last);
    seen = (struct seen){0};
    assert_int_equal(sbx_store_load(st, collect, &seen, NULL), 0);
    assert_int_equal(seen.n, 0);
    sbx_store_close(st);
    sbx_record_free(sb);
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
