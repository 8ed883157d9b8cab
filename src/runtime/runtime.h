/*
 * runtime.h - the native sandbox runtime: namespaces, an overlay root, cgroups, capabilities,
 * seccomp, and the records that let a crashed caller clean up after itself.
 *
 *   struct sbx_rt *rt;               sbx_rt_open(&rt, &cfg, &err)
 *   struct sbx_rt_sandbox *sb;       sbx_rt_create(&sb, rt, &spec, &err)   set up, not yet running
 *                                    sbx_rt_start(sb, &err)                 exec the command
 *   struct sbx_rt_exit ex;           sbx_rt_wait(&ex, sb, NULL, &err)
 *                                    sbx_rt_destroy(sb, &err); sbx_rt_sandbox_free(sb)
 *
 * Every host-side resource (state dir, cgroup dirs, bridge lease) is written to
 * <state_dir>/run/<id>/state.json before it is created, so sbx_rt_destroy (or sbx_rt_gc after a
 * crash) removes exactly what exists. Mounts never leak: they all live in the sandbox's private
 * mount namespace and vanish with it. See docs/runtime.md.
 */
#ifndef SBX_RUNTIME_RUNTIME_H
#define SBX_RUNTIME_RUNTIME_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

enum sbx_rt_netmode {
    SBX_RT_NET_NONE = 0, /* own netns with only `lo` up */
    SBX_RT_NET_HOST,     /* the host's netns */
    SBX_RT_NET_BRIDGE,   /* own netns + a veth through the net hook */
};

/* Address of a sandbox attached to the bridge (filled by the net hook). */
struct sbx_rt_lease {
    char address[64]; /* "10.88.0.5/16" */
    char gateway[64]; /* "10.88.0.1" */
};

/* Bridge networking hook: the lead plugs src/net in here. NULL ops => bridge is unavailable.
 * attach configures the sandbox's network namespace completely, `lo` included: with a bridge
 * the child does not bring `lo` up itself (it would wait for the rtnl lock the veth setup
 * holds meanwhile). */
struct sbx_rt_net_ops {
    void *net;
    int (*attach)(void *net, struct sbx_rt_lease *out, const char *sandbox_id, int netns_fd,
                  sbx_error **err);
    int (*detach)(void *net, const char *sandbox_id, sbx_error **err);
    /* Hand an attached namespace's lease from one id to another (the namespace pool). */
    int (*transfer)(void *net, const char *from_id, const char *to_id, sbx_error **err);
    /* Put an attached sandbox's port in a network group (spec.net_group); may be NULL when no
     * spec asks for one. */
    int (*set_group)(void *net, const char *sandbox_id, uint32_t group, sbx_error **err);
    /* Visit the ids holding leases (the pool's crash recovery); fn returns < 0 to stop. */
    int (*foreach_lease)(void *net, int (*fn)(const char *sandbox_id, void *payload), void *payload,
                         sbx_error **err);
    /* After sbx_rt_gc has released the dead: remove what the network keeps for nobody any more
     * (empty leaf bridges). May be NULL. */
    int (*gc)(void *net, sbx_error **err);
};

struct sbx_rt_config {
    const char *state_dir;     /* NULL => "/var/lib/sbx"; records live in <state_dir>/run */
    const char *cgroup_parent; /* NULL => "sbx"; created below the caller's own cgroup */
    const struct sbx_rt_net_ops *net_ops; /* NULL => bridge mode answers SBX_EUNAVAIL */
    /* Keep this many network namespaces of mode netns_pool_net ready (bridge: attached; none:
     * `lo` up), made by a low-priority thread while no create runs; creates of that mode
     * without a user namespace take one instead of making their own (docs/runtime.md "Network
     * namespace pool"). 0 => none (one-shot callers). At most 64. */
    unsigned netns_pool;
    enum sbx_rt_netmode netns_pool_net;
    /* Aggregate limits of all the runtime's sandboxes together, set on the common parent
     * cgroup (`cgroup_parent`): the kernel then enforces the sum, whatever each sandbox's own
     * limit (an OOM or a refused fork inside the sandboxes, never the host's). 0 => none. */
    uint64_t total_memory_bytes;
    uint64_t total_pids;
    /* All writable layers on one file system of this size (<state>/upper.img mounted on
     * <state>/upper): sandboxes together cannot fill the state dir's disk. 0 => none. */
    uint64_t total_disk_bytes;
    /* cgroup v2: when the caller is alone in its own cgroup (a systemd service with
     * Delegate=yes), move it into this child of it at open, so that its cgroup can enable
     * controllers for the sandboxes' (sbx_cg_v2_leave_own); sandboxes are still made below
     * the caller's original cgroup. NULL => stay (`sbx run`). */
    const char *own_cgroup_leaf;
    /* Pivot once, at open, into a template mount namespace that sandboxes' roots are moved
     * into, instead of a pivot_root per sandbox, which walks every task on the host (template.c;
     * docs/runtime.md "Entering the root"). For long-lived callers (the server): the template
     * costs a fork and that one walk at open. Sandboxes in a user namespace pivot anyway. */
    bool pivot_once;
    /* cgroup v1: keep the cgroups of at most this many destroyed sandboxes (per hierarchy)
     * for later creates instead of removing them (cgspare.c; docs/runtime.md "Kept cgroups").
     * Spares of a caller that is gone are reused by the next open with this set, and removed
     * by gc. 0 => none (one-shot callers). */
    unsigned spare_cgroups;
};

struct sbx_rt_volume {
    const char *src; /* host path (must exist); only named in messages when src_fd is set */
    const char *dst; /* absolute path inside the sandbox, resolved inside its root */
    bool ro;
    int src_fd; /* > 2: bind exactly this (O_PATH) fd, which the caller resolved, not src;
                   0: bind src */
};

/* Where the writable layer (the overlay's upper and work dirs) lives. */
enum sbx_rt_upper {
    SBX_RT_UPPER_DISK = 0, /* <state_dir>/upper/<id>: the state dir's filesystem (default) */
    SBX_RT_UPPER_TMPFS,    /* a tmpfs of the sandbox's mount namespace: RAM, charged to its
                              memory cgroup, sized by tmpfs_bytes */
};

/* One id mapping line: ids [inside, inside+count) map to [outside, outside+count). */
struct sbx_rt_idmap {
    uint32_t inside, outside, count;
};

struct sbx_rt_spec {
    const char *id;         /* NULL => generated; [A-Za-z0-9_.-]{1,63} */
    char *const *argv;      /* required; argv[0] is looked up in PATH of env */
    char *const *env;       /* NULL => image_env, else a default PATH/HOME/TERM */
    char *const *image_env; /* image defaults, overridden by env entries of the same name */
    const char *cwd;        /* NULL => image_workdir, else "/" */
    const char *image_workdir;
    const char *hostname; /* NULL => the id (truncated) */
    /* non-NULL: the sandbox's /etc/resolv.conf (written in its root, replacing what the image
     * has there, a symlink included) */
    const char *resolv_conf;
    uid_t uid; /* user inside (after the optional user namespace) */
    gid_t gid;
    const char *const *layers; /* lower layer dirs, bottom first; n_layers 0 => `host` image */
    size_t n_layers;
    const struct sbx_rt_volume *volumes;
    size_t n_volumes;
    const char *execd_path;  /* bound read-only at SBX_RT_EXECD_PATH when set */
    uint64_t memory_bytes;   /* 0 => unlimited */
    uint64_t pids_max;       /* 0 => unlimited */
    uint64_t cpu_millis;     /* 1000 = one CPU; 0 => unlimited */
    enum sbx_rt_upper upper; /* where the writable layer lives (default: disk) */
    uint64_t tmpfs_bytes;    /* SBX_RT_UPPER_TMPFS: its size; 0 => memory limit or 1 GiB */
    uint64_t disk_bytes;     /* SBX_RT_UPPER_DISK: cap the layer at this size (a file system of
                                its own, on a loop device; costs a mkfs per sandbox); 0 => no
                                cap (the state dir's file system) */
    /* SBX_RT_UPPER_DISK: run on the layer that sbx_rt_upper_keep kept for spec->id
     * (its files, a cap it had) instead of a fresh one; SBX_ENOTFOUND when none is kept. */
    bool reuse_upper;
    enum sbx_rt_netmode net;
    /* bridge: the network group of its port, set before the sandbox runs (net_ops.set_group);
     * 0 = isolated from every other sandbox (the default) */
    uint32_t net_group;
    bool userns; /* own user namespace with the maps below */
    struct sbx_rt_idmap uid_map, gid_map;
    /* fds for the command's stdin/stdout/stderr; -1 => the sandbox's /dev/null. Pipes and
     * sockets are passed as they are, devices and read-only files are opened again on a
     * read-only mount; a file (or named FIFO) open for writing is refused with SBX_EINVAL
     * (the sandbox could chmod it through its fd): pass a pipe and copy, see
     * sbx_rt_stdio_needs_pipe. */
    int stdio[3];
    /* With has_fd3: passed to the command as its fd 3 (the init keeps no copy), e.g. the write
     * end of a pipe execd signals readiness on. Nothing else of the caller's gets in. */
    bool has_fd3;
    int fd3;
    bool die_with_parent; /* PR_SET_PDEATHSIG(SIGKILL) on the sandbox's init (sbx run) */
    bool as_init;         /* argv is an init (execd): exec it as PID 1, no sbx reaper */
    bool pausable;        /* create a freezer cgroup (needed by sbx_rt_pause) */
    bool start;           /* create and start at once; setup errors come from sbx_rt_wait */
    /* stdio[0] is a terminal (a pty slave the caller made): it becomes the command's
     * controlling terminal, in a session of its own (sbx run -t). */
    bool tty;
};

/* fd is one that spec.stdio refuses (a host file or named FIFO open for writing): the caller
 * must hand the sandbox a pipe instead and copy. */
bool sbx_rt_stdio_needs_pipe(int fd);

#define SBX_RT_EXECD_PATH "/.sbx/bin/sbx-execd"
/* A private (0700) directory for the daemon's state: the host image has it (and the mount
 * point of SBX_RT_EXECD_PATH) in its skeleton, so a sandbox of it writes nothing to its layer
 * before it is used (each file made in a disk layer is an ext4 inode, plus an overlay
 * copy-up of its parents). */
#define SBX_RT_EXECD_STATE "/.sbx/state"

struct sbx_rt_exit {
    int status;            /* raw wait status of the command, -1 if unknown (adopted sandbox) */
    int code;              /* exit code, or 128+signal */
    bool oom_killed;       /* the cgroup's OOM killer fired */
    char start_error[244]; /* non-empty when the command could not be started (exec failed) */
};

struct sbx_rt;
struct sbx_rt_sandbox;

int sbx_rt_open(struct sbx_rt **out, const struct sbx_rt_config *cfg, sbx_error **err);
void sbx_rt_close(struct sbx_rt *rt);
/* Network namespaces ready in the pool (sbx_rt_config.netns_pool) right now. */
unsigned sbx_rt_pool_ready(struct sbx_rt *rt);

/* Set up a sandbox whose command waits, fully isolated, for sbx_rt_start. */
int sbx_rt_create(struct sbx_rt_sandbox **out, struct sbx_rt *rt, const struct sbx_rt_spec *spec,
                  sbx_error **err);
/* Let the command exec (not needed with spec.start). Exec failures are reported by
 * sbx_rt_wait (code 127/126). */
int sbx_rt_start(struct sbx_rt_sandbox *sb, sbx_error **err);
/* Wait for the command; signals in `forward` (may be NULL) that reach the caller meanwhile are
 * passed to the sandbox (they must be blocked by the caller). Returns as soon as the command's
 * status is known: the init may still be tearing the sandbox down (destroy waits for it). */
int sbx_rt_wait(struct sbx_rt_exit *out, struct sbx_rt_sandbox *sb, const sigset_t *forward,
                sbx_error **err);
int sbx_rt_kill(struct sbx_rt_sandbox *sb, int sig, sbx_error **err);
int sbx_rt_pause(struct sbx_rt_sandbox *sb, sbx_error **err);
int sbx_rt_resume(struct sbx_rt_sandbox *sb, sbx_error **err);
/* Kill everything, release the cgroups, lease and state dir. Idempotent. */
int sbx_rt_destroy(struct sbx_rt_sandbox *sb, sbx_error **err);
/* Keep the writable layer on disk of sandbox id (the server's stop; SBX_ENOTFOUND when it has
 * none): destroy and gc leave a kept layer alone (gc --all removes it), a later sbx_rt_create
 * with the same id and reuse_upper runs on it, sbx_rt_upper_remove removes it. Written durably
 * before it returns; call it before sbx_rt_destroy, and sbx_rt_upper_settle after. */
int sbx_rt_upper_keep(struct sbx_rt *rt, const char *id, sbx_error **err);
/* After sbx_rt_destroy of a sandbox whose layer is kept: write the layer's files to disk and
 * clear overlayfs's `volatile` mark, so that a later start can mount it (a fresh disk layer is
 * mounted volatile: no sync on the sandbox's every fsync and teardown; see docs/runtime.md
 * "Writable layer"). Until then a crash leaves a layer that a start refuses. */
int sbx_rt_upper_settle(struct sbx_rt *rt, const char *id, sbx_error **err);
/* True when a layer is kept for id in the runtime state dir state_dir (a stopped sandbox:
 * something that outlives its runtime record, e.g. a volume it uses, is still in use). */
bool sbx_rt_upper_kept(const char *state_dir, const char *id);
/* Remove the writable layer kept for id (nothing to do when there is none). SBX_ECONFLICT while
 * a record of id exists: a sandbox may still run on it. */
int sbx_rt_upper_remove(struct sbx_rt *rt, const char *id, sbx_error **err);
/* True while id has a runtime record or a writable layer (running, stopped, or not yet torn
 * down). */
bool sbx_rt_knows(struct sbx_rt *rt, const char *id);
/* The directory of id's files on its disk layer (the overlay's upper dir, as the host sees it;
 * caller frees). SBX_EINVAL for a capped layer (its file system is mounted only inside the
 * sandbox), SBX_ENOTFOUND when the layer is not on disk. */
int sbx_rt_upper_files(struct sbx_rt *rt, const char *id, char **out, sbx_error **err);
/* Undo sbx_rt_upper_keep (nothing to do when id's layer is not kept): the next destroy of id, or
 * gc once its record is gone, removes the layer. For a delete that destroys asynchronously
 * (sbx_rt_destroy_async): a crash before the teardown finished leaves nothing kept. */
int sbx_rt_upper_unkeep(struct sbx_rt *rt, const char *id, sbx_error **err);
/* Like sbx_rt_destroy, but the cgroup rmdirs (which have 10-30 ms tail spikes on some hosts)
 * and the record removal run on a detached thread, off the caller's path. For long-lived
 * callers (the server); if the process exits first, the record remains and gc finishes. */
int sbx_rt_destroy_deferred(struct sbx_rt_sandbox *sb, sbx_error **err);
/* Like sbx_rt_destroy, but all of it (kill, wait for the init's exit, cgroups, lease, record)
 * runs in a forked process, detached from the caller's stdio and session, so that the caller
 * can exit at once: for `sbx run`, whose caller waits for its exit. Only for a caller that is
 * about to exit (until then the init and the forked process are its unreaped children). A
 * failure there leaves the record for `sbx gc`, as a crash would. */
int sbx_rt_destroy_detached(struct sbx_rt_sandbox *sb, sbx_error **err);
/* For a long-lived caller (the server): SIGKILL now, so the sandbox is stopped when this
 * returns; the rest of sbx_rt_destroy (reaping the init, whose exit tears down its namespaces,
 * lease, cgroups, record) runs on a detached thread, which then calls done(arg, result) (may
 * be NULL) and frees sb: sb belongs to this call, even when it fails. sbx_rt_close waits for
 * these threads. If the process exits first, the record remains and gc removes it. */
int sbx_rt_destroy_async(struct sbx_rt_sandbox *sb, void (*done)(void *arg, int result), void *arg,
                         sbx_error **err);
void sbx_rt_sandbox_free(struct sbx_rt_sandbox *sb);

/* Re-open a sandbox recorded in the state dir whose init is still running. */
int sbx_rt_adopt(struct sbx_rt_sandbox **out, struct sbx_rt *rt, const char *id, sbx_error **err);

struct sbx_rt_exec {
    char *const *argv;
    char *const *env; /* NULL => PATH only */
    const char *cwd;  /* NULL => "/" */
    uid_t uid;
    gid_t gid;
    int stdio[3];
};
/* nsenter-style: run a process inside all the sandbox's namespaces and cgroup, with the same
 * caps/seccomp/no_new_privs. *pid is the caller's child; it exits with the process's status. */
int sbx_rt_exec_into(pid_t *pid, struct sbx_rt_sandbox *sb, const struct sbx_rt_exec *ex,
                     sbx_error **err);
/* A TCP socket connected to 127.0.0.1:port inside the sandbox's network namespace. */
int sbx_rt_connect(int *fd, struct sbx_rt_sandbox *sb, uint16_t port, sbx_error **err);

struct sbx_rt_gc_stats {
    unsigned removed; /* sandboxes cleaned up */
    unsigned kept;    /* still running (left alone without `all`) */
};
/* Remove what crashed callers left: every recorded sandbox whose init is gone (all: every one),
 * and every writable layer without a record except kept ones (all: those too). */
int sbx_rt_gc(struct sbx_rt_gc_stats *out, struct sbx_rt *rt, bool all, sbx_error **err);
/* Remove sandbox id's record and all it holds, whatever the record says (an init that runs is
 * killed): for a caller that owns id and has no handle of it, e.g. a delete after a create
 * whose own teardown failed, whose record (no init, made by a live process) sbx_rt_gc must
 * take for a create under way and keep. Only this record is read, not every one. 0 also when
 * there is none. */
int sbx_rt_gc_id(struct sbx_rt *rt, const char *id, sbx_error **err);

/* Accessors. */
const char *sbx_rt_sandbox_id(const struct sbx_rt_sandbox *sb);
pid_t sbx_rt_sandbox_pid(const struct sbx_rt_sandbox *sb);
int sbx_rt_sandbox_pidfd(const struct sbx_rt_sandbox *sb);
const char *sbx_rt_sandbox_dir(const struct sbx_rt_sandbox *sb);
/* The memory limit in bytes (0 = none), for messages. */
uint64_t sbx_rt_sandbox_memory_limit(const struct sbx_rt_sandbox *sb);
/* What the sandbox uses now (UINT64_MAX for a figure this host's cgroups cannot give). */
struct sbx_rt_usage {
    uint64_t memory_bytes;
    uint64_t cpu_ns;
    uint64_t pids;
};
void sbx_rt_usage(const struct sbx_rt_sandbox *sb, struct sbx_rt_usage *u);
/* A cgroup dir of the sandbox (v2: its cgroup; v1: the first controller's), NULL if none. */
const char *sbx_rt_sandbox_cgroup(const struct sbx_rt_sandbox *sb);
/* The sandbox's network namespace (opened on first use, owned by sb), or -1 with errno. */
int sbx_rt_sandbox_netns_fd(struct sbx_rt_sandbox *sb);
/* The bridge lease, NULL unless attached to the bridge. */
const struct sbx_rt_lease *sbx_rt_sandbox_lease(const struct sbx_rt_sandbox *sb);
/* Its network namespace came ready from the pool (sbx_rt_config.netns_pool). */
bool sbx_rt_sandbox_pooled(const struct sbx_rt_sandbox *sb);

#endif
