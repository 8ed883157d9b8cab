/*
 * netpool.c - network namespaces made ahead of time (sbx_rt_config.netns_pool).
 *
 * A fresh network namespace costs ~0.4 ms of kernel work inside the clone (per-namespace
 * sysctl tables, proc entries, `lo`), and with a bridge ~1.5 ms more for the veth, its address
 * and route: on the critical path of every create. A long-running caller (the server) keeps a
 * few ready. One low-priority thread makes them while no create is running; a create whose
 * network mode matches takes one, and its child setns()es into it instead of cloning a new one.
 *
 * Why a pooled namespace is as good as a cloned one:
 * - it is brand new: made by unshare(CLONE_NEWNET) on the pool thread, which goes back to its
 *   own namespace at once; nothing but `lo` (and, bridged, the veth end) was ever in it, and
 *   no process ever ran in it;
 * - it is owned by the same user namespace (the caller's) as one the runtime's clone would
 *   make, so the sandbox's (reduced) capabilities over it are exactly the same; a sandbox with
 *   a user namespace of its own never gets one (it could not setns into it anyway);
 * - it is handed out once: the pool's fd is the only reference, moved to the sandbox;
 * - after a crash nothing is left: only the pool's fds held the namespaces (the kernel deletes
 *   their veths with them), and each bridge lease is held under a placeholder id naming the
 *   owning process (pool.<pid>.<start time>.<n>), which the next pool start releases when that
 *   process is gone. A sandbox's lease is handed to its id (one rename) only after the
 *   sandbox's record says it has one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

#define POOL_MAX      64
#define POOL_ID_FMT   "pool.%d.%" PRIu64 ".%" PRIu64
#define RETRY_DELAY_S 1

struct pool_entry {
    int fd;
    char id[64]; /* placeholder id of its bridge lease ("" without a bridge) */
    struct sbx_rt_lease lease;
};

struct sbx_rt_netpool {
    struct sbx_rt *rt;
    enum sbx_rt_netmode net;
    unsigned size;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* taken, a create ended, or stop */
    struct pool_entry v[POOL_MAX];
    unsigned n;
    unsigned creating; /* creates in progress: refills wait for them */
    bool armed;        /* a create has run: nothing is made on the host before */
    bool stop;
    pthread_t tid;
    uint64_t seq;
    uint64_t self_start; /* our start time, in placeholder ids */
};

/* A placeholder lease id names a process that no longer exists (or a recycled pid). */
static bool
owner_gone(const char *id)
{
    int pid = 0;
    uint64_t start = 0;
    uint64_t n = 0;
    if (sscanf(id, POOL_ID_FMT, &pid, &start, &n) != 3 || pid <= 0)
        return false;
    return sbx_proc_start_time(pid) != start;
}

static int
reclaim_one(const char *id, void *payload)
{
    struct sbx_rt *rt = payload;
    if (strncmp(id, "pool.", 5) == 0 && owner_gone(id)) {
        sbx_autoerror sbx_error *ignored = NULL;
        (void)rt->net_ops.detach(rt->net_ops.net, id, &ignored);
    }
    return 0;
}

/* Bridge leases of pools of processes that are gone (a crash, kill -9). */
static void
reclaim_dead_pools(struct sbx_rt *rt)
{
    if (!rt->has_net_ops || !rt->net_ops.foreach_lease)
        return;
    sbx_autoerror sbx_error *ignored = NULL;
    (void)rt->net_ops.foreach_lease(rt->net_ops.net, reclaim_one, rt, &ignored);
}

/* A new network namespace, from this thread (which goes back to `home`). */
static int
new_netns(int home, bool lo_up, sbx_error **err)
{
    if (unshare(CLONE_NEWNET) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "unshare a network namespace");
    int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int e = errno;
    int r = fd >= 0 && lo_up ? sbx_netns_lo_up() : 0;
    /* Must not fail: this thread would stay in the pooled namespace. It does nothing with
     * sockets but sbx_netns_lo_up's (closed above), so even then nothing of the caller's
     * could end up in it; exit the thread rather than go on there. */
    if (setns(home, CLONE_NEWNET) < 0)
        pthread_exit(NULL);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, e, "open the new network namespace");
    if (r < 0) {
        (void)close(fd);
        return sbx_error_set(err, SBX_EGENERIC, -r, "bring up lo");
    }
    return fd;
}

static int
make_entry(struct sbx_rt_netpool *p, int home, struct pool_entry *e, sbx_error **err)
{
    bool bridge = p->net == SBX_RT_NET_BRIDGE;
    *e = (struct pool_entry){.fd = -1};
    int fd = new_netns(home, !bridge, err);
    if (fd < 0)
        return fd;
    if (bridge) {
        pthread_mutex_lock(&p->mu);
        uint64_t n = ++p->seq;
        pthread_mutex_unlock(&p->mu);
        snprintf(e->id, sizeof e->id, POOL_ID_FMT, (int)getpid(), p->self_start, n);
        int r = p->rt->net_ops.attach(p->rt->net_ops.net, &e->lease, e->id, fd, err);
        if (r < 0) {
            (void)close(fd);
            return r;
        }
    }
    e->fd = fd;
    return 0;
}

static void
drop_entry(struct sbx_rt *rt, struct pool_entry *e)
{
    if (e->fd >= 0)
        (void)close(e->fd); /* the last reference: the kernel deletes the veth with it */
    if (e->id[0] && rt->has_net_ops) {
        sbx_autoerror sbx_error *ignored = NULL;
        (void)rt->net_ops.detach(rt->net_ops.net, e->id, &ignored);
    }
    e->fd = -1;
    e->id[0] = '\0';
}

static bool
wants_entry(const struct sbx_rt_netpool *p)
{
    return p->stop || (p->armed && p->n < p->size && p->creating == 0);
}

static void *
pool_thread(void *arg)
{
    struct sbx_rt_netpool *p = arg;
    /* Refills are background work: a create in progress comes first. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    sbx_autoclose int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0)
        return NULL;
    bool reclaimed = false;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!wants_entry(p))
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop)
            break;
        if (!reclaimed && p->net == SBX_RT_NET_BRIDGE) {
            pthread_mutex_unlock(&p->mu);
            reclaim_dead_pools(p->rt);
            reclaimed = true;
            pthread_mutex_lock(&p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        struct pool_entry e;
        sbx_autoerror sbx_error *err = NULL;
        int r = make_entry(p, home, &e, &err);
        pthread_mutex_lock(&p->mu);
        if (r == 0 && p->n < POOL_MAX) {
            p->v[p->n++] = e;
            continue;
        }
        if (r == 0)
            drop_entry(p->rt, &e);
        /* No address left, no memory: creates go the cold way; try again later. */
        struct timespec until = sbx_monotonic_in(RETRY_DELAY_S * 1000ULL);
        while (!p->stop)
            if (pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int
sbx_rt_pool_start(struct sbx_rt *rt, unsigned size, enum sbx_rt_netmode net, sbx_error **err)
{
    if (size == 0 || net == SBX_RT_NET_HOST)
        return 0;
    if (size > POOL_MAX)
        return sbx_error_set(err, SBX_EINVAL, 0, "netns_pool must be at most %d", POOL_MAX);
    if (net == SBX_RT_NET_BRIDGE && !rt->has_net_ops)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "bridge networking is not available here");
    struct sbx_rt_netpool *p = sbx_xcalloc(1, sizeof *p);
    p->rt = rt;
    p->net = net;
    p->size = size;
    p->self_start = sbx_proc_start_time(getpid());
    (void)pthread_mutex_init(&p->mu, NULL);
    sbx_cond_init_monotonic(&p->cv);
    if (pthread_create(&p->tid, NULL, pool_thread, p) != 0) {
        (void)pthread_cond_destroy(&p->cv);
        (void)pthread_mutex_destroy(&p->mu);
        free(p);
        return sbx_error_set(err, SBX_EGENERIC, EAGAIN, "start the network namespace pool");
    }
    rt->pool = p;
    return 0;
}

void
sbx_rt_pool_stop(struct sbx_rt *rt)
{
    struct sbx_rt_netpool *p = rt->pool;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    (void)pthread_join(p->tid, NULL);
    for (unsigned i = 0; i < p->n; i++)
        drop_entry(rt, &p->v[i]);
    (void)pthread_cond_destroy(&p->cv);
    (void)pthread_mutex_destroy(&p->mu);
    free(p);
    rt->pool = NULL;
}

void
sbx_rt_pool_begin(struct sbx_rt *rt)
{
    struct sbx_rt_netpool *p = rt->pool;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->creating++;
    p->armed = true;
    pthread_mutex_unlock(&p->mu);
}

void
sbx_rt_pool_end(struct sbx_rt *rt)
{
    struct sbx_rt_netpool *p = rt->pool;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->creating--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

unsigned
sbx_rt_pool_ready(struct sbx_rt *rt)
{
    struct sbx_rt_netpool *p = rt->pool;
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    unsigned n = p->n;
    pthread_mutex_unlock(&p->mu);
    return n;
}

bool
sbx_rt_pool_take(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec)
{
    struct sbx_rt_netpool *p = sb->rt->pool;
    if (!p || spec->net != p->net || spec->userns)
        return false;
    pthread_mutex_lock(&p->mu);
    bool got = p->n > 0;
    if (got) {
        struct pool_entry *e = &p->v[--p->n];
        sb->netns_fd = e->fd;
        sb->pooled = true;
        snprintf(sb->pool_id, sizeof sb->pool_id, "%s", e->id);
        sb->lease = e->lease;
    }
    pthread_mutex_unlock(&p->mu);
    return got;
}

int
sbx_rt_pool_claim(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (!sb->pool_id[0])
        return 0;
    struct sbx_rt *rt = sb->rt;
    int r = rt->net_ops.transfer(rt->net_ops.net, sb->pool_id, sb->id, err);
    if (r == 0)
        sb->pool_id[0] = '\0';
    return r;
}

void
sbx_rt_pool_unclaimed(struct sbx_rt_sandbox *sb)
{
    if (!sb->pool_id[0])
        return;
    struct sbx_rt *rt = sb->rt;
    sbx_autoerror sbx_error *ignored = NULL;
    (void)rt->net_ops.detach(rt->net_ops.net, sb->pool_id, &ignored);
    sb->pool_id[0] = '\0';
}
