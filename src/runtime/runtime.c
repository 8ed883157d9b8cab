/*
 * runtime.c - the parent side: runtime context, create/start/wait/kill/pause/destroy.
 *
 * Hot path of create: mkdir the record dir, record, mkdir cgroups, one clone3 with every
 * namespace flag (v2: into the cgroup; v1: the child joins its cgroups itself), then (while the
 * child builds its root in parallel) record the pid and attach the network; one READY message
 * back. No helper processes, no sleeps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

static const char *const default_path =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

static bool
dir_is_empty(const char *path)
{
    sbx_autoclosedir DIR *d = opendir(path);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return false;
    }
    return d != NULL;
}

/* Records describe running processes, so they need no disk: a tmpfs makes the few metadata
 * operations per sandbox cost microseconds instead of an ext4 journal's hundreds. Mounted once
 * per state dir, under a lock so that concurrent first runs do not stack two tmpfs (the second
 * would hide the first's records); never over existing records. `sbx gc --all` unmounts it. */
static void
ensure_run_tmpfs(const struct sbx_rt *rt)
{
    if (sbx_on_tmpfs(rt->run_dir))
        return;
    sbx_autofree char *lock = sbx_xasprintf("%s/run.lock", rt->state_dir);
    sbx_autoclose int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0)
        return;
    if (sbx_on_tmpfs(rt->run_dir) || !dir_is_empty(rt->run_dir))
        return;
    if (mount("sbx-run", rt->run_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711,size=64m") < 0)
        sbx_debug("records stay on disk: mount tmpfs on `%s`: %m", rt->run_dir);
}

/* Each sandbox's disk layer is a directory tree of its own that lives for minutes: mark their
 * parent as a top of hierarchy (ext2/3/4's `chattr +T`), so the Orlov allocator spreads the
 * layers over block groups instead of packing them into the parent's. Without it, a busy
 * server's create/delete churn concentrates freed inodes in one group, and on an ext4 without
 * a journal every new inode there scans past each one freed in the last minutes
 * (recently_deleted: measured at 10 % of all CPU under the API benchmark). Elsewhere a no-op. */
static void
spread_layers(const char *upper_dir)
{
    sbx_autoclose int fd = open(upper_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int flags = 0;
    if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_TOPDIR_FL)) {
        flags |= FS_TOPDIR_FL;
        (void)ioctl(fd, FS_IOC_SETFLAGS, &flags);
    }
}

static bool only_lost_found(const char *dir);

/* gc --all: drop our tmpfs once it holds no records, and the writable layers' file system
 * (total_disk) once it holds no layer (its image stays for the next open). */
void
sbx_rt_release_run_tmpfs(const struct sbx_rt *rt)
{
    if (sbx_on_tmpfs(rt->run_dir) && !sbx_on_tmpfs(rt->state_dir) && dir_is_empty(rt->run_dir))
        (void)umount2(rt->run_dir, MNT_DETACH);
    struct stat a;
    struct stat b;
    if (stat(rt->upper_dir, &a) == 0 && stat(rt->state_dir, &b) == 0 && a.st_dev != b.st_dev &&
        only_lost_found(rt->upper_dir))
        (void)umount2(rt->upper_dir, MNT_DETACH);
}

/* A fresh ext4 holds lost+found and our template files only. */
static bool
only_lost_found(const char *dir)
{
    sbx_autoclosedir DIR *d = opendir(dir);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (d && (e = readdir(d))) {
        const char *n = e->d_name;
        bool ours = strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "lost+found") == 0 ||
                    sbx_str_starts(n, ".template");
        if (!ours)
            return false;
    }
    return d != NULL;
}

#define CG_ROOT "/sys/fs/cgroup"

/* The limits of the parent cgroup every sandbox's cgroup is made in (<own>/<cgroup_parent>):
 * memory and pids are hierarchical (v1 with use_hierarchy, the default for years; v2 always),
 * so its limits cap the sum of all sandboxes. Planned as a sandbox cgroup whose id is the
 * parent's last component. */
static int
aggregate_limits(struct sbx_rt *rt, const struct sbx_rt_config *cfg, sbx_error **err)
{
    sbx_autofree char *parent = sbx_xstrdup(rt->cgroup_parent);
    char *slash = strrchr(parent, '/');
    const char *id = slash ? slash + 1 : parent;
    if (slash)
        *slash = '\0';
    struct sbx_cg cg = {.ops = rt->cg_ops,
                        .roles = SBX_CG_ROLE(SBX_CG_MEMORY) | SBX_CG_ROLE(SBX_CG_PIDS)};
    struct sbx_cg_limits lim = {.memory_bytes = cfg->total_memory_bytes,
                                .pids_max = cfg->total_pids};
    int ret = rt->cg_ops->plan(&cg, CG_ROOT, rt->self_cgroup, slash ? parent : "", id, err);
    if (ret == 0)
        ret = rt->cg_ops->create(&cg, &lim, err);
    sbx_cg_release(&cg);
    return ret < 0 ? sbx_error_wrap(err, "aggregate limits on cgroup `%s`", rt->cgroup_parent) : 0;
}

static int mkfs_ext4(const char *img, sbx_error **err);

/* cgroup v2: out of the root of a delegated subtree into a leaf of it (runtime.h). Not fatal:
 * when it cannot move, a create that needs a controller says why. */
static void
leave_own_cgroup(const struct sbx_rt *rt, const char *leaf)
{
    sbx_autoerror sbx_error *e = NULL;
    int r = sbx_cg_v2_leave_own(CG_ROOT, rt->self_cgroup, leaf, getpid(), false, &e);
    sbx_autofree char *own = sbx_cg_self_path(rt->self_cgroup, NULL);
    if (r == 1)
        sbx_info("cgroup v2: moved into %s/%s; sandboxes go below %s", own, leaf, own);
    else if (r < 0)
        sbx_warn("cgroup v2: could not move into %s/%s (%s): the sandboxes' cgroups may lack "
                 "controllers",
                 own, leaf, sbx_error_msg(e));
}

static bool
is_mountpoint(const char *dir, const char *parent)
{
    struct stat a;
    struct stat b;
    return stat(dir, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* All writable layers on one file system of `bytes`: <state>/upper.img (sparse ext4, made once)
 * on a loop device mounted at <state>/upper. Sandboxes together then cannot fill the state
 * dir's file system: a sandbox that writes past it gets ENOSPC, the host keeps its space (the
 * memory and pids of all sandboxes are capped the same way, on their parent cgroup). Skipped,
 * with a warning, when <state>/upper already holds layers of before (the mount would hide
 * them). Mounted in the host's mount namespace: it outlives the server like the layers do, and
 * the next open finds it mounted. */
static int
aggregate_disk(struct sbx_rt *rt, uint64_t bytes, sbx_error **err)
{
    if (is_mountpoint(rt->upper_dir, rt->state_dir))
        return 0;
    if (!only_lost_found(rt->upper_dir)) {
        sbx_warn("%s holds writable layers of before: not capped (total_disk needs it empty)",
                 rt->upper_dir);
        return 0;
    }
    sbx_autofree char *img = sbx_xasprintf("%s/upper.img", rt->state_dir);
    if (access(img, F_OK) < 0) {
        sbx_autofree char *tmp = sbx_xasprintf("%s.%d", img, (int)getpid());
        sbx_autoclose int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int ret = fd < 0 || ftruncate(fd, (off_t)bytes) < 0
                      ? sbx_error_set(err, SBX_EGENERIC, errno, "create `%s`", tmp)
                      : mkfs_ext4(tmp, err);
        if (ret == 0 && rename(tmp, img) < 0)
            ret = sbx_error_set(err, SBX_EGENERIC, errno, "rename `%s`", tmp);
        if (ret < 0) {
            (void)unlink(tmp);
            return sbx_error_wrap(err, "the writable layers' file system");
        }
    }
    char dev[32];
    sbx_autoclose int fd = -1;
    if (sbx_loop_attach(img, dev, sizeof dev, &fd, err) < 0)
        return sbx_error_wrap(err, "the writable layers' file system");
    if (mount(dev, rt->upper_dir, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mount `%s` on `%s`", img, rt->upper_dir);
    (void)chmod(rt->upper_dir, 0711);
    return 0;
}

/* A host without loop devices (a container, say) still runs sandboxes: without this cap, with
 * min_free_disk's check at create, and a warning that says so. */
static void
total_disk(struct sbx_rt *rt, uint64_t bytes)
{
    sbx_autoerror sbx_error *err = NULL;
    if (aggregate_disk(rt, bytes, &err) < 0)
        sbx_warn("total_disk not enforced: %s", sbx_error_msg(err));
}

int
sbx_rt_open(struct sbx_rt **out, const struct sbx_rt_config *cfg, sbx_error **err)
{
    struct sbx_rt *rt = sbx_xcalloc(1, sizeof *rt);
    rt->mnt_template = -1;
    rt->state_dir = sbx_xstrdup(cfg && cfg->state_dir ? cfg->state_dir : "/var/lib/sbx");
    rt->run_dir = sbx_xasprintf("%s/run", rt->state_dir);
    rt->upper_dir = sbx_xasprintf("%s/upper", rt->state_dir);
    /* -2: the skeleton gained the daemon's mount point and state dir, -3 /etc/hostname (an
     * older one, which running sandboxes may still use as a lower layer, is left alone) */
    rt->host_image = sbx_xasprintf("%s/images/host-6", rt->state_dir);
    rt->cgroup_parent = sbx_xstrdup(cfg && cfg->cgroup_parent ? cfg->cgroup_parent : "sbx");
    if (cfg && cfg->net_ops) {
        rt->net_ops = *cfg->net_ops;
        rt->has_net_ops = true;
    }
    sbx_caps_default(&rt->caps);
    (void)pthread_mutex_init(&rt->async_mu, NULL);
    (void)pthread_cond_init(&rt->async_cv, NULL);
    sbx_rt_sock_init(rt);
    sbx_rt_cgs_open(rt, cfg ? cfg->spare_cgroups : 0);
    /* 0711: a sandbox in its own user namespace runs as an unprivileged host id and must be
     * able to traverse to its scratch dir; listing stays root-only. */
    int ret = sbx_mkdir_p(rt->run_dir, 0711, err);
    sbx_autofree char *images = sbx_xasprintf("%s/images", rt->state_dir);
    if (ret == 0)
        ret = sbx_mkdir_p(images, 0755, err);
    /* 0711 like run/: a sandbox in a user namespace traverses to its own (chowned) dir. */
    if (ret == 0)
        ret = sbx_mkdir_p(rt->upper_dir, 0711, err);
    if (ret == 0 && cfg && cfg->total_disk_bytes)
        total_disk(rt, cfg->total_disk_bytes);
    if (ret == 0)
        spread_layers(rt->upper_dir);
    if (ret == 0)
        ensure_run_tmpfs(rt);
    if (ret == 0)
        ret = sbx_read_file("/proc/self/cgroup", 1 << 16, &rt->self_cgroup, NULL, err);
    if (ret == 0)
        ret = sbx_cg_detect(&rt->cg_ops, "/sys/fs/cgroup", err);
    if (ret == 0 && cfg && cfg->own_cgroup_leaf && rt->cg_ops == &sbx_cg_v2_ops)
        leave_own_cgroup(rt, cfg->own_cgroup_leaf);
    if (ret == 0)
        ret = sbx_seccomp_build(&rt->seccomp, err);
    if (ret == 0)
        ret = sbx_seccomp_init_build(&rt->init_seccomp);
    if (ret == 0 && cfg && (cfg->total_memory_bytes || cfg->total_pids))
        ret = aggregate_limits(rt, cfg, err);
    if (ret == 0 && cfg)
        ret = sbx_rt_pool_start(rt, cfg->netns_pool, cfg->netns_pool_net, err);
    if (ret == 0 && cfg && cfg->pivot_once)
        sbx_rt_template_open(rt);
    if (ret == 0 && rt->cgs_cap)
        sbx_rt_cgs_sweep(rt, true);
    if (ret < 0) {
        sbx_rt_close(rt);
        return sbx_error_wrap(err, "open the sandbox runtime");
    }
    *out = rt;
    return 0;
}

void
sbx_rt_close(struct sbx_rt *rt)
{
    if (!rt)
        return;
    /* Asynchronous destroys use rt (and its net hook): let them finish. */
    pthread_mutex_lock(&rt->async_mu);
    while (rt->n_async > 0)
        pthread_cond_wait(&rt->async_cv, &rt->async_mu);
    pthread_mutex_unlock(&rt->async_mu);
    sbx_rt_pool_stop(rt);
    sbx_rt_cgs_close(rt);
    (void)pthread_cond_destroy(&rt->async_cv);
    (void)pthread_mutex_destroy(&rt->async_mu);
    sbx_rt_sock_stop(rt);
    sbx_seccomp_free(&rt->seccomp);
    sbx_seccomp_free(&rt->init_seccomp);
    sbx_closep(&rt->mnt_template);
    free(rt->state_dir);
    free(rt->run_dir);
    free(rt->upper_dir);
    free(rt->host_image);
    free(rt->cgroup_parent);
    free(rt->self_cgroup);
    free(rt);
}

bool
sbx_rt_valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 63 || id[0] == '.')
        return false;
    return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int
check_spec(const struct sbx_rt *rt, const struct sbx_rt_spec *spec, sbx_error **err)
{
    if (!spec->argv || !spec->argv[0])
        return sbx_error_set(err, SBX_EINVAL, 0, "no command to run");
    if (spec->id && !sbx_rt_valid_id(spec->id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", spec->id);
    if (spec->net == SBX_RT_NET_BRIDGE && !rt->has_net_ops)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "bridge networking not available");
    if (spec->n_volumes > SBX_MAX_VOLUMES)
        return sbx_error_set(err, SBX_ELIMIT, 0, "too many volumes (at most %d)", SBX_MAX_VOLUMES);
    for (size_t i = 0; i < spec->n_volumes; i++) {
        if (!spec->volumes[i].src || !spec->volumes[i].dst || spec->volumes[i].dst[0] != '/')
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "volume %zu: need a source and an "
                                 "absolute destination",
                                 i);
        if (spec->volumes[i].src_fd < 0 ||
            (spec->volumes[i].src_fd > 0 && spec->volumes[i].src_fd < 3))
            return sbx_error_set(err, SBX_EINVAL, 0, "volume %zu: source fd %d is stdio", i,
                                 spec->volumes[i].src_fd);
    }
    if (spec->userns && (!spec->uid_map.count || !spec->gid_map.count))
        return sbx_error_set(err, SBX_EINVAL, 0, "user namespace without an id mapping");
    if (spec->reuse_upper && (spec->upper != SBX_RT_UPPER_DISK || !spec->id))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "reusing a kept layer needs the disk mode and an id");
    /* ext4 cannot be mounted from inside a user namespace */
    if (spec->disk_bytes && (spec->userns || spec->upper != SBX_RT_UPPER_DISK))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "a capped writable layer needs the disk mode and no user namespace");
    return 0;
}

static void
make_id(char *out, size_t n, const char *want)
{
    if (want) {
        snprintf(out, n, "%s", want);
        return;
    }
    uint8_t r[6] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, (int)getpid(), sizeof r);
    snprintf(out, n, "sbx-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

static void
state_from_sb(struct sbx_state *st, const struct sbx_rt_sandbox *sb)
{
    memset(st, 0, sizeof *st);
    memcpy(st->id, sb->id, sizeof st->id);
    st->owner = getpid();
    st->pid = sb->pid;
    st->start_time = sb->start_time;
    st->cgroup_backend = (char *)sb->cg.ops->name;
    for (int r = 0; r < SBX_CG_NROLES; r++)
        st->cgroups[r] = sb->cg.dir[r];
    st->lease = sb->has_lease;
    st->upper = sb->upper != NULL;
    st->net = (int)sb->net;
    st->memory_limit = sb->memory_limit;
}

static int
record(const struct sbx_rt_sandbox *sb, sbx_error **err)
{
    struct sbx_state st;
    state_from_sb(&st, sb); /* borrows; nothing to release */
    return sbx_state_write(sb->dir, &st, err);
}

static struct sbx_rt_sandbox *
sandbox_new(struct sbx_rt *rt, const char *id)
{
    struct sbx_rt_sandbox *sb = sbx_xcalloc(1, sizeof *sb);
    sb->rt = rt;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    sb->dir = sbx_xasprintf("%s/%s", rt->run_dir, id);
    sb->pidfd = -1;
    sb->sync_fd = -1;
    sb->netns_fd = -1;
    for (int i = 0; i < SBX_RT_SPARE_SOCKS; i++)
        sb->spare_socks[i] = -1;
    sb->cg.ops = rt->cg_ops;
    sb->exit.status = -1;
    sb->exit.code = -1;
    sb->init_status = -1;
    return sb;
}

/* The record dir appears complete or not at all: it is built under a temporary name (with
 * our pid, so gc can tell a crashed builder from a live one) and renamed into place. */
static int
make_record_dir(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    sbx_autofree char *tmp = sbx_xasprintf("%s/.new-%s.%d", sb->rt->run_dir, sb->id, (int)getpid());
    sbx_autofree char *scratch = sbx_xasprintf("%s/scratch", tmp);
    struct sbx_state st;
    state_from_sb(&st, sb);
    int ret = 0;
    if (mkdir(tmp, 0711) < 0 || mkdir(scratch, 0700) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", scratch);
    if (ret == 0)
        ret = sbx_state_write(tmp, &st, err);
    /* rename refuses a non-empty target, and every record dir holds a state.json. */
    if (ret == 0 && rename(tmp, sb->dir) < 0)
        ret = sbx_error_set(err, errno == ENOTEMPTY || errno == EEXIST ? SBX_EEXISTS : SBX_EGENERIC,
                            errno, "create sandbox dir `%s`", sb->dir);
    if (ret < 0) {
        sbx_autoerror sbx_error *ignored = NULL;
        (void)sbx_rm_rf(tmp, &ignored);
    }
    return ret;
}

/* The disk-backed writable layer's dir (already named in the record). The child makes upper/
 * and work/ in it while the parent goes on. With reuse_upper it is the layer a stop kept. */
static int
make_upper_dir(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    if (!sb->upper)
        return 0;
    bool kept = sbx_rt_upper_is_kept(sb->upper);
    if (spec->reuse_upper && kept && sbx_rt_upper_recover(sb->upper, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s`", sb->id);
    if (spec->reuse_upper)
        return kept ? 0
                    : sbx_error_set(err, SBX_ENOTFOUND, 0,
                                    "sandbox `%s`: no writable layer was kept for it", sb->id);
    /* A kept layer belongs to a stopped sandbox of this id: never wiped by a fresh create. */
    if (kept)
        return sbx_error_set(err, SBX_ECONFLICT, 0,
                             "sandbox `%s`: a writable layer is kept for this id (start it with "
                             "that layer, or remove it first)",
                             sb->id);
    /* One that exists otherwise has no record (the record dir was new): left by a crash or a
     * reboot that no gc saw, so nothing uses it. */
    if (mkdir(sb->upper, 0700) < 0 &&
        (errno != EEXIST || sbx_rm_rf(sb->upper, err) < 0 || mkdir(sb->upper, 0700) < 0))
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", sb->upper);
    /* In a user namespace the sandbox's root is an unprivileged host id: it owns its layer. */
    if (spec->userns && chown(sb->upper, spec->uid_map.outside, spec->gid_map.outside) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "chown `%s`", sb->upper);
    return 0;
}

/* v1 cgroups (a mkdir and limit writes per controller, ~0.4 ms for a memory+pids+cpu+freezer
 * sandbox) are made on a thread while the child is cloned and sets up; the child joins them
 * after GO, which is sent only once they exist. So the child's own setup (sbx's code: mounts,
 * no fork) is not accounted to the sandbox; everything from its exec on is. Not with a user
 * namespace (the child could not open the host's cgroup files) nor on v2 (the clone goes
 * straight into the cgroup, which must exist). */
static bool
late_cgroups(const struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec)
{
    if (sb->cg.ops->clone_into || spec->userns || !sbx_cg_any_dir(&sb->cg))
        return false;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (sb->cg.dir[r] && !sbx_str_starts(sb->cg.dir[r], CG_ROOT "/"))
            return false;
    }
    return true;
}

static void *
cg_thread_main(void *arg)
{
    struct sbx_rt_sandbox *sb = arg;
    sbx_rt_cgs_take(sb->rt, &sb->cg);
    sb->cg_ret = sb->cg.ops->create(&sb->cg, &sb->cg_lim, &sb->cg_err);
    return NULL;
}

/* Wait for the cgroups of a late create (no-op otherwise); keeps ret if it already failed. */
static int
cg_wait(struct sbx_rt_sandbox *sb, int ret, sbx_error **err)
{
    if (!sb->cg_pending)
        return ret;
    (void)pthread_join(sb->cg_thread, NULL);
    sb->cg_pending = false;
    if (ret == 0 && sb->cg_ret < 0) {
        sbx_error_move(err, &sb->cg_err);
        ret = sb->cg_ret;
    }
    sbx_error_clear(&sb->cg_err);
    return ret;
}

/* Record, then cgroups: everything the host keeps for this sandbox, in that order. */
static int
prepare_host(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    struct sbx_rt *rt = sb->rt;
    /* Only the controllers this sandbox needs: each one is a mkdir, a write and an rmdir. */
    sb->cg.roles = (spec->memory_bytes ? SBX_CG_ROLE(SBX_CG_MEMORY) : 0) |
                   (spec->pids_max ? SBX_CG_ROLE(SBX_CG_PIDS) : 0) |
                   /* cpu only: nothing reads cpuacct, and on v1 hosts that mount it apart
                    * it was one more cgroup to make, join and remove per sandbox */
                   (spec->cpu_millis ? SBX_CG_ROLE(SBX_CG_CPU) : 0) |
                   (spec->pausable ? SBX_CG_ROLE(SBX_CG_FREEZER) : 0);
    int ret = sb->cg.ops->plan(&sb->cg, CG_ROOT, rt->self_cgroup, rt->cgroup_parent, sb->id, err);
    if (ret == 0)
        ret = make_record_dir(sb, err);
    if (ret < 0)
        return ret;
    sb->has_record = true;
    ret = make_upper_dir(sb, spec, err);
    if (ret < 0)
        return ret;
    sb->cg_lim = (struct sbx_cg_limits){.memory_bytes = spec->memory_bytes,
                                        .pids_max = spec->pids_max,
                                        .cpu_millis = spec->cpu_millis};
    if (late_cgroups(sb, spec) && pthread_create(&sb->cg_thread, NULL, cg_thread_main, sb) == 0) {
        sb->cg_pending = true;
        return 0;
    }
    sbx_rt_cgs_take(rt, &sb->cg);
    return sb->cg.ops->create(&sb->cg, &sb->cg_lim, err);
}

/* True when the environment entries a and b set the same variable. */
static bool
same_var(const char *a, const char *b)
{
    size_t la = strcspn(a, "=");
    return la == strcspn(b, "=") && memcmp(a, b, la) == 0;
}

static char **
merge_env(const struct sbx_rt_spec *spec)
{
    size_t n = 4;
    for (size_t i = 0; spec->image_env && spec->image_env[i]; i++)
        n++;
    for (size_t i = 0; spec->env && spec->env[i]; i++)
        n++;
    char **env = sbx_xcalloc(n, sizeof *env);
    size_t k = 0;
    env[k++] = (char *)default_path;
    env[k++] = (char *)(spec->uid == 0 ? "HOME=/root" : "HOME=/");
    char *const *lists[2] = {spec->image_env, spec->env};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; lists[l] && lists[l][i]; i++) {
            size_t j = 0;
            while (j < k && !same_var(env[j], lists[l][i]))
                j++;
            env[j] = lists[l][i]; /* later entries override earlier ones of the same name */
            k += j == k;
        }
    }
    return env;
}

static int
overlay_opts(struct sbx_child_args *a, const struct sbx_rt_spec *spec, sbx_error **err)
{
    size_t cap = sizeof a->overlay_opts;
    size_t off = (size_t)snprintf(a->overlay_opts, cap, "lowerdir=");
    /* overlayfs lists the top layer first; the spec lists the bottom first. */
    for (size_t i = spec->n_layers; i > 0 && off < cap; i--) {
        const char *l = spec->layers[i - 1];
        if (strpbrk(l, ",:"))
            return sbx_error_set(err, SBX_EINVAL, 0, "layer path `%s` has `,` or `:`", l);
        off += (size_t)snprintf(a->overlay_opts + off, cap - off, "%s%s", l, i > 1 ? ":" : "");
    }
    if (spec->n_layers == 0)
        off += (size_t)snprintf(a->overlay_opts + off, cap - off, "%s", a->lower_host);
    const char *layer = a->upper ? a->upper : a->scratch;
    if (off < cap)
        off += (size_t)snprintf(a->overlay_opts + off, cap - off,
                                ",upperdir=%s/upper,workdir=%s/work", layer, layer);
    /* A fresh layer on the state dir's file system is volatile (overlayfs skips every sync of
     * it): like CRI-O's and podman's --rm containers, it dies with its sandbox, so neither the
     * sandbox's fsyncs nor its teardown (whose unmount otherwise syncs the whole host file
     * system the layer is on, journal commit included) need to reach the disk. A stop makes
     * it durable (sbx_rt_upper_settle); a kept layer runs again without it. Not for a capped
     * layer (its own ext4, no journal) nor on tmpfs. */
    if (a->upper && a->upper_loop_fd < 0 && !a->upper_reused && off < cap) {
        a->volatile_at = off;
        off += (size_t)snprintf(a->overlay_opts + off, cap - off, ",volatile");
    }
    if (off >= cap)
        return sbx_error_set(err, SBX_ELIMIT, 0, "too many image layers");
    return 0;
}

static int
host_lower(struct sbx_child_args *a, const struct sbx_rt *rt, const struct sbx_rt_spec *spec,
           sbx_error **err)
{
    uid_t uid = spec->userns ? spec->uid_map.outside : 0;
    gid_t gid = spec->userns ? spec->gid_map.outside : 0;
    if (uid || gid)
        a->lower_host = sbx_xasprintf("%s-%u-%u", rt->host_image, (unsigned)uid, (unsigned)gid);
    else
        a->lower_host = sbx_xstrdup(rt->host_image);
    return sbx_hostimg_ensure(a->lower_host, uid, gid, err);
}

/* mkfs.ext4 on img: no journal (a scratch layer that dies with its sandbox), no reserved
 * blocks, lazy inode tables (a few MiB of metadata are written, whatever the size). */
static int
mkfs_ext4(const char *img, sbx_error **err)
{
    static const char *const paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};
    const char *mkfs = NULL;
    for (size_t i = 0; !mkfs && i < SBX_ARRAY_SIZE(paths); i++)
        mkfs = access(paths[i], X_OK) == 0 ? paths[i] : NULL;
    if (!mkfs)
        return sbx_error_set(err, SBX_EUNAVAIL, 0,
                             "a capped writable layer needs mkfs.ext4 (Debian: e2fsprogs)");
    char *const argv[] = {"mkfs.ext4",    "-q", "-F",
                          "-m",           "0",  "-O",
                          "^has_journal", "-E", "lazy_itable_init=1,nodiscard",
                          (char *)img,    NULL};
    char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    (void)posix_spawn_file_actions_init(&fa);
    (void)posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    (void)posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    int r = posix_spawn(&pid, mkfs, &fa, NULL, argv, envp);
    (void)posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return sbx_error_set(err, SBX_EGENERIC, r, "run %s", mkfs);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return sbx_error_set(err, SBX_EGENERIC, errno, "wait for %s", mkfs);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return sbx_error_set(err, SBX_EGENERIC, 0, "%s `%s` failed (status %d)", mkfs, img, st);
    return 0;
}

/* Attach img to a free loop device that detaches itself when its last user goes (the mount, or
 * the fd in *fd_out if nothing mounts it): no loop device outlives its user. Its path in dev. */
int
sbx_loop_attach(const char *img, char *dev, size_t devlen, int *fd_out, sbx_error **err)
{
    sbx_autoclose int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    sbx_autoclose int file = open(img, O_RDWR | O_CLOEXEC);
    if (ctl < 0 || file < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`",
                             ctl < 0 ? "/dev/loop-control" : img);
    for (int tries = 0; tries < 16; tries++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "find a free loop device");
        snprintf(dev, devlen, "/dev/loop%d", n);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", dev);
        struct loop_config lc = {.fd = (unsigned)file, .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
        if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
            *fd_out = fd;
            return 0;
        }
        int e = errno;
        (void)close(fd);
        if (e != EBUSY) /* EBUSY: another process took it in between */
            return sbx_error_set(err, SBX_EGENERIC, e, "set up `%s`", dev);
    }
    return sbx_error_set(err, SBX_EGENERIC, EBUSY, "no free loop device");
}

static int
attach_loop(struct sbx_child_args *a, const char *img, sbx_error **err)
{
    return sbx_loop_attach(img, a->upper_dev, sizeof a->upper_dev, &a->upper_loop_fd, err);
}

/* Copy the data extents of a sparse file (holes stay holes): a fresh ext4 is a few hundred KiB
 * of metadata in a file of any size. */
static int
copy_sparse(int from, int to, uint64_t size)
{
    off_t pos = 0;
    for (;;) {
        off_t data = lseek(from, pos, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1; /* ENXIO: no data after pos */
        off_t hole = lseek(from, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        for (off_t off = data; off < hole;) {
            off_t in = off;
            off_t out = off;
            ssize_t n = copy_file_range(from, &in, to, &out, (size_t)(hole - off), 0);
            if (n <= 0)
                return -1;
            off += n;
        }
        pos = hole;
        if ((uint64_t)pos >= size)
            return 0;
    }
}

/* <upper_dir>/.template-<size>.img: made once per size (under a lock, built aside and renamed
 * into place), so a create copies a few hundred KiB instead of running mkfs (30-70 ms here).
 * Every layer of a size shares the template's file system UUID: they are never mounted in the
 * same namespace, and nothing here looks file systems up by UUID. */
static int
layer_template(const struct sbx_rt *rt, uint64_t size, char **out, sbx_error **err)
{
    char *tmpl = sbx_xasprintf("%s/.template-%" PRIu64 ".img", rt->upper_dir, size);
    *out = tmpl;
    if (access(tmpl, F_OK) == 0)
        return 0;
    sbx_autofree char *lock = sbx_xasprintf("%s/.template.lock", rt->upper_dir);
    sbx_autoclose int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0 || flock(lfd, LOCK_EX) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "lock `%s`", lock);
    if (access(tmpl, F_OK) == 0)
        return 0;
    sbx_autofree char *tmp = sbx_xasprintf("%s.%d", tmpl, (int)getpid());
    sbx_autoclose int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "create `%s`", tmp);
    int ret = mkfs_ext4(tmp, err);
    if (ret == 0 && rename(tmp, tmpl) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "rename `%s`", tmp);
    if (ret < 0)
        (void)unlink(tmp);
    return ret;
}

static bool
upper_has_image(const char *upper)
{
    sbx_autofree char *img = sbx_xasprintf("%s/layer.img", upper);
    return access(img, F_OK) == 0;
}

/* A capped disk layer: <upper>/layer.img (sparse, the cap's size) with its own ext4 (a copy of
 * the size's template), which the child mounts on <upper>/fs. All of it is inside <upper>,
 * which the record names. */
static int
capped_layer(struct sbx_child_args *a, const struct sbx_rt_sandbox *sb,
             const struct sbx_rt_spec *spec, sbx_error **err)
{
    sbx_autofree char *img = sbx_xasprintf("%s/layer.img", sb->upper);
    char *fs = sbx_xasprintf("%s/fs", sb->upper);
    a->upper = fs;
    if (a->upper_reused) /* its own file system, with the files of before */
        return attach_loop(a, img, err);
    sbx_autofree char *tmpl = NULL;
    int ret = layer_template(sb->rt, spec->disk_bytes, &tmpl, err);
    if (ret < 0)
        return ret;
    sbx_autoclose int from = open(tmpl, O_RDONLY | O_CLOEXEC);
    sbx_autoclose int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (from < 0 || fd < 0 || ftruncate(fd, (off_t)spec->disk_bytes) < 0 ||
        copy_sparse(from, fd, spec->disk_bytes) < 0 || mkdir(fs, 0755) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "make the layer `%s`", img);
    return attach_loop(a, img, err);
}

/* A volume given as an fd is cloned here, in the caller's mount namespace (a mount of another
 * namespace cannot be cloned from the sandbox's): the child gets a detached tree that it only
 * moves into place, so what it binds is exactly what the caller resolved. The tree vanishes
 * when its last fd closes if it was never attached: nothing can leak on the host. */
static int
clone_volume_trees(struct sbx_child_args *a, size_t first, const struct sbx_rt_spec *spec,
                   sbx_error **err)
{
    for (size_t i = 0; i < spec->n_volumes; i++) {
        int src = spec->volumes[i].src_fd;
        if (src <= 0)
            continue;
        int tree =
            open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
        if (tree >= 0 && tree < 3) {
            int hi = fcntl(tree, F_DUPFD_CLOEXEC, 3);
            (void)close(tree);
            tree = hi;
        }
        if (tree < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "clone volume `%s`",
                                 spec->volumes[i].src);
        a->binds[first + i].src_fd = tree;
    }
    return 0;
}

/* The parent's copies of the cloned trees (the child has its own). */
static void
close_volume_trees(struct sbx_child_args *a)
{
    for (size_t i = 0; i < a->n_binds; i++) {
        if (a->binds[i].src_fd > 0)
            (void)close(a->binds[i].src_fd);
        a->binds[i].src_fd = 0;
    }
}

/* How the child joins its v1 cgroups: made already (their `tasks` files opened for it), or
 * being made (late_cgroups: the cgroup root opened, the paths below it). */
static int
child_cgroups(struct sbx_child_args *a, const struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->cg.ops->clone_into || !sbx_cg_any_dir(&sb->cg))
        return 0;
    if (!sb->cg_pending) {
        int n = sb->cg.ops->open_join(&sb->cg, a->cg_join_fds, SBX_CG_NROLES, err);
        if (n < 0)
            return n;
        a->n_cg_join = (size_t)n;
        return 0;
    }
    a->cg_root_fd = open(CG_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (a->cg_root_fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", CG_ROOT);
    const char *dirs[SBX_CG_NROLES];
    size_t n = sbx_cg_unique_dirs(&sb->cg, dirs, SBX_CG_NROLES);
    for (size_t i = 0; i < n; i++)
        a->cg_rel[a->n_cg_rel++] = dirs[i] + strlen(CG_ROOT "/");
    return 0;
}

/* Where this process's argv and environment strings are (fields 48-51 of /proc/self/stat):
 * an init made by the plain clone is a copy of the caller's memory, and wipes them (child.c)
 * so that /proc/1/cmdline and /proc/1/environ hold nothing of the caller's. */
static void
scrub_ranges(struct sbx_child_args *a)
{
    char buf[2048];
    sbx_autoclose int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    unsigned long long v[4];
    /* After ")": field 3 (state) onwards; fields 48-51 are arg_start, arg_end, env_start,
     * env_end. */
    for (int field = 2; p && field < 48; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p, " %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]) != 4)
        return;
    if (v[0] < v[1] && v[2] < v[3]) {
        a->scrub_arg[0] = (uintptr_t)v[0];
        a->scrub_arg[1] = (uintptr_t)v[1];
        a->scrub_env[0] = (uintptr_t)v[2];
        a->scrub_env[1] = (uintptr_t)v[3];
    }
}

static int
child_args(struct sbx_child_args *a, struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec,
           sbx_error **err)
{
    a->spec = spec;
    if (spec->n_layers == 0) {
        int ret = host_lower(a, sb->rt, spec, err);
        if (ret < 0)
            return ret;
    }
    a->scratch = sbx_xasprintf("%s/scratch", sb->dir);
    a->upper = sb->upper;
    a->upper_loop_fd = -1;
    a->upper_reused = sb->upper && spec->reuse_upper;
    /* A kept layer is capped when it has its image, whatever disk_bytes says now. */
    bool capped = a->upper_reused ? upper_has_image(sb->upper) : spec->disk_bytes != 0;
    if (sb->upper && capped) {
        int ret = capped_layer(a, sb, spec, err);
        if (ret < 0)
            return ret;
    }
    a->hostname = spec->hostname ? spec->hostname : sb->id;
    uint64_t tmpfs = spec->tmpfs_bytes    ? spec->tmpfs_bytes
                     : spec->memory_bytes ? spec->memory_bytes
                                          : 1ULL << 30;
    snprintf(a->tmpfs_opts, sizeof a->tmpfs_opts, "mode=755,size=%" PRIu64, tmpfs);
    /* /dev with /dev/shm: half the memory limit (see rootfs.c), else tmpfs's default (half the
     * RAM). */
    if (spec->memory_bytes)
        snprintf(a->dev_opts, sizeof a->dev_opts, "mode=755,size=%" PRIu64, spec->memory_bytes / 2);
    else
        snprintf(a->dev_opts, sizeof a->dev_opts, "mode=755");
    if (spec->n_layers == 0)
        a->n_binds = sbx_hostimg_binds(a->binds, SBX_MAX_MOUNTS);
    size_t first_volume = a->n_binds;
    for (size_t i = 0; i < spec->n_volumes; i++)
        a->binds[a->n_binds++] = (struct sbx_child_bind){
            .src = spec->volumes[i].src, .dst = spec->volumes[i].dst, .ro = spec->volumes[i].ro};
    if (spec->execd_path)
        a->binds[a->n_binds++] =
            (struct sbx_child_bind){.src = spec->execd_path, .dst = SBX_RT_EXECD_PATH, .ro = true};
    a->env = merge_env(spec);
    a->cwd = spec->cwd ? spec->cwd : spec->image_workdir ? spec->image_workdir : "/";
    /* v1: the child joins its cgroups itself (see sbx_cg_join_self), then roots its cgroup
     * namespace there. */
    a->unshare_cgroupns = !sb->cg.ops->clone_into && sbx_cg_any_dir(&sb->cg);
    /* A child in a user namespace cannot join the template (it belongs to the initial one). */
    a->mnt_template_fd = spec->userns ? -1 : sb->rt->mnt_template;
    a->share_sys = a->mnt_template_fd >= 0 && sb->rt->sys_template && spec->net == SBX_RT_NET_NONE;
    a->seccomp = &sb->rt->seccomp;
    a->init_seccomp = &sb->rt->init_seccomp;
    a->caps = &sb->rt->caps;
    if (!spec->as_init) /* an init that stays (not exec'd over) */
        scrub_ranges(a);
    int ret = sbx_rt_safe_stdio(a, spec, err);
    if (ret == 0)
        ret = child_cgroups(a, sb, err);
    if (ret < 0)
        return ret;
    ret = clone_volume_trees(a, first_volume, spec, err);
    return ret < 0 ? ret : overlay_opts(a, spec, err);
}

static int
write_map(pid_t pid, const char *file, const struct sbx_rt_idmap *m, sbx_error **err)
{
    char path[64];
    char line[96];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    int n = snprintf(line, sizeof line, "%u %u %u\n", m->inside, m->outside, m->count);
    if (!m->count) /* setgroups */
        n = snprintf(line, sizeof line, "deny");
    sbx_autoclose int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        return sbx_error_set(err, SBX_EGENERIC, errno, "write `%s`", path);
    return 0;
}

static int
map_ids(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    static const struct sbx_rt_idmap deny = {0};
    int ret = write_map(sb->pid, "uid_map", &spec->uid_map, err);
    if (ret == 0)
        ret = write_map(sb->pid, "setgroups", &deny, err);
    if (ret == 0)
        ret = write_map(sb->pid, "gid_map", &spec->gid_map, err);
    if (ret == 0 && sbx_sync_send(sb->sync_fd, SBX_SYNC_MAPPED, 0, 0, NULL) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "release the child");
    return ret;
}

static uint64_t
clone_flags(const struct sbx_child_args *a, bool into_cgroup, bool no_cgroup)
{
    const struct sbx_rt_spec *spec = a->spec;
    /* Every namespace at once: one clone, nothing shared with the host but what we bind (a
     * pooled network namespace is entered by the child first thing instead). */
    uint64_t f = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_PIDFD;
    if (spec->net != SBX_RT_NET_HOST && a->netns_fd < 0)
        f |= CLONE_NEWNET;
    if (spec->userns)
        f |= CLONE_NEWUSER;
    if (into_cgroup)
        f |= CLONE_INTO_CGROUP;
    if (into_cgroup || no_cgroup)
        f |= CLONE_NEWCGROUP;
    return f;
}

/* What spawn_setup leaves to its caller (each -1 when unused). */
struct spawn_fds {
    int pidfd;     /* CLONE_PIDFD writes here */
    int child_end; /* the child's end of the sync socket (the caller closes it) */
    int cgfd;      /* v2: the cgroup for CLONE_INTO_CGROUP (the caller closes it) */
};

static void
spawn_fds_close(struct spawn_fds *f)
{
    if (f->child_end >= 0)
        (void)close(f->child_end);
    if (f->cgfd >= 0)
        (void)close(f->cgfd);
    f->child_end = f->cgfd = -1;
}

/* The sync socket and the clone arguments shared by both ways of spawning. */
static int
spawn_setup(struct sbx_rt_sandbox *sb, struct sbx_child_args *a, struct clone_args *ca,
            struct spawn_fds *f, sbx_error **err)
{
    *f = (struct spawn_fds){.pidfd = -1, .child_end = -1, .cgfd = -1};
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "socketpair");
    f->child_end = sv[1];
    sb->sync_fd = sv[0];
    a->sync_fd = sv[1];
    a->parent_fd = sv[0];
    bool into = sb->cg.ops->clone_into && sbx_cg_any_dir(&sb->cg);
    f->cgfd = into ? sb->cg.ops->clone_fd(&sb->cg) : -1;
    if (into && f->cgfd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open cgroup `%s`", sbx_cg_any_dir(&sb->cg));
    *ca = (struct clone_args){.flags = clone_flags(a, into, !sbx_cg_any_dir(&sb->cg)),
                              .pidfd = (uint64_t)(uintptr_t)&f->pidfd,
                              .exit_signal = SIGCHLD,
                              .cgroup = (uint64_t)(f->cgfd >= 0 ? f->cgfd : 0)};
    return 0;
}

static int
spawn(struct sbx_rt_sandbox *sb, struct sbx_child_args *a, sbx_error **err)
{
    struct clone_args ca = {0};
    struct spawn_fds f;
    int r = spawn_setup(sb, a, &ca, &f, err);
    if (r < 0) {
        spawn_fds_close(&f);
        return r;
    }
    /* The child starts with every signal blocked: as a pid namespace's init it would silently
     * drop any signal without a handler that arrives before its reaper loop runs. The command
     * gets an empty mask at exec. */
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &old);
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        sbx_child_main(a);
    int e = errno;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    spawn_fds_close(&f);
    if (pid < 0)
        return sbx_error_set(err, SBX_EGENERIC, e, "clone the sandbox");
    sb->pid = (pid_t)pid;
    sb->pidfd = sbx_fd_park(f.pidfd);
    sb->is_child = true;
    return 0;
}

static int
await_ready(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    struct sbx_sync_msg m;
    int r = sbx_sync_recv(sb->sync_fd, &m);
    if (r == 1 && m.type == SBX_SYNC_READY)
        return 0;
    if (r == 1 && m.type == SBX_SYNC_ERROR)
        return sbx_error_set(err, SBX_EGENERIC, m.err, "set up sandbox: %s", m.msg);
    return sbx_error_set(err, SBX_EGENERIC, r < 0 ? -r : 0, "sandbox init died during setup");
}

static int
attach_host_side(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    int ret = spec->userns ? map_ids(sb, spec, err) : 0;
    sb->start_time = sbx_proc_start_time(sb->pid);
    /* The bridge needs the namespace; the server connects into it for every request. */
    bool bridge = spec->net == SBX_RT_NET_BRIDGE;
    if (!sb->pooled && (bridge || (spec->as_init && spec->net == SBX_RT_NET_NONE))) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
        sb->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ret == 0 && bridge && sb->netns_fd < 0)
            ret = sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", path);
    }
    sb->has_lease = bridge; /* recorded (with the pid) before it exists */
    if (ret == 0)
        ret = record(sb, err);
    if (ret == 0 && bridge)
        ret = sb->pooled ? sbx_rt_pool_claim(sb, err)
                         : sb->rt->net_ops.attach(sb->rt->net_ops.net, &sb->lease, sb->id,
                                                  sb->netns_fd, err);
    /* Before GO: nothing in the sandbox runs while its port is in the wrong group. */
    if (ret == 0 && bridge && spec->net_group)
        ret = sb->rt->net_ops.set_group
                  ? sb->rt->net_ops.set_group(sb->rt->net_ops.net, sb->id, spec->net_group, err)
                  : sbx_error_set(err, SBX_EUNAVAIL, 0, "network groups are not available");
    return cg_wait(sb, ret, err); /* GO follows: the cgroups must exist */
}

/* ---- shared spawn (the server: as_init + start) ----
 *
 * A plain clone3 copies the caller's address space, and for a server (hundreds of mappings,
 * a dozen threads) that copy, the copy-on-write faults it causes in the server afterwards and
 * its teardown at the child's exec cost ~1 ms of CPU per sandbox. An as_init child only runs
 * sbx's own setup code and then execs, so it is cloned the way posix_spawn clones:
 * CLONE_VM | CLONE_VFORK, on a stack of its own. It shares the server's memory until its
 * exec, which is safe because it allocates nothing, changes no global (its environment goes
 * to execve, never to `environ`), works on its own copy of the child args and calls only
 * async-signal-safe functions; the calling thread sleeps in clone3 until the exec (or the
 * child's exit), so its stack and thread-local state (errno) are not in use. Other threads
 * run on, as they do during posix_spawn. The host side (record, user maps, bridge) runs on a
 * helper thread meanwhile, which sends GO. x86_64 only (the trampoline below); elsewhere,
 * and for everything else, the plain clone. */

#if defined(__x86_64__)
#define SBX_SHARED_SPAWN 1

/* clone3 with ca->stack set: the child calls fn(arg) on that stack and never returns. */
static long
clone3_on_stack(struct clone_args *ca, void (*fn)(void *), void *arg)
{
    register long nr __asm__("rax") = SYS_clone3;
    register long r12 __asm__("r12") = (long)fn;
    register long r13 __asm__("r13") = (long)arg;
    __asm__ volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "mov %%r13, %%rdi\n\t"
                     "call *%%r12\n\t"
                     "ud2\n"
                     "1:"
                     : "+r"(nr)
                     : "D"(ca), "S"(sizeof *ca), "r"(r12), "r"(r13)
                     : "rcx", "r11", "memory");
    return nr;
}
#endif

#ifdef SBX_SHARED_SPAWN

#define SHARED_STACK ((size_t)256 * 1024)

struct host_job {
    struct sbx_rt_sandbox *sb;
    const struct sbx_rt_spec *spec;
    int pidfd; /* written by the kernel before the child runs */
    pid_t pid; /* CLONE_PARENT_SETTID: likewise */
    bool go;   /* GO was sent */
    int ret;
    sbx_error *err;
};

/* The child's start: its own copy of the args, and (ASan builds) where the caller's stack is. */
struct shared_start {
    struct sbx_child_args args;
    const void *caller_stack;
    size_t caller_stack_size;
};

__attribute__((noreturn)) static void
shared_child(void *arg)
{
    struct shared_start *st = arg;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan tracks one stack per thread, and we share the caller's thread state: tell it we
     * are on our own stack now (the caller switches back after the clone). */
    __sanitizer_finish_switch_fiber(NULL, &st->caller_stack, &st->caller_stack_size);
#endif
    sbx_child_main(&st->args);
}

/* The helper thread: once the child says it runs, its pid and pidfd are set; do the host
 * side, then release it. On failure, kill it, which ends the caller's vfork wait. */
static void *
host_job_main(void *arg)
{
    struct host_job *j = arg;
    struct sbx_rt_sandbox *sb = j->sb;
    struct sbx_sync_msg m;
    int r = sbx_sync_recv(sb->sync_fd, &m);
    if (r != 1 || m.type != SBX_SYNC_HELLO) {
        j->ret = r == 1 && m.type == SBX_SYNC_ERROR
                     ? sbx_error_set(&j->err, SBX_EGENERIC, m.err, "set up sandbox: %s", m.msg)
                     : sbx_error_set(&j->err, SBX_EGENERIC, r < 0 ? -r : 0,
                                     "sandbox init died during setup");
        return NULL;
    }
    sb->pid = j->pid;
    sb->pidfd = j->pidfd;
    sb->is_child = true;
    j->ret = attach_host_side(sb, j->spec, &j->err);
    if (j->ret == 0 && sbx_sync_send(sb->sync_fd, SBX_SYNC_GO, 0, 0, NULL) < 0)
        j->ret = sbx_error_set(&j->err, SBX_EGENERIC, errno, "start sandbox `%s`", sb->id);
    j->go = j->ret == 0;
    if (j->ret < 0)
        (void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    else
        sbx_rt_make_spare_socks(sb); /* last: this thread is left in the sandbox's netns */
    return NULL;
}

/* After the exec (the child's end closed) the socket holds READY and then EOF; an ERROR means
 * the exec or a late setup step failed. */
static int
shared_result(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    struct sbx_sync_msg m;
    int r;
    bool exec_next = false;
    /* ECONNRESET: our copy of the child's end was closed with a GO unread (the child died
     * first); what the child sent is still queued behind it. */
    while ((r = sbx_sync_recv(sb->sync_fd, &m)) == -ECONNRESET ||
           (r == 1 && (m.type == SBX_SYNC_READY || m.type == SBX_SYNC_EXEC))) {
        if (r == 1 && m.type == SBX_SYNC_EXEC)
            exec_next = true;
    }
    if (r == 1 && m.type == SBX_SYNC_ERROR)
        return sbx_error_set(err, SBX_EGENERIC, m.err, "start sandbox `%s`: %s", sb->id, m.msg);
    if (r != 0)
        return sbx_error_set(err, SBX_EGENERIC, r < 0 ? -r : 0,
                             "start sandbox `%s`: unexpected message from its init", sb->id);
    /* EOF after EXEC: exec'd (the command may have exited already: that is its result, read
     * by wait). EOF without it: the init died during setup without a word. */
    if (!exec_next)
        return sbx_error_set(err, SBX_EGENERIC, 0, "sandbox `%s`: init died during setup", sb->id);
    (void)close(sb->sync_fd);
    sb->sync_fd = -1;
    sb->started = true;
    return 0;
}

static void
release_stack(void *stack)
{
#if defined(__SANITIZE_ADDRESS__)
    /* The child's instrumented frames poisoned this stack's shadow, and they never returned. */
    __asan_unpoison_memory_region(stack, SHARED_STACK);
#endif
    (void)munmap(stack, SHARED_STACK);
}

/* Undo spawn_setup for the plain spawn that follows (it makes its own socket). */
static int
shared_abandon(struct sbx_rt_sandbox *sb, struct spawn_fds *f)
{
    spawn_fds_close(f);
    (void)close(sb->sync_fd);
    sb->sync_fd = -1;
    return 0;
}

/* Every descriptor the child uses is below base: it keeps only those when it unshares a
 * shared table (child.c). A transient one at or above it (the low range was full) means the
 * table is copied as before instead. */
static bool
child_fds_below(const struct sbx_child_args *a, int base)
{
    int most = a->sync_fd > a->parent_fd ? a->sync_fd : a->parent_fd;
    int more[] = {
        a->netns_fd, a->mnt_template_fd, a->upper_loop_fd, a->cg_root_fd,
        a->stdio[0], a->stdio[1],        a->stdio[2],      a->spec->has_fd3 ? a->spec->fd3 : -1};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        most = more[i] > most ? more[i] : most;
    for (size_t i = 0; i < a->n_cg_join; i++)
        most = a->cg_join_fds[i] > most ? a->cg_join_fds[i] : most;
    for (size_t i = 0; i < a->n_binds; i++)
        most = a->binds[i].src_fd > most ? a->binds[i].src_fd : most;
    return most < base;
}

/* Clone the child on its own stack with the helper thread at work; returns the clone's result
 * once the child has exec'd or exited (or the clone failed). */
static long
shared_clone(struct clone_args *ca, const struct sbx_child_args *a, struct host_job *j,
             int *child_end)
{
    void *stack = mmap(NULL, SHARED_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -ENOMEM;
    /* The child's own args (it writes a few fields); the strings it points to are read-only. */
    struct shared_start *mine = sbx_xcalloc(1, sizeof *mine);
    memcpy(&mine->args, a, sizeof mine->args);
    mine->args.hello = true;
    ca->flags |= CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID;
    /* With parked descriptors (sbx_fd_park: one or two per live sandbox), share the fd table
     * instead of copying it: the child's first act is to unshare it without the parked range
     * (child.c), so it never holds, copies or closes one of them. Safe while shared: this
     * thread is suspended (CLONE_VFORK) and closes nothing of the child's, and the child
     * touches no descriptor before it has a table of its own. */
    unsigned base = sbx_fd_park_base();
    mine->args.fds_shared = base && child_fds_below(a, (int)base) ? base : 0;
    if (mine->args.fds_shared)
        ca->flags |= CLONE_FILES;
    ca->parent_tid = (uint64_t)(uintptr_t)&j->pid;
    ca->pidfd = (uint64_t)(uintptr_t)&j->pidfd;
    ca->stack = (uint64_t)(uintptr_t)stack;
    ca->stack_size = SHARED_STACK;
    pthread_t t;
    long pid = -EAGAIN;
    if (pthread_create(&t, NULL, host_job_main, j) == 0) {
        sigset_t all;
        sigset_t old;
        sigfillset(&all);
        (void)pthread_sigmask(SIG_SETMASK, &all, &old);
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_start_switch_fiber(NULL, stack, SHARED_STACK);
#endif
        pid = clone3_on_stack(ca, shared_child, mine);
#if defined(__SANITIZE_ADDRESS__)
        if (mine->caller_stack) { /* the child switched ASan to its stack: back to ours */
            __sanitizer_start_switch_fiber(NULL, mine->caller_stack, mine->caller_stack_size);
            __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
        }
#endif
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        /* The child has its own copy of its end (exec'd or exited by now): with ours closed,
         * a child that died before its HELLO reads as EOF in the helper. */
        (void)close(*child_end);
        *child_end = -1;
        if (pid < 0) /* the helper waits for a HELLO that will never come */
            (void)shutdown(j->sb->sync_fd, SHUT_RDWR);
        (void)pthread_join(t, NULL);
    }
    free(mine);
    release_stack(stack);
    return pid;
}

/* 1: the sandbox runs (exec'd, like sbx_rt_start for as_init), 0: not done (no stack, thread
 * or shared clone here; the caller spawns the plain way), < 0: failed. */
static int
spawn_shared(struct sbx_rt_sandbox *sb, struct sbx_child_args *a, const struct sbx_rt_spec *spec,
             sbx_error **err)
{
    struct clone_args ca = {0};
    struct host_job j = {.sb = sb, .spec = spec, .pidfd = -1};
    struct spawn_fds f;
    int r = spawn_setup(sb, a, &ca, &f, err);
    if (r < 0) {
        spawn_fds_close(&f);
        return r;
    }
    long pid = shared_clone(&ca, a, &j, &f.child_end);
    if (pid < 0) {
        sbx_error_clear(&j.err);
        return shared_abandon(sb, &f);
    }
    spawn_fds_close(&f);  /* the child's end too: the socket reads EOF after the exec */
    sb->pid = (pid_t)pid; /* also when the helper never saw it (the child died first) */
    sb->pidfd = j.pidfd = sbx_fd_park(j.pidfd); /* the helper thread has ended */
    sb->is_child = true;
    if (j.ret < 0) {
        sbx_error_move(err, &j.err);
        return j.ret;
    }
    r = shared_result(sb, err);
    return r < 0 ? r : 1;
}
#endif /* SBX_SHARED_SPAWN */

/* A host-side step failed because the child had already died of a setup error (e.g. its netns
 * was gone by the time the parent looked): the child's own message is the useful one. */
static void
prefer_child_error(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    struct sbx_sync_msg m;
    if (sb->sync_fd < 0 || !sb->pid)
        return;
    for (;;) {
        ssize_t n = recv(sb->sync_fd, &m, sizeof m, MSG_DONTWAIT);
        if (n < 0 && (errno == ECONNRESET || errno == EINTR))
            continue;
        if (n != (ssize_t)sizeof m)
            return;
        if (m.type == SBX_SYNC_ERROR) {
            (void)sbx_error_set(err, SBX_EGENERIC, m.err, "set up sandbox: %s", m.msg);
            return;
        }
    }
}

int
sbx_rt_create(struct sbx_rt_sandbox **out, struct sbx_rt *rt, const struct sbx_rt_spec *spec,
              sbx_error **err)
{
    int ret = check_spec(rt, spec, err);
    if (ret < 0)
        return ret;
    char id[64];
    make_id(id, sizeof id, spec->id);
    struct sbx_rt_sandbox *sb = sandbox_new(rt, id);
    if (spec->upper == SBX_RT_UPPER_DISK)
        sb->upper = sbx_xasprintf("%s/%s", rt->upper_dir, id);
    sb->net = spec->net;
    sb->as_init = spec->as_init;
    sb->memory_limit = spec->memory_bytes;
    struct sbx_child_args *a = sbx_xcalloc(1, sizeof *a);
    a->upper_loop_fd = -1;
    a->cg_root_fd = -1;
    a->netns_fd = -1;
    a->stdio[0] = a->stdio[1] = a->stdio[2] = -1;
    sbx_rt_pool_begin(rt);
    ret = prepare_host(sb, spec, err);
    if (ret == 0 && sbx_rt_pool_take(sb, spec))
        a->netns_fd = sb->netns_fd; /* the child gets a copy of the fd with the clone */
    if (ret == 0)
        ret = child_args(a, sb, spec, err);
    /* 1: spawned, attached and started the shared way; 0: the plain way follows. */
    int shared = 0;
#ifdef SBX_SHARED_SPAWN
    if (ret == 0 && spec->as_init && spec->start)
        shared = spawn_shared(sb, a, spec, err);
    if (shared < 0)
        ret = shared;
#endif
    if (ret == 0 && shared == 0)
        ret = spawn(sb, a, err);
    close_volume_trees(a);
    sbx_rt_safe_stdio_close(a);               /* the child has its own copies */
    for (size_t i = 0; i < a->n_cg_join; i++) /* the child has its own copies */
        (void)close(a->cg_join_fds[i]);
    if (a->cg_root_fd >= 0)
        (void)close(a->cg_root_fd);
    if (a->upper_loop_fd >= 0) /* the child holds its own copy until it has mounted it */
        (void)close(a->upper_loop_fd);
    if (ret == 0 && shared == 0)
        ret = attach_host_side(sb, spec, err);
    /* spec->start: GO goes out now and the child never blocks on it; READY (or a setup
     * error) is read by sbx_rt_wait. Saves a round trip through the scheduler. */
    if (shared == 1) {
        /* attached and started already */
    } else if (ret == 0 && spec->start) {
        sb->start_unconfirmed = !spec->as_init;
        ret = sbx_rt_start(sb, err);
    } else if (ret == 0)
        ret = await_ready(sb, err);
    if (a->upper != sb->upper)
        free((void *)a->upper);
    free((void *)a->scratch);
    free((void *)a->lower_host);
    free((void *)a->env);
    free(a);
    ret = cg_wait(sb, ret, err); /* before any destroy removes them */
    sbx_rt_pool_end(rt);
    if (ret < 0)
        prefer_child_error(sb, err);
    if (ret < 0) {
        sbx_rt_pool_unclaimed(sb);
        sbx_autoerror sbx_error *ignored = NULL;
        (void)sbx_rt_destroy(sb, &ignored);
        sbx_rt_sandbox_free(sb);
        return sbx_error_wrap(err, "create sandbox `%s`", id);
    }
    *out = sb;
    return 0;
}

int
sbx_rt_start(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->started || sb->sync_fd < 0)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` already started", sb->id);
    if (sbx_sync_send(sb->sync_fd, SBX_SYNC_GO, 0, 0, NULL) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "start sandbox `%s`", sb->id);
    sb->started = true;
    if (sb->as_init) {
        /* The init execs directly: EOF on the socket means exec succeeded. */
        struct sbx_sync_msg m;
        int r;
        while ((r = sbx_sync_recv(sb->sync_fd, &m)) == 1 &&
               (m.type == SBX_SYNC_READY || m.type == SBX_SYNC_EXEC))
            ;
        (void)close(sb->sync_fd);
        sb->sync_fd = -1;
        if (r == 1 && m.type == SBX_SYNC_ERROR)
            return sbx_error_set(err, SBX_EGENERIC, m.err, "start sandbox `%s`: %s", sb->id, m.msg);
    }
    return 0;
}
