/*
 * cgspare.c - memory cgroups of destroyed sandboxes, kept for the next creates.
 *
 * Removing a memory cgroup is cheap for the caller but not for the host: the kernel takes it
 * offline on a worker (css_killed_work_fn) that holds cgroup_mutex while it hands its list_lru
 * entries to the parent, two lists of every superblock on the host (memcg_reparent_list_lrus),
 * and the next create's cgroup mkdir waits for that mutex. With 5,000 sandboxes standing that
 * walk was 26 % of all CPU time while creates followed deletes (docs/server.md "Many
 * sandboxes"). A kept cgroup is never taken offline, and a create that reuses one allocates no
 * new per-cgroup shrinker state either.
 *
 * A kept cgroup is renamed (cgroup v1 only: the backend's `keep`) to
 * <memory parent>/.spare-<pid>.<seq>, the pid being the server's, and a create renames it onto
 * its planned <memory parent>/<id>, so records, gc and everything else still see cgroups named
 * by sandbox. The rename is also the claim: whoever renames a spare first has it, so two
 * servers on one parent, a sweep and a gc never share one.
 *
 * Why a kept cgroup carries nothing of one sandbox into the next: only cgroups without tasks and
 * without an OOM kill are kept; their limit is reset to none and the next create writes its
 * own; the peak and fail counters are reset; what stays charged (at most 8 MiB, reclaimable
 * page cache and dentries) is only counted, never readable from inside: sandboxes do not see
 * cgroupfs.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

#define SPARE_PREFIX ".spare-"

void
sbx_rt_cgs_open(struct sbx_rt *rt, unsigned cap)
{
    (void)pthread_mutex_init(&rt->cgs_mu, NULL);
    rt->cgs_cap = cap;
    rt->cgs = cap ? sbx_xcalloc(cap, sizeof *rt->cgs) : NULL;
}

/* <memory parent> of this runtime's sandboxes (planned as a sandbox's dir), or NULL when its
 * backend keeps no cgroups. Caller frees. */
static char *
memory_parent(struct sbx_rt *rt)
{
    if (!rt->cg_ops || !rt->cg_ops->keep)
        return NULL;
    struct sbx_cg cg = {.ops = rt->cg_ops, .roles = SBX_CG_ROLE(SBX_CG_MEMORY)};
    sbx_autoerror sbx_error *err = NULL;
    if (rt->cg_ops->plan(&cg, "/sys/fs/cgroup", rt->self_cgroup, rt->cgroup_parent, "x", &err) <
        0) {
        sbx_cg_release(&cg);
        return NULL;
    }
    char *dir = sbx_steal_ptr(&cg.dir[SBX_CG_MEMORY]);
    sbx_cg_release(&cg);
    *strrchr(dir, '/') = '\0';
    return dir;
}

static bool
same_parent(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/');
    const char *sb = strrchr(b, '/');
    return sa && sb && sa - a == sb - b && memcmp(a, b, (size_t)(sa - a)) == 0;
}

static char *
pop(struct sbx_rt *rt)
{
    pthread_mutex_lock(&rt->cgs_mu);
    char *s = rt->n_cgs ? rt->cgs[--rt->n_cgs] : NULL;
    pthread_mutex_unlock(&rt->cgs_mu);
    return s;
}

/* Push spare (taken); false when the stack is full (spare stays the caller's). */
static bool
push(struct sbx_rt *rt, char *spare)
{
    pthread_mutex_lock(&rt->cgs_mu);
    bool room = rt->n_cgs < rt->cgs_cap;
    if (room)
        rt->cgs[rt->n_cgs++] = spare;
    pthread_mutex_unlock(&rt->cgs_mu);
    return room;
}

static void
remove_spare(const char *path)
{
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_cg_rmdir(path, &err) < 0)
        sbx_warn("spare cgroup: %s", sbx_error_msg(err));
}

/* A new name for a spare of this process below parent. Caller frees. */
static char *
spare_name(struct sbx_rt *rt, const char *parent)
{
    pthread_mutex_lock(&rt->cgs_mu);
    unsigned seq = rt->cgs_seq++;
    pthread_mutex_unlock(&rt->cgs_mu);
    return sbx_xasprintf("%s/" SPARE_PREFIX "%d.%u", parent, (int)getpid(), seq);
}

bool
sbx_rt_cgs_take(struct sbx_rt *rt, const struct sbx_cg *cg)
{
    const char *dir = cg->dir[SBX_CG_MEMORY];
    if (!dir || !cg->ops->keep || cg->fake || !rt->cgs_cap)
        return false;
    for (char *spare; (spare = pop(rt));) {
        sbx_autofree char *s = spare;
        if (!same_parent(spare, dir)) {
            remove_spare(spare); /* never the case with one cgroup_parent per runtime */
            continue;
        }
        if (rename(spare, dir) == 0)
            return true;
        /* ENOENT: another process (a gc, a second server's sweep) had it; anything else (the
         * dir exists): keep the spare, make a new cgroup */
        if (errno != ENOENT && push(rt, spare)) {
            s = NULL;
            return false;
        }
    }
    return false;
}

void
sbx_rt_cgs_give(struct sbx_rt *rt, const struct sbx_cg *cg)
{
    const char *dir = cg->dir[SBX_CG_MEMORY];
    if (!dir || !cg->ops->keep || cg->fake || !rt->cgs_cap)
        return;
    pthread_mutex_lock(&rt->cgs_mu);
    bool full = rt->n_cgs >= rt->cgs_cap;
    pthread_mutex_unlock(&rt->cgs_mu);
    if (full)
        return;
    sbx_autofree char *parent = sbx_xstrndup(dir, (size_t)(strrchr(dir, '/') - dir));
    char *spare = spare_name(rt, parent);
    if (!cg->ops->keep(cg, spare)) {
        free(spare);
        return;
    }
    if (!push(rt, spare)) { /* filled meanwhile */
        remove_spare(spare);
        free(spare);
    }
}

/* The pid of a spare's name, 0 when name is not a spare's. */
static pid_t
spare_pid(const char *name)
{
    if (strncmp(name, SPARE_PREFIX, strlen(SPARE_PREFIX)) != 0)
        return 0;
    char *end = NULL;
    long pid = strtol(name + strlen(SPARE_PREFIX), &end, 10);
    return pid > 0 && pid <= 0x3fffffff && end && *end == '.' ? (pid_t)pid : 0;
}

static bool
pid_alive(pid_t pid)
{
    return pid == getpid() || kill(pid, 0) == 0 || errno == EPERM;
}

void
sbx_rt_cgs_sweep(struct sbx_rt *rt, bool adopt)
{
    sbx_autofree char *parent = memory_parent(rt);
    sbx_autoclosedir DIR *d = parent ? opendir(parent) : NULL;
    if (!d)
        return;
    unsigned adopted = 0;
    unsigned removed = 0;
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((e = readdir(d))) {
        pid_t pid = spare_pid(e->d_name);
        if (!pid || pid_alive(pid))
            continue; /* a live server's: its own to use */
        sbx_autofree char *path = sbx_xasprintf("%s/%s", parent, e->d_name);
        char *mine = adopt ? spare_name(rt, parent) : NULL;
        if (mine && rename(path, mine) == 0 && push(rt, mine)) {
            adopted++;
            continue;
        }
        if (mine && access(mine, F_OK) == 0) /* renamed, but the stack is full */
            remove_spare(mine);
        else
            remove_spare(path);
        free(mine);
        removed++;
    }
    if (adopted || removed)
        sbx_info("spare memory cgroups of stopped servers in %s: %u reused, %u removed", parent,
                 adopted, removed);
}

void
sbx_rt_cgs_close(struct sbx_rt *rt)
{
    for (char *spare; (spare = pop(rt));) {
        remove_spare(spare);
        free(spare);
    }
    free(rt->cgs);
    rt->cgs = NULL;
    (void)pthread_mutex_destroy(&rt->cgs_mu);
}
