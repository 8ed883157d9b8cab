/*
 * store.c - SQLite store of sandbox records, with a version table and ordered migrations.
 */
#include "server/store.h"
#include "server/metrics.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"

struct sbx_store {
    sqlite3 *db;
    pthread_mutex_t mu;
    /* The writes every lifecycle step makes, compiled once (under mu): parsing the SQL again
     * on each was a visible part of a write's cost. */
    sqlite3_stmt *put;
    sqlite3_stmt *del;
};

/* Migration i brings the schema from version i to i + 1. Never edit one; append. */
static const char *const migrations[] = {
    "CREATE TABLE sandboxes ("
    " id TEXT PRIMARY KEY, provider TEXT NOT NULL, state TEXT NOT NULL, reason TEXT,"
    " message TEXT, last_transition_at INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    " expires_at INTEGER, image TEXT, entrypoint TEXT NOT NULL, env TEXT NOT NULL,"
    " metadata TEXT NOT NULL, resource_limits TEXT NOT NULL, extensions TEXT NOT NULL,"
    " provider_private TEXT NOT NULL);"
    "CREATE INDEX sandboxes_created ON sandboxes(created_at);",
    /* 2: the last lifecycle transitions, for the diagnostics API (written with the row) */
    "ALTER TABLE sandboxes ADD COLUMN events TEXT NOT NULL DEFAULT '[]';",
    /* 3: snapshots (snapshot.c), one JSON document per row */
    "CREATE TABLE snapshots (id TEXT PRIMARY KEY, doc TEXT NOT NULL);",
    /* 4: pools of warm sandboxes (pool.c), one JSON document per pool name */
    "CREATE TABLE pools (name TEXT PRIMARY KEY, doc TEXT NOT NULL);",
};

static int
db_error(sqlite3 *db, sbx_error **err, const char *what)
{
    return sbx_error_set(err, SBX_EIO, 0, "store: %s: %s", what, sqlite3_errmsg(db));
}

static int
exec_sql(sqlite3 *db, const char *sql, sbx_error **err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int r = sbx_error_set(err, SBX_EIO, 0, "store: %s", msg ? msg : "exec failed");
        sqlite3_free(msg);
        return r;
    }
    return 0;
}

static int
read_version(sqlite3 *db, int *version, sbx_error **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &st, NULL) != SQLITE_OK)
        return db_error(db, err, "read schema version");
    *version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return 0;
}

static int
migrate(sqlite3 *db, sbx_error **err)
{
    if (exec_sql(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", err) <
        0)
        return -SBX_EIO;
    int version = 0;
    if (read_version(db, &version, err) < 0)
        return -SBX_EIO;
    int known = (int)SBX_ARRAY_SIZE(migrations);
    if (version > known)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "store: schema version %d is newer than this sbx (%d)", version,
                             known);
    for (int v = version; v < known; v++) {
        sbx_autofree char *sql = sbx_xasprintf("BEGIN IMMEDIATE; %s DELETE FROM schema_version; "
                                               "INSERT INTO schema_version VALUES (%d); COMMIT;",
                                               migrations[v], v + 1);
        if (exec_sql(db, sql, err) < 0) {
            (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return sbx_error_wrap(err, "migrate to version %d", v + 1);
        }
    }
    return 0;
}

int
sbx_store_open(const char *path, struct sbx_store **out, sbx_error **err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        int r = sbx_error_set(err, SBX_EIO, 0, "store: open `%s`: %s", path,
                              db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return r;
    }
    (void)sqlite3_busy_timeout(db, 5000);
    if (exec_sql(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", err) < 0 ||
        migrate(db, err) < 0) {
        sqlite3_close(db);
        return sbx_error_wrap(err, "open store `%s`", path);
    }
    struct sbx_store *st = sbx_xcalloc(1, sizeof *st);
    st->db = db;
    pthread_mutex_init(&st->mu, NULL);
    *out = st;
    return 0;
}

void
sbx_store_close(struct sbx_store *st)
{
    if (!st)
        return;
    sqlite3_finalize(st->put);
    sqlite3_finalize(st->del);
    sqlite3_close(st->db);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Can the store still be written? Takes SQLite's write lock and lets it go (BEGIN IMMEDIATE
 * fails on a read-only file, a full disk's journal, or a lock held past the busy timeout). */
int
sbx_store_check(struct sbx_store *st, sbx_error **err)
{
    pthread_mutex_lock(&st->mu);
    int r = exec_sql(st->db, "BEGIN IMMEDIATE; ROLLBACK;", err);
    pthread_mutex_unlock(&st->mu);
    return r;
}

int
sbx_store_version(struct sbx_store *st)
{
    int v = 0;
    pthread_mutex_lock(&st->mu);
    (void)read_version(st->db, &v, NULL);
    pthread_mutex_unlock(&st->mu);
    return v;
}

static void
bind_json(sqlite3_stmt *s, int i, const json_t *j)
{
    if (!j) {
        sqlite3_bind_null(s, i);
        return;
    }
    char *txt = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    sqlite3_bind_text(s, i, txt ? txt : "null", -1, SQLITE_TRANSIENT);
    free(txt);
}

static void
bind_text(sqlite3_stmt *s, int i, const char *t)
{
    if (t && *t)
        sqlite3_bind_text(s, i, t, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, i);
}

static void
bind_row(sqlite3_stmt *s, const struct sbx_record *sb)
{
    bind_text(s, 1, sb->id);
    bind_text(s, 2, sb->provider);
    bind_text(s, 3, sb->state);
    bind_text(s, 4, sb->reason);
    bind_text(s, 5, sb->message);
    sqlite3_bind_int64(s, 6, sb->last_transition_ms);
    sqlite3_bind_int64(s, 7, sb->created_ms);
    if (sb->expires_ms)
        sqlite3_bind_int64(s, 8, sb->expires_ms);
    else
        sqlite3_bind_null(s, 8);
    bind_json(s, 9, sb->image);
    bind_json(s, 10, sb->entrypoint);
    bind_json(s, 11, sb->env);
    bind_json(s, 12, sb->metadata);
    bind_json(s, 13, sb->limits);
    bind_json(s, 14, sb->extensions);
    bind_json(s, 15, sb->priv);
    bind_json(s, 16, sb->events);
}

/* Run the cached statement *slot (compiled from sql on first use) with sb's row or id. */
static int
run_stmt(struct sbx_store *st, sqlite3_stmt **slot, const char *sql, const struct sbx_record *sb,
         const char *id, sbx_error **err)
{
    pthread_mutex_lock(&st->mu);
    int r = 0;
    if (!*slot &&
        sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) != SQLITE_OK)
        r = db_error(st->db, err, "prepare");
    sqlite3_stmt *s = r == 0 ? *slot : NULL;
    if (s && sb)
        bind_row(s, sb);
    else if (s)
        bind_text(s, 1, id);
    if (s && sqlite3_step(s) != SQLITE_DONE)
        r = db_error(st->db, err, "write");
    if (s) {
        (void)sqlite3_reset(s);
        (void)sqlite3_clear_bindings(s);
    }
    pthread_mutex_unlock(&st->mu);
    return r;
}

int
sbx_store_put(struct sbx_store *st, const struct sbx_record *sb, sbx_error **err)
{
    uint64_t t0 = sbx_now_ns();
    int r = run_stmt(st, &st->put,
                     "INSERT OR REPLACE INTO sandboxes VALUES "
                     "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)",
                     sb, NULL, err);
    sbx_metrics_store_write((double)(sbx_now_ns() - t0) / 1e9);
    return r;
}

int
sbx_store_delete(struct sbx_store *st, const char *id, sbx_error **err)
{
    return run_stmt(st, &st->del, "DELETE FROM sandboxes WHERE id = ?1", NULL, id, err);
}

static json_t *
col_json(sqlite3_stmt *s, int i, bool object_default)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    json_t *j = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
    if (!j && object_default)
        j = json_object();
    return j;
}

static void
col_copy(char *dst, size_t n, sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    size_t len = t ? strnlen(t, n - 1) : 0;
    if (len)
        memcpy(dst, t, len);
    dst[len] = '\0';
}

static struct sbx_record *
row_to_sandbox(sqlite3_stmt *s)
{
    struct sbx_record *sb = sbx_xcalloc(1, sizeof *sb);
    col_copy(sb->id, sizeof sb->id, s, 0);
    col_copy(sb->provider, sizeof sb->provider, s, 1);
    col_copy(sb->state, sizeof sb->state, s, 2);
    col_copy(sb->reason, sizeof sb->reason, s, 3);
    const char *msg = (const char *)sqlite3_column_text(s, 4);
    sb->message = msg ? sbx_xstrdup(msg) : NULL;
    sb->last_transition_ms = sqlite3_column_int64(s, 5);
    sb->created_ms = sqlite3_column_int64(s, 6);
    sb->expires_ms = sqlite3_column_int64(s, 7);
    sb->image = col_json(s, 8, false);
    sb->entrypoint = col_json(s, 9, false);
    if (!sb->entrypoint)
        sb->entrypoint = json_array();
    sb->env = col_json(s, 10, true);
    sb->metadata = col_json(s, 11, true);
    sb->limits = col_json(s, 12, true);
    sb->extensions = col_json(s, 13, true);
    sb->priv = col_json(s, 14, true);
    sb->events = col_json(s, 15, false);
    if (!json_is_array(sb->events)) {
        json_decref(sb->events);
        sb->events = json_array();
    }
    return sb;
}

int
sbx_store_load(struct sbx_store *st, void (*fn)(struct sbx_record *sb, void *ud), void *ud,
               sbx_error **err)
{
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *s = NULL;
    int r = 0;
    int rc = 0;
    if (sqlite3_prepare_v2(st->db, "SELECT * FROM sandboxes ORDER BY created_at", -1, &s, NULL) !=
        SQLITE_OK) {
        r = db_error(st->db, err, "prepare");
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        fn(row_to_sandbox(s), ud);
    if (rc != SQLITE_DONE)
        r = db_error(st->db, err, "read");
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->mu);
    return r;
}

/* ---- snapshots: one JSON document per row (snapshot.c owns the shape) ---- */

static int
doc_stmt(struct sbx_store *st, const char *sql, const char *id, const json_t *doc, sbx_error **err)
{
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *s = NULL;
    int r = 0;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        r = db_error(st->db, err, "prepare");
    if (r == 0) {
        bind_text(s, 1, id);
        if (doc)
            bind_json(s, 2, doc);
        if (sqlite3_step(s) != SQLITE_DONE)
            r = db_error(st->db, err, "write");
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->mu);
    return r;
}

int
sbx_store_snapshot_put(struct sbx_store *st, const char *id, const json_t *doc, sbx_error **err)
{
    return doc_stmt(st, "INSERT OR REPLACE INTO snapshots VALUES (?1, ?2)", id, doc, err);
}

int
sbx_store_snapshot_delete(struct sbx_store *st, const char *id, sbx_error **err)
{
    return doc_stmt(st, "DELETE FROM snapshots WHERE id = ?1", id, NULL, err);
}

/* Call fn for each document of `sql` (SELECT doc FROM ...). */
static int
doc_load(struct sbx_store *st, const char *sql, void (*fn)(json_t *doc, void *ud), void *ud,
         sbx_error **err)
{
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *s = NULL;
    int r = 0;
    int rc = 0;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        r = db_error(st->db, err, "prepare");
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *doc = col_json(s, 0, false);
        if (json_is_object(doc))
            fn(doc, ud);
        else
            json_decref(doc);
    }
    if (rc != SQLITE_DONE)
        r = db_error(st->db, err, "read");
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->mu);
    return r;
}

int
sbx_store_snapshot_load(struct sbx_store *st, void (*fn)(json_t *doc, void *ud), void *ud,
                        sbx_error **err)
{
    return doc_load(st, "SELECT doc FROM snapshots", fn, ud, err);
}

/* ---- pools: one JSON document per pool (pool.c owns the shape) ---- */

int
sbx_store_pool_put(struct sbx_store *st, const char *name, const json_t *doc, sbx_error **err)
{
    return doc_stmt(st, "INSERT OR REPLACE INTO pools VALUES (?1, ?2)", name, doc, err);
}

int
sbx_store_pool_delete(struct sbx_store *st, const char *name, sbx_error **err)
{
    return doc_stmt(st, "DELETE FROM pools WHERE name = ?1", name, NULL, err);
}

int
sbx_store_pool_load(struct sbx_store *st, void (*fn)(json_t *doc, void *ud), void *ud,
                    sbx_error **err)
{
    return doc_load(st, "SELECT doc FROM pools ORDER BY name", fn, ud, err);
}
