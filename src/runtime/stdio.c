/*
 * stdio.c - the caller's stdin/stdout/stderr, made safe to hand to a sandbox.
 *
 * A file descriptor is more than its data: through it (fchmod, fchown, fsetxattr, utimensat on
 * /proc/self/fd/N) the holder changes the inode's metadata, and sandbox root keeps CAP_FOWNER,
 * CAP_CHOWN and CAP_FSETID. Given the caller's terminal, its /dev/null or a file it redirected
 * to, a sandbox could `chmod 000` the host's /dev/null or make the file setuid root and fill it
 * with a program. So no fd that leads to a host inode reaches the sandbox as the caller opened
 * it:
 *
 *  - pipes and sockets pass as they are: their inodes are anonymous (pipefs, sockfs), and the
 *    sandbox can only read or write the stream (a named FIFO is a host inode: not this case);
 *  - devices (a terminal, /dev/null) and files opened read-only are opened again through a
 *    read-only clone of their mount: the same device or file, but every metadata change goes
 *    through that mount and fails with EROFS (a device node stays writable on a read-only
 *    mount: only its inode is protected, the I/O is the device's);
 *  - anything else open for writing (a regular file, a named FIFO) is refused: the caller
 *    passes a pipe and copies (`sbx run` does, see cmd_run.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "runtime/internal.h"

enum stdio_kind {
    STDIO_PASS,   /* an anonymous pipe or a socket */
    STDIO_REOPEN, /* a device, or a file open read-only: reopened on a read-only mount */
    STDIO_REFUSE, /* a host file (or named FIFO) open for writing */
};

static int
classify(int fd, enum stdio_kind *kind)
{
    struct stat st;
    struct statfs sf;
    if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
        return -errno;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    if (S_ISSOCK(st.st_mode) || (S_ISFIFO(st.st_mode) && sf.f_type == PIPEFS_MAGIC))
        *kind = STDIO_PASS;
    else if (S_ISCHR(st.st_mode) || (fl & O_ACCMODE) == O_RDONLY)
        *kind = STDIO_REOPEN;
    else
        *kind = STDIO_REFUSE;
    return 0;
}

/* The same inode as fd, opened with fd's access mode and flags through a detached read-only
 * clone of its mount. The clone lives as long as the returned file (nothing is attached
 * anywhere), and a regular file keeps its offset. */
static int
reopen_readonly(int fd, int *out)
{
    sbx_autoclose int tree = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tree < 0)
        return -errno;
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                          MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NODEV};
    /* nodev would refuse opening the device itself: set it only on files. */
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        attr.attr_set &= ~(uint64_t)MOUNT_ATTR_NODEV;
    if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
        return -errno;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    /* O_NONBLOCK for the open itself: a FIFO opened read-only would wait for a writer. */
    int flags = (fl & (O_ACCMODE | O_APPEND | O_NONBLOCK)) | O_NOCTTY | O_CLOEXEC | O_NONBLOCK;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", tree);
    int nfd = open(path, flags);
    if (nfd < 0)
        return -errno;
    if (!(fl & O_NONBLOCK) && fcntl(nfd, F_SETFL, fl & (O_APPEND | O_NONBLOCK)) < 0) {
        int e = errno;
        (void)close(nfd);
        return -e;
    }
    if (S_ISREG(st.st_mode)) {
        off_t off = lseek(fd, 0, SEEK_CUR);
        if (off > 0)
            (void)lseek(nfd, off, SEEK_SET);
    }
    *out = nfd;
    return 0;
}

int
sbx_rt_safe_stdio(struct sbx_child_args *a, const struct sbx_rt_spec *spec, sbx_error **err)
{
    static const char *const names[] = {"stdin", "stdout", "stderr"};
    for (int i = 0; i < 3; i++) {
        int fd = spec->stdio[i];
        a->stdio[i] = -1;
        a->stdio_owned[i] = false;
        if (fd < 0)
            continue; /* the sandbox's own /dev/null (child.c) */
        enum stdio_kind kind = STDIO_REFUSE;
        int r = classify(fd, &kind);
        if (r < 0)
            return sbx_error_set(err, SBX_EINVAL, -r, "%s (fd %d)", names[i], fd);
        if (kind == STDIO_REFUSE)
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "%s (fd %d) is a file open for writing: the sandbox could "
                                 "change it (chmod, chown) through it; pass a pipe",
                                 names[i], fd);
        if (kind == STDIO_PASS) {
            a->stdio[i] = fd;
            continue;
        }
        /* The same description twice (a terminal on 0, 1 and 2): one reopen serves both. */
        for (int j = 0; j < i && a->stdio[i] < 0; j++) {
            if (spec->stdio[j] == fd && a->stdio_owned[j])
                a->stdio[i] = a->stdio[j];
        }
        if (a->stdio[i] >= 0)
            continue;
        r = reopen_readonly(fd, &a->stdio[i]);
        if (r < 0)
            return sbx_error_set(err, SBX_EGENERIC, -r,
                                 "%s (fd %d): open it again on a read-only mount", names[i], fd);
        a->stdio_owned[i] = true;
    }
    /* The one other fd that reaches the command (fd 3, e.g. execd's readiness pipe). */
    enum stdio_kind kind = STDIO_REFUSE;
    if (spec->has_fd3 && (classify(spec->fd3, &kind) < 0 || kind != STDIO_PASS))
        return sbx_error_set(err, SBX_EINVAL, 0, "fd 3 (fd %d) must be a pipe or a socket",
                             spec->fd3);
    return 0;
}

bool
sbx_rt_stdio_needs_pipe(int fd)
{
    enum stdio_kind kind = STDIO_PASS;
    return classify(fd, &kind) == 0 && kind == STDIO_REFUSE;
}

void
sbx_rt_safe_stdio_close(struct sbx_child_args *a)
{
    for (int i = 0; i < 3; i++) {
        if (a->stdio_owned[i]) /* a reused one is owned by the first slot only */
            (void)close(a->stdio[i]);
        a->stdio_owned[i] = false;
    }
}
