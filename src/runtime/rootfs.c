/*
 * rootfs.c - the sandbox's filesystem, built by the child inside its own mount namespace:
 * a private tmpfs for the writable layer, an overlay root, read-only binds, /proc with the OCI
 * masked and read-only paths, a minimal /dev, a read-only /sys, then pivot_root.
 *
 * Runs after clone, before exec: no allocation, failures go to sbx_child_fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "runtime/internal.h"

#define FAIL(a, ...) sbx_child_fail((a)->sync_fd, errno, __VA_ARGS__)

/* Paths the OCI runtime spec masks (information leaks about the host, or kernel knobs). */
static const char *const masked_files[] = {
    "proc/kcore",       "proc/keys",          "proc/timer_list",
    "proc/sched_debug", "proc/latency_stats", "proc/timer_stats",
};
static const char *const masked_dirs[] = {"proc/acpi", "proc/scsi", "proc/asound", "sys/firmware"};
static const char *const readonly_paths[] = {"proc/sys", "proc/sysrq-trigger", "proc/irq",
                                             "proc/bus", "proc/fs"};
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int
openat2_in_root(int rootfd, const char *path)
{
    /* RESOLVE_IN_ROOT: ".." and absolute symlinks are resolved as if rootfd were "/", so an
     * image or a volume cannot point a mount target outside the sandbox's root. */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    while (*path == '/')
        path++;
    if (!*path)
        path = ".";
    return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof how);
}

/* Open (creating if missing, as a dir or an empty file) path inside the root. -errno on error. */
static int
resolve_create(int rootfd, const char *path, bool dir)
{
    int fd = openat2_in_root(rootfd, path);
    if (fd >= 0 || errno != ENOENT)
        return fd >= 0 ? fd : -errno;
    char buf[4096];
    size_t len = strlen(path);
    if (len >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    char *slash = strrchr(buf, '/');
    const char *name = slash ? slash + 1 : buf;
    if (slash)
        *slash = '\0';
    int parent = slash ? resolve_create(rootfd, buf[0] ? buf : "/", true)
                       : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
    if (parent < 0)
        return parent;
    int r = dir ? mkdirat(parent, name, 0755) : 0;
    if (!dir) {
        int f = openat(parent, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        r = f < 0 ? -1 : close(f);
    }
    int e = errno;
    (void)close(parent);
    if (r < 0 && e != EEXIST)
        return -e;
    fd = openat2_in_root(rootfd, path);
    return fd >= 0 ? fd : -errno;
}

/* Clone the tree at src (host path, or relative to srcdir), apply attrs, attach at fd. */
static int
attach_tree(int srcdir, const char *src, int target, unsigned attrs)
{
    sbx_autoclose int tree =
        open_tree(srcdir, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0)
        return -1;
    /* Attributes are set on the detached tree, so it is never visible writable. */
    struct mount_attr attr = {.attr_set = attrs};
    if (attrs && mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
        return -1;
    return move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

/* Attach a detached tree the parent cloned (see clone_volume_trees), attrs applied first. */
static int
attach_fd(int tree, int target, unsigned attrs)
{
    struct mount_attr attr = {.attr_set = attrs};
    if (attrs && mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
        return -1;
    return move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

static void
bind_one(struct sbx_child_args *a, int rootfd, const struct sbx_child_bind *b)
{
    struct stat st;
    /* A source given as an fd is bound exactly as the caller resolved it (e.g. beneath an
     * allowed prefix without following symlinks): no path is looked up again here, so
     * nothing can swap it in between. */
    if ((b->src_fd > 0 ? fstat(b->src_fd, &st) : stat(b->src, &st)) < 0)
        FAIL(a, "volume source `%s`", b->src);
    sbx_autoclose int target = resolve_create(rootfd, b->dst, S_ISDIR(st.st_mode));
    if (target < 0) {
        errno = -target;
        FAIL(a, "volume target `%s`", b->dst);
    }
    /* nosuid/nodev on every bind: a host file can never bring privileges or devices in. */
    unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->ro ? MOUNT_ATTR_RDONLY : 0);
    int r = b->src_fd > 0 ? attach_fd(b->src_fd, target, attrs)
                          : attach_tree(AT_FDCWD, b->src, target, attrs);
    if (r < 0)
        FAIL(a, "bind `%s` to `%s`", b->src, b->dst);
}

static void
mount_at(struct sbx_child_args *a, int rootfd, const char *dst, const char *type,
         unsigned long flags, const char *opts)
{
    int fd = resolve_create(rootfd, dst, true);
    if (fd < 0) {
        errno = -fd;
        FAIL(a, "mount point `%s`", dst);
    }
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    int r = mount(type, p, type, flags, opts);
    int e = errno;
    (void)close(fd);
    errno = e;
    if (r < 0)
        FAIL(a, "mount %s on `%s`", type, dst);
}

static void
setup_proc(struct sbx_child_args *a, int rootfd)
{
    /* A fresh proc of the new pid namespace: host processes are not in it. */
    mount_at(a, rootfd, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    for (size_t i = 0; i < sizeof masked_files / sizeof masked_files[0]; i++) {
        sbx_autoclose int t = openat2_in_root(rootfd, masked_files[i]);
        if (t >= 0 && attach_tree(AT_FDCWD, "/dev/null", t, MOUNT_ATTR_RDONLY) < 0)
            FAIL(a, "mask `/%s`", masked_files[i]);
    }
    for (size_t i = 0; i < sizeof readonly_paths / sizeof readonly_paths[0]; i++) {
        sbx_autoclose int t = openat2_in_root(rootfd, readonly_paths[i]);
        if (t >= 0 && attach_tree(rootfd, readonly_paths[i], t,
                                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                      MOUNT_ATTR_NOEXEC) < 0)
            FAIL(a, "read-only `/%s`", readonly_paths[i]);
    }
}

/* Every tmpfs or other mount of a new file system is one more superblock on the host, and the
 * kernel makes each new memory cgroup allocate ~1 KiB of shrinker bookkeeping per 64
 * superblocks that ever existed at once, and each removed one walk every superblock's lists
 * (docs/server.md "Many sandboxes"). So the masked directories share one empty, read-only
 * directory: src, a detached copy of the template's empty directory (template.c), or without
 * a template one new tmpfs; the first mask is that, the others clones of it (a clone is the
 * same superblock). */
static void
mask_dirs(struct sbx_child_args *a, int rootfd, int src)
{
    sbx_autoclose int first = -1;
    for (size_t i = 0; i < sizeof masked_dirs / sizeof masked_dirs[0]; i++) {
        sbx_autoclose int t = openat2_in_root(rootfd, masked_dirs[i]);
        if (t < 0)
            continue;
        if (first < 0) {
            if (src < 0)
                mount_at(a, rootfd, masked_dirs[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                         "size=0");
            else if (attach_fd(src, t, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) <
                     0)
                FAIL(a, "mask `/%s`", masked_dirs[i]);
            /* RESOLVE_IN_ROOT again: the mount's root, never a path the image could redirect. */
            first = openat2_in_root(rootfd, masked_dirs[i]);
            if (first < 0)
                FAIL(a, "open `/%s`", masked_dirs[i]);
            continue;
        }
        sbx_autoclose int tree =
            open_tree(first, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0 ||
            attach_fd(tree, t, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) < 0)
            FAIL(a, "mask `/%s`", masked_dirs[i]);
    }
}

static void
dev_symlinks(struct sbx_child_args *a, int devfd)
{
    static const char *const links[][2] = {
        {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"},
        {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}, {"core", "/proc/kcore"},
    };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        if (symlinkat(links[i][1], devfd, links[i][0]) < 0)
            FAIL(a, "symlink /dev/%s", links[i][0]);
    }
}

static void
setup_dev(struct sbx_child_args *a, int rootfd)
{
    /* Only these host devices exist in the sandbox: no disks, no /dev/mem, no kmsg. */
    /* One tmpfs for /dev and /dev/shm (a directory in it, not a file system of its own: see
     * mask_dirs on what each superblock costs). Sized at half the memory limit (dev_opts): its
     * pages are charged to the sandbox, and a /dev/shm that can take the whole limit turns
     * filling it into an OOM kill of whatever the kernel picks, execd included, with nothing
     * left to free. nodev holds for files made in it; the device nodes below are binds, mounts
     * of their own. */
    mount_at(a, rootfd, "dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, a->dev_opts);
    sbx_autoclose int devfd = openat2_in_root(rootfd, "dev");
    if (devfd < 0)
        FAIL(a, "open /dev");
    if (mkdirat(devfd, "shm", 01777) < 0 || fchmodat(devfd, "shm", 01777, 0) < 0)
        FAIL(a, "mkdir /dev/shm");
    for (size_t i = 0; i < sizeof dev_nodes / sizeof dev_nodes[0]; i++) {
        char src[32];
        snprintf(src, sizeof src, "/dev/%s", dev_nodes[i]);
        sbx_autoclose int t = openat(devfd, dev_nodes[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        /* Read-only binds: the node is the host's own inode, and sandbox root has CAP_FOWNER
         * and CAP_CHOWN, so a writable bind would let `chmod 000 /dev/null` inside break the
         * host. On a read-only mount every change of the inode (chmod, chown, utimes, xattrs)
         * is EROFS, while reading and writing the device still work: a device node's I/O is
         * the driver's, not the file system's. */
        if (t < 0 || attach_tree(AT_FDCWD, src, t,
                                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC) < 0)
            FAIL(a, "bind %s", src);
    }
    /* A private devpts instance: the sandbox sees only its own ptys. */
    mount_at(a, rootfd, "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
             "newinstance,ptmxmode=0666,mode=0620");
    mount_at(a, rootfd, "dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    dev_symlinks(a, devfd);
}

static void
setup_sys(struct sbx_child_args *a, int rootfd)
{
    /* Read-only, and from the sandbox's own netns (its interfaces only). */
    int fd = resolve_create(rootfd, "sys", true);
    if (fd < 0) {
        errno = -fd;
        FAIL(a, "mount point /sys");
    }
    if (a->share_sys) { /* the template's, attached by enter_template */
        (void)close(fd);
        return;
    }
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    unsigned long fl = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    int r = mount("sysfs", p, "sysfs", fl, NULL);
    if (r < 0 && errno == EPERM) /* a user ns that does not own the netns (host network) */
        r = attach_tree(AT_FDCWD, "/sys", fd,
                        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            MOUNT_ATTR_NOEXEC);
    (void)close(fd);
    if (r < 0)
        FAIL(a, "mount sysfs");
}

static void
write_hostname(int rootfd, const char *name)
{
    sbx_autoclose int etc = openat2_in_root(rootfd, "etc");
    if (etc < 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d/hostname", etc);
    /* O_NOFOLLOW: an image's /etc/hostname symlink must not redirect the write. */
    sbx_autoclose int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f >= 0) {
        (void)!write(f, name, strlen(name));
        (void)!write(f, "\n", 1);
    }
}

/* /etc/resolv.conf of the sandbox (egress policies: sbx's resolver on the gateway). A symlink
 * there (e.g. to systemd-resolved's stub file) is replaced, never followed. Failing to write it
 * weakens nothing: without it the sandbox's lookups fail, its reach stays what nftables let. */
static void
write_resolv_conf(int rootfd, const char *text)
{
    sbx_autoclose int etc = openat2_in_root(rootfd, "etc");
    if (etc < 0)
        return;
    (void)unlinkat(etc, "resolv.conf", 0);
    sbx_autoclose int f =
        openat(etc, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f >= 0)
        (void)!write(f, text, strlen(text));
}

/* mkdir <base>/<name> (0755) for each name; existing ones are fine when `reuse`. */
static void
mkdirs_in(struct sbx_child_args *a, const char *base, const char *const *names, size_t n,
          bool reuse)
{
    char p[4096];
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s", base, names[i]);
        if (mkdir(p, 0755) < 0 && !(reuse && errno == EEXIST))
            FAIL(a, "mkdir `%s`", p);
    }
}

static int
mount_root(struct sbx_child_args *a)
{
    char p[4096];
    static const char *const sub[] = {"upper", "work", "root"};
    /* Nothing we mount from here on propagates back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        FAIL(a, "make / private");
    if (a->upper) {
        /* On disk (the parent made <upper> and recorded it, or kept it from a stop: then
         * upper/ and work/ hold the files of before): its pages are page cache that the
         * kernel can write back and reclaim, so filling it is ENOSPC at worst, never an OOM
         * kill of the sandbox. The overlay is mounted on the scratch dir, in this mount
         * namespace only. */
        /* Capped: the layer's own ext4 (a loop device the parent set up), mounted in this
         * namespace only; it detaches itself when the sandbox is gone. noinit_itable: no
         * background zeroing of inode tables, which would fill the sparse image. */
        if (a->upper_loop_fd >= 0 &&
            mount(a->upper_dev, a->upper, "ext4", MS_NOSUID | MS_NODEV, "noinit_itable") < 0)
            FAIL(a, "mount the layer's file system `%s`", a->upper_dev);
        mkdirs_in(a, a->upper, sub, 2, a->upper_reused);
        snprintf(p, sizeof p, "%s", a->scratch);
    } else {
        /* On a tmpfs of this mount namespace only: it vanishes with the sandbox, so no host
         * mount can leak, and its pages are charged to the sandbox's memory cgroup. */
        if (mount("sbx", a->scratch, "tmpfs", MS_NOSUID | MS_NODEV, a->tmpfs_opts) < 0)
            FAIL(a, "mount tmpfs on `%s`", a->scratch);
        mkdirs_in(a, a->scratch, sub, 3, false);
        snprintf(p, sizeof p, "%s/root", a->scratch);
    }
    int r = mount("overlay", p, "overlay", 0, a->overlay_opts);
    if (r < 0 && errno == EINVAL && a->volatile_at > 0) { /* a kernel before 5.10 */
        a->overlay_opts[a->volatile_at] = '\0';
        r = mount("overlay", p, "overlay", 0, a->overlay_opts);
    }
    if (r < 0)
        FAIL(a, "mount overlay");
    int rootfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        FAIL(a, "open `%s`", p);
    return rootfd;
}

static void
pivot(struct sbx_child_args *a, int rootfd)
{
    /* pivot_root(".", "."): the old root is stacked under the new one and detached at once;
     * after that nothing in this mount namespace leads back to the host's filesystem (unlike
     * chroot, which a process with CAP_SYS_CHROOT can leave). */
    if (fchdir(rootfd) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
        FAIL(a, "pivot_root");
    if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        FAIL(a, "detach the old root");
}

/* Instead of pivot(): a copy of the root built here goes on top of the template namespace's
 * "/" (a read-only tmpfs, nothing of the host: template.c says why a climb out of the chroot
 * is harmless there), and we chroot into it. No pivot_root: it walks every task on the
 * host. The namespace we leave (the host's copy, with the root as built) is referenced by
 * nothing once rootfd and the volume fds are closed, before anything of the sandbox runs.
 * Then the template's mounts that sandboxes share: its empty directory on every masked
 * directory, and for network none its sysfs on /sys (template.c: the sysfs of a namespace
 * with only `lo`, as the sandbox's own, and no new superblock per sandbox). */
static void
enter_template(struct sbx_child_args *a, int rootfd)
{
    int tree =
        open_tree(rootfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    if (tree < 0)
        FAIL(a, "copy the root");
    if (setns(a->mnt_template_fd, CLONE_NEWNS) < 0)
        FAIL(a, "enter the template mount namespace");
    /* Copies of the template's mounts, taken while it is this process's namespace (a mount
     * is cloned only from the caller's own); nothing here changes the template itself. */
    sbx_autoclose int empty = open_tree(AT_FDCWD, "/empty", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    sbx_autoclose int sys =
        a->share_sys ? open_tree(AT_FDCWD, "/sys", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) : -1;
    if (empty < 0 || (a->share_sys && sys < 0))
        FAIL(a, "copy the template's mounts");
    if (unshare(CLONE_NEWNS) < 0)
        FAIL(a, "enter the template mount namespace");
    (void)close(a->mnt_template_fd);
    if (move_mount(tree, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        FAIL(a, "mount the root");
    if (fchdir(tree) < 0 || chroot(".") < 0 || chdir("/") < 0)
        FAIL(a, "enter the root");
    (void)close(tree);
    sbx_autoclose int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        FAIL(a, "open the root");
    if (sys >= 0) {
        sbx_autoclose int t = openat2_in_root(root, "sys"); /* made by setup_sys */
        if (t < 0 || attach_fd(sys, t,
                               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   MOUNT_ATTR_NOEXEC) < 0)
            FAIL(a, "mount sysfs");
    }
    mask_dirs(a, root, empty);
}

int
sbx_rootfs_setup(struct sbx_child_args *a)
{
    sbx_autoclose int rootfd = mount_root(a);
    for (size_t i = 0; i < a->n_binds; i++)
        bind_one(a, rootfd, &a->binds[i]);
    setup_proc(a, rootfd);
    setup_dev(a, rootfd);
    setup_sys(a, rootfd);
    if (a->spec->n_layers > 0) /* the host image's is a link to the kernel's (hostimg.c) */
        write_hostname(rootfd, a->hostname);
    if (a->spec->resolv_conf)
        write_resolv_conf(rootfd, a->spec->resolv_conf);
    if (a->mnt_template_fd >= 0) {
        enter_template(a, rootfd);
    } else {
        mask_dirs(a, rootfd, -1);
        pivot(a, rootfd);
    }
    return 0;
}
