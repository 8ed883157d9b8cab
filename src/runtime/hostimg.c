/*
 * hostimg.c - the built-in `host` image: a small skeleton directory (built once per state dir)
 * used as the overlay's lower layer, onto which the child binds the host's OS directories
 * read-only. Only a minimal /etc is copied: no shadow, no ssh keys, no machine secrets.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

/* Top-level OS dirs; on Debian 12 all but /usr are symlinks into /usr. */
static const char *const os_dirs[] = {"/usr",   "/bin",   "/sbin",  "/lib",
                                      "/lib32", "/lib64", "/libx32"};
/* Read-only binds of /etc subtrees that the OS dirs point into: the alternatives symlinks, the
 * CA certificates, and the system configuration of the desktop's programs (fontconfig's
 * fonts.conf, X resources and app-defaults, XDG config such as openbox's rc.xml, Debian's
 * chromium wrapper flags). Public by nature (package defaults, no credentials); nothing else
 * of /etc/ssl (private/ holds the host's TLS keys) and no other /etc subtree is bound. */
static const char *const etc_binds[] = {
    "/etc/alternatives", "/etc/ssl/certs", "/etc/fonts", "/etc/X11", "/etc/xdg", "/etc/chromium.d",
    /* fontconfig's cache of /usr/share/fonts (fc-cache's output, derived from public files):
     * without it every GUI program in a fresh sandbox rebuilds it first (~5 s for xterm) */
    "/var/cache/fontconfig"};
/* Copied once into the skeleton (the upper layer makes them writable per sandbox). */
static const char *const etc_files[] = {
    "etc/passwd",      "etc/group",      "etc/hosts",          "etc/nsswitch.conf",
    "etc/ld.so.cache", "etc/ld.so.conf", "etc/host.conf",      "etc/resolv.conf",
    "etc/localtime",   "etc/os-release", "etc/gai.conf",       "etc/protocols",
    "etc/services",    "etc/networks",   "etc/debian_version", "etc/ssl/openssl.cnf",
};
static const char *const empty_dirs[] = {
    "proc",
    "dev",
    "sys",
    "run",
    "var",
    "var/tmp",
    "tmp",
    "root",
    "home",
    "mnt",
    "opt",
    "srv",
    "etc",
    ".sbx",
    ".sbx/bin",
    "etc/alternatives",
    "etc/ssl",
    "etc/ssl/certs",
    "etc/fonts",
    "etc/X11",
    "etc/xdg",
    "etc/chromium.d",
    "var/cache",
    "var/cache/fontconfig",
    "etc/ld.so.conf.d",
};

static int
copy_file(const char *src, const char *dst, sbx_error **err)
{
    sbx_autofree char *data = NULL;
    size_t len = 0;
    sbx_autoerror sbx_error *missing = NULL;
    if (sbx_read_file(src, 64 << 20, &data, &len, &missing) < 0)
        return 0; /* optional: not every host has every file */
    sbx_autoclose int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || sbx_write_all(fd, data, len) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "write `%s`", dst);
    return 0;
}

static int
make_os_dir(const char *tmp, const char *name, sbx_error **err)
{
    const char *host = name;
    char link[256];
    sbx_autofree char *dst = sbx_xasprintf("%s%s", tmp, name);
    ssize_t n = readlink(host, link, sizeof link - 1);
    if (n > 0) {
        link[n] = '\0';
        if (symlink(link, dst) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "symlink `%s`", dst);
        return 0;
    }
    struct stat st;
    if (stat(host, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    if (mkdir(dst, 0755) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", dst);
    return 0;
}

static int
build(const char *tmp, sbx_error **err)
{
    int ret = sbx_mkdir_p(tmp, 0755, err);
    for (size_t i = 0; ret == 0 && i < SBX_ARRAY_SIZE(empty_dirs); i++) {
        sbx_autofree char *d = sbx_xasprintf("%s/%s", tmp, empty_dirs[i]);
        if (mkdir(d, 0755) < 0)
            ret = sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", d);
    }
    for (size_t i = 0; ret == 0 && i < SBX_ARRAY_SIZE(os_dirs); i++)
        ret = make_os_dir(tmp, os_dirs[i], err);
    for (size_t i = 0; ret == 0 && i < SBX_ARRAY_SIZE(etc_files); i++) {
        sbx_autofree char *src = sbx_xasprintf("/%s", etc_files[i]);
        sbx_autofree char *dst = sbx_xasprintf("%s/%s", tmp, etc_files[i]);
        ret = copy_file(src, dst, err);
    }
    if (ret < 0)
        return ret;
    sbx_autofree char *tmpdir = sbx_xasprintf("%s/tmp", tmp);
    sbx_autofree char *vartmp = sbx_xasprintf("%s/var/tmp", tmp);
    sbx_autofree char *mtab = sbx_xasprintf("%s/etc/mtab", tmp);
    sbx_autofree char *hostname = sbx_xasprintf("%s/etc/hostname", tmp);
    sbx_autofree char *state = sbx_xasprintf("%s" SBX_RT_EXECD_STATE, tmp);
    sbx_autofree char *execd = sbx_xasprintf("%s" SBX_RT_EXECD_PATH, tmp);
    sbx_autoclose int mp = open(execd, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (chmod(tmpdir, 01777) < 0 || chmod(vartmp, 01777) < 0 ||
        symlink("/proc/self/mounts", mtab) < 0 || mkdir(state, 0700) < 0 || mp < 0 ||
        /* The sandbox's own (UTS namespace) hostname, read by the kernel: nothing to write
         * into each sandbox's layer (a file there costs an inode and a copy-up of /etc). */
        symlink("/proc/sys/kernel/hostname", hostname) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "finish `%s`", tmp);
    return 0;
}

/* Hand the skeleton to the user namespace's root: a lower-layer dir owned by an id that is
 * not mapped cannot be copied up (EOVERFLOW), so /tmp and /etc would not be writable. */
static int
chown_tree(const char *path, uid_t uid, gid_t gid)
{
    if (lchown(path, uid, gid) < 0)
        return -1;
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    sbx_autoclosedir DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        sbx_autofree char *sub = sbx_xasprintf("%s/%s", path, e->d_name);
        if (chown_tree(sub, uid, gid) < 0)
            return -1;
    }
    return 0;
}

static int
build_aside(const char *dir, uid_t uid, gid_t gid, sbx_error **err)
{
    /* Build aside and rename: concurrent first runs (other processes) each build their own
     * copy and one wins; a crash mid-build leaves only a temp dir that the next build ignores.
     * Threads of one process are serialised by the caller, so the pid names the copy. */
    sbx_autofree char *tmp = sbx_xasprintf("%s.tmp.%d", dir, (int)getpid());
    sbx_autoerror sbx_error *ignored = NULL;
    (void)sbx_rm_rf(tmp, &ignored);
    int ret = build(tmp, err);
    if (ret == 0 && (uid || gid) && chown_tree(tmp, uid, gid) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "chown `%s`", tmp);
    if (ret == 0 && rename(tmp, dir) < 0 && errno != EEXIST && errno != ENOTEMPTY)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "rename `%s`", tmp);
    (void)sbx_rm_rf(tmp, &ignored);
    if (ret < 0)
        return sbx_error_wrap(err, "build the host image");
    return 0;
}

int
sbx_hostimg_ensure(const char *dir, uid_t uid, gid_t gid, sbx_error **err)
{
    static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;
    if (access(dir, F_OK) == 0)
        return 0;
    pthread_mutex_lock(&build_lock);
    int ret = access(dir, F_OK) == 0 ? 0 : build_aside(dir, uid, gid, err);
    pthread_mutex_unlock(&build_lock);
    return ret;
}

size_t
sbx_hostimg_binds(struct sbx_child_bind *binds, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(os_dirs) + SBX_ARRAY_SIZE(etc_binds) && n < max; i++) {
        const char *p =
            i < SBX_ARRAY_SIZE(os_dirs) ? os_dirs[i] : etc_binds[i - SBX_ARRAY_SIZE(os_dirs)];
        struct stat st;
        /* lstat: symlinked OS dirs are recreated as symlinks in the skeleton, not bound. */
        if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        binds[n++] = (struct sbx_child_bind){.src = p, .dst = p, .ro = true};
    }
    return n;
}
