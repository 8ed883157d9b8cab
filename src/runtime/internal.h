/*
 * internal.h - what the runtime's files share: the runtime and sandbox objects, the child's
 * precomputed arguments, the parent/child sync messages, the state record.
 */
#ifndef SBX_RUNTIME_INTERNAL_H
#define SBX_RUNTIME_INTERNAL_H

#include <linux/filter.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/capability.h>
#include <sys/types.h>

#include "runtime/cgroup.h"
#include "runtime/runtime.h"

/* A capability set in the kernel's capset format (_LINUX_CAPABILITY_VERSION_3: two words). */
struct sbx_caps {
    struct __user_cap_data_struct data[2];
};

struct sbx_rt {
    char *state_dir;  /* <cfg.state_dir> */
    char *run_dir;    /* <state_dir>/run: one dir per sandbox */
    char *upper_dir;  /* <state_dir>/upper: disk-backed writable layers, one dir per sandbox */
    char *host_image; /* <state_dir>/images/host: skeleton lower layer of the `host` image */
    char *cgroup_parent;
    char *self_cgroup; /* text of /proc/self/cgroup */
    const struct sbx_cg_ops *cg_ops;
    struct sbx_rt_net_ops net_ops;
    bool has_net_ops;
    struct sock_fprog seccomp;      /* the default profile, built once */
    struct sock_fprog init_seccomp; /* the init's (sbx_seccomp_init_build) */
    pthread_mutex_t async_mu;       /* guards n_async */
    pthread_cond_t async_cv;        /* n_async dropped */
    unsigned n_async;               /* sbx_rt_destroy_async threads still running */
    struct sbx_caps caps;           /* the default capability set (uid 0 inside) */
    /* netns.c: the thread that makes sockets inside sandboxes' network namespaces */
    pthread_mutex_t sock_mu;
    pthread_cond_t sock_cv;   /* a request was queued, or stop */
    pthread_cond_t sock_done; /* a request was served */
    struct sbx_rt_sock_req *sock_head;
    pthread_t sock_tid;
    bool sock_running, sock_stop;
    struct sbx_rt_netpool *pool; /* netpool.c; NULL without sbx_rt_config.netns_pool */
    /* netns.c: the sandboxes that hold spare sockets, the newest SBX_RT_SPARE_WINDOW (a
     * ring): an older one's are closed, so spares do not grow with the number of sandboxes */
    pthread_mutex_t spare_mu;
    struct sbx_rt_sandbox **spare_ring;
    unsigned spare_next;
    /* template.c: the mount namespace sandboxes' roots are moved into (-1: none, each child
     * pivots its root; sbx_rt_config.pivot_once) */
    int mnt_template;
    /* the template has a sysfs (of a network namespace with only `lo`) that sandboxes of
     * network none share */
    bool sys_template;
    /* cgspare.c: cgroups of destroyed sandboxes kept for the next creates (cgroup v1;
     * sbx_rt_config.spare_cgroups), one stack of paths <parent>/.spare-<pid>.<seq> per role */
    pthread_mutex_t cgs_mu;
    char **cgs[SBX_CG_NROLES]; /* each a stack of at most cgs_cap */
    unsigned n_cgs[SBX_CG_NROLES];
    unsigned cgs_cap;
    unsigned cgs_seq; /* the next spare's <seq> */
};

/* cgspare.c (docs/runtime.md "Kept cgroups"): keep a destroyed sandbox's cgroups for a later
 * create instead of removing them: taking a memory cgroup offline walks every superblock's
 * lists on the host with cgroup_mutex held, and a new cpu cgroup's quota write walks every cpu
 * cgroup on the host. */
void sbx_rt_cgs_open(struct sbx_rt *rt, unsigned cap);
/* Rename spares onto cg's planned dirs (before the backend's create, whose mkdir then finds
 * them); roles without a spare are made as usual. */
void sbx_rt_cgs_take(struct sbx_rt *rt, const struct sbx_cg *cg);
/* Before the backend's destroy: keep those of cg's dirs that can be reused (cgroup.h, keep);
 * destroy then finds them gone. */
void sbx_rt_cgs_give(struct sbx_rt *rt, const struct sbx_cg *cg);
/* Spares of processes that are gone: adopt them (open) or remove them (gc). */
void sbx_rt_cgs_sweep(struct sbx_rt *rt, bool adopt);
/* Remove this process's spares (close). */
void sbx_rt_cgs_close(struct sbx_rt *rt);

#define SBX_RT_SPARE_SOCKS  2
#define SBX_RT_SPARE_WINDOW 64

struct sbx_rt_sandbox {
    struct sbx_rt *rt;
    char id[64];
    char *dir;           /* <run_dir>/<id> */
    char *upper;         /* <upper_dir>/<id> when the writable layer is on disk, else NULL */
    pid_t pid;           /* the sandbox's init, in the caller's pid namespace */
    pid_t owner;         /* creator's pid, from the record */
    uint64_t start_time; /* field 22 of /proc/<pid>/stat, guards against pid reuse */
    int pidfd;
    int sync_fd;      /* parent end of the sync socket, -1 once closed */
    int netns_fd;     /* opened when needed (or taken from the pool), -1 otherwise */
    bool pooled;      /* netns_fd came from the pool (the child setns()es into it) */
    char pool_id[64]; /* its lease's placeholder id until handed to `id` ("" then) */
    bool is_child;    /* we cloned it (waitpid works); false when adopted */
    bool as_init;
    bool started, reaped, destroyed, frozen, has_lease;
    /* Unconnected TCP sockets made in its network namespace for sbx_rt_connect (taken with
     * an atomic exchange; -1: none). They pin the namespace: closed on destroy and free. */
    int spare_socks[SBX_RT_SPARE_SOCKS];
    unsigned spare_slot; /* its place + 1 in rt->spare_ring, 0: none */
    /* v1: the cgroups are being made on cg_thread meanwhile (sbx_rt_create only) */
    bool cg_pending;
    pthread_t cg_thread;
    int cg_ret;
    sbx_error *cg_err;
    struct sbx_cg_limits cg_lim;
    bool has_record;        /* the record dir is ours: destroy may remove it */
    bool start_unconfirmed; /* started with spec.start: READY not read yet */
    bool ready_seen;
    struct sbx_cg cg;
    struct sbx_rt_lease lease;
    enum sbx_rt_netmode net;
    uint64_t memory_limit;
    struct sbx_rt_exit exit;
    int init_status; /* wait status of the init itself, -1 if not ours to reap */
};

/* Parent <-> child messages over a SOCK_SEQPACKET socketpair. */
enum sbx_sync_type {
    SBX_SYNC_READY = 1, /* child: set up, waiting for GO */
    SBX_SYNC_GO,        /* parent: exec now */
    SBX_SYNC_ERROR,     /* child: setup or exec failed; err/msg say why */
    SBX_SYNC_EXIT,      /* child (init): the command exited with wait status `status` */
    SBX_SYNC_MAPPED,    /* parent: uid/gid maps written */
    SBX_SYNC_HELLO,     /* child (shared spawn): running; the parent may read its pid now */
    SBX_SYNC_EXEC,      /* child (as_init): setup done, exec next (an EOF then means exec'd) */
};

struct sbx_sync_msg {
    int32_t type;
    int32_t err;    /* errno */
    int32_t status; /* wait status (EXIT) */
    char msg[244];
};

#define SBX_MAX_VOLUMES 48
/* Host image binds (at most 9) + volumes + execd. */
#define SBX_MAX_MOUNTS (SBX_MAX_VOLUMES + 16)

/* A host dir bound read-only (the host image's /usr, etc.) or a volume. */
struct sbx_child_bind {
    const char *src;
    int src_fd;      /* > 0: bind this fd instead of src */
    const char *dst; /* absolute inside the sandbox */
    bool ro;
};

/* Everything the child needs, computed by the parent before clone so that the child does no
 * allocation (it may be cloned from a multi-threaded server). */
struct sbx_child_args {
    const struct sbx_rt_spec *spec;
    int mnt_template_fd;    /* the runtime's template mount namespace, or -1 (rootfs.c) */
    bool share_sys;         /* /sys is the template's (network none; template.c) */
    const char *lower_host; /* the host image skeleton for this spec (owner differs in a userns) */
    int sync_fd;
    int parent_fd;       /* the parent's end: closed first so the parent's death reads as EOF */
    const char *scratch; /* tmpfs mode: host dir the child mounts its private tmpfs on; disk
                            mode: the overlay's mount point */
    const char *upper;   /* disk mode: <upper_dir>/<id>, or <upper_dir>/<id>/fs when capped (the
                            child makes upper/ and work/ in it); NULL in tmpfs mode */
    int upper_loop_fd;   /* capped disk mode: the loop device (the child mounts it on upper and
                            closes it), else -1 */
    char upper_dev[32];  /* its path, /dev/loopN */
    bool upper_reused;   /* disk mode: a kept layer (upper/ and work/ exist already) */
    char overlay_opts[8192];
    size_t volatile_at; /* > 0: overlay_opts ends in ",volatile" from here (cut on EINVAL) */
    char tmpfs_opts[64];
    char dev_opts[64]; /* the tmpfs options of /dev (and /dev/shm in it) */
    const char *hostname;
    struct sbx_child_bind binds[SBX_MAX_MOUNTS];
    size_t n_binds;
    const char *const *host_files; /* skeleton-relative files copied per sandbox: none yet */
    char *const *env;              /* merged environment */
    const char *cwd;
    int cg_join_fds[SBX_CG_NROLES]; /* v1: `tasks` of each cgroup dir, for sbx_cg_join_self */
    size_t n_cg_join;
    /* v1, cgroups made while the child sets up (see late_cgroups in runtime.c): after GO the
     * child joins each <cg_root_fd>/<cg_rel[i]>/tasks; -1 / 0 otherwise */
    int cg_root_fd;
    const char *cg_rel[SBX_CG_NROLES];
    size_t n_cg_rel;
    bool unshare_cgroupns; /* v1: after joining our cgroups */
    const struct sock_fprog *seccomp;
    const struct sock_fprog *init_seccomp; /* the init's own, once its command runs */
    const struct sbx_caps *caps;
    /* The command's stdio as the child dups it (stdio.c): the caller's pipe or socket, or a
     * device or read-only file reopened on a read-only mount; -1: the sandbox's /dev/null,
     * opened after pivot_root so that no host inode is ever behind it. */
    int stdio[3];
    bool stdio_owned[3]; /* reopened by sbx_rt_safe_stdio: the parent closes its copy */
    /* Plain spawn: where the caller's argv and environment strings are in the child's copy
     * of its memory ([start, end) from /proc/self/stat); the init wipes them. 0: none. */
    uintptr_t scrub_arg[2];
    uintptr_t scrub_env[2];
    int fd3;             /* in the child: spec->fd3 copied above 3, or -1 */
    int netns_fd;        /* a pooled network namespace to enter instead of a new one, or -1 */
    bool hello;          /* shared spawn: send HELLO first (the parent's host side waits for it) */
    unsigned fds_shared; /* the parked range's base: cloned with the caller's fd table shared
                          * (CLONE_FILES), to unshare without that range first; 0: a copy */
};

/* runtime.c: unmount the records tmpfs when it is empty (gc --all). */
void sbx_rt_release_run_tmpfs(const struct sbx_rt *rt);

/* child.c */
__attribute__((noreturn)) void sbx_child_main(struct sbx_child_args *a);
/* Report a failure to the parent and _exit. */
__attribute__((noreturn)) void sbx_child_fail(int fd, int e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* rootfs.c (runs in the child) */
int sbx_rootfs_setup(struct sbx_child_args *a);

/* stdio.c: fill a->stdio from spec->stdio (see there why), and close the reopened ones. */
int sbx_rt_safe_stdio(struct sbx_child_args *a, const struct sbx_rt_spec *spec, sbx_error **err);
void sbx_rt_safe_stdio_close(struct sbx_child_args *a);

/* hostimg.c */
/* Build the host image skeleton at dir once, owned by uid:gid (a user namespace's root). */
int sbx_hostimg_ensure(const char *dir, uid_t uid, gid_t gid, sbx_error **err);
/* Host dirs the host image binds read-only; returns the count put in binds. */
size_t sbx_hostimg_binds(struct sbx_child_bind *binds, size_t max);

/* security.c */
int sbx_seccomp_build(struct sock_fprog *out, sbx_error **err);
/* The stricter filter of `sbx run`'s init once its command runs (seccomp_profile.c). */
int sbx_seccomp_init_build(struct sock_fprog *out);
void sbx_seccomp_free(struct sock_fprog *prog);
void sbx_caps_default(struct sbx_caps *c);
extern const int sbx_caps_keep[];
extern const size_t sbx_caps_n_keep;
/* In the child: bounding set, ids, caps, ambient, no_new_privs. Returns -errno. */
int sbx_security_apply(const struct sbx_caps *caps, uid_t uid, gid_t gid, bool userns,
                       const char **what);
int sbx_seccomp_apply(const struct sock_fprog *prog);

/* state.c: <dir>/state.json */
struct sbx_state {
    char id[64];
    pid_t owner; /* the process that created it (a record without a pid yet is in progress) */
    pid_t pid;
    uint64_t start_time;
    char *cgroup_backend;         /* "v1"|"v2" */
    char *cgroups[SBX_CG_NROLES]; /* by role */
    bool lease;
    bool upper; /* the writable layer is on disk, in <upper_dir>/<id> */
    int net;
    uint64_t memory_limit;
};
int sbx_state_write(const char *dir, const struct sbx_state *st, sbx_error **err);
int sbx_state_read(struct sbx_state *st, const char *dir, sbx_error **err);
void sbx_state_release(struct sbx_state *st);
/* Field 22 (starttime) of /proc/<pid>/stat; 0 when the process is gone or a zombie. */
uint64_t sbx_proc_start_time(pid_t pid);

/* netns.c */
int sbx_netns_lo_up(void);
void sbx_rt_sock_init(struct sbx_rt *rt);
/* From a thread that makes no other socket afterwards (it is left in the sandbox's network
 * namespace): fill sb->spare_socks, so the server's first requests connect at once. */
void sbx_rt_make_spare_socks(struct sbx_rt_sandbox *sb);
/* Close the spare sockets (they keep the sandbox's network namespace alive). */
void sbx_rt_close_spare_socks(struct sbx_rt_sandbox *sb);
/* Stop and join the socket thread (sbx_rt_close). */
void sbx_rt_sock_stop(struct sbx_rt *rt);

/* netpool.c: network namespaces made ahead of time */
int sbx_rt_pool_start(struct sbx_rt *rt, unsigned size, enum sbx_rt_netmode net, sbx_error **err);
/* Drop the pooled namespaces (and their leases) and stop the pool thread. */
void sbx_rt_pool_stop(struct sbx_rt *rt);
/* A create begins / ends: refills wait while any runs. */
void sbx_rt_pool_begin(struct sbx_rt *rt);
void sbx_rt_pool_end(struct sbx_rt *rt);
/* Take a ready namespace for sb when spec fits one (sets netns_fd, pooled, pool_id, lease). */
bool sbx_rt_pool_take(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec);
/* Hand the taken lease to sb's id (after its record names the lease). */
int sbx_rt_pool_claim(struct sbx_rt_sandbox *sb, sbx_error **err);
/* A failed create: release a taken lease that was never handed over. */
void sbx_rt_pool_unclaimed(struct sbx_rt_sandbox *sb);

/* A sandbox id that is safe as a file name: [A-Za-z0-9_.-], 1-63 characters, no leading dot. */
bool sbx_rt_valid_id(const char *id);
/* Left in a layer's work dir by overlayfs while it is (or was, until a crash) mounted volatile. */
#define SBX_RT_VOLATILE_MARK "work/work/incompat/volatile"
/* Before a start on the kept layer dir `layer`: settle it if a stop was cut short in this boot;
 * SBX_ECONFLICT when that happened before a reboot (its files may be incomplete). */
int sbx_rt_upper_recover(const char *layer, sbx_error **err);
/* The disk layer dir `upper` is kept (sbx_rt_upper_keep marked it). */
bool sbx_rt_upper_is_kept(const char *upper);
/* Close every fd above stdio except keep (a long-lived process must not pin the caller's
 * sockets, pipes and files). */
void sbx_close_fds_except(int keep);
/* Same, keeping every fd in keep[0..n) (the array is sorted in place; no allocation). */
void sbx_close_fds_except_set(int *keep, size_t n);

/* Sync socket helpers. */
int sbx_sync_send(int fd, int type, int err, int status, const char *msg);
/* 1 = got a message, 0 = peer closed, <0 = -errno. */
int sbx_sync_recv(int fd, struct sbx_sync_msg *m);

/* setgroups(0, NULL) / setresgid(g,g,g) / setresuid(u,u,u) as raw syscalls: safe in a child
 * cloned from a multi-threaded process (security.c says why). */
int sbx_raw_setgroups0(void);
int sbx_raw_setresgid(gid_t gid);
int sbx_raw_setresuid(uid_t uid);

/* runtime.c: a free loop device backed by img (autoclear); its path in dev, its fd in *fd_out. */
int sbx_loop_attach(const char *img, char *dev, size_t devlen, int *fd_out, sbx_error **err);

/* template.c: make rt->mnt_template (left -1, with a warning, when it cannot be made). */
void sbx_rt_template_open(struct sbx_rt *rt);

#endif
