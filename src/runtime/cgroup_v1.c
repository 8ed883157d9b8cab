/*
 * cgroup_v1.c - the cgroup v1 backend: one directory per hierarchy (memory, pids, cpu,
 * cpuacct, freezer), each below the caller's own cgroup in that hierarchy so that limits set
 * on the caller (e.g. by a supervisor) still apply to its sandboxes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/cgroup.h"

static const char *const v1_controller[SBX_CG_NROLES] = {
    [SBX_CG_MEMORY] = "memory",   [SBX_CG_PIDS] = "pids",       [SBX_CG_CPU] = "cpu",
    [SBX_CG_CPUACCT] = "cpuacct", [SBX_CG_FREEZER] = "freezer",
};

static int
v1_plan(struct sbx_cg *cg, const char *root, const char *self, const char *parent, const char *id,
        sbx_error **err)
{
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (!(cg->roles & SBX_CG_ROLE(r)))
            continue;
        sbx_autofree char *own = sbx_cg_self_path(self, v1_controller[r]);
        const char *sep = strcmp(own, "/") == 0 ? "" : own;
        sbx_autofree char *mnt = sbx_xasprintf("%s/%s", root, v1_controller[r]);
        /* cpu and cpuacct are often one hierarchy behind two symlinks: resolve the mount so
         * the same directory is not created twice. */
        sbx_autofree char *real = realpath(mnt, NULL);
        if (!real && !cg->fake)
            return sbx_error_set(err, SBX_EUNAVAIL, errno, "cgroup v1 `%s`", mnt);
        cg->dir[r] = sbx_xasprintf("%s%s/%s/%s", real ? real : mnt, sep, parent, id);
    }
    return 0;
}

static int
v1_set_limits(const struct sbx_cg *cg, const struct sbx_cg_limits *lim, sbx_error **err)
{
    char v[64];
    int ret = 0;
    if (lim->memory_bytes && cg->dir[SBX_CG_MEMORY]) {
        snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes);
        ret = sbx_cg_write(cg, cg->dir[SBX_CG_MEMORY], "memory.limit_in_bytes", v, err);
        /* No swap here, but where there is, memsw keeps the sandbox from swapping past it. */
        sbx_autoerror sbx_error *ignored = NULL;
        if (ret == 0)
            (void)sbx_cg_write(cg, cg->dir[SBX_CG_MEMORY], "memory.memsw.limit_in_bytes", v,
                               &ignored);
    }
    if (ret == 0 && lim->pids_max && cg->dir[SBX_CG_PIDS]) {
        snprintf(v, sizeof v, "%" PRIu64, lim->pids_max);
        ret = sbx_cg_write(cg, cg->dir[SBX_CG_PIDS], "pids.max", v, err);
    }
    /* Only the quota: a new cpu cgroup's period is always the kernel's 100 ms (it is not
     * inherited, and sbx never changes it), and every write of either file walks the host's
     * whole tree of cpu cgroups (tg_set_bandwidth checks schedulability from the root): one
     * walk per create, not two (docs/server.md "Many sandboxes"). */
    if (ret == 0 && lim->cpu_millis && cg->dir[SBX_CG_CPU]) {
        uint64_t now = 0;
        /* A kept cgroup (runtime/cgspare.c) may have this quota already: then no write, and
         * no walk */
        if (sbx_cg_read_u64(cg->dir[SBX_CG_CPU], "cpu.cfs_quota_us", &now) < 0 ||
            now != lim->cpu_millis * 100) {
            snprintf(v, sizeof v, "%" PRIu64, lim->cpu_millis * 100);
            ret = sbx_cg_write(cg, cg->dir[SBX_CG_CPU], "cpu.cfs_quota_us", v, err);
        }
    }
    return ret;
}

static int
v1_create(struct sbx_cg *cg, const struct sbx_cg_limits *lim, sbx_error **err)
{
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (!cg->dir[r])
            continue;
        sbx_autofree char *parent = sbx_xstrdup(cg->dir[r]);
        *strrchr(parent, '/') = '\0';
        int ret = sbx_mkdir_p(parent, 0755, err);
        if (ret < 0)
            return ret;
        if ((ret = sbx_cg_mkdir(cg->dir[r], err)) < 0)
            return ret;
    }
    return v1_set_limits(cg, lim, err);
}

static int
v1_clone_fd(const struct sbx_cg *cg)
{
    (void)cg;
    return -1;
}

static int
v1_attach(const struct sbx_cg *cg, pid_t pid, sbx_error **err)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    const char *dirs[SBX_CG_NROLES];
    size_t n = sbx_cg_unique_dirs(cg, dirs, SBX_CG_NROLES);
    for (size_t i = 0; i < n; i++) {
        int ret = sbx_cg_write(cg, dirs[i], "cgroup.procs", v, err);
        if (ret < 0)
            return ret;
    }
    return 0;
}

static int
v1_open_join(const struct sbx_cg *cg, int *fds, size_t max, sbx_error **err)
{
    const char *dirs[SBX_CG_NROLES];
    size_t n = sbx_cg_unique_dirs(cg, dirs, SBX_CG_NROLES);
    if (n > max)
        return sbx_error_set(err, SBX_EGENERIC, 0, "too many cgroup dirs (%zu)", n);
    int flags = O_WRONLY | O_CLOEXEC | (cg->fake ? O_CREAT : 0);
    for (size_t i = 0; i < n; i++) {
        sbx_autofree char *path = sbx_xasprintf("%s/tasks", dirs[i]);
        fds[i] = open(path, flags, 0644);
        if (fds[i] < 0) {
            int e = errno;
            for (size_t k = 0; k < i; k++)
                (void)close(fds[k]);
            return sbx_error_set(err, SBX_EGENERIC, e, "open `%s`", path);
        }
    }
    return (int)n;
}

static int
v1_freeze(const struct sbx_cg *cg, bool frozen, sbx_error **err)
{
    const char *want = frozen ? "FROZEN" : "THAWED";
    if (!cg->dir[SBX_CG_FREEZER])
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "sandbox was not created pausable");
    int ret = sbx_cg_write(cg, cg->dir[SBX_CG_FREEZER], "freezer.state", want, err);
    if (ret < 0 || cg->fake)
        return ret;
    /* v1 freezing is asynchronous: FREEZING until every task stopped. There is no
     * notification, so poll with a short sleep (pause is not on the start path). */
    sbx_autofree char *path = sbx_xasprintf("%s/freezer.state", cg->dir[SBX_CG_FREEZER]);
    for (int i = 0; i < 5000; i++) {
        sbx_autofree char *state = NULL;
        ret = sbx_read_file(path, 64, &state, NULL, err);
        if (ret < 0)
            return ret;
        if (strncmp(state, want, strlen(want)) == 0)
            return 0;
        if (frozen)
            (void)sbx_cg_write(cg, cg->dir[SBX_CG_FREEZER], "freezer.state", want, NULL);
        struct timespec ts = {0, 1000000};
        (void)nanosleep(&ts, NULL);
    }
    return sbx_error_set(err, SBX_ETIMEDOUT, 0, "cgroup `%s` did not become %s",
                         cg->dir[SBX_CG_FREEZER], want);
}

static int
v1_oom_kills(const struct sbx_cg *cg, uint64_t *out, sbx_error **err)
{
    *out = 0;
    if (!cg->dir[SBX_CG_MEMORY])
        return 0;
    return sbx_cg_read_key(cg->dir[SBX_CG_MEMORY], "memory.oom_control", "oom_kill", out, err);
}

static void
v1_usage(const struct sbx_cg *cg, struct sbx_cg_usage *u)
{
    *u = (struct sbx_cg_usage){UINT64_MAX, UINT64_MAX, UINT64_MAX};
    if (cg->dir[SBX_CG_MEMORY])
        (void)sbx_cg_read_u64(cg->dir[SBX_CG_MEMORY], "memory.usage_in_bytes", &u->memory_bytes);
    /* cpuacct is not made per sandbox (runtime.c: one cgroup less to create and remove), so
     * CPU time is known where it is mounted together with cpu (cpu,cpuacct: most v1 hosts) */
    const char *acct = cg->dir[SBX_CG_CPUACCT] ? cg->dir[SBX_CG_CPUACCT] : cg->dir[SBX_CG_CPU];
    if (acct)
        (void)sbx_cg_read_u64(acct, "cpuacct.usage", &u->cpu_ns);
    if (cg->dir[SBX_CG_PIDS])
        (void)sbx_cg_read_u64(cg->dir[SBX_CG_PIDS], "pids.current", &u->pids);
}

/* At most this much may still be charged to a memory cgroup that is kept for another sandbox:
 * what is left once the tasks are gone and the layer removed is page cache of the image's files
 * and kernel objects (dentries), all reclaimable, which the next sandbox then carries in its
 * usage (and which its limit reclaims first). An idle sandbox leaves ~0.3 MiB. Above this the
 * cgroup is removed and its pages go to the parent as before: emptying it (force_empty) would
 * evict from the page cache files that other sandboxes map. */
#define V1_KEEP_MAX_CHARGE (8ULL << 20)

/* True once no task is left in dir: the last ones can still be leaving just after the init was
 * reaped (as in sbx_cg_rmdir), so a few short waits. */
static bool
v1_empty(const char *dir)
{
    sbx_autofree char *path = sbx_xasprintf("%s/cgroup.procs", dir);
    for (int i = 0; i < 20; i++) {
        char c;
        sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, &c, 1);
        if (n == 0)
            return true;
        if (n < 0)
            return false;
        struct timespec ts = {0, 1000000};
        (void)nanosleep(&ts, NULL);
    }
    return false;
}

/* What the memory dir must be to be kept, and its reset: no OOM kill (memory.oom_control's
 * count cannot be reset: the next sandbox would be reported OOM-killed), little charged, limits
 * back to none (the next create writes its own), peak and fail counters at 0. */
static bool
v1_keep_memory(const struct sbx_cg *cg, const char *dir)
{
    uint64_t kills = 1;
    uint64_t charged = UINT64_MAX;
    sbx_autoerror sbx_error *ignored = NULL;
    if (v1_oom_kills(cg, &kills, &ignored) < 0 || kills != 0 ||
        sbx_cg_read_u64(dir, "memory.usage_in_bytes", &charged) < 0 || charged > V1_KEEP_MAX_CHARGE)
        return false;
    /* memsw first (it may not be below the limit); it exists only with swap accounting */
    (void)sbx_cg_write(cg, dir, "memory.memsw.limit_in_bytes", "-1", &ignored);
    if (sbx_cg_write(cg, dir, "memory.limit_in_bytes", "-1", &ignored) < 0)
        return false;
    (void)sbx_cg_write(cg, dir, "memory.max_usage_in_bytes", "0", &ignored);
    (void)sbx_cg_write(cg, dir, "memory.failcnt", "0", &ignored);
    (void)sbx_cg_write(cg, dir, "memory.memsw.max_usage_in_bytes", "0", &ignored);
    (void)sbx_cg_write(cg, dir, "memory.memsw.failcnt", "0", &ignored);
    return true;
}

static bool
v1_keep(const struct sbx_cg *cg, int role, const char *spare)
{
    const char *dir = cg->dir[role];
    if (!dir || cg->fake || role == SBX_CG_CPUACCT)
        return false;
    /* Only a hierarchy of one role: a dir that also serves another one (memory mounted with
     * freezer, say) would carry that controller's state along. */
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (r != role && cg->dir[r] && strcmp(cg->dir[r], dir) == 0)
            return false;
    }
    if (!v1_empty(dir))
        return false;
    sbx_autoerror sbx_error *ignored = NULL;
    switch (role) {
    case SBX_CG_MEMORY:
        if (!v1_keep_memory(cg, dir))
            return false;
        break;
    case SBX_CG_CPU:
        /* The quota stays: the next create writes it only when it differs, since every write
         * walks all the host's cpu cgroups (v1_set_limits). CPU time starts at 0 where cpuacct
         * is mounted with cpu (usage reads it there). */
        (void)sbx_cg_write(cg, dir, "cpuacct.usage", "0", &ignored);
        break;
    case SBX_CG_FREEZER: {
        sbx_autofree char *path = sbx_xasprintf("%s/freezer.state", dir);
        sbx_autofree char *state = NULL;
        if (sbx_read_file(path, 64, &state, NULL, &ignored) < 0 || strncmp(state, "THAWED", 6) != 0)
            return false;
        break;
    }
    default: /* pids: the next create writes its pids.max */
        break;
    }
    /* v1 renames a cgroup within its parent (cgroup1_rename); the id a sandbox's record
     * names stays its own, and a kept one is named apart (ids never start with '.'). */
    return rename(dir, spare) == 0;
}

static int
v1_destroy(const struct sbx_cg *cg, sbx_error **err)
{
    if (cg->dir[SBX_CG_FREEZER] && access(cg->dir[SBX_CG_FREEZER], F_OK) == 0) {
        /* Frozen tasks cannot die: thaw before the last SIGKILL lands. */
        sbx_autoerror sbx_error *ignored = NULL;
        (void)sbx_cg_write(cg, cg->dir[SBX_CG_FREEZER], "freezer.state", "THAWED", &ignored);
    }
    const char *dirs[SBX_CG_NROLES];
    size_t n = sbx_cg_unique_dirs(cg, dirs, SBX_CG_NROLES);
    int ret = 0;
    for (size_t i = 0; i < n; i++) {
        if ((cg->fake ? sbx_rm_rf(dirs[i], err) : sbx_cg_rmdir(dirs[i], err)) < 0)
            ret = -SBX_EGENERIC;
    }
    return ret;
}

const struct sbx_cg_ops sbx_cg_v1_ops = {
    .name = "v1",
    .clone_into = false,
    .plan = v1_plan,
    .create = v1_create,
    .clone_fd = v1_clone_fd,
    .attach = v1_attach,
    .open_join = v1_open_join,
    .freeze = v1_freeze,
    .oom_kills = v1_oom_kills,
    .usage = v1_usage,
    .keep = v1_keep,
    .destroy = v1_destroy,
};
