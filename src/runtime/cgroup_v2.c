/*
 * cgroup_v2.c - the unified hierarchy backend: one directory per sandbox below the caller's
 * own cgroup, controllers enabled on the parent, the sandbox cloned straight into it
 * (CLONE_INTO_CGROUP), cgroup.freeze for pause and memory.events for OOM kills.
 *
 * This machine kind has no v2 controllers, so this backend is exercised by unit tests on a
 * fake directory tree (tests/unit/runtime/test_cgroup.c), not by the integration tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/cgroup.h"

static int
v2_plan(struct sbx_cg *cg, const char *root, const char *self, const char *parent, const char *id,
        sbx_error **err)
{
    (void)err;
    sbx_autofree char *own = sbx_cg_self_path(self, NULL);
    const char *sep = strcmp(own, "/") == 0 ? "" : own;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (cg->roles & SBX_CG_ROLE(r))
            cg->dir[r] = sbx_xasprintf("%s%s/%s/%s", root, sep, parent, id);
    }
    return 0;
}

static int
v2_enable_controllers(const struct sbx_cg *cg, const char *dir, sbx_error **err)
{
    /* Controllers must be enabled in every ancestor's subtree_control from the caller's own
     * cgroup down; the caller's cgroup itself must hold no processes for that ("no internal
     * processes" rule), which a supervisor arranges. */
    sbx_autofree char *ctl = sbx_xasprintf("%s/cgroup.controllers", dir);
    sbx_autofree char *have = NULL;
    if (sbx_read_file(ctl, 4096, &have, NULL, NULL) < 0)
        return 0;
    static const char *const want[] = {"memory", "pids", "cpu"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(want); i++) {
        if (!strstr(have, want[i]))
            continue;
        char v[32];
        snprintf(v, sizeof v, "+%s", want[i]);
        int ret = sbx_cg_write(cg, dir, "cgroup.subtree_control", v, err);
        if (ret < 0)
            return ret;
    }
    return 0;
}

int
sbx_cg_v2_leave_own(const char *root, const char *self, const char *leaf, pid_t pid, bool fake,
                    sbx_error **err)
{
    sbx_autofree char *own = sbx_cg_self_path(self, NULL);
    if (strcmp(own, "/") == 0) /* the root cgroup may hold processes and delegate */
        return 0;
    sbx_autofree char *dir = sbx_xasprintf("%s%s", root, own);
    sbx_autofree char *procs = sbx_xasprintf("%s/cgroup.procs", dir);
    sbx_autofree char *text = NULL;
    if (sbx_read_file(procs, 1 << 20, &text, NULL, err) < 0)
        return sbx_error_wrap(err, "cgroup v2");
    bool self_seen = false;
    for (char *p = text; *p;) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v != (long)pid)
            return 0; /* not alone: a shell's session, a container's init... */
        self_seen = true;
        p = end + strspn(end, "\n");
    }
    if (!self_seen)
        return 0;
    sbx_autofree char *sub = sbx_xasprintf("%s/%s", dir, leaf);
    if (mkdir(sub, 0755) < 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", sub);
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    struct sbx_cg cg = {.fake = fake};
    return sbx_cg_write(&cg, sub, "cgroup.procs", v, err) < 0 ? -SBX_EGENERIC : 1;
}

static int
v2_set_limits(const struct sbx_cg *cg, const struct sbx_cg_limits *lim, sbx_error **err)
{
    const char *dir = sbx_cg_any_dir(cg);
    char v[64];
    int ret = 0;
    if (lim->memory_bytes) {
        snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes);
        ret = sbx_cg_write(cg, dir, "memory.max", v, err);
        sbx_autoerror sbx_error *ignored = NULL;
        if (ret == 0)
            (void)sbx_cg_write(cg, dir, "memory.swap.max", "0", &ignored);
    }
    if (ret == 0 && lim->pids_max) {
        snprintf(v, sizeof v, "%" PRIu64, lim->pids_max);
        ret = sbx_cg_write(cg, dir, "pids.max", v, err);
    }
    if (ret == 0 && lim->cpu_millis) {
        snprintf(v, sizeof v, "%" PRIu64 " 100000", lim->cpu_millis * 100);
        ret = sbx_cg_write(cg, dir, "cpu.max", v, err);
    }
    return ret;
}

static int
v2_create(struct sbx_cg *cg, const struct sbx_cg_limits *lim, sbx_error **err)
{
    const char *dir = sbx_cg_any_dir(cg);
    if (!dir)
        return 0;
    sbx_autofree char *parent = sbx_xstrdup(dir);
    *strrchr(parent, '/') = '\0';
    sbx_autofree char *grand = sbx_xstrdup(parent);
    *strrchr(grand, '/') = '\0';
    int ret = sbx_mkdir_p(parent, 0755, err);
    if (ret == 0)
        ret = v2_enable_controllers(cg, grand, err);
    if (ret == 0)
        ret = v2_enable_controllers(cg, parent, err);
    if (ret < 0)
        return ret;
    if ((ret = sbx_cg_mkdir(dir, err)) < 0)
        return ret;
    return v2_set_limits(cg, lim, err);
}

static int
v2_clone_fd(const struct sbx_cg *cg)
{
    const char *dir = sbx_cg_any_dir(cg);
    if (!dir) {
        errno = ENOENT;
        return -1;
    }
    return open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static int
// NOLINTNEXTLINE(readability-non-const-parameter): the vtable's signature
v2_open_join(const struct sbx_cg *cg, int *fds, size_t max, sbx_error **err)
{
    (void)cg;
    (void)fds;
    (void)max;
    (void)err;
    return 0;
}

static int
v2_attach(const struct sbx_cg *cg, pid_t pid, sbx_error **err)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    const char *dir = sbx_cg_any_dir(cg);
    return dir ? sbx_cg_write(cg, dir, "cgroup.procs", v, err) : 0;
}

static int
v2_freeze(const struct sbx_cg *cg, bool frozen, sbx_error **err)
{
    const char *dir = cg->dir[SBX_CG_FREEZER];
    if (!dir)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "sandbox was not created pausable");
    int ret = sbx_cg_write(cg, dir, "cgroup.freeze", frozen ? "1" : "0", err);
    if (ret < 0 || cg->fake)
        return ret;
    /* cgroup.events signals POLLPRI when "frozen" changes: wait for it, bounded. */
    sbx_autofree char *path = sbx_xasprintf("%s/cgroup.events", dir);
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    for (int i = 0; fd >= 0 && i < 100; i++) {
        uint64_t state = 0;
        ret = sbx_cg_read_key(dir, "cgroup.events", "frozen", &state, err);
        if (ret < 0 || (state == 1) == frozen)
            return ret;
        struct pollfd p = {.fd = fd, .events = POLLPRI};
        (void)poll(&p, 1, 50);
    }
    return sbx_error_set(err, SBX_ETIMEDOUT, 0, "cgroup `%s` did not %s", dir,
                         frozen ? "freeze" : "thaw");
}

static int
v2_oom_kills(const struct sbx_cg *cg, uint64_t *out, sbx_error **err)
{
    *out = 0;
    if (!cg->dir[SBX_CG_MEMORY])
        return 0;
    return sbx_cg_read_key(cg->dir[SBX_CG_MEMORY], "memory.events", "oom_kill", out, err);
}

static void
v2_usage(const struct sbx_cg *cg, struct sbx_cg_usage *u)
{
    *u = (struct sbx_cg_usage){UINT64_MAX, UINT64_MAX, UINT64_MAX};
    const char *dir = sbx_cg_any_dir(cg);
    if (!dir)
        return;
    (void)sbx_cg_read_u64(dir, "memory.current", &u->memory_bytes);
    (void)sbx_cg_read_u64(dir, "pids.current", &u->pids);
    uint64_t usec = 0;
    if (sbx_cg_read_key(dir, "cpu.stat", "usage_usec", &usec, NULL) == 0)
        u->cpu_ns = usec * 1000;
}

static int
v2_destroy(const struct sbx_cg *cg, sbx_error **err)
{
    const char *dir = sbx_cg_any_dir(cg);
    if (!dir || access(dir, F_OK) != 0)
        return 0;
    sbx_autoerror sbx_error *ignored = NULL;
    (void)sbx_cg_write(cg, dir, "cgroup.kill", "1", &ignored);
    if (cg->fake)
        return sbx_rm_rf(dir, err);
    return sbx_cg_rmdir(dir, err);
}

const struct sbx_cg_ops sbx_cg_v2_ops = {
    .name = "v2",
    .clone_into = true,
    .plan = v2_plan,
    .create = v2_create,
    .clone_fd = v2_clone_fd,
    .attach = v2_attach,
    .open_join = v2_open_join,
    .freeze = v2_freeze,
    .oom_kills = v2_oom_kills,
    .usage = v2_usage,
    .keep = NULL, /* no rename in cgroup v2 (cgroup.h) */
    .destroy = v2_destroy,
};
