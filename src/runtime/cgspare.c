/*
 * cgspare.c - cgroups of destroyed sandboxes, kept for the next creates (cgroup v1).
 *
 * Removing and making cgroups is cheap for the caller but not for the host, and both grow with
 * the number of sandboxes on it (docs/server.md "Many sandboxes"):
 * - a removed memory cgroup is taken offline by a worker (css_killed_work_fn) that holds
 *   cgroup_mutex while it hands its list_lru entries to the parent, two lists of every
 *   superblock on the host (memcg_reparent_list_lrus: 26 % of all CPU time with 5,000
 *   sandboxes standing and creates following deletes), and the next create's cgroup mkdir
 *   waits for that mutex; a new one allocates per-cgroup shrinker state for every superblock;
 * - a new cpu cgroup needs its quota written, and every write walks all the host's cpu cgroups
 *   (tg_set_bandwidth: 17 % of all CPU time at 10,000 with memory cgroups kept); a kept one
 *   has it already when the next sandbox asks for the same.
 *
 * A kept cgroup is renamed (the backend's `keep`; v1 only) to <parent>/.spare-<pid>.<seq> in
 * its hierarchy, the pid being the server's, and a create renames one onto its planned
 * <parent>/<id>, so records, gc and everything else still see cgroups named by sandbox. The
 * rename is also the claim: whoever renames a spare first has it, so two servers on one parent,
 * a sweep and a gc never share one.
 *
 * Why a kept cgroup carries nothing of one sandbox into the next: only cgroups without tasks
 * are kept, memory ones only without an OOM kill and with little charged, their limits reset
 * (cgroup_v1.c, v1_keep), a freezer only THAWED; what stays (at most 8 MiB of reclaimable page
 * cache charged, counters sbx does not report) is only counted, never readable from inside:
 * sandboxes do not see cgroupfs.
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
    for (int r = 0; r < SBX_CG_NROLES && cap; r++)
        rt->cgs[r] = sbx_xcalloc(cap, sizeof *rt->cgs[r]);
}

static bool
enabled(const struct sbx_rt *rt, const struct sbx_cg *cg)
{
    return rt->cgs_cap && cg->ops && cg->ops->keep && !cg->fake;
}

static char *
pop(struct sbx_rt *rt, int role)
{
    pthread_mutex_lock(&rt->cgs_mu);
    char *s = rt->n_cgs[role] ? rt->cgs[role][--rt->n_cgs[role]] : NULL;
    pthread_mutex_unlock(&rt->cgs_mu);
    return s;
}

/* Push spare (taken); false when the role's stack is full (spare stays the caller's). */
static bool
push(struct sbx_rt *rt, int role, char *spare)
{
    pthread_mutex_lock(&rt->cgs_mu);
    bool room = rt->n_cgs[role] < rt->cgs_cap;
    if (room)
        rt->cgs[role][rt->n_cgs[role]++] = spare;
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

static bool
same_parent(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/');
    const char *sb = strrchr(b, '/');
    return sa && sb && sa - a == sb - b && memcmp(a, b, (size_t)(sa - a)) == 0;
}

/* Rename a spare of role onto dir; false when there is none. */
static bool
take_one(struct sbx_rt *rt, int role, const char *dir)
{
    for (char *spare; (spare = pop(rt, role));) {
        sbx_autofree char *s = spare;
        if (!same_parent(spare, dir)) {
            remove_spare(spare); /* never the case with one cgroup_parent per runtime */
            continue;
        }
        if (rename(spare, dir) == 0)
            return true;
        /* ENOENT: another process (a gc, a second server's sweep) had it; anything else (the
         * dir exists): keep the spare (or remove it when the stack filled meanwhile), make a
         * new cgroup */
        if (errno != ENOENT) {
            if (push(rt, role, spare))
                s = NULL;
            else
                remove_spare(spare);
            return false;
        }
    }
    return false;
}

void
sbx_rt_cgs_take(struct sbx_rt *rt, const struct sbx_cg *cg)
{
    if (!enabled(rt, cg))
        return;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (cg->dir[r])
            (void)take_one(rt, r, cg->dir[r]);
    }
}

static void
give_one(struct sbx_rt *rt, const struct sbx_cg *cg, int role)
{
    const char *dir = cg->dir[role];
    pthread_mutex_lock(&rt->cgs_mu);
    bool full = rt->n_cgs[role] >= rt->cgs_cap;
    pthread_mutex_unlock(&rt->cgs_mu);
    if (full)
        return;
    sbx_autofree char *parent = sbx_xstrndup(dir, (size_t)(strrchr(dir, '/') - dir));
    char *spare = spare_name(rt, parent);
    if (!cg->ops->keep(cg, role, spare)) {
        free(spare);
        return;
    }
    if (!push(rt, role, spare)) { /* filled meanwhile */
        remove_spare(spare);
        free(spare);
    }
}

void
sbx_rt_cgs_give(struct sbx_rt *rt, const struct sbx_cg *cg)
{
    if (!enabled(rt, cg))
        return;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (cg->dir[r])
            give_one(rt, cg, r);
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

/* The parent dir of this runtime's sandboxes in each role's hierarchy (planned as a
 * sandbox's dir); NULL where a role has no hierarchy or shares one with an earlier role. */
static void
parents(struct sbx_rt *rt, char *out[SBX_CG_NROLES])
{
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        struct sbx_cg cg = {.ops = rt->cg_ops, .roles = SBX_CG_ROLE(r)};
        sbx_autoerror sbx_error *err = NULL;
        char *d = NULL;
        if (r != SBX_CG_CPUACCT && rt->cg_ops->plan(&cg, "/sys/fs/cgroup", rt->self_cgroup,
                                                    rt->cgroup_parent, "x", &err) == 0)
            d = sbx_steal_ptr(&cg.dir[r]);
        sbx_cg_release(&cg);
        if (d)
            *strrchr(d, '/') = '\0';
        for (int k = 0; d && k < r; k++) {
            if (out[k] && strcmp(out[k], d) == 0) {
                free(d);
                d = NULL;
            }
        }
        out[r] = d;
    }
}

/* Adopt (into role's stack) or remove one spare of a process that is gone. */
static bool
sweep_one(struct sbx_rt *rt, int role, const char *parent, const char *name, bool adopt)
{
    sbx_autofree char *path = sbx_xasprintf("%s/%s", parent, name);
    char *mine = adopt ? spare_name(rt, parent) : NULL;
    if (mine && rename(path, mine) == 0) {
        if (push(rt, role, mine))
            return true;
        remove_spare(mine); /* renamed, but the stack is full */
    } else {
        remove_spare(path);
    }
    free(mine);
    return false;
}

void
sbx_rt_cgs_sweep(struct sbx_rt *rt, bool adopt)
{
    char *parent[SBX_CG_NROLES] = {0};
    if (rt->cg_ops && rt->cg_ops->keep)
        parents(rt, parent);
    unsigned adopted = 0;
    unsigned removed = 0;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        sbx_autofree char *p = parent[r];
        sbx_autoclosedir DIR *d = p ? opendir(p) : NULL;
        struct dirent *e;
        /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
        while (d && (e = readdir(d))) {
            pid_t pid = spare_pid(e->d_name);
            if (!pid || pid_alive(pid))
                continue; /* a live server's: its own to use */
            if (sweep_one(rt, r, p, e->d_name, adopt))
                adopted++;
            else
                removed++;
        }
    }
    if (adopted || removed)
        sbx_info("spare cgroups of stopped servers below %s: %u reused, %u removed",
                 rt->cgroup_parent, adopted, removed);
}

void
sbx_rt_cgs_close(struct sbx_rt *rt)
{
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        for (char *spare; (spare = pop(rt, r));) {
            remove_spare(spare);
            free(spare);
        }
        free(rt->cgs[r]);
        rt->cgs[r] = NULL;
    }
    (void)pthread_mutex_destroy(&rt->cgs_mu);
}
