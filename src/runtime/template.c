/*
 * template.c - the template mount namespace: one read-only tmpfs, empty but for two
 * directories and a file with a read-only sysfs and its network namespace on them
 * (make_template), made once per runtime (sbx_rt_config.pivot_once: the server's), which
 * every sandbox's root is moved into instead of each child calling pivot_root.
 *
 * Why: pivot_root walks every task on the host (chroot_fs_refs, to move roots and cwds off the
 * old root), so with 10,000 idle sandboxes (20,000 tasks) each create paid ~5 ms for it
 * (docs/server.md "Many sandboxes"). Here only the template's own maker pivots, once.
 *
 * How a child enters (rootfs.c, enter_template): it builds its root in the mount namespace it
 * was cloned with (a copy of the host's, as before), takes a detached copy of that whole tree
 * (open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)), joins the template namespace, unshares a
 * private copy of it, attaches the tree on top of its "/" and chroots into the tree.
 *
 * Why that is as safe as pivot_root: the plain chroot of a runtime's "no pivot" mode is unsafe
 * because the host's root is still mounted under the sandbox's, so a root with CAP_SYS_CHROOT
 * that climbs out of its chroot (chroot deeper, fchdir back out, chdir ..) reaches the host's
 * files. Here the host's root is not in the sandbox's namespace: below the sandbox's tree
 * there is the template's tmpfs, empty and read-only at the superblock (no remount without
 * CAP_SYS_ADMIN over the initial user namespace), and below that only what is below any
 * pivot_root's new root too (on a host whose own "/" is stacked on the initramfs rootfs, that
 * rootfs). No path climbs there: ".." at the root of a mount whose mountpoint is the root of
 * the mount below it goes on up, and stops at the namespace's root, so the climb ends in the
 * sandbox's own root, as after a pivot_root. The host tree stays in the namespace the child
 * was cloned with, which nothing references once the child has left it (the fds it used to
 * build the root are closed before anything of the sandbox runs). setns into a sandbox's
 * namespace (exec_into) still lands in its root: mntns_install looks "/" up with
 * LOOKUP_DOWN, which takes the mount stacked on the namespace's root. server/isolation tries
 * the climb and checks what the root is stacked on (statmount). That holds only when the
 * maker's root is its namespace's root; a chrooted server gets no template (make_template).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

/* In the forked maker (no allocation: it may be forked from a multi-threaded server): a
 * namespace whose root is a read-only tmpfs, mounted over dir (any directory; the mount is of
 * this namespace only), holding an empty directory (/empty, what masked directories show)
 * and, when a network namespace could be made, the read-only sysfs of that namespace (/sys)
 * and a bind of the namespace itself (/net); then wait for the parent to open it. Writes 2
 * to ready with a sysfs, 1 without. */
__attribute__((noreturn)) static void
make_template(const char *dir, int ready, int go)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        _exit(1);
    int self = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (self < 0 ||
        mount("sbx-template", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,nr_inodes=4,mode=0555") < 0 ||
        chdir(dir) < 0 || mkdir("empty", 0555) < 0 || mkdir("sys", 0555) < 0)
        _exit(2);
    /* A network namespace with `lo` up and nothing else, which is what a sandbox of network
     * none has: the sysfs mounted here shows the same /sys/class/net (only `lo`'s counters
     * are this namespace's, and nothing ever uses it). A sysfs mount is a new superblock per
     * network namespace, found by a walk of every sysfs superblock on the host. A sysfs holds
     * its namespace only passively (torn down with the last process in it, `lo` gone from
     * /sys/class/net): the bind of the namespace on /net holds it, in this namespace and in
     * every sandbox's copy of it, so it lives as long as a sandbox that shows its sysfs, past
     * the server that made it. */
    char c = 1;
    int f = -1;
    if (unshare(CLONE_NEWNET) == 0 && sbx_netns_lo_up() == 0 &&
        (f = open("net", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) >= 0 && close(f) == 0 &&
        mount("/proc/self/ns/net", "net", NULL, MS_BIND, NULL) == 0 &&
        mount("sysfs", "sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
        c = 2;
    struct stat mine;
    struct stat root;
    if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0 ||
        stat("/", &mine) < 0)
        _exit(3);
    /* Only a namespace whose root is this tmpfs is a template. A caller chrooted below its
     * namespace's root (a server in a chroot) leaves the mounts above its root in the
     * namespace, under where a sandbox's root would be stacked: then every sandbox pivots as
     * before. A setns into our own namespace moves our root to where a sandbox's child's
     * will be (the namespace's root, LOOKUP_DOWN); it must be this tmpfs still. */
    if (setns(self, CLONE_NEWNS) < 0 || stat("/", &root) < 0 || root.st_dev != mine.st_dev ||
        root.st_ino != mine.st_ino)
        _exit(6);
    (void)close(self);
    /* Read-only at the superblock: a sandbox's process that climbs out of its chroot can
     * write nothing here, and cannot make it writable again. */
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        _exit(4);
    if (write(ready, &c, 1) != 1)
        _exit(5);
    (void)!read(go, &c, 1);
    _exit(0);
}

void
sbx_rt_template_open(struct sbx_rt *rt)
{
    int ready[2] = {-1, -1};
    int go[2] = {-1, -1};
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
        sbx_closep(&ready[0]);
        sbx_closep(&ready[1]);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* the other ends are the parent's: go's must be closed here too for its EOF */
        (void)close(ready[0]);
        (void)close(go[1]);
        make_template(rt->run_dir, ready[1], go[0]);
    }
    (void)close(ready[1]);
    (void)close(go[0]);
    char c = 0;
    if (pid > 0 && read(ready[0], &c, 1) == 1) {
        sbx_autofree char *ns = sbx_xasprintf("/proc/%d/ns/mnt", (int)pid);
        rt->mnt_template = open(ns, O_RDONLY | O_CLOEXEC);
        rt->sys_template = c == 2 && rt->mnt_template >= 0;
    }
    (void)close(go[1]); /* the maker exits on EOF */
    (void)close(ready[0]);
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    int status = pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rt->mnt_template < 0 && status == 6)
        sbx_warn("runtime: no template mount namespace (the server's root is not its mount "
                 "namespace's: a chroot?): every sandbox pivots its root");
    else if (rt->mnt_template < 0)
        sbx_warn("runtime: no template mount namespace (maker status %d): every sandbox "
                 "pivots its root",
                 status);
}
