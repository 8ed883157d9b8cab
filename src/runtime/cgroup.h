/*
 * cgroup.h - one interface over cgroup v1 (this machine kind) and v2 (most hosts).
 *
 * A sandbox's cgroup is planned (paths computed, nothing touched), recorded in the state file,
 * then created. The backend is chosen once per runtime by sbx_cg_detect: a cgroup2 mount at the
 * root => v2; otherwise v1 hierarchies (a hybrid host's empty cgroup2 mount is ignored).
 */
#ifndef SBX_RUNTIME_CGROUP_H
#define SBX_RUNTIME_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

enum sbx_cg_role {
    SBX_CG_MEMORY = 0,
    SBX_CG_PIDS,
    SBX_CG_CPU,
    SBX_CG_CPUACCT,
    SBX_CG_FREEZER,
    SBX_CG_NROLES,
};
#define SBX_CG_ROLE(r) (1U << (r))
#define SBX_CG_ALL     (SBX_CG_ROLE(SBX_CG_NROLES) - 1)

struct sbx_cg_limits {
    uint64_t memory_bytes; /* 0 = unlimited */
    uint64_t pids_max;     /* 0 = unlimited */
    uint64_t cpu_millis;   /* 0 = unlimited; 1000 = one CPU */
};

struct sbx_cg_ops;

/* What a sandbox's cgroup has used (UINT64_MAX: this backend or host cannot tell). */
struct sbx_cg_usage {
    uint64_t memory_bytes; /* charged now (page cache included, as the limit counts it) */
    uint64_t cpu_ns;       /* CPU time since the cgroup was made */
    uint64_t pids;         /* tasks now */
};

/* One sandbox's cgroup: the directory serving each role (v2: the same dir for all), NULL for a
 * role the sandbox does not need (no cgroup work at all when it needs none). */
struct sbx_cg {
    const struct sbx_cg_ops *ops;
    char *dir[SBX_CG_NROLES];
    unsigned roles; /* input to plan: SBX_CG_ROLE() bits of the controllers needed */
    bool fake;      /* unit tests: a plain directory tree stands in for cgroupfs */
};

struct sbx_cg_ops {
    const char *name; /* "v1" | "v2" */
    bool clone_into;  /* v2: clone straight into the cgroup; v1: the parent attaches the pid */
    /* Fill cg->dir[] of the roles in cg->roles for <own cgroup>/<parent>/<id> below root.
     * self is the text of /proc/self/cgroup. */
    int (*plan)(struct sbx_cg *cg, const char *root, const char *self, const char *parent,
                const char *id, sbx_error **err);
    int (*create)(struct sbx_cg *cg, const struct sbx_cg_limits *lim, sbx_error **err);
    /* v2: an O_PATH dir fd for CLONE_INTO_CGROUP; v1: -1 (the parent attaches instead). */
    int (*clone_fd)(const struct sbx_cg *cg);
    int (*attach)(const struct sbx_cg *cg, pid_t pid, sbx_error **err);
    /* v1: open (write-only) the `tasks` file of each of the sandbox's dirs into fds[] (at most
     * max), for the child to join them itself by writing "0" (sbx_cg_join_self); returns the
     * count. v2: 0 (it clones into the cgroup). */
    int (*open_join)(const struct sbx_cg *cg, int *fds, size_t max, sbx_error **err);
    int (*freeze)(const struct sbx_cg *cg, bool frozen, sbx_error **err);
    int (*oom_kills)(const struct sbx_cg *cg, uint64_t *out, sbx_error **err);
    void (*usage)(const struct sbx_cg *cg, struct sbx_cg_usage *u);
    /* Keep the dir of `role` of a sandbox whose tasks are gone for another sandbox: when it
     * can be reused, reset what must not pass on and rename it to spare (same parent); true
     * when it did. NULL: this backend cannot (v2 cannot rename a cgroup, so a reused one
     * would have to be named by slot, not by sandbox). */
    bool (*keep)(const struct sbx_cg *cg, int role, const char *spare);
    /* Thaw and remove; missing dirs are fine. */
    int (*destroy)(const struct sbx_cg *cg, sbx_error **err);
};

extern const struct sbx_cg_ops sbx_cg_v1_ops;
extern const struct sbx_cg_ops sbx_cg_v2_ops;

/* Choose the backend for the cgroup mount at root ("/sys/fs/cgroup"). */
int sbx_cg_detect(const struct sbx_cg_ops **out, const char *root, sbx_error **err);

/* The caller's own cgroup path for a v1 controller ("memory") or v2 (controller NULL) from the
 * text of /proc/self/cgroup; "/" when not listed. Caller frees. */
char *sbx_cg_self_path(const char *self, const char *controller);

/* v2: move process pid (the caller) out of its own cgroup into <own>/<leaf> when it is the
 * only process there, so that its cgroup may enable controllers for the sandboxes' cgroups
 * below it: v2 gives a cgroup that holds processes no domain controllers for its children
 * ("no internal processes"), and systemd starts a service with Delegate=yes in the root of
 * its delegated subtree (systemd 254's DelegateSubgroup= does this instead). Sandboxes are
 * still planned from self (the text of /proc/self/cgroup before the move). Returns 1 when it
 * moved pid, 0 when there was nothing to do (the root cgroup, another process beside it).
 * fake: root is a plain directory tree (unit tests). */
int sbx_cg_v2_leave_own(const char *root, const char *self, const char *leaf, pid_t pid, bool fake,
                        sbx_error **err);

/* In the process to move (single-threaded): join the cgroups whose `tasks` files open_join
 * opened, and close them. Writing "0" to `tasks` moves the calling thread without the global
 * cgroup_threadgroup_rwsem that a pid written to cgroup.procs takes (kernel 5.3+, "cgroup:
 * Optimize single thread migration"): that rwsem's first writer after a quiet spell waits for
 * an RCU grace period (~10 ms here). For a single-threaded process the thread is the process.
 * Returns 0 or -errno (async-signal-safe: only write and close). */
int sbx_cg_join_self(const int *fds, size_t n);
/* The distinct dirs of cg (for the state record), in removal order. Returns the count. */
size_t sbx_cg_unique_dirs(const struct sbx_cg *cg, const char **out, size_t max);

void sbx_cg_release(struct sbx_cg *cg);
/* The first planned dir (v2: the sandbox's cgroup), or NULL when none is needed. */
const char *sbx_cg_any_dir(const struct sbx_cg *cg);

/* Small file helpers shared by the backends. */
int sbx_cg_write(const struct sbx_cg *cg, const char *dir, const char *file, const char *val,
                 sbx_error **err);
/* The number a one-value file (memory.current, pids.current...) holds; -1 when unreadable. */
int sbx_cg_read_u64(const char *dir, const char *file, uint64_t *out);
int sbx_cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out,
                    sbx_error **err);
/* mkdir of a sandbox's cgroup (EEXIST is fine). ENOSPC is a host limit, not a full disk: a
 * SBX_ELIMIT (the API's 429) whose message names it. */
int sbx_cg_mkdir(const char *dir, sbx_error **err);
/* rmdir that tolerates a missing dir and retries briefly while the last task is being reaped. */
int sbx_cg_rmdir(const char *dir, sbx_error **err);

#endif
