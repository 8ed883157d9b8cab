#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

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
    assert_int_equal(sbx_store_version(st), 4);
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
    /* the transitions came back with the row, in order */
    assert_int_equal(json_array_size(seen.last->events), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(seen.last->events, 0), "state")),
        "Running");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(seen.last->events, 0), "message")), "hi");
    assert_true(json_equal(seen.last->events, sb->events));
    assert_int_equal(sbx_store_delete(st, sb->id, NULL), 0);
    sbx_record_free(seen.last);
    seen = (struct seen){0};
    assert_int_equal(sbx_store_load(st, collect, &seen, NULL), 0);
    assert_int_equal(seen.n, 0);
    sbx_store_close(st);
    sbx_record_free(sb);
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
}

/* The events keep the newest SBX_EVENTS_MAX transitions. */
static void
test_events_capped(void **state)
{
    (void)state;
    struct sbx_record *sb = sbx_record_new();
    char name[16];
    for (int i = 0; i < SBX_EVENTS_MAX + 5; i++) {
        (void)snprintf(name, sizeof name, "S%d", i);
        sbx_record_set_state(sb, name, NULL, "\xff not UTF-8");
    }
    assert_int_equal(json_array_size(sb->events), SBX_EVENTS_MAX);
    json_t *first = json_array_get(sb->events, 0);
    assert_string_equal(json_string_value(json_object_get(first, "state")), "S5");
    assert_null(json_object_get(first, "message")); /* not UTF-8: not kept */
    assert_null(json_object_get(first, "reason"));
    sbx_record_free(sb);
}

/* A version 1 store (before the events column) is migrated: its rows load with no events. */
static void
test_migrate_v1(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-store-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof path, "%s/sbx.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "CREATE TABLE schema_version (version INTEGER NOT NULL);"
                     "INSERT INTO schema_version VALUES (1);"
                     "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, provider TEXT NOT NULL,"
                     " state TEXT NOT NULL, reason TEXT, message TEXT,"
                     " last_transition_at INTEGER NOT NULL, created_at INTEGER NOT NULL,"
                     " expires_at INTEGER, image TEXT, entrypoint TEXT NOT NULL, env TEXT NOT NULL,"
                     " metadata TEXT NOT NULL, resource_limits TEXT NOT NULL,"
                     " extensions TEXT NOT NULL, provider_private TEXT NOT NULL);"
                     "INSERT INTO sandboxes VALUES ('x', 'process', 'Running', NULL, NULL, 1, 1,"
                     " NULL, NULL, '[]', '{}', '{}', '{}', '{}', '{}');",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    struct sbx_store *st = NULL;
    assert_int_equal(sbx_store_open(path, &st, NULL), 0);
    assert_int_equal(sbx_store_version(st), 4);
    struct seen seen = {0};
    assert_int_equal(sbx_store_load(st, collect, &seen, NULL), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.last->state, "Running");
    assert_true(json_is_array(seen.last->events));
    assert_int_equal(json_array_size(seen.last->events), 0);
    sbx_record_free(seen.last);
    sbx_store_close(st);
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
}

static void
collect_doc(json_t *doc, void *ud)
{
    json_t *all = ud;
    (void)json_array_append_new(all, doc);
}

/* Pool rows: put replaces, delete removes, load gives them back by name. */
static void
test_pools(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-store-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof path, "%s/sbx.db", dir);
    struct sbx_store *st = NULL;
    assert_int_equal(sbx_store_open(path, &st, NULL), 0);
    json_t *a = json_pack("{s:s, s:i}", "name", "a", "revision", 1);
    json_t *b = json_pack("{s:s}", "name", "b");
    assert_int_equal(sbx_store_pool_put(st, "b", b, NULL), 0);
    assert_int_equal(sbx_store_pool_put(st, "a", a, NULL), 0);
    (void)json_object_set_new(a, "revision", json_integer(2));
    assert_int_equal(sbx_store_pool_put(st, "a", a, NULL), 0);
    sbx_store_close(st);
    assert_int_equal(sbx_store_open(path, &st, NULL), 0);
    json_t *all = json_array();
    assert_int_equal(sbx_store_pool_load(st, collect_doc, all, NULL), 0);
    assert_int_equal(json_array_size(all), 2);
    assert_true(json_equal(json_array_get(all, 0), a));
    assert_int_equal(sbx_store_pool_delete(st, "a", NULL), 0);
    json_array_clear(all);
    assert_int_equal(sbx_store_pool_load(st, collect_doc, all, NULL), 0);
    assert_int_equal(json_array_size(all), 1);
    assert_true(json_equal(json_array_get(all, 0), b));
    json_decref(all);
    json_decref(a);
    json_decref(b);
    sbx_store_close(st);
    (void)unlink(path);
    (void)rmdir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_events_capped),
        cmocka_unit_test(test_migrate_v1),
        cmocka_unit_test(test_pools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
