/*
 * pool.c - pools of warm sandboxes: capacity rules, the refiller thread, takes (pool.h).
 *
 * Locking: p->mu guards the pool list and each pool's counters; it is taken before the
 * manager's lock (the counts come from sbx_mgr_each under p->mu), never after it, and no
 * manager call that waits for a provider (create, delete) runs under it.
 */
#include "server/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/api.h"
#include "server/api_fields.h"
#include "server/httpd.h"
#include "server/manager.h"
#include "server/meta.h"
#include "server/srvutil.h"
#include "server/store.h"

#define TICK_MS      1000  /* the refiller looks at every pool at least this often */
#define TAKE_WAIT_MS 30000 /* a take from a full pool waits this long for a warm one */
#define BACKOFF_MAX  30000 /* between refills of a pool whose creates fail */
/* After a take, refills wait this long while the pool still has a warm sandbox: the new
 * owner's first commands come within milliseconds, and on a small machine a create running
 * beside them (clone, mounts, cgroups) doubles their time. An empty pool refills at once. */
#define REFILL_DELAY_MS 50

/* ---- the pure part ---- */

bool
sbx_pool_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > SBX_POOL_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
        return false;
    return name[0] != '-' && name[n - 1] != '-';
}

static const char *const cap_keys[] = {"bufferMax", "bufferMin", "poolMax", "poolMin"};

int
sbx_pool_capacity_parse(const json_t *spec, int64_t max_total, struct sbx_pool_capacity *out,
                        char *why, size_t why_size)
{
    int64_t v[4] = {0};
    if (!json_is_object(spec)) {
        (void)snprintf(why, why_size, "`capacitySpec` must be an object");
        return -1;
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(cap_keys); i++) {
        json_t *x = json_object_get(spec, cap_keys[i]);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) > SBX_POOL_COUNT_MAX) {
            (void)snprintf(why, why_size, "`capacitySpec.%s` must be an integer in [0, %d]",
                           cap_keys[i], SBX_POOL_COUNT_MAX);
            return -1;
        }
        v[i] = json_integer_value(x);
    }
    struct sbx_pool_capacity c = {
        .buffer_max = v[0], .buffer_min = v[1], .pool_max = v[2], .pool_min = v[3]};
    const char *bad = NULL;
    if (c.buffer_min > c.buffer_max)
        bad = "`capacitySpec.bufferMin` is greater than `bufferMax`";
    else if (c.pool_min > c.pool_max)
        bad = "`capacitySpec.poolMin` is greater than `poolMax`";
    else if (c.buffer_min > c.pool_max)
        bad = "`capacitySpec.bufferMin` is greater than `poolMax`";
    if (bad) {
        (void)snprintf(why, why_size, "%s", bad);
        return -1;
    }
    if (c.pool_max > max_total) {
        (void)snprintf(why, why_size,
                       "`capacitySpec.poolMax` (%lld) is above the server's max_sandboxes (%lld)",
                       (long long)c.pool_max, (long long)max_total);
        return -1;
    }
    *out = c;
    return 0;
}

json_t *
sbx_pool_capacity_json(const struct sbx_pool_capacity *c)
{
    return json_pack("{s:I, s:I, s:I, s:I}", "bufferMax", (json_int_t)c->buffer_max, "bufferMin",
                     (json_int_t)c->buffer_min, "poolMax", (json_int_t)c->pool_max, "poolMin",
                     (json_int_t)c->pool_min);
}

static size_t
sub0(int64_t a, int64_t b)
{
    return a > b ? (size_t)(a - b) : 0;
}

static size_t
total_of(const struct sbx_pool_counts *n)
{
    return n->available + n->allocated + n->creating + n->taking;
}

void
sbx_pool_plan(const struct sbx_pool_capacity *c, const struct sbx_pool_counts *n, size_t *create,
              size_t *trim)
{
    int64_t warm = (int64_t)(n->available + n->creating); /* warm now or soon */
    int64_t total = (int64_t)total_of(n);
    size_t want = sub0(c->buffer_min, warm);
    size_t for_min = sub0(c->pool_min, total);
    if (for_min > want)
        want = for_min;
    size_t room_buf = sub0(c->buffer_max, warm);
    size_t room_total = sub0(c->pool_max, total);
    if (want > room_buf)
        want = room_buf;
    if (want > room_total)
        want = room_total;
    *create = want;
    size_t over = sub0(warm, c->buffer_max);
    size_t over_total = sub0(total, c->pool_max);
    if (over_total > over)
        over = over_total;
    *trim = over < n->available ? over : n->available;
}

bool
sbx_pool_room(const struct sbx_pool_capacity *c, const struct sbx_pool_counts *n)
{
    return (int64_t)total_of(n) < c->pool_max;
}

const char *
sbx_pool_of(const struct sbx_record *sb, bool *warm, const char **uid)
{
    json_t *p = json_object_get(sb->priv, SBX_POOL_PRIV);
    if (warm)
        *warm = json_is_true(json_object_get(p, "warm"));
    if (uid)
        *uid = json_string_value(json_object_get(p, "uid"));
    return json_string_value(json_object_get(p, "name"));
}

bool
sbx_pool_is_warm(const struct sbx_record *sb)
{
    bool warm = false;
    (void)sbx_pool_of(sb, &warm, NULL);
    return warm;
}

/* ---- the pools of a server ---- */

struct pool {
    char name[SBX_POOL_NAME_MAX + 1];
    char uid[33];
    json_t *tmpl; /* the create body, its provider named */
    struct sbx_pool_capacity cap;
    int64_t created_ms;
    int64_t revision;
    size_t creating; /* warm creates in flight */
    size_t taking;   /* on-demand creates of takes in flight */
    struct sbx_pool_counts n;
    unsigned failures; /* refills failed in a row */
    int64_t retry_ms;  /* no refill before this (back-off) */
    char *last_error;  /* why the last refill failed */
    struct pool *next;
};

struct sbx_pools {
    struct sbx_srv *srv;
    struct sbx_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* the refiller: kicked, stopping, or a tick */
    pthread_cond_t ready_cv; /* a refill ended (a take from a full pool waits for one) */
    struct pool *head;
    pthread_t thread;
    bool started;
    bool stopping;
    bool kicked;
    int64_t quiet_until; /* sbx_now_ms: refills of pools with a warm sandbox wait (a take) */
};

static struct pool *
find_pool(struct sbx_pools *p, const char *name)
{
    for (struct pool *x = p->head; x; x = x->next) {
        if (strcmp(x->name, name) == 0)
            return x;
    }
    return NULL;
}

static void
pool_free(struct pool *x)
{
    json_decref(x->tmpl);
    free(x->last_error);
    free(x);
}

static json_t *
pool_doc(const struct pool *x)
{
    return json_pack("{s:s, s:s, s:O, s:o, s:I, s:I}", "name", x->name, "uid", x->uid, "template",
                     x->tmpl, "capacitySpec", sbx_pool_capacity_json(&x->cap), "createdAt",
                     (json_int_t)x->created_ms, "revision", (json_int_t)x->revision);
}

static int
pool_save(struct sbx_pools *p, const struct pool *x, sbx_error **err)
{
    json_t *doc = pool_doc(x);
    int r = sbx_store_pool_put(p->store, x->name, doc, err);
    json_decref(doc);
    return r;
}

/* ---- counting: one pass over the manager's records ---- */

/* Sandboxes the refiller deletes: dead or unusable warm ones, warm ones of no pool, trims. */
struct victims {
    char (*ids)[SBX_UUID_LEN + 1];
    size_t n, cap;
};

static void
victim_add(struct victims *v, const char *id)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->ids = sbx_xrealloc(v->ids, v->cap * sizeof *v->ids);
    }
    (void)snprintf(v->ids[v->n++], sizeof v->ids[0], "%s", id);
}

struct scan {
    struct sbx_pools *p;
    struct victims *dead; /* NULL: only count */
};

static bool
dead_state(const char *s)
{
    return strcmp(s, "Failed") == 0 || strcmp(s, "Terminated") == 0;
}

static void
scan_one(const struct sbx_record *sb, bool busy, void *ud)
{
    struct scan *s = ud;
    bool warm = false;
    const char *uid = NULL;
    const char *name = sbx_pool_of(sb, &warm, &uid);
    if (!name || strcmp(sb->state, "Pending") == 0) /* creates count as in flight */
        return;
    struct pool *x = find_pool(s->p, name);
    bool mine = x && uid && strcmp(uid, x->uid) == 0;
    if (!warm) {
        if (mine && !dead_state(sb->state))
            x->n.allocated++;
        return;
    }
    if (busy)
        return;
    if (mine && strcmp(sb->state, "Running") == 0)
        x->n.available++;
    else if (s->dead) /* failed, lost, paused or stopped by hand, or its pool is gone */
        victim_add(s->dead, sb->id);
}

/* Fresh counts of every pool (lock held). */
static void
count_all(struct sbx_pools *p, struct victims *dead)
{
    for (struct pool *x = p->head; x; x = x->next) {
        memset(&x->n, 0, sizeof x->n);
        x->n.creating = x->creating;
        x->n.taking = x->taking;
    }
    /* No pool and no warm sandbox (of a pool removed, or of before a restart): nothing to
     * count or clean up, so a server without pools does not walk every sandbox each tick. */
    if (!p->head && sbx_mgr_unlisted(p->srv->mgr) == 0)
        return;
    struct scan s = {.p = p, .dead = dead};
    sbx_mgr_each(p->srv->mgr, scan_one, &s);
}

/* trim: up to `want` idle warm Running sandboxes of pool x */
struct trim {
    const struct pool *x;
    struct victims *v;
    size_t want;
};

static void
trim_one(const struct sbx_record *sb, bool busy, void *ud)
{
    struct trim *t = ud;
    bool warm = false;
    const char *uid = NULL;
    const char *name = sbx_pool_of(sb, &warm, &uid);
    if (t->want && warm && !busy && name && uid && strcmp(name, t->x->name) == 0 &&
        strcmp(uid, t->x->uid) == 0 && strcmp(sb->state, "Running") == 0) {
        victim_add(t->v, sb->id);
        t->want--;
    }
}

static json_t *
pool_json(const struct pool *x)
{
    char ts[32];
    char rev[24];
    sbx_srv_format_time(x->created_ms, ts);
    (void)snprintf(rev, sizeof rev, "%lld", (long long)x->revision);
    json_t *o =
        json_pack("{s:s, s:o, s:{s:I, s:I, s:I, s:s}, s:s}", "name", x->name, "capacitySpec",
                  sbx_pool_capacity_json(&x->cap), "status", "total", (json_int_t)total_of(&x->n),
                  "allocated", (json_int_t)x->n.allocated, "available", (json_int_t)x->n.available,
                  "revision", rev, "createdAt", ts);
    /* sbx: the provider its sandboxes run on, and why refills fail when they do */
    (void)json_object_set(o, "provider", json_object_get(x->tmpl, "provider"));
    if (x->last_error)
        (void)json_object_set_new(json_object_get(o, "status"), "message",
                                  json_string(x->last_error));
    return o;
}

/* ---- the refiller ---- */

static void
reply_dispose(struct sbx_reply *rep)
{
    json_decref(rep->body);
    free(rep->message);
    free(rep->location);
    memset(rep, 0, sizeof *rep);
}

static void
set_pool_priv(struct sbx_record *sb, const char *name, const char *uid, bool warm)
{
    (void)json_object_set_new(sb->priv, SBX_POOL_PRIV,
                              json_pack("{s:s, s:s, s:b}", "name", name, "uid", uid, "warm", warm));
}

/* Make one warm sandbox of the pool from its template (no lock held). 0 or an error. */
static int
make_warm(struct sbx_pools *p, const char *name, const char *uid, const json_t *tmpl,
          sbx_error **err)
{
    struct sbx_reply rep = {0};
    struct sbx_record *sb = NULL;
    if (sbx_api_build_create(p->srv, tmpl, &sb, &rep) < 0) {
        int r = sbx_error_set(err, SBX_EINVAL, 0, "template: %s",
                              rep.message ? rep.message : "invalid");
        reply_dispose(&rep);
        return r;
    }
    sb->expires_ms = 0; /* warm sandboxes never expire; a take sets the request's timeout */
    set_pool_priv(sb, name, uid, true);
    struct sbx_record *done = NULL;
    int r = sbx_mgr_create(p->srv->mgr, sb, &done, err);
    if (r >= 0)
        sbx_debug("pool %s: warm sandbox %s ready", name, done->id);
    sbx_record_free(done);
    return r;
}

static bool
still_warm(const struct sbx_record *sb, void *ud)
{
    (void)ud;
    return sbx_pool_is_warm(sb);
}

static void
delete_victims(struct sbx_pools *p, struct victims *v, const char *reason)
{
    for (size_t i = 0; i < v->n && !p->stopping; i++) {
        sbx_autoerror sbx_error *err = NULL;
        /* Still warm: a take may have claimed it since it was picked (outside the lock), and
         * a taken sandbox is its owner's (ECONFLICT: left alone). */
        if (sbx_mgr_delete_if(p->srv->mgr, v->ids[i], still_warm, reason, &err) < 0 &&
            sbx_error_code(err) != SBX_ENOTFOUND && sbx_error_code(err) != SBX_ECONFLICT)
            sbx_warn("pool: delete warm sandbox %s: %s", v->ids[i], sbx_error_msg(err));
    }
    v->n = 0;
}

/* One refill to start (lock held): the first pool that wants one and is not backing off.
 * Its in-flight count is raised; *tmpl is a reference the caller drops. */
static struct pool *
next_refill(struct sbx_pools *p, struct victims *trims, json_t **tmpl)
{
    int64_t now = (int64_t)sbx_now_ms();
    bool quiet = now < p->quiet_until;
    struct pool *pick = NULL;
    for (struct pool *x = p->head; x; x = x->next) {
        size_t create = 0;
        size_t trim = 0;
        sbx_pool_plan(&x->cap, &x->n, &create, &trim);
        if (trim) {
            struct trim t = {.x = x, .v = trims, .want = trim};
            sbx_mgr_each(p->srv->mgr, trim_one, &t);
        }
        if (!pick && create && now >= x->retry_ms && !(quiet && x->n.available > 0))
            pick = x;
    }
    if (pick) {
        pick->creating++;
        *tmpl = json_incref(pick->tmpl);
    }
    return pick;
}

static void
refill_done(struct sbx_pools *p, const char *name, const char *uid, const sbx_error *err)
{
    struct pool *x = find_pool(p, name);
    if (!x || strcmp(x->uid, uid) != 0)
        return; /* removed meanwhile: the next scan deletes what was made */
    x->creating--;
    free(x->last_error);
    x->last_error = NULL;
    if (!err) {
        x->failures = 0;
        x->retry_ms = 0;
        return;
    }
    x->last_error = sbx_xstrdup(sbx_error_msg(err));
    x->failures++;
    int64_t wait = 1000LL << (x->failures < 6 ? x->failures - 1 : 5);
    x->retry_ms = (int64_t)sbx_now_ms() + (wait < BACKOFF_MAX ? wait : BACKOFF_MAX);
    sbx_warn("pool %s: refill failed (%u in a row): %s", name, x->failures, sbx_error_msg(err));
}

/* Until kicked, stopping, a tick, or the end of a quiet time after a take (lock held). */
static void
wait_tick(struct sbx_pools *p)
{
    int64_t left = p->quiet_until - (int64_t)sbx_now_ms();
    struct timespec ts = sbx_monotonic_in((uint64_t)(left > 0 && left < TICK_MS ? left : TICK_MS));
    while (!p->stopping && !p->kicked && pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
        ;
    p->kicked = false;
}

static void *
refiller_main(void *arg)
{
    struct sbx_pools *p = arg;
    struct victims dead = {0};
    struct victims trims = {0};
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        count_all(p, &dead);
        json_t *tmpl = NULL;
        struct pool *x = next_refill(p, &trims, &tmpl);
        char name[SBX_POOL_NAME_MAX + 1] = "";
        char uid[33] = "";
        if (x) {
            (void)snprintf(name, sizeof name, "%s", x->name);
            (void)snprintf(uid, sizeof uid, "%s", x->uid);
        }
        pthread_mutex_unlock(&p->mu);
        delete_victims(p, &dead, "pool_cleanup");
        delete_victims(p, &trims, "pool_trim");
        sbx_autoerror sbx_error *err = NULL;
        if (x)
            (void)make_warm(p, name, uid, tmpl, &err);
        json_decref(tmpl);
        pthread_mutex_lock(&p->mu);
        if (x) {
            refill_done(p, name, uid, err);
            pthread_cond_broadcast(&p->ready_cv);
            continue; /* at once: more may be wanted */
        }
        wait_tick(p);
    }
    pthread_mutex_unlock(&p->mu);
    free(dead.ids);
    free(trims.ids);
    return NULL;
}

void
sbx_pools_kick(struct sbx_pools *p)
{
    pthread_mutex_lock(&p->mu);
    p->kicked = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- open, close ---- */

static void
load_cb(json_t *doc, void *ud)
{
    struct sbx_pools *p = ud;
    const char *name = json_string_value(json_object_get(doc, "name"));
    const char *uid = json_string_value(json_object_get(doc, "uid"));
    json_t *tmpl = json_object_get(doc, "template");
    struct sbx_pool_capacity c = {0};
    char why[160];
    if (!sbx_pool_name_valid(name) || !uid || strlen(uid) >= 33 || !json_is_object(tmpl) ||
        sbx_pool_capacity_parse(json_object_get(doc, "capacitySpec"), SBX_POOL_COUNT_MAX, &c, why,
                                sizeof why) < 0) {
        sbx_warn("pool: a stored pool is unreadable; skipped");
        json_decref(doc);
        return;
    }
    struct pool *x = sbx_xcalloc(1, sizeof *x);
    (void)snprintf(x->name, sizeof x->name, "%s", name);
    (void)snprintf(x->uid, sizeof x->uid, "%s", uid);
    x->tmpl = json_incref(tmpl);
    x->cap = c;
    x->created_ms = json_integer_value(json_object_get(doc, "createdAt"));
    x->revision = json_integer_value(json_object_get(doc, "revision"));
    x->next = p->head;
    p->head = x;
    json_decref(doc);
}

int
sbx_pools_open(struct sbx_srv *srv, struct sbx_store *store, struct sbx_pools **out,
               sbx_error **err)
{
    struct sbx_pools *p = sbx_xcalloc(1, sizeof *p);
    p->srv = srv;
    p->store = store;
    pthread_mutex_init(&p->mu, NULL);
    /* timed waits on CLOCK_MONOTONIC: a wall-clock step neither stalls nor rushes them */
    sbx_cond_init_monotonic(&p->cv);
    sbx_cond_init_monotonic(&p->ready_cv);
    if (sbx_store_pool_load(store, load_cb, p, err) < 0) {
        sbx_pools_close(p);
        return sbx_error_wrap(err, "load pools");
    }
    int rc = pthread_create(&p->thread, NULL, refiller_main, p);
    if (rc != 0) {
        sbx_pools_close(p);
        return sbx_error_set(err, SBX_EGENERIC, rc, "start the pool refiller");
    }
    p->started = true;
    *out = p;
    return 0;
}

void
sbx_pools_close(struct sbx_pools *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_cond_broadcast(&p->ready_cv);
    pthread_mutex_unlock(&p->mu);
    if (p->started)
        pthread_join(p->thread, NULL);
    while (p->head) {
        struct pool *x = p->head;
        p->head = x->next;
        pool_free(x);
    }
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->ready_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ---- the API's calls ---- */

static int
not_found(const char *name, sbx_error **err)
{
    return sbx_error_set(err, SBX_ENOTFOUND, 0, "pool `%s` not found", name);
}

int
sbx_pools_add(struct sbx_pools *p, const char *name, const json_t *tmpl,
              const struct sbx_pool_capacity *c, json_t **out, sbx_error **err)
{
    struct pool *x = sbx_xcalloc(1, sizeof *x);
    (void)snprintf(x->name, sizeof x->name, "%s", name);
    sbx_srv_random_hex(x->uid, 16);
    x->tmpl = json_deep_copy(tmpl);
    x->cap = *c;
    x->created_ms = sbx_wall_ms();
    x->revision = 1;
    pthread_mutex_lock(&p->mu);
    int r = find_pool(p, name)
                ? sbx_error_set(err, SBX_EEXISTS, 0, "pool `%s` already exists", name)
                : pool_save(p, x, err);
    if (r >= 0) {
        x->next = p->head;
        p->head = x;
        count_all(p, NULL);
        *out = pool_json(x);
        p->kicked = true;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    if (r < 0)
        pool_free(x);
    return r;
}

json_t *
sbx_pools_list(struct sbx_pools *p)
{
    json_t *items = json_array();
    pthread_mutex_lock(&p->mu);
    count_all(p, NULL);
    for (struct pool *x = p->head; x; x = x->next)
        (void)json_array_append_new(items, pool_json(x));
    pthread_mutex_unlock(&p->mu);
    return json_pack("{s:o}", "items", items);
}

int
sbx_pools_get(struct sbx_pools *p, const char *name, json_t **out, sbx_error **err)
{
    pthread_mutex_lock(&p->mu);
    struct pool *x = find_pool(p, name);
    if (x) {
        count_all(p, NULL);
        *out = pool_json(x);
    }
    pthread_mutex_unlock(&p->mu);
    return x ? 0 : not_found(name, err);
}

int
sbx_pools_update(struct sbx_pools *p, const char *name, const struct sbx_pool_capacity *c,
                 json_t **out, sbx_error **err)
{
    pthread_mutex_lock(&p->mu);
    struct pool *x = find_pool(p, name);
    int r = x ? 0 : not_found(name, err);
    if (r >= 0 && x) {
        struct sbx_pool_capacity old = x->cap;
        x->cap = *c;
        x->revision++;
        r = pool_save(p, x, err);
        if (r < 0) {
            x->cap = old;
            x->revision--;
        } else {
            x->retry_ms = 0; /* a new capacity is worth a try at once */
            count_all(p, NULL);
            *out = pool_json(x);
            p->kicked = true;
            pthread_cond_signal(&p->cv);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

int
sbx_pools_remove(struct sbx_pools *p, const char *name, sbx_error **err)
{
    pthread_mutex_lock(&p->mu);
    struct pool *x = find_pool(p, name);
    int r = x ? sbx_store_pool_delete(p->store, name, err) : not_found(name, err);
    if (r >= 0 && x) {
        struct pool **pp = &p->head;
        while (*pp != x)
            pp = &(*pp)->next;
        *pp = x->next;
        pool_free(x);
        /* Its warm sandboxes now belong to no pool: deleted here, before the answer (one
         * still being made is deleted by the refiller's next pass when it is done). */
        struct victims dead = {0};
        struct scan s = {.p = p, .dead = &dead};
        sbx_mgr_each(p->srv->mgr, scan_one, &s);
        pthread_cond_broadcast(&p->ready_cv);
        pthread_mutex_unlock(&p->mu);
        delete_victims(p, &dead, "pool_deleted");
        free(dead.ids);
        return 0;
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

int
sbx_pools_template(struct sbx_pools *p, const char *name, json_t **out, sbx_error **err)
{
    pthread_mutex_lock(&p->mu);
    struct pool *x = find_pool(p, name);
    if (x)
        *out = json_deep_copy(x->tmpl);
    pthread_mutex_unlock(&p->mu);
    return x ? 0 : not_found(name, err);
}

/* ---- takes ---- */

struct take {
    const char *name;
    const char *uid;
    const struct sbx_record *want;
};

static bool
take_pick(const struct sbx_record *sb, void *ud)
{
    const struct take *t = ud;
    bool warm = false;
    const char *uid = NULL;
    const char *name = sbx_pool_of(sb, &warm, &uid);
    return warm && name && uid && strcmp(name, t->name) == 0 && strcmp(uid, t->uid) == 0;
}

static void
replace_json(json_t **dst, const json_t *src)
{
    json_decref(*dst);
    *dst = json_deep_copy(src);
}

/* The warm sandbox becomes the request's: its metadata, extensions, expiry, access token. */
static int
take_change(struct sbx_record *sb, void *ud, sbx_error **err)
{
    (void)err;
    const struct take *t = ud;
    set_pool_priv(sb, t->name, t->uid, false);
    replace_json(&sb->metadata, t->want->metadata);
    replace_json(&sb->extensions, t->want->extensions);
    sb->created_ms = t->want->created_ms;
    sb->expires_ms = t->want->expires_ms;
    json_t *tok = json_object_get(t->want->priv, SBX_ACCESS_TOKEN_PRIV);
    if (tok)
        (void)json_object_set(sb->priv, SBX_ACCESS_TOKEN_PRIV, tok);
    char msg[SBX_POOL_NAME_MAX + 32];
    (void)snprintf(msg, sizeof msg, "taken from pool %s", t->name);
    sbx_record_set_state(sb, "Running", "SANDBOX_RUNNING", msg);
    return 0;
}

/* A timed wait on ready_cv (lock held). */
static void
wait_ready(struct sbx_pools *p, int64_t ms)
{
    struct timespec ts = sbx_monotonic_in((uint64_t)ms);
    (void)pthread_cond_timedwait(&p->ready_cv, &p->mu, &ts);
}

/* A sandbox made for the take itself (none warm, room in the pool). want is consumed. */
static int
take_new(struct sbx_pools *p, struct pool *x, struct sbx_record *want, struct sbx_record **out,
         sbx_error **err)
{
    char name[SBX_POOL_NAME_MAX + 1];
    char uid[33];
    (void)snprintf(name, sizeof name, "%s", x->name);
    (void)snprintf(uid, sizeof uid, "%s", x->uid);
    x->taking++;
    pthread_mutex_unlock(&p->mu);
    set_pool_priv(want, name, uid, false);
    int r = sbx_mgr_create(p->srv->mgr, want, out, err);
    pthread_mutex_lock(&p->mu);
    struct pool *y = find_pool(p, name);
    if (y && strcmp(y->uid, uid) == 0)
        y->taking--;
    p->kicked = true;
    pthread_cond_signal(&p->cv);
    pthread_cond_broadcast(&p->ready_cv); /* takes that found the pool full count again */
    pthread_mutex_unlock(&p->mu);
    return r;
}

int
sbx_pools_take(struct sbx_pools *p, const char *name, struct sbx_record *want,
               struct sbx_record **out, sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + TAKE_WAIT_MS;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct pool *x = find_pool(p, name);
        if (!x || p->stopping) {
            pthread_mutex_unlock(&p->mu);
            sbx_record_free(want);
            return x ? sbx_error_set(err, SBX_EUNAVAIL, 0, "the server is shutting down")
                     : not_found(name, err);
        }
        char uid[33];
        (void)snprintf(uid, sizeof uid, "%s", x->uid);
        struct take t = {.name = name, .uid = uid, .want = want};
        sbx_autoerror sbx_error *cerr = NULL;
        int r = sbx_mgr_claim(p->srv->mgr, take_pick, take_change, &t, out, &cerr);
        if (r >= 0 || sbx_error_code(cerr) != SBX_ENOTFOUND) {
            int64_t now = (int64_t)sbx_now_ms();
            if (r >= 0 && now >= p->quiet_until) /* not extended: a burst still refills */
                p->quiet_until = now + REFILL_DELAY_MS;
            p->kicked = true; /* refill behind the take */
            pthread_cond_signal(&p->cv);
            pthread_mutex_unlock(&p->mu);
            sbx_record_free(want);
            if (r < 0 && err)
                *err = sbx_steal_ptr(&cerr);
            return r;
        }
        count_all(p, NULL);
        if (sbx_pool_room(&x->cap, &x->n))
            return take_new(p, x, want, out, err); /* unlocks */
        /* A refill or another take in flight may free room, and until its counter drops its
         * sandbox, Running already, is counted twice (as made and as in flight): wait for
         * those before calling the pool full. */
        if ((x->creating == 0 && x->taking == 0) || sbx_now_ms() >= deadline) {
            int64_t max = x->cap.pool_max;
            pthread_mutex_unlock(&p->mu);
            sbx_record_free(want);
            return sbx_error_set(err, SBX_ELIMIT, 0,
                                 "pool `%s` is full (poolMax %lld) and has no sandbox available",
                                 name, (long long)max);
        }
        wait_ready(p, 200);
    }
}
