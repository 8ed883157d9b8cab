/*
 * manager.c - sandbox records, provider calls, create workers, TTL reaper, reconcile.
 *
 * Locking: one mutex guards the table and every record in it. Provider calls never run under
 * it: the caller marks the entry busy (so no other operation starts on it), writes the
 * transition to the store, drops the lock and hands the provider a private copy of the
 * record; the provider's new private data is merged back under the lock.
 *
 * Lazy providers (registry.c) are built on the first operation that needs one, outside the
 * lock; until then their entries have no provider (e->prov NULL), are not polled, and keep
 * their stored state.
 */
#include "server/manager.h"
#include "server/credvault.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/api_fields.h"
#include "server/meta.h"
#include "server/metrics.h"
#include "server/srvutil.h"
#include "common/strmap.h"

struct entry {
    struct sbx_record *sb;
    struct sbx_provider *prov; /* NULL: a lazy provider not built yet, or not configured */
    bool busy;                 /* an operation is running on it */
    bool create_done;          /* the create job has finished (either way) */
    bool reap_warned;          /* the reaper could not get its provider (warned once) */
    int watch_fd;              /* provider.watch's fd, in sbx_mgr.watch_ep; -1: none */
    bool watch_owned;          /* watch_fd is ours to close (else the provider's own) */
    bool unlisted;             /* opts.unlisted says so (counted in sbx_mgr.n_unlisted) */
    bool dead;                 /* Failed or Terminated (counted in sbx_mgr.n_dead) */
    int64_t renewed_ms;        /* the last renew-on-access (renew_on_access) */
    char rid[129];             /* the request that created it: its create job logs with it */
    char spec_hash[SBX_SPEC_HASH_LEN + 1];
    struct entry *next_job;
    sbx_error *create_err;
    size_t idx;                  /* its place in sbx_mgr.items */
    struct entry *newer, *older; /* the list in listing order (newest first) */
};

typedef int (*prov_op)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);

/* The reason of the Stopping state of a stop (a Stopping without it is a delete). */
#define SBX_REASON_STOP "STOP_REQUESTED"

#define POLL_MS           250    /* find-or-create: between two status polls */
#define WAIT_USABLE_DEF   120000 /* find-or-create: default deadline */
#define RENEW_INTERVAL_MS 60000  /* renew-on-access: at most once a minute per sandbox */

struct sbx_mgr {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* an operation ended (create done, entry idle), stopping */
    pthread_cond_t jobs_cv; /* a create was queued, stopping: the workers wait here alone */
    pthread_cond_t stop_cv; /* stopping: the reaper's 1 s ticks wait here alone */
    struct entry **items;   /* unordered; an entry knows its index (O(1) removal) */
    size_t n, cap;
    struct sbx_strmap by_id;       /* id -> entry: lookups that do not grow with the count */
    struct entry *newest, *oldest; /* listing order (newest_first) */
    struct sbx_mgr_opts opts;
    struct entry *jobs_head, *jobs_tail;
    pthread_t *workers;
    size_t n_workers;
    pthread_t reaper;
    bool reaper_started;
    int watch_ep;      /* epoll of the entries' watch fds (-1: none; status is asked of all) */
    size_t n_unlisted; /* entries with unlisted set */
    /* Entries in Failed or Terminated, and entries without their provider (a lazy one not
     * built yet): kept up to date as records change, so that a create never walks every
     * entry (at 10,000 sandboxes such a walk, a few cache misses per entry, cost ~2 ms of
     * each create) */
    size_t n_dead, n_noprov;
    /* sandboxes with renew-on-access: while none has it, a router request takes no lock for it */
    atomic_size_t renewers;
    bool stopping;
};

static struct entry *
find(struct sbx_mgr *m, const char *id)
{
    return sbx_strmap_get(&m->by_id, id);
}

/* Listing order: newest first, then by id (as GET /sandboxes pages). */
static int
cmp_newest_first(const struct sbx_record *x, const struct sbx_record *y)
{
    if (x->created_ms != y->created_ms)
        return x->created_ms < y->created_ms ? 1 : -1;
    return strcmp(x->id, y->id);
}

/* Into the ordered list: a new sandbox is the newest (O(1)); records loaded at startup come
 * oldest first, so each of them is the newest too. */
static void
link_ordered(struct sbx_mgr *m, struct entry *e)
{
    struct entry *after = NULL; /* the entry e goes after (older side), NULL: at the head */
    struct entry *cur = m->newest;
    while (cur && cmp_newest_first(cur->sb, e->sb) < 0) {
        after = cur;
        cur = cur->older;
    }
    e->newer = after;
    e->older = cur;
    if (after)
        after->older = e;
    else
        m->newest = e;
    if (cur)
        cur->newer = e;
    else
        m->oldest = e;
}

static void
unlink_ordered(struct sbx_mgr *m, struct entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        m->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        m->oldest = e->newer;
    e->newer = e->older = NULL;
}

static bool dead_state(const char *s);

/* Whether lists show e and whether it is dead, after its record changed (every change of a
 * record's state is followed by this). Caller holds the lock. */
static void
relist(struct sbx_mgr *m, struct entry *e)
{
    bool u = m->opts.unlisted && m->opts.unlisted(e->sb);
    if (u != e->unlisted)
        m->n_unlisted = u ? m->n_unlisted + 1 : m->n_unlisted - 1;
    e->unlisted = u;
    bool d = dead_state(e->sb->state);
    if (d != e->dead)
        m->n_dead = d ? m->n_dead + 1 : m->n_dead - 1;
    e->dead = d;
}

/* Give e its built provider p (lock held). */
static void
set_prov(struct sbx_mgr *m, struct entry *e, struct sbx_provider *p)
{
    if (!e->prov && p)
        m->n_noprov--;
    e->prov = p;
}

static void
add_entry(struct sbx_mgr *m, struct entry *e)
{
    sbx_record_spec_hash(e->sb, e->spec_hash);
    if (sbx_api_renew_seconds(e->sb->extensions))
        atomic_fetch_add(&m->renewers, 1);
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->items = sbx_xrealloc(m->items, m->cap * sizeof(struct entry *));
    }
    e->idx = m->n;
    m->items[m->n++] = e;
    m->n_noprov += !e->prov;
    (void)sbx_strmap_put(&m->by_id, e->sb->id, e);
    link_ordered(m, e);
    relist(m, e);
}

/* Forget e's watch fd (it fired, or e goes). Caller holds the lock. */
static void
unwatch(struct sbx_mgr *m, struct entry *e)
{
    if (e->watch_fd < 0)
        return;
    (void)epoll_ctl(m->watch_ep, EPOLL_CTL_DEL, e->watch_fd, NULL);
    if (e->watch_owned)
        sbx_closep(&e->watch_fd);
    e->watch_fd = -1;
}

static void
remove_entry(struct sbx_mgr *m, struct entry *e)
{
    unwatch(m, e);
    if (e->unlisted)
        m->n_unlisted--;
    m->n_dead -= e->dead;
    m->n_noprov -= !e->prov;
    if (e->idx < m->n && m->items[e->idx] == e) {
        m->items[e->idx] = m->items[--m->n];
        m->items[e->idx]->idx = e->idx;
    }
    if (sbx_strmap_get(&m->by_id, e->sb->id) == e)
        (void)sbx_strmap_del(&m->by_id, e->sb->id);
    unlink_ordered(m, e);
    if (sbx_api_renew_seconds(e->sb->extensions))
        atomic_fetch_sub(&m->renewers, 1);
    sbx_record_free(e->sb);
    sbx_error_clear(&e->create_err);
    free(e);
}

/* Record a transition: in memory, then in the store. A store failure is logged; the
 * in-memory state still moves so the API tells the truth about the live sandbox. */
static void
transition(struct sbx_mgr *m, struct entry *e, const char *state, const char *reason,
           const char *msg)
{
    /* A watch is of one workload: a stop, a start, a delete or a failure drops it, so its fd,
     * fired by that workload's end, is not taken after a quick start for the next workload's
     * (a status call of a live sandbox). Pausing and resuming keep it: the freezer ends
     * nothing. */
    if (strcmp(state, "Running") != 0 && strcmp(state, "Paused") != 0 &&
        strcmp(state, "Pausing") != 0 && strcmp(state, "Resuming") != 0)
        unwatch(m, e);
    sbx_record_set_state(e->sb, state, reason, msg);
    relist(m, e);
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_store_put(m->opts.store, e->sb, &err) < 0)
        sbx_error_log("sandbox %s -> %s: %s", e->sb->id, state, sbx_error_msg(err));
}

/* Merge the provider's private data of work back into e (under the lock). */
static void
merge_priv(struct sbx_mgr *m, struct entry *e, struct sbx_record *work)
{
    json_decref(e->sb->priv);
    e->sb->priv = json_incref(work->priv);
    relist(m, e);
}

/* ---- acquiring an entry for an operation ---- */

/* The operation on e is over: wake whoever waits for it (a delete). */
static void
set_idle(struct sbx_mgr *m, struct entry *e)
{
    e->busy = false;
    pthread_cond_broadcast(&m->cv);
}

static int
acquire(struct sbx_mgr *m, const char *id, struct entry **out, sbx_error **err)
{
    struct entry *e = find(m, id);
    if (!e)
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` not found", id);
    if (e->busy)
        return sbx_error_set(err, SBX_ECONFLICT, 0,
                             "sandbox `%s` is %s; another operation is in progress", id,
                             e->sb->state);
    *out = e;
    return 0;
}

/* Like acquire, for operations that need the provider. */
static int
acquire_with_prov(struct sbx_mgr *m, const char *id, struct entry **out, sbx_error **err)
{
    int r = acquire(m, id, out, err);
    if (r >= 0 && *out && !(*out)->prov)
        r = sbx_error_set(err, SBX_EUNAVAIL, 0,
                          "sandbox `%s`: its provider `%s` is not enabled in this server's config",
                          id, (*out)->sb->provider);
    return r;
}

/* Give every entry of provider `name` that has none yet the built provider p. */
static void
attach_prov(struct sbx_mgr *m, const char *name, struct sbx_provider *p)
{
    for (size_t i = 0; m->n_noprov && i < m->n; i++) {
        if (!m->items[i]->prov && strcmp(m->items[i]->sb->provider, name) == 0)
            set_prov(m, m->items[i], p);
    }
}

/* Make sure the entry `id` has its provider, building a lazy one first (outside the lock, so a
 * slow build never stalls other requests). Unknown ids and unconfigured providers are left to
 * the caller (acquire and acquire_with_prov report them). */
static int
ensure_prov(struct sbx_mgr *m, const char *id, sbx_error **err)
{
    char name[SBX_NAME_MAX] = "";
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    if (e && !e->prov)
        (void)snprintf(name, sizeof name, "%s", e->sb->provider);
    pthread_mutex_unlock(&m->mu);
    if (!*name || !sbx_registry_resolve(m->opts.registry, name))
        return 0;
    struct sbx_provider *p = NULL;
    if (sbx_registry_acquire(m->opts.registry, name, &p, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s`", id);
    pthread_mutex_lock(&m->mu);
    attach_prov(m, name, p);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

/* ---- create ---- */

static double
since(uint64_t t0_ns)
{
    return (double)(sbx_now_ns() - t0_ns) / 1e9;
}

/* A provider's failure, counted by provider and code (GET /metrics). */
static void
count_error(const struct entry *e, const sbx_error *err)
{
    if (e->prov && err)
        sbx_metrics_provider_error(e->prov->name, sbx_error_code(err));
}

static void
run_create(struct sbx_mgr *m, struct entry *e)
{
    uint64_t t0 = sbx_now_ns();
    sbx_log_set_request_id(e->rid[0] ? e->rid : NULL);
    pthread_mutex_lock(&m->mu);
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    sbx_error *err = NULL;
    const struct sbx_provider_ops *ops = e->prov->ops;
    int r = ops->create(e->prov, work, &err);
    if (r >= 0) {
        /* Record what exists before starting it, so a crash here can be cleaned up. */
        pthread_mutex_lock(&m->mu);
        merge_priv(m, e, work);
        /* Registry credentials served the provider's pull; the store keeps no copy. */
        (void)json_object_del(e->sb->image, "auth");
        transition(m, e, "Pending", "PROVISIONING", "starting");
        pthread_mutex_unlock(&m->mu);
        r = ops->start(e->prov, work, &err);
    }
    if (r < 0)
        (void)ops->delete (e->prov, work, NULL);
    pthread_mutex_lock(&m->mu);
    merge_priv(m, e, work);
    (void)json_object_del(e->sb->image, "auth");
    sbx_metrics_op(SBX_OP_CREATE, since(t0), r >= 0);
    if (r < 0)
        count_error(e, err);
    if (r < 0) {
        sbx_warn("sandbox %s: create failed: %s", e->sb->id, sbx_error_msg(err));
        transition(m, e, "Failed", "PROVISIONING_ERROR", sbx_error_msg(err));
        e->create_err = err;
    } else {
        transition(m, e, "Running", "SANDBOX_RUNNING", NULL);
        sbx_info("sandbox %s: running (provider %s)", e->sb->id, e->prov->name);
    }
    e->busy = false;
    e->create_done = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    sbx_record_free(work);
    sbx_log_set_request_id(NULL);
}

static void *
worker_main(void *arg)
{
    struct sbx_mgr *m = arg;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        while (!m->jobs_head && !m->stopping)
            pthread_cond_wait(&m->jobs_cv, &m->mu);
        if (!m->jobs_head)
            break;
        struct entry *e = m->jobs_head;
        m->jobs_head = e->next_job;
        if (!m->jobs_head)
            m->jobs_tail = NULL;
        pthread_mutex_unlock(&m->mu);
        run_create(m, e);
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* Entries not Failed or Terminated (lock held). Debug builds check the count against a walk. */
static size_t
count_live(struct sbx_mgr *m)
{
#ifndef NDEBUG
    size_t live = 0;
    for (size_t i = 0; i < m->n; i++)
        live += !dead_state(m->items[i]->sb->state);
    assert(live == m->n - m->n_dead);
#endif
    return m->n - m->n_dead;
}

static int
enqueue_create(struct sbx_mgr *m, struct entry *e, sbx_error **err)
{
    if (m->stopping)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "the server is shutting down");
    size_t live = count_live(m);
    if (live >= m->opts.max_sandboxes)
        return sbx_error_set(err, SBX_ELIMIT, 0,
                             "too many sandboxes: %zu live, the limit is %zu (limits.max_sandboxes "
                             "in the server's config)",
                             live, m->opts.max_sandboxes);
    /* A 429 that names the limit before the server runs out of descriptors: past it every
     * create (and much else) would fail with EMFILE half-way (server.c, check_nofile). */
    if (m->opts.fd_cap && live >= m->opts.fd_cap)
        return sbx_error_set(err, SBX_ELIMIT, 0,
                             "too many sandboxes for the server's open files limit: %zu live; "
                             "RLIMIT_NOFILE is %lu, about %zu sandboxes' worth (raise the hard "
                             "limit: ulimit -Hn, systemd LimitNOFILE=)",
                             live, m->opts.fd_limit, m->opts.fd_cap);
    sbx_record_set_state(e->sb, "Pending", "PROVISIONING", "queued");
    if (sbx_store_put(m->opts.store, e->sb, err) < 0)
        return sbx_error_wrap(err, "create sandbox");
    add_entry(m, e);
    if (m->jobs_tail)
        m->jobs_tail->next_job = e;
    else
        m->jobs_head = e;
    m->jobs_tail = e;
    /* One worker, not every waiter: a broadcast on cv woke all the workers, the reaper and
     * every waiting request for each create. */
    pthread_cond_signal(&m->jobs_cv);
    return 0;
}

/* ---- find-or-create ---- */

static bool
dead_state(const char *s)
{
    return strcmp(s, "Failed") == 0 || strcmp(s, "Terminated") == 0;
}

/* The newest entry of provider `prov` with reuse key `key` and spec hash `hash` that is not
 * Failed or Terminated. */
static struct entry *
find_reusable(struct sbx_mgr *m, const char *prov, const char *key, const char *hash)
{
    struct entry *best = NULL;
    for (size_t i = 0; i < m->n; i++) {
        struct entry *e = m->items[i];
        const char *k = sbx_record_reuse_key(e->sb);
        if (!k || strcmp(k, key) != 0 || strcmp(e->sb->provider, prov) != 0 ||
            strcmp(e->spec_hash, hash) != 0 || dead_state(e->sb->state))
            continue;
        if (!best || e->sb->created_ms > best->sb->created_ms)
            best = e;
    }
    return best;
}

/* Ask e's provider for its live state (lock dropped meanwhile; e is busy). */
static int
poll_status(struct sbx_mgr *m, struct entry *e, struct sbx_provider_status *st, sbx_error **err)
{
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    int r = e->prov->ops->status(e->prov, work, st, err);
    pthread_mutex_lock(&m->mu);
    sbx_record_free(work);
    return r;
}

/* Run the provider op that makes a startable (or stopped-on-the-provider) e usable: resume a
 * Paused sandbox, start any other one. e is busy; the lock is dropped during the op. */
static int
wake(struct sbx_mgr *m, struct entry *e, sbx_error **err)
{
    bool paused = strcmp(e->sb->state, "Paused") == 0;
    prov_op op = paused ? e->prov->ops->resume : e->prov->ops->start;
    char before[SBX_NAME_MAX];
    (void)snprintf(before, sizeof before, "%s", e->sb->state);
    transition(m, e, paused ? "Resuming" : "Starting", "REUSE", "find-or-create");
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    int r = op ? op(e->prov, work, err)
               : sbx_error_set(err, SBX_EINVAL, 0, "provider `%s` cannot resume", e->prov->name);
    pthread_mutex_lock(&m->mu);
    merge_priv(m, e, work);
    sbx_record_free(work);
    if (r < 0)
        transition(m, e, before, "OPERATION_FAILED", sbx_error_msg(err ? *err : NULL));
    else
        transition(m, e, "Running", "SANDBOX_RUNNING", "reused (find-or-create)");
    return r;
}

/* Wait until e is usable, within the deadline: 1 = usable (reuse it), 0 = terminal (it is now
 * Failed; never reused), < 0 = error. Called with the lock held and e marked busy. */
static int
wait_usable(struct sbx_mgr *m, struct entry *e, sbx_error **err)
{
    int64_t wait = m->opts.wait_usable_ms > 0 ? m->opts.wait_usable_ms : WAIT_USABLE_DEF;
    uint64_t deadline = sbx_now_ms() + (uint64_t)wait;
    for (;;) {
        struct sbx_provider_status st = {0};
        if (poll_status(m, e, &st, err) < 0)
            return sbx_error_wrap(err, "find-or-create: sandbox `%s`", e->sb->id);
        if (st.cls == SBX_CLASS_USABLE && strcmp(e->sb->state, "Running") == 0)
            return 1;
        if (st.cls == SBX_CLASS_USABLE || st.cls == SBX_CLASS_STARTABLE)
            return wake(m, e, err) < 0
                       ? sbx_error_wrap(err, "find-or-create: start `%s`", e->sb->id)
                       : 1;
        if (st.cls == SBX_CLASS_TERMINAL) {
            transition(m, e, "Failed", st.reason[0] ? st.reason : "SANDBOX_LOST", st.state);
            sbx_info("sandbox %s: %s on its provider; find-or-create makes a new one", e->sb->id,
                     st.state);
            return 0;
        }
        if (sbx_now_ms() >= deadline)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0,
                                 "find-or-create: sandbox `%s` is still `%s` after %lld ms",
                                 e->sb->id, st.state, (long long)wait);
        pthread_mutex_unlock(&m->mu);
        (void)usleep(POLL_MS * 1000);
        pthread_mutex_lock(&m->mu);
    }
}

/* Another live sandbox than `self` named `name` (lock held): its entry, or NULL. */
static struct entry *
find_named(struct sbx_mgr *m, const char *name, const struct entry *self)
{
    for (size_t i = 0; name && i < m->n; i++) {
        struct entry *e = m->items[i];
        const char *n = sbx_record_name(e->sb);
        if (e != self && n && strcmp(n, name) == 0 && !dead_state(e->sb->state))
            return e;
    }
    return NULL;
}

static int
name_taken(const char *name, const struct entry *other, sbx_error **err)
{
    return sbx_error_set(err, SBX_EEXISTS, 0,
                         "the name `%s` is in use by sandbox %s (remove it or pick another)", name,
                         other->sb->id);
}

/* Look for a sandbox to reuse for sb (lock held). 1 and *out when one was made usable, 0 when
 * none is left (create one), < 0 on error. Waits for busy candidates (a create or start of the
 * same key in progress), so creates with one key never race each other. */
static int
reuse(struct sbx_mgr *m, const struct sbx_record *sb, const char *hash, struct sbx_record **out,
      sbx_error **err)
{
    const char *key = sbx_record_reuse_key(sb);
    struct entry *e = NULL;
    while (!m->stopping && (e = find_reusable(m, sb->provider, key, hash))) {
        if (e->busy) {
            pthread_cond_wait(&m->cv, &m->mu);
            continue;
        }
        if (!e->prov)
            set_prov(m, e, sbx_registry_peek(m->opts.registry, sb->provider));
        e->busy = true;
        int r = e->prov ? wait_usable(m, e, err)
                        : sbx_error_set(err, SBX_EUNAVAIL, 0, "provider `%s` is not available",
                                        sb->provider);
        if (r > 0)
            *out = sbx_record_dup(e->sb);
        set_idle(m, e);
        if (r != 0)
            return r;
    }
    return 0;
}

/* Queue sb's entry (lock held) and wait for the create job. */
static int
create_locked(struct sbx_mgr *m, struct entry *e, struct sbx_record **out, sbx_error **err)
{
    int r = enqueue_create(m, e, err);
    if (r < 0) {
        sbx_record_free(e->sb);
        free(e);
        return r;
    }
    while (!e->create_done)
        pthread_cond_wait(&m->cv, &m->mu);
    *out = sbx_record_dup(e->sb);
    if (e->create_err) {
        r = sbx_error_set(err, sbx_error_code(e->create_err), 0, "%s",
                          sbx_error_msg(e->create_err));
        sbx_error_clear(&e->create_err);
    }
    return r;
}

int
sbx_mgr_create(struct sbx_mgr *m, struct sbx_record *sb, struct sbx_record **out, sbx_error **err)
{
    struct sbx_provider *prov = NULL;
    /* A lazy provider is built here, before anything is recorded: a missing secret is an
     * error of this request, and the next one (after `sbx secret set`) builds it. */
    int r = sbx_registry_acquire(m->opts.registry, sb->provider, &prov, err);
    if (r < 0) {
        sbx_record_free(sb);
        return r;
    }
    struct entry *e = sbx_xcalloc(1, sizeof *e);
    e->watch_fd = -1;
    e->sb = sb;
    e->prov = prov;
    e->busy = true;
    const char *rid = sbx_log_request_id();
    (void)snprintf(e->rid, sizeof e->rid, "%s", rid ? rid : "");
    char hash[SBX_SPEC_HASH_LEN + 1];
    sbx_record_spec_hash(sb, hash);
    pthread_mutex_lock(&m->mu);
    attach_prov(m, sb->provider, prov);
    r = sbx_record_reuse_key(sb) ? reuse(m, sb, hash, out, err) : 0;
    struct entry *named = r == 0 ? find_named(m, sbx_record_name(sb), NULL) : NULL;
    if (named)
        r = name_taken(sbx_record_name(sb), named, err);
    if (r != 0) {
        pthread_mutex_unlock(&m->mu);
        sbx_record_free(sb);
        free(e);
        return r > 0 ? 0 : r;
    }
    r = create_locked(m, e, out, err);
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* ---- reads ---- */

int
sbx_mgr_get(struct sbx_mgr *m, const char *id, struct sbx_record **out, sbx_error **err)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    if (e)
        *out = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    return e ? 0 : sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` not found", id);
}

void
sbx_mgr_list(struct sbx_mgr *m, struct sbx_record ***out, size_t *n)
{
    pthread_mutex_lock(&m->mu);
    struct sbx_record **items = sbx_xcalloc(m->n + 1, sizeof(struct sbx_record *));
    size_t k = 0;
    for (struct entry *e = m->newest; e; e = e->older)
        items[k++] = sbx_record_dup(e->sb);
    *n = k;
    pthread_mutex_unlock(&m->mu);
    *out = items;
}

size_t
sbx_mgr_list_page(struct sbx_mgr *m, const struct sbx_mgr_page *pg, struct sbx_record ***out,
                  size_t *n)
{
    sbx_mgr_match_fn match = pg->match;
    void *ud = pg->ud;
    size_t start = pg->start;
    size_t count = pg->count;
    pthread_mutex_lock(&m->mu);
    struct sbx_record **items = sbx_xcalloc(count + 1, sizeof(struct sbx_record *));
    size_t total = 0;
    size_t k = 0;
    for (struct entry *e = m->newest; e; e = e->older) {
        if (e->unlisted || (match && !match(e->sb, ud)))
            continue;
        /* only the page is copied; the rest is counted (without a filter, not even walked) */
        if (total >= start && k < count)
            items[k++] = sbx_record_dup(e->sb);
        total++;
        if (!match && k == count)
            break;
    }
    if (!match)
        total = m->n - m->n_unlisted;
    pthread_mutex_unlock(&m->mu);
    *out = items;
    *n = k;
    return total;
}

size_t
sbx_mgr_unlisted(struct sbx_mgr *m)
{
    pthread_mutex_lock(&m->mu);
    size_t n = m->n_unlisted;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void
sbx_mgr_list_free(struct sbx_record **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sbx_record_free(items[i]);
    free(items);
}

void
sbx_mgr_each(struct sbx_mgr *m, sbx_mgr_each_fn fn, void *ud)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++)
        fn(m->items[i]->sb, m->items[i]->busy, ud);
    pthread_mutex_unlock(&m->mu);
}

/* ---- claims (pools) ---- */

/* Apply change to a copy of e's record; store it, then swap it in (lock held, e idle). */
static int
claim_entry(struct sbx_mgr *m, struct entry *e, sbx_mgr_change_fn change, void *ud, sbx_error **err)
{
    struct sbx_record *work = sbx_record_dup(e->sb);
    int r = change(work, ud, err);
    const char *name = r >= 0 ? sbx_record_name(work) : NULL;
    struct entry *named = name ? find_named(m, name, e) : NULL;
    if (named)
        r = name_taken(name, named, err);
    if (r >= 0)
        r = sbx_store_put(m->opts.store, work, err);
    if (r < 0) {
        sbx_record_free(work);
        return r;
    }
    /* renew-on-access is counted per sandbox that has it (add_entry, remove_entry) */
    bool had = sbx_api_renew_seconds(e->sb->extensions) != 0;
    bool has = sbx_api_renew_seconds(work->extensions) != 0;
    if (had != has) {
        if (has)
            atomic_fetch_add(&m->renewers, 1);
        else
            atomic_fetch_sub(&m->renewers, 1);
    }
    sbx_record_free(e->sb);
    e->sb = work;
    relist(m, e);
    sbx_record_spec_hash(e->sb, e->spec_hash);
    return 0;
}

int
sbx_mgr_claim(struct sbx_mgr *m, sbx_mgr_pick_fn pick, sbx_mgr_change_fn change, void *ud,
              struct sbx_record **out, sbx_error **err)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    for (size_t i = 0; i < m->n && !e; i++) {
        struct entry *c = m->items[i];
        if (!c->busy && c->prov && strcmp(c->sb->state, "Running") == 0 && pick(c->sb, ud))
            e = c;
    }
    int r = e ? claim_entry(m, e, change, ud, err)
              : sbx_error_set(err, SBX_ENOTFOUND, 0, "no sandbox to claim");
    if (r >= 0 && e)
        *out = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* ---- operations on an existing sandbox ---- */

/* A transition of an operation: the state and its reason. */
struct step {
    const char *state;
    const char *reason;
};

static enum sbx_metrics_op
op_of(const struct sbx_provider_ops *ops, prov_op op)
{
    if (op == ops->pause)
        return SBX_OP_PAUSE;
    if (op == ops->resume)
        return SBX_OP_RESUME;
    if (op == ops->stop)
        return SBX_OP_STOP;
    return SBX_OP_START;
}

/* Mark e busy in state `during`, run op on a copy without the lock, then land in `after`
 * (or back in the previous state, reason OPERATION_FAILED, when op fails). */
static int
run_op(struct sbx_mgr *m, struct entry *e, prov_op op, struct step during, struct step after,
       sbx_error **err)
{
    uint64_t t0 = sbx_now_ns();
    char before[SBX_NAME_MAX];
    (void)snprintf(before, sizeof before, "%s", e->sb->state);
    e->busy = true;
    transition(m, e, during.state, during.reason, NULL);
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    int r = op(e->prov, work, err);
    pthread_mutex_lock(&m->mu);
    merge_priv(m, e, work);
    sbx_record_free(work);
    set_idle(m, e);
    sbx_metrics_op(op_of(e->prov->ops, op), since(t0), r >= 0);
    if (r < 0) {
        count_error(e, err ? *err : NULL);
        transition(m, e, before, "OPERATION_FAILED", sbx_error_msg(err ? *err : NULL));
    } else {
        transition(m, e, after.state, after.reason, NULL);
    }
    return r;
}

static int
delete_locked(struct sbx_mgr *m, struct entry *e, const char *reason, sbx_error **err)
{
    e->busy = true;
    transition(m, e, "Stopping", reason, NULL);
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    uint64_t t0 = sbx_now_ns();
    int r = e->prov ? e->prov->ops->delete (e->prov, work, err) : 0;
    sbx_metrics_op(SBX_OP_DELETE, since(t0), r >= 0);
    sbx_record_free(work);
    pthread_mutex_lock(&m->mu);
    set_idle(m, e);
    if (r < 0) {
        count_error(e, err ? *err : NULL);
        transition(m, e, "Failed", "DELETE_FAILED", sbx_error_msg(err ? *err : NULL));
        return r;
    }
    sbx_autoerror sbx_error *serr = NULL;
    if (sbx_store_delete(m->opts.store, e->sb->id, &serr) < 0)
        sbx_error_log("sandbox %s: %s", e->sb->id, sbx_error_msg(serr));
    /* its Credential Vault's values go with it (credvault.h) */
    if (json_object_get(json_object_get(e->sb->priv, SBX_EGRESS_PRIV), "credentialProxy"))
        sbx_credvault_remove(m->opts.vault, e->sb->id);
    sbx_info("sandbox %s: deleted (%s)", e->sb->id, reason);
    remove_entry(m, e);
    return 0;
}

int
sbx_mgr_delete(struct sbx_mgr *m, const char *id, const char *reason, sbx_error **err)
{
    return sbx_mgr_delete_if(m, id, NULL, reason, err);
}

int
sbx_mgr_delete_if(struct sbx_mgr *m, const char *id, sbx_mgr_match_fn still, const char *reason,
                  sbx_error **err)
{
    /* A lazy provider (remote sandboxes) must be built to remove what it made: without it the
     * delete fails (naming the missing secret) instead of leaking the remote sandbox. */
    if (ensure_prov(m, id, err) < 0)
        return -SBX_EUNAVAIL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    /* A delete waits for an operation in progress (a create, a pause, a liveness cleanup)
     * instead of failing: whatever it ends in, delete can follow. */
    while ((e = find(m, id)) && e->busy && !m->stopping)
        pthread_cond_wait(&m->cv, &m->mu);
    int r = 0;
    if (e && still && !still(e->sb, NULL))
        r = sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` changed meanwhile; not deleted", id);
    if (r >= 0)
        r = acquire(m, id, &e, err);
    if (r >= 0)
        r = delete_locked(m, e, reason, err);
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* An operation allowed only from some states: `from` lists them ("Running|Paused"). */
struct op_spec {
    const char *from;
    prov_op (*pick)(const struct sbx_provider_ops *ops); /* the provider's op (may be NULL) */
    const char *what;
    struct step during, after;
};

static bool
state_in(const char *state, const char *list)
{
    size_t n = strlen(state);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, "|");
        if (len == n && strncmp(p, state, n) == 0)
            return true;
        p += len + (p[len] == '|');
    }
    return false;
}

static int
lifecycle_op(struct sbx_mgr *m, const char *id, const struct op_spec *o, sbx_error **err)
{
    if (ensure_prov(m, id, err) < 0)
        return -SBX_EUNAVAIL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    int r = acquire_with_prov(m, id, &e, err);
    if (r >= 0 && !e)
        r = -SBX_ENOTFOUND; /* (acquire sets e whenever it succeeds) */
    prov_op op = r >= 0 ? o->pick(e->prov->ops) : NULL;
    if (r >= 0 && !state_in(e->sb->state, o->from))
        r = sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` is %s; %s needs %s", id,
                          e->sb->state, o->what, o->from);
    else if (r >= 0 && !op)
        r = sbx_error_set(err, SBX_EINVAL, 0, "provider `%s` cannot %s sandboxes", e->prov->name,
                          o->what);
    else if (r >= 0)
        r = run_op(m, e, op, o->during, o->after, err);
    pthread_mutex_unlock(&m->mu);
    return r;
}

static prov_op
pick_pause(const struct sbx_provider_ops *ops)
{
    return ops->pause;
}

static prov_op
pick_resume(const struct sbx_provider_ops *ops)
{
    return ops->resume;
}

static prov_op
pick_stop(const struct sbx_provider_ops *ops)
{
    return ops->stop;
}

static prov_op
pick_start(const struct sbx_provider_ops *ops)
{
    return ops->start;
}

int
sbx_mgr_pause(struct sbx_mgr *m, const char *id, sbx_error **err)
{
    static const struct op_spec o = {.from = "Running",
                                     .pick = pick_pause,
                                     .what = "pause",
                                     .during = {"Pausing", NULL},
                                     .after = {"Paused", "SANDBOX_PAUSED"}};
    return lifecycle_op(m, id, &o, err);
}

int
sbx_mgr_resume(struct sbx_mgr *m, const char *id, sbx_error **err)
{
    static const struct op_spec o = {.from = "Paused",
                                     .pick = pick_resume,
                                     .what = "resume",
                                     .during = {"Resuming", NULL},
                                     .after = {"Running", "SANDBOX_RUNNING"}};
    return lifecycle_op(m, id, &o, err);
}

int
sbx_mgr_stop(struct sbx_mgr *m, const char *id, sbx_error **err)
{
    static const struct op_spec o = {.from = "Running|Paused",
                                     .pick = pick_stop,
                                     .what = "stop",
                                     .during = {"Stopping", SBX_REASON_STOP},
                                     .after = {"Stopped", "SANDBOX_STOPPED"}};
    return lifecycle_op(m, id, &o, err);
}

int
sbx_mgr_start(struct sbx_mgr *m, const char *id, sbx_error **err)
{
    static const struct op_spec o = {.from = "Stopped",
                                     .pick = pick_start,
                                     .what = "start",
                                     .during = {"Starting", "START_REQUESTED"},
                                     .after = {"Running", "SANDBOX_RUNNING"}};
    return lifecycle_op(m, id, &o, err);
}

/* Busy (so no stop, delete or pause runs meanwhile) but in the same state: a snapshot is not a
 * lifecycle transition, and the router keeps serving the sandbox around the freeze. */
int
sbx_mgr_snapshot(struct sbx_mgr *m, const char *id, struct sbx_snapshot_capture *c, char *provider,
                 sbx_error **err)
{
    if (ensure_prov(m, id, err) < 0)
        return -SBX_EUNAVAIL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    int r = acquire_with_prov(m, id, &e, err);
    if (r >= 0 && !e)
        r = -SBX_ENOTFOUND; /* (acquire sets e whenever it succeeds) */
    if (r >= 0 && !state_in(e->sb->state, "Running|Paused|Stopped"))
        r = sbx_error_set(err, SBX_ECONFLICT, 0,
                          "sandbox `%s` is %s; a snapshot needs it Running, Paused or Stopped", id,
                          e->sb->state);
    else if (r >= 0 && !e->prov->ops->snapshot)
        r = sbx_error_set(err, SBX_EINVAL, 0, "provider `%s` cannot snapshot sandboxes",
                          e->prov->name);
    if (r < 0) {
        pthread_mutex_unlock(&m->mu);
        return r;
    }
    (void)snprintf(provider, SBX_NAME_MAX, "%s", e->prov->name);
    e->busy = true;
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    r = e->prov->ops->snapshot(e->prov, work, c, err);
    sbx_record_free(work);
    pthread_mutex_lock(&m->mu);
    set_idle(m, e);
    if (r < 0)
        count_error(e, err ? *err : NULL);
    pthread_mutex_unlock(&m->mu);
    return r;
}

int
sbx_mgr_renew(struct sbx_mgr *m, const char *id, int64_t expires_ms, sbx_error **err)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    int r = acquire(m, id, &e, err);
    if (r >= 0 && (!e || e->sb->expires_ms == 0))
        r = sbx_error_set(err, SBX_ECONFLICT, 0,
                          "sandbox `%s` was created without a timeout; it does not expire", id);
    if (r >= 0 && e) {
        e->sb->expires_ms = expires_ms;
        r = sbx_store_put(m->opts.store, e->sb, err);
    }
    pthread_mutex_unlock(&m->mu);
    return r;
}

int
sbx_mgr_patch_metadata(struct sbx_mgr *m, const char *id, const json_t *patch,
                       struct sbx_record **out, sbx_error **err)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    if (!e) {
        pthread_mutex_unlock(&m->mu);
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` not found", id);
    }
    json_t *merged = json_deep_copy(e->sb->metadata);
    sbx_merge_patch(merged, patch);
    int r = sbx_meta_validate(merged, err);
    const char *name = json_string_value(json_object_get(merged, SBX_NAME_LABEL));
    struct entry *named = r >= 0 && name ? find_named(m, name, e) : NULL;
    if (named)
        r = name_taken(name, named, err);
    if (r >= 0) {
        json_decref(e->sb->metadata);
        e->sb->metadata = json_incref(merged);
        r = sbx_store_put(m->opts.store, e->sb, err);
        *out = sbx_record_dup(e->sb);
    }
    json_decref(merged);
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* OSEP-0009 renew-on-access: a sandbox created with extensions["access.renew.extend.seconds"]
 * = S lives at least S seconds past each use through the router, renewed at most once a
 * minute (the reference's renew_intent.min_interval_seconds) so traffic costs no store write
 * per request. Called with m->mu held. */
static void
renew_on_access(struct sbx_mgr *m, struct entry *e)
{
    int64_t ext = sbx_api_renew_seconds(e->sb->extensions);
    int64_t now = sbx_wall_ms();
    if (!ext || !e->sb->expires_ms || now - e->renewed_ms < RENEW_INTERVAL_MS)
        return;
    e->renewed_ms = now;
    if (now + ext * 1000 <= e->sb->expires_ms)
        return;
    int64_t was = e->sb->expires_ms;
    e->sb->expires_ms = now + ext * 1000;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_store_put(m->opts.store, e->sb, &err) < 0) {
        e->sb->expires_ms = was; /* not kept: not promised */
        sbx_warn("sandbox %s: renew on access: %s", e->sb->id, sbx_error_msg(err));
    }
}

int
sbx_mgr_store_check(struct sbx_mgr *m, sbx_error **err)
{
    return sbx_store_check(m->opts.store, err);
}

void
sbx_mgr_touch(struct sbx_mgr *m, const char *id)
{
    if (atomic_load(&m->renewers) == 0) /* the common case: nothing to renew */
        return;
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    if (e)
        renew_on_access(m, e);
    pthread_mutex_unlock(&m->mu);
}

int
sbx_mgr_provider_status(struct sbx_mgr *m, const char *id, struct sbx_provider_status *st,
                        sbx_error **err)
{
    if (ensure_prov(m, id, err) < 0)
        return -SBX_EUNAVAIL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    struct sbx_record *work = e && e->prov ? sbx_record_dup(e->sb) : NULL;
    struct sbx_provider *p = e ? e->prov : NULL;
    pthread_mutex_unlock(&m->mu);
    if (!work)
        return sbx_error_set(
            err, e ? SBX_EUNAVAIL : SBX_ENOTFOUND, 0,
            e ? "sandbox `%s`: its provider is not enabled" : "sandbox `%s` not found", id);
    memset(st, 0, sizeof *st);
    int r = p->ops->status(p, work, st, err); /* without the lock: it may ask a remote side */
    sbx_record_free(work);
    return r;
}

int
sbx_mgr_usage(struct sbx_mgr *m, const char *id, struct sbx_provider_usage *u)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    bool ok = e && e->prov && e->prov->ops->usage && state_in(e->sb->state, "Running|Paused");
    struct sbx_record *work = ok ? sbx_record_dup(e->sb) : NULL;
    struct sbx_provider *p = ok ? e->prov : NULL;
    pthread_mutex_unlock(&m->mu);
    if (!work)
        return -SBX_ENOTFOUND;
    int r = p->ops->usage(p, work, u); /* a few file reads, without the lock */
    sbx_record_free(work);
    return r;
}

bool
sbx_mgr_access_ok(struct sbx_mgr *m, const char *id, const char *token)
{
    if (!token || !*token)
        return false;
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    const char *want =
        e ? json_string_value(json_object_get(e->sb->priv, SBX_ACCESS_TOKEN_PRIV)) : NULL;
    bool ok = want && sbx_srv_secret_equal(token, want);
    pthread_mutex_unlock(&m->mu);
    return ok;
}

int
sbx_mgr_egress_auth(struct sbx_mgr *m, const char *id, const char *token)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    json_t *eg = e ? json_object_get(e->sb->priv, SBX_EGRESS_PRIV) : NULL;
    const char *want = json_string_value(json_object_get(eg, "token"));
    int r = !want ? -1 : token && *token && sbx_srv_secret_equal(token, want) ? 1 : 0;
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* Store e's record with priv (a new reference taken). */
static int
put_priv(struct sbx_mgr *m, struct entry *e, json_t *priv, sbx_error **err)
{
    json_decref(e->sb->priv);
    e->sb->priv = json_incref(priv);
    relist(m, e);
    return sbx_store_put(m->opts.store, e->sb, err);
}

/* Stored first, then enforced: a server killed in between enforces the stored policy when it
 * comes back (reconcile), never an older one. */
static int
egress_locked(struct sbx_mgr *m, struct entry *e, json_t *priv, json_t *old, sbx_error **err)
{
    int r = put_priv(m, e, priv, err);
    if (r < 0 || !e->prov->ops->egress) {
        (void)put_priv(m, e, old, NULL);
        return r < 0 ? r : sbx_error_set(err, SBX_EUNAVAIL, 0, "no egress policies here");
    }
    e->busy = true;
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    r = e->prov->ops->egress(e->prov, work, err);
    pthread_mutex_lock(&m->mu);
    sbx_record_free(work);
    set_idle(m, e);
    if (r < 0) {
        sbx_autoerror sbx_error *perr = NULL;
        if (put_priv(m, e, old, &perr) < 0)
            sbx_error_log("sandbox %s: %s", e->sb->id, sbx_error_msg(perr));
    }
    return r;
}

/* Under the lock: read, and with change, edit, store and enforce e's policy. */
static int
egress_edit(struct sbx_mgr *m, struct entry *e, sbx_mgr_egress_fn change, void *arg, json_t **out,
            sbx_error **err)
{
    json_t *eg = json_object_get(e->sb->priv, SBX_EGRESS_PRIV);
    if (!json_object_get(eg, "policy"))
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` has no egress policy", e->sb->id);
    json_t *old = json_incref(e->sb->priv);
    json_t *priv = json_deep_copy(old);
    json_t *pol = json_object_get(json_object_get(priv, SBX_EGRESS_PRIV), "policy");
    int r = change ? change(pol, arg, err) : 0; /* NULL: only read it */
    if (r >= 0 && change)
        r = egress_locked(m, e, priv, old, err);
    if (r >= 0)
        *out = json_deep_copy(pol);
    json_decref(priv);
    json_decref(old);
    return r;
}

int
sbx_mgr_egress(struct sbx_mgr *m, const char *id, sbx_mgr_egress_fn change, void *arg, json_t **out,
               sbx_error **err)
{
    if (ensure_prov(m, id, err) < 0)
        return -SBX_EUNAVAIL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    while ((e = find(m, id)) && e->busy && !m->stopping)
        pthread_cond_wait(&m->cv, &m->mu);
    int r = acquire_with_prov(m, id, &e, err);
    if (r >= 0 && !e)
        r = -SBX_ENOTFOUND; /* (acquire sets e whenever it succeeds) */
    if (r >= 0)
        r = egress_edit(m, e, change, arg, out, err);
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* Under the lock: a changed vault (stored) reaches the provider's credential proxy through its
 * egress op, as a changed policy does (the bindings are in the same priv object). */
static int
vault_enforce(struct sbx_mgr *m, struct entry *e, sbx_error **err)
{
    if (!e->prov || !e->prov->ops->egress)
        return 0; /* (a provider without egress has no credentialProxy either) */
    e->busy = true;
    struct sbx_record *work = sbx_record_dup(e->sb);
    pthread_mutex_unlock(&m->mu);
    int r = e->prov->ops->egress(e->prov, work, err);
    pthread_mutex_lock(&m->mu);
    sbx_record_free(work);
    set_idle(m, e);
    return r;
}

int
sbx_mgr_vault(struct sbx_mgr *m, const char *id, const struct sbx_mgr_vault_op *op, json_t **out,
              sbx_error **err)
{
    *out = NULL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = NULL;
    while ((e = find(m, id)) && e->busy && !m->stopping)
        pthread_cond_wait(&m->cv, &m->mu);
    json_t *eg = e ? json_object_get(e->sb->priv, SBX_EGRESS_PRIV) : NULL;
    int r = 0;
    if (!json_is_object(eg)) {
        r = sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` has no egress policy", id);
    } else {
        json_t *old = json_incref(e->sb->priv);
        json_t *priv = json_deep_copy(old);
        json_t *neg = json_object_get(priv, SBX_EGRESS_PRIV);
        /* (under the lock: the vault's encrypted values are written here too, so that the
         * values and the record change together; a vault write is one small file) */
        r = op->change ? op->change(neg, op->arg, err) : 0;
        if (r > 0 && put_priv(m, e, priv, err) < 0) {
            r = -SBX_EGENERIC;
            (void)put_priv(m, e, old, NULL);
            if (op->undo)
                op->undo(op->arg);
        } else if (r > 0 && vault_enforce(m, e, err) < 0) {
            r = -SBX_EGENERIC;
            (void)put_priv(m, e, old, NULL);
            if (op->undo)
                op->undo(op->arg);
            (void)vault_enforce(m, e, NULL); /* the old bindings again */
        }
        if (r >= 0)
            *out = json_deep_copy(neg);
        json_decref(priv);
        json_decref(old);
    }
    pthread_mutex_unlock(&m->mu);
    return r;
}

int
sbx_mgr_connect(struct sbx_mgr *m, const char *id, int port, int *fd, json_t **headers,
                sbx_error **err)
{
    *headers = NULL;
    if (ensure_prov(m, id, err) < 0)
        return -SBX_EUNAVAIL;
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    int r = 0;
    if (!e)
        r = sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` not found", id);
    else if (strcmp(e->sb->state, "Running") != 0)
        r = sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` is %s, not Running", id,
                          e->sb->state);
    else if (!e->prov)
        r = sbx_error_set(err, SBX_EUNAVAIL, 0, "sandbox `%s`: provider `%s` is not enabled", id,
                          e->sb->provider);
    struct sbx_record *work = r >= 0 && e ? sbx_record_dup(e->sb) : NULL;
    struct sbx_provider *p = r >= 0 && e ? e->prov : NULL;
    pthread_mutex_unlock(&m->mu);
    if (r < 0 || !work || !p)
        return r < 0 ? r : -SBX_ENOTFOUND;
    r = p->ops->connect(p, work, port, fd, err);
    *headers = r >= 0 && p->ops->proxy_headers ? p->ops->proxy_headers(p, work, port) : NULL;
    sbx_record_free(work);
    return r;
}

/* ---- TTL reaper ---- */

/* Ids of the expired sandboxes that are not busy (caller frees). */
static size_t
expired_ids(struct sbx_mgr *m, int64_t now, char (**out)[SBX_UUID_LEN + 1])
{
    pthread_mutex_lock(&m->mu);
    char(*ids)[SBX_UUID_LEN + 1] = NULL; /* made on the first expired one: a tick allocates
                                          * nothing while none is */
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        struct entry *e = m->items[i];
        if (e->busy || !e->sb->expires_ms || e->sb->expires_ms > now)
            continue;
        if (!ids)
            ids = sbx_xcalloc(m->n - i + 1, sizeof *ids);
        memcpy(ids[k++], e->sb->id, sizeof ids[0]);
    }
    pthread_mutex_unlock(&m->mu);
    *out = ids;
    return k;
}

/* The reaper cannot build a lazy provider (its secret is not set): warn once per sandbox and
 * leave it - deleting the record alone would leak what the provider made. */
static void
warn_reap(struct sbx_mgr *m, const char *id, const sbx_error *err)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    bool warn = e && !e->reap_warned;
    if (e)
        e->reap_warned = true;
    pthread_mutex_unlock(&m->mu);
    if (warn)
        sbx_warn("sandbox %s: expired, but cannot be deleted yet: %s", id, sbx_error_msg(err));
}

int
sbx_mgr_reap(struct sbx_mgr *m)
{
    char(*ids)[SBX_UUID_LEN + 1] = NULL;
    size_t n = expired_ids(m, sbx_wall_ms(), &ids);
    int count = 0;
    for (size_t i = 0; i < n && !m->stopping; i++) {
        sbx_autoerror sbx_error *err = NULL;
        if (ensure_prov(m, ids[i], &err) < 0) {
            warn_reap(m, ids[i], err);
            continue;
        }
        pthread_mutex_lock(&m->mu);
        struct entry *e = find(m, ids[i]);
        if (e && !e->busy && e->sb->expires_ms && e->sb->expires_ms <= sbx_wall_ms()) {
            if (delete_locked(m, e, "ttl_expiry", &err) < 0)
                sbx_warn("sandbox %s: expiry delete failed: %s", ids[i], sbx_error_msg(err));
            count++;
        }
        pthread_mutex_unlock(&m->mu);
    }
    free(ids);
    return count;
}

/* ---- liveness: a workload that died while the server ran ---- */

static bool
live_state(const char *s)
{
    return strcmp(s, "Running") == 0 || strcmp(s, "Paused") == 0;
}

/* Mark a dead sandbox Failed (written first), then let its provider clean up what is left. */
static void
mark_lost(struct sbx_mgr *m, const char *id, struct sbx_record *work,
          const struct sbx_provider_status *st)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    if (!e || e->busy || strcmp(e->sb->state, work->state) != 0) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    e->busy = true;
    transition(m, e, "Failed", st->reason[0] ? st->reason : "SANDBOX_LOST",
               "the sandbox's workload exited");
    sbx_warn("sandbox %s: lost (%s)", id, st->state);
    pthread_mutex_unlock(&m->mu);
    (void)e->prov->ops->delete (e->prov, work, NULL);
    pthread_mutex_lock(&m->mu);
    set_idle(m, e);
    pthread_mutex_unlock(&m->mu);
}

static void
check_one(struct sbx_mgr *m, const char *id)
{
    pthread_mutex_lock(&m->mu);
    struct entry *e = find(m, id);
    bool ok = e && !e->busy && e->prov && live_state(e->sb->state);
    struct sbx_record *work = ok ? sbx_record_dup(e->sb) : NULL;
    struct sbx_provider *p = ok ? e->prov : NULL;
    pthread_mutex_unlock(&m->mu);
    if (!work || !p)
        return;
    /* status may run any time (provider contract), so no busy mark for the common case */
    struct sbx_provider_status st = {0};
    sbx_metrics_liveness_check();
    if (p->ops->status(p, work, &st, NULL) >= 0 && st.cls == SBX_CLASS_TERMINAL)
        mark_lost(m, id, work, &st);
    sbx_record_free(work);
}

/* A live, idle sandbox of a provider that can watch it gets a watch fd instead of a status
 * call at every pass. 1: watched now (or already). Caller holds the lock. */
static bool
watched(struct sbx_mgr *m, struct entry *e)
{
    if (e->watch_fd >= 0)
        return true;
    if (m->watch_ep < 0 || !e->prov->ops->watch)
        return false;
    bool owned = true;
    int fd = e->prov->ops->watch(e->prov, e->sb, &owned);
    if (fd < 0)
        return false; /* gone already, or not watchable now: status decides */
    /* A provider's own fd (owned false) stays open while the entry is in a live state: the
     * provider closes it only in stop, delete or a failed start, and every transition to
     * those states unwatches first (transition()), under this lock. Should it close one
     * anyway, epoll drops the closed file by itself, and a stale event matched to a reused
     * number only costs a status call, which decides. */
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(m->watch_ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        if (owned)
            (void)close(fd);
        return false;
    }
    e->watch_fd = fd;
    e->watch_owned = owned;
    return true;
}

/* Status of every live sandbox that has no watch fd (those with one are asked when it fires:
 * the cost of a pass does not grow with idle watched sandboxes, and no record is copied for
 * them). */
int
sbx_mgr_check_live(struct sbx_mgr *m)
{
    pthread_mutex_lock(&m->mu);
    size_t n = 0;
    char(*ids)[SBX_UUID_LEN + 1] = NULL;
    for (size_t i = 0; i < m->n; i++) {
        struct entry *e = m->items[i];
        if (e->busy || !e->prov || !live_state(e->sb->state) || watched(m, e))
            continue;
        if (!ids)
            ids = sbx_xcalloc(m->n - i + 1, sizeof *ids);
        memcpy(ids[n++], e->sb->id, sizeof ids[0]);
    }
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < n; i++)
        check_one(m, ids[i]);
    free(ids);
    return (int)n;
}

#define WATCH_BATCH 64

/* The sandboxes whose watch fd fired (their workload exited, or is about to be found dead):
 * the watch goes (a pidfd stays readable) and status decides, as for an unwatched one; a
 * sandbox still live (a start made a new workload) is watched again at the next pass. */
static int
check_fired(struct sbx_mgr *m)
{
    struct epoll_event ev[WATCH_BATCH];
    char ids[WATCH_BATCH][SBX_UUID_LEN + 1];
    size_t n = 0;
    int got = m->watch_ep < 0 ? 0 : epoll_wait(m->watch_ep, ev, WATCH_BATCH, 0);
    if (got <= 0)
        return 0;
    pthread_mutex_lock(&m->mu);
    /* By fd, under the lock: an entry removed since epoll_wait took its fd out of the set
     * (a scan of the entries, only when something fired). */
    for (size_t i = 0; i < m->n; i++) {
        struct entry *e = m->items[i];
        for (int j = 0; e->watch_fd >= 0 && j < got; j++) {
            if (ev[j].data.fd != e->watch_fd)
                continue;
            unwatch(m, e);
            memcpy(ids[n++], e->sb->id, sizeof ids[0]);
        }
    }
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < n; i++)
        check_one(m, ids[i]);
    return (int)n;
}

#define LIVENESS_EVERY 5 /* reaper ticks (seconds) between liveness checks */

static void *
reaper_main(void *arg)
{
    struct sbx_mgr *m = arg;
    unsigned tick = 0;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        /* A tick every second (stop_cv is signaled only when stopping; a spurious wake-up
         * waits on for the rest of the second). */
        struct timespec ts = sbx_monotonic_in(1000);
        while (!m->stopping && pthread_cond_timedwait(&m->stop_cv, &m->mu, &ts) != ETIMEDOUT)
            ;
        if (m->stopping)
            break;
        pthread_mutex_unlock(&m->mu);
        (void)sbx_mgr_reap(m);
        (void)check_fired(m);
        if (++tick % LIVENESS_EVERY == 0)
            (void)sbx_mgr_check_live(m);
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- startup: load and reconcile ---- */

/* A Stopping record is a delete in progress unless its reason says it is a stop. */
static bool
is_delete(const struct sbx_record *sb)
{
    return strcmp(sb->state, "Stopping") == 0 && strcmp(sb->reason, SBX_REASON_STOP) != 0;
}

/* The API state of a startable sandbox: Stopped when it was being stopped or started (or was
 * stopped), else Paused. */
static const char *
startable_state(const char *stored)
{
    return state_in(stored, "Stopped|Stopping|Starting") ? "Stopped" : "Paused";
}

/* A sandbox of a lazy provider that is not built: nothing is read at startup (no secret, no
 * network), so its live state is not asked for. Stable states are kept (the provider is asked
 * on first use, and polled from then on); interrupted operations land where the user can
 * retry them. */
static void
reconcile_deferred(struct sbx_mgr *m, struct entry *e)
{
    const char *s = e->sb->state;
    if (strcmp(s, "Pending") == 0)
        transition(m, e, "Failed", "PROVISION_INTERRUPTED",
                   "the server stopped while the sandbox was being created; delete it to remove "
                   "what its provider made");
    else if (is_delete(e->sb))
        transition(m, e, "Failed", "DELETE_INTERRUPTED",
                   "the server stopped while the sandbox was being deleted; delete it again");
    else if (state_in(s, "Stopping|Starting"))
        transition(m, e, "Stopped", "RECONCILE_DEFERRED",
                   "the server stopped during a stop or start; start it again");
    else if (state_in(s, "Pausing|Resuming"))
        transition(m, e, "Running", "RECONCILE_DEFERRED",
                   "the server stopped during a pause or resume");
}

static void
reconcile_live(struct sbx_mgr *m, struct entry *e)
{
    struct sbx_provider_status st = {0};
    sbx_autoerror sbx_error *err = NULL;
    int r = e->prov->ops->reconcile(e->prov, e->sb, &st, &err);
    if (r == -SBX_EUNAVAIL) {
        /* The provider's backend (a Docker daemon, a cloud API) does not answer: that says
         * nothing about the sandbox. Keep a stable stored state (the liveness check asks
         * again); an interrupted stop, start, pause or resume lands where it can be retried. */
        sbx_warn("reconcile: sandbox %s left %s: %s", e->sb->id, e->sb->state, sbx_error_msg(err));
        reconcile_deferred(m, e);
        return;
    }
    if (r < 0) {
        st.cls = SBX_CLASS_TERMINAL;
        (void)snprintf(st.reason, sizeof st.reason, "RECONCILE_FAILED");
    }
    if (st.cls == SBX_CLASS_USABLE) {
        transition(m, e, "Running", "SANDBOX_RUNNING", "re-adopted after a server restart");
    } else if (st.cls == SBX_CLASS_STARTABLE) {
        const char *to = startable_state(e->sb->state);
        transition(m, e, to, strcmp(to, "Stopped") == 0 ? "SANDBOX_STOPPED" : "SANDBOX_PAUSED",
                   "re-adopted after a server restart");
    } else {
        (void)e->prov->ops->delete (e->prov, e->sb, NULL);
        transition(m, e, "Failed", st.reason[0] ? st.reason : "SANDBOX_LOST",
                   "the sandbox was gone when the server restarted");
    }
    sbx_info("reconcile: sandbox %s is %s", e->sb->id, e->sb->state);
}

static void
reconcile_one(struct sbx_mgr *m, struct entry *e)
{
    const char *s = e->sb->state;
    if (strcmp(s, "Failed") == 0 || strcmp(s, "Terminated") == 0)
        return;
    if (!e->prov && sbx_registry_resolve(m->opts.registry, e->sb->provider)) {
        reconcile_deferred(m, e);
        return;
    }
    if (!e->prov) {
        transition(m, e, "Failed", "PROVIDER_UNAVAILABLE",
                   "its provider is not enabled in this server's config");
        return;
    }
    if (strcmp(s, "Pending") == 0) {
        /* A create that never finished: remove what it made; never leave it Pending. */
        (void)e->prov->ops->delete (e->prov, e->sb, NULL);
        transition(m, e, "Failed", "PROVISION_INTERRUPTED",
                   "the server stopped while the sandbox was being created");
        return;
    }
    reconcile_live(m, e);
}

static void
load_cb(struct sbx_record *sb, void *ud)
{
    struct sbx_mgr *m = ud;
    struct entry *e = sbx_xcalloc(1, sizeof *e);
    e->watch_fd = -1;
    e->sb = sb;
    /* Eager providers are built; a lazy one stays unbuilt (NULL) until first use. */
    e->prov = sbx_registry_peek(m->opts.registry, sb->provider);
    e->create_done = true;
    add_entry(m, e);
}

static int
reconcile_all(struct sbx_mgr *m, sbx_error **err)
{
    if (sbx_store_load(m->opts.store, load_cb, m, err) < 0)
        return sbx_error_wrap(err, "load sandboxes");
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n;) {
        struct entry *e = m->items[i];
        if (is_delete(e->sb) &&
            (e->prov || !sbx_registry_resolve(m->opts.registry, e->sb->provider))) {
            /* A delete that never finished: finish it. */
            sbx_autoerror sbx_error *derr = NULL;
            if (delete_locked(m, e, "user_delete", &derr) == 0)
                continue;
        } else {
            reconcile_one(m, e);
        }
        i++;
    }
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static int
start_threads(struct sbx_mgr *m, sbx_error **err)
{
    m->workers = sbx_xcalloc(m->opts.workers, sizeof *m->workers);
    for (size_t i = 0; i < m->opts.workers; i++) {
        int rc = pthread_create(&m->workers[i], NULL, worker_main, m);
        if (rc != 0)
            return sbx_error_set(err, SBX_EGENERIC, rc, "start create worker");
        m->n_workers++;
    }
    int rc = pthread_create(&m->reaper, NULL, reaper_main, m);
    if (rc != 0)
        return sbx_error_set(err, SBX_EGENERIC, rc, "start reaper");
    m->reaper_started = true;
    return 0;
}

int
sbx_mgr_new(const struct sbx_mgr_opts *opts, struct sbx_mgr **out, sbx_error **err)
{
    struct sbx_mgr *m = sbx_xcalloc(1, sizeof *m);
    m->opts = *opts;
    if (m->opts.workers == 0)
        m->opts.workers = 1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    pthread_cond_init(&m->jobs_cv, NULL);
    sbx_cond_init_monotonic(&m->stop_cv);
    m->watch_ep = epoll_create1(EPOLL_CLOEXEC);
    if (reconcile_all(m, err) < 0 || start_threads(m, err) < 0) {
        sbx_mgr_free(m);
        return -SBX_EGENERIC;
    }
    *out = m;
    return 0;
}

void
sbx_mgr_free(struct sbx_mgr *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_cond_broadcast(&m->cv);
    pthread_cond_broadcast(&m->jobs_cv);
    pthread_cond_broadcast(&m->stop_cv);
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < m->n_workers; i++)
        pthread_join(m->workers[i], NULL);
    if (m->reaper_started)
        pthread_join(m->reaper, NULL);
    for (size_t i = 0; i < m->n; i++) {
        unwatch(m, m->items[i]);
        sbx_record_free(m->items[i]->sb);
        sbx_error_clear(&m->items[i]->create_err);
        free(m->items[i]);
    }
    sbx_closep(&m->watch_ep);
    free(m->items);
    sbx_strmap_free(&m->by_id);
    free(m->workers);
    pthread_cond_destroy(&m->cv);
    pthread_cond_destroy(&m->jobs_cv);
    pthread_cond_destroy(&m->stop_cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
