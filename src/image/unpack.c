/*
 * unpack.c - unpack one untrusted layer tar into an overlayfs lower directory.
 *
 * SECURITY BOUNDARY. The tar comes from a registry or a file we do not trust. Why nothing can
 * be written outside the layer directory:
 *   - entry names are cleaned first: absolute names and any ".." component are rejected, so a
 *     name can only denote something below the layer root;
 *   - the parent of every entry is reached one component at a time with
 *     openat(O_DIRECTORY | O_NOFOLLOW) from the layer root fd, so a symlink planted by an earlier
 *     entry ("x -> /etc", then "x/passwd") is never followed: the walk fails with ELOOP/ENOTDIR;
 *   - the final component is created with *at() calls relative to that parent fd, with O_EXCL |
 *     O_NOFOLLOW / AT_SYMLINK_NOFOLLOW, after removing what was there (never writing through it);
 *   - hard links are made with linkat() between two names resolved the same way (both inside the
 *     layer); linkat() without AT_SYMLINK_FOLLOW links a symlink itself, not its target;
 *   - device nodes are only created as overlay whiteouts (char 0/0); other devices are skipped;
 *   - xattrs from the tar are limited to user.* and security.capability: trusted.overlay.* in a
 *     layer could redirect overlayfs lookups, so only this code sets trusted.overlay.opaque;
 *   - the layer dir is a fresh private temp dir nobody else writes to until it is renamed.
 * Ownership and modes are kept (we run as root); setuid bits are applied after chown.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define WH_PREFIX  ".wh."
#define WH_META    ".wh..wh."
#define WH_OPAQUE  ".wh..wh..opq"
#define XATTR_OPQ  "trusted.overlay.opaque"
#define READ_BLOCK (128u << 10)

struct unpacker {
    const char *dir; /* layer root path (for rm -rf of replaced dirs) */
    int root;        /* layer root fd */
    struct archive *a;
};

/* Clean an entry name to "a/b/c" ("" for the root). Rejects absolute names and "..". */
static int
clean_path(const char *raw, char **out, sbx_error **err)
{
    *out = NULL;
    if (raw[0] == '/') {
        (void)sbx_error_set(err, SBX_EINVAL, 0, "layer entry `%s` is an absolute path", raw);
        return -SBX_EINVAL;
    }
    size_t n = strlen(raw);
    char *res = sbx_xmalloc(n + 1);
    size_t len = 0;
    const char *p = raw;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t cn = slash ? (size_t)(slash - p) : strlen(p);
        if (cn == 2 && p[0] == '.' && p[1] == '.') {
            free(res);
            (void)sbx_error_set(err, SBX_EINVAL, 0, "layer entry `%s` contains `..`", raw);
            return -SBX_EINVAL;
        }
        if (cn > 0 && !(cn == 1 && p[0] == '.')) {
            if (len > 0)
                res[len++] = '/';
            memcpy(res + len, p, cn);
            len += cn;
        }
        p += cn + (slash ? 1 : 0);
    }
    res[len] = '\0';
    *out = res;
    return 0;
}

/* Open the parent dir of path (relative to root) without following any symlink, creating
 * missing directories (tars may omit them). *leaf points into path. */
static int
open_parent(const struct unpacker *u, char *path, const char **leaf, sbx_error **err)
{
    *leaf = NULL;
    sbx_autoclose int fd = fcntl(u->root, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
        (void)sbx_error_set(err, SBX_EGENERIC, errno, "dup layer fd");
        return -SBX_EGENERIC;
    }
    char *comp = path;
    char *slash;
    while ((slash = strchr(comp, '/')) != NULL) {
        *slash = '\0';
        int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT) {
            if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
                (void)sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", path);
                return -SBX_EGENERIC;
            }
            nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        *slash = '/';
        if (nfd < 0) {
            (void)sbx_error_set(err, SBX_EINVAL, errno,
                                "layer entry `%s`: a parent is a symlink or not a directory", path);
            return -SBX_EINVAL;
        }
        (void)close(fd);
        fd = nfd;
        comp = slash + 1;
    }
    *leaf = comp;
    return sbx_steal_fd(&fd);
}

/* Remove whatever is at parent/leaf unless it is a directory and keep_dir is set. */
static int
clear_leaf(const struct unpacker *u, int parent, const char *leaf, const char *path, bool keep_dir,
           sbx_error **err)
{
    struct stat st;
    if (fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : sbx_error_set(err, SBX_EGENERIC, errno, "stat `%s`", path);
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(parent, leaf, 0) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "replace `%s`", path);
        return 0;
    }
    if (keep_dir)
        return 1;
    /* path is made only of real directories we just walked with O_NOFOLLOW. */
    sbx_autofree char *full = sbx_xasprintf("%s/%s", u->dir, path);
    return sbx_rm_rf(full, err);
}

static bool
xattr_allowed(const char *name)
{
    return sbx_str_starts(name, "user.") || strcmp(name, "security.capability") == 0;
}

static int
apply_xattrs(int fd, struct archive_entry *e, const char *path, sbx_error **err)
{
    const char *name;
    const void *val;
    size_t size;
    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK) {
        if (!xattr_allowed(name)) {
            sbx_debug("layer entry `%s`: dropping xattr %s", path, name);
            continue;
        }
        if (fsetxattr(fd, name, val, size, 0) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "set xattr %s on `%s`", name, path);
    }
    return 0;
}

/* Owner, then mode (chown clears setuid), xattrs and mtime on an open file or directory. */
static int
apply_meta_fd(int fd, struct archive_entry *e, const char *path, sbx_error **err)
{
    if (fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "chown `%s`", path);
    if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "chmod `%s`", path);
    int ret = apply_xattrs(fd, e, path, err);
    if (ret < 0)
        return ret;
    struct timespec ts[2] = {
        {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)},
        {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)},
    };
    (void)futimens(fd, ts);
    return 0;
}

/* Owner, mode and mtime of a node we cannot open (symlink, fifo, whiteout). */
static int
apply_meta_at(int parent, const char *leaf, struct archive_entry *e, const char *path,
              sbx_error **err)
{
    if (fchownat(parent, leaf, archive_entry_uid(e), archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "chown `%s`", path);
    if (archive_entry_filetype(e) != AE_IFLNK &&
        fchmodat(parent, leaf, archive_entry_perm(e) & 07777, 0) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "chmod `%s`", path);
    struct timespec ts[2] = {
        {.tv_sec = archive_entry_mtime(e), .tv_nsec = 0},
        {.tv_sec = archive_entry_mtime(e), .tv_nsec = 0},
    };
    (void)utimensat(parent, leaf, ts, AT_SYMLINK_NOFOLLOW);
    return 0;
}

static int
pwrite_all(int fd, const char *buf, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, buf, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        buf += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

static int
copy_data(struct archive *a, int fd, struct archive_entry *e, const char *path, sbx_error **err)
{
    for (;;) {
        const void *buf;
        size_t size;
        la_int64_t off;
        int r = archive_read_data_block(a, &buf, &size, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return sbx_error_set(err, SBX_EIO, 0, "read `%s` from layer: %s", path,
                                 archive_error_string(a));
        if (pwrite_all(fd, buf, size, (off_t)off) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "write `%s`", path);
    }
    /* Sparse files may end in a hole. */
    if (ftruncate(fd, (off_t)archive_entry_size(e)) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "truncate `%s`", path);
    return 0;
}

static int
make_file(struct unpacker *u, int parent, const char *leaf, struct archive_entry *e,
          const char *path, sbx_error **err)
{
    sbx_autoclose int fd =
        openat(parent, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "create `%s`", path);
    int ret = copy_data(u->a, fd, e, path, err);
    return ret < 0 ? ret : apply_meta_fd(fd, e, path, err);
}

static int
make_dir(int parent, const char *leaf, bool exists, struct archive_entry *e, const char *path,
         sbx_error **err)
{
    if (!exists && mkdirat(parent, leaf, 0700) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", path);
    sbx_autoclose int fd = openat(parent, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", path);
    return apply_meta_fd(fd, e, path, err);
}

/* Hard link to another entry of this layer, resolved like any entry name. */
static int
make_hardlink(struct unpacker *u, int parent, const char *leaf, const char *target,
              const char *path, sbx_error **err)
{
    sbx_autofree char *tpath = NULL;
    int ret = clean_path(target, &tpath, err);
    if (ret < 0)
        return ret;
    if (!*tpath)
        return sbx_error_set(err, SBX_EINVAL, 0, "layer entry `%s`: hard link to the root", path);
    const char *tleaf;
    sbx_autoclose int tparent = open_parent(u, tpath, &tleaf, err);
    if (tparent < 0)
        return tparent;
    if (linkat(tparent, tleaf, parent, leaf, 0) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "hard link `%s` -> `%s`", path, target);
    return 0;
}

/* OCI whiteouts -> overlayfs: ".wh.NAME" hides NAME (char device 0/0), ".wh..wh..opq" makes the
 * directory opaque (hides everything below it from lower layers). */
static int
make_whiteout(struct unpacker *u, int parent, const char *leaf, const char *path, sbx_error **err)
{
    if (strcmp(leaf, WH_OPAQUE) == 0) {
        if (fsetxattr(parent, XATTR_OPQ, "y", 1, 0) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "mark `%s` opaque", path);
        return 0;
    }
    if (sbx_str_starts(leaf, WH_META))
        return 0; /* other AUFS metadata (.wh..wh.plnk ...) means nothing to overlayfs */
    const char *name = leaf + strlen(WH_PREFIX);
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "layer entry `%s`: bad whiteout", path);
    sbx_autofree char *victim = sbx_xstrdup(path);
    memmove(strrchr(victim, '/') ? strrchr(victim, '/') + 1 : victim, name, strlen(name) + 1);
    int ret = clear_leaf(u, parent, name, victim, false, err);
    if (ret < 0)
        return ret;
    if (mknodat(parent, name, S_IFCHR | 0, makedev(0, 0)) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "whiteout `%s`", victim);
    return 0;
}

static int
make_node(int parent, const char *leaf, struct archive_entry *e, const char *path, sbx_error **err)
{
    switch (archive_entry_filetype(e)) {
    case AE_IFLNK:
        if (!archive_entry_symlink(e))
            return sbx_error_set(err, SBX_EINVAL, 0, "layer entry `%s`: symlink without target",
                                 path);
        if (symlinkat(archive_entry_symlink(e), parent, leaf) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "symlink `%s`", path);
        break;
    case AE_IFIFO:
        if (mknodat(parent, leaf, S_IFIFO | 0600, 0) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "mkfifo `%s`", path);
        break;
    case AE_IFCHR:
        if (archive_entry_rdev(e) != 0) {
            sbx_debug("layer entry `%s`: skipping device node", path);
            return 0;
        }
        if (mknodat(parent, leaf, S_IFCHR | 0, makedev(0, 0)) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "whiteout `%s`", path);
        break;
    default:
        sbx_debug("layer entry `%s`: skipping block device or socket", path);
        return 0;
    }
    return apply_meta_at(parent, leaf, e, path, err);
}

static int
unpack_entry(struct unpacker *u, struct archive_entry *e, sbx_error **err)
{
    const char *raw = archive_entry_pathname(e);
    if (!raw)
        return sbx_error_set(err, SBX_EINVAL, 0, "layer entry without a usable name");
    sbx_autofree char *path = NULL;
    int ret = clean_path(raw, &path, err);
    if (ret < 0)
        return ret;
    bool is_dir = archive_entry_filetype(e) == AE_IFDIR;
    if (!*path)
        return is_dir ? apply_meta_fd(u->root, e, ".", err) : 0;
    const char *leaf;
    sbx_autoclose int parent = open_parent(u, path, &leaf, err);
    if (parent < 0)
        return parent;
    if (sbx_str_starts(leaf, WH_PREFIX))
        return make_whiteout(u, parent, leaf, path, err);
    const char *hardlink = archive_entry_hardlink(e);
    int exists = clear_leaf(u, parent, leaf, path, is_dir && !hardlink, err);
    if (exists < 0)
        return exists;
    if (hardlink)
        return make_hardlink(u, parent, leaf, hardlink, path, err);
    if (is_dir)
        return make_dir(parent, leaf, exists == 1, e, path, err);
    if (archive_entry_filetype(e) == AE_IFREG)
        return make_file(u, parent, leaf, e, path, err);
    return make_node(parent, leaf, e, path, err);
}

static struct archive *
open_tar(int fd)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    (void)archive_read_support_format_tar(a);
    (void)archive_read_support_filter_gzip(a);
    (void)archive_read_support_filter_zstd(a);
    if (archive_read_open_fd(a, fd, READ_BLOCK) != ARCHIVE_OK) {
        sbx_debug("open layer: %s", archive_error_string(a));
        (void)archive_read_free(a);
        return NULL;
    }
    return a;
}

static int
unpack_all(struct unpacker *u, sbx_error **err)
{
    for (;;) {
        struct archive_entry *e;
        int r = archive_read_next_header(u->a, &e);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return sbx_error_set(err, SBX_EIO, 0, "read layer: %s", archive_error_string(u->a));
        int ret = unpack_entry(u, e, err);
        if (ret < 0)
            return ret;
    }
}

int
sbx_image_unpack(const char *dir, int tar_fd, sbx_error **err)
{
    sbx_autoclose int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", dir);
    struct unpacker u = {.dir = dir, .root = root, .a = open_tar(tar_fd)};
    if (!u.a)
        return sbx_error_set(err, SBX_EIO, 0, "layer is not a (gzip/zstd) tar archive");
    int ret = unpack_all(&u, err);
    (void)archive_read_free(u.a);
    return ret;
}
