#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

int
sbx_parse_u64(const char *s, uint64_t *out, sbx_error **err)
{
    if (!s || !*s || *s < '0' || *s > '9')
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not a number", s ? s : "");
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not a valid number", s);
    *out = v;
    return 0;
}

int
sbx_parse_i64(const char *s, int64_t *out, sbx_error **err)
{
    if (!s || !*s)
        return sbx_error_set(err, SBX_EINVAL, 0, "empty number");
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0' || end == s)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not a valid number", s);
    *out = v;
    return 0;
}

static int
size_suffix(const char *suf, uint64_t *mult)
{
    static const struct {
        const char *s;
        uint64_t m;
    } tab[] = {
        {"", 1},
        {"b", 1},
        {"k", 1ULL << 10},
        {"kb", 1ULL << 10},
        {"ki", 1ULL << 10},
        {"m", 1ULL << 20},
        {"mb", 1ULL << 20},
        {"mi", 1ULL << 20},
        {"g", 1ULL << 30},
        {"gb", 1ULL << 30},
        {"gi", 1ULL << 30},
        {"t", 1ULL << 40},
        {"tb", 1ULL << 40},
        {"ti", 1ULL << 40},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(tab); i++) {
        if (strcasecmp(suf, tab[i].s) == 0) {
            *mult = tab[i].m;
            return 0;
        }
    }
    return -1;
}

int
sbx_parse_size(const char *s, uint64_t *out, sbx_error **err)
{
    if (!s || !((*s >= '0' && *s <= '9') || *s == '.'))
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not a size", s ? s : "");
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    uint64_t mult = 0;
    if (errno == ERANGE || end == s || size_suffix(end, &mult) < 0 || !isfinite(v) || v < 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`%s` is not a size (use e.g. 512, 256k, 256m, 1g, 512Mi)", s);
    double bytes = v * (double)mult;
    if (bytes >= 18446744073709551615.0)
        return sbx_error_set(err, SBX_EINVAL, 0, "size `%s` is too large", s);
    *out = (uint64_t)bytes;
    return 0;
}

int
sbx_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

ssize_t
sbx_read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int
sbx_read_file(const char *path, size_t max, char **out, size_t *len, sbx_error **err)
{
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, errno == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC, errno,
                             "open `%s`", path);
    size_t cap = 4096;
    size_t n = 0;
    sbx_autofree char *data = sbx_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            data = sbx_xrealloc(data, cap);
        }
        ssize_t r = read(fd, data + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "read `%s`", path);
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max)
            return sbx_error_set(err, SBX_ELIMIT, 0, "`%s` is larger than %zu bytes", path, max);
    }
    data[n] = '\0';
    if (len)
        *len = n;
    *out = sbx_steal_ptr(&data);
    return 0;
}

static void
fsync_parent(const char *path)
{
    sbx_autofree char *dir = sbx_xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    sbx_autoclose int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        (void)fsync(fd);
}

int
sbx_write_file_atomic(const char *path, const void *data, size_t n, mode_t mode, sbx_error **err)
{
    /* A unique temp name (mkostemp), so concurrent writers in one process never share it. */
    sbx_autofree char *tmp = sbx_xasprintf("%s.tmp.XXXXXX", path);
    sbx_autoclose int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "create `%s`", tmp);
    if (fchmod(fd, mode) < 0 || sbx_write_all(fd, data, n) < 0 || fsync(fd) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return sbx_error_set(err, SBX_EGENERIC, e, "write `%s`", tmp);
    }
    if (rename(tmp, path) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return sbx_error_set(err, SBX_EGENERIC, e, "rename `%s` to `%s`", tmp, path);
    }
    fsync_parent(path);
    return 0;
}

int
sbx_mkdir_p(const char *path, mode_t mode, sbx_error **err)
{
    sbx_autofree char *p = sbx_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", p);
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", p);
    return 0;
}

static int rm_at(int dirfd, const char *name, dev_t dev, sbx_error **err);

static int
rm_children(int fd, dev_t dev, const char *name, sbx_error **err)
{
    sbx_autoclosedir DIR *d = fdopendir(fd);
    if (!d) {
        (void)close(fd);
        return sbx_error_set(err, SBX_EGENERIC, errno, "opendir `%s`", name);
    }
    struct dirent *de;
    /* readdir() is safe here: glibc only shares state per DIR stream, and this one is ours. */
    while ((de = readdir(d)) != NULL) { // NOLINT(concurrency-mt-unsafe)
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        int ret = rm_at(dirfd(d), de->d_name, dev, err);
        if (ret < 0)
            return ret;
    }
    return 0;
}

static int
rm_at(int dirfd, const char *name, dev_t dev, sbx_error **err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : sbx_error_set(err, SBX_EGENERIC, errno, "stat `%s`", name);
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
            return sbx_error_set(err, SBX_EGENERIC, errno, "unlink `%s`", name);
        return 0;
    }
    /* A directory on another device is a mount point: refuse rather than empty a host dir. */
    if (st.st_dev != dev)
        return sbx_error_set(err, SBX_EGENERIC, EBUSY, "`%s` is a mount point", name);
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", name);
    int ret = rm_children(fd, dev, name, err);
    if (ret < 0)
        return ret;
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return sbx_error_set(err, SBX_EGENERIC, errno, "rmdir `%s`", name);
    return 0;
}

int
sbx_rm_rf(const char *path, sbx_error **err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : sbx_error_set(err, SBX_EGENERIC, errno, "stat `%s`", path);
    int ret = rm_at(AT_FDCWD, path, st.st_dev, err);
    if (ret < 0)
        return sbx_error_wrap(err, "remove `%s`", path);
    return 0;
}

uint64_t
sbx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t
sbx_now_ms(void)
{
    return sbx_now_ns() / 1000000ULL;
}

int64_t
sbx_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
sbx_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    (void)pthread_condattr_init(&a);
    (void)pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    (void)pthread_cond_init(cv, &a);
    (void)pthread_condattr_destroy(&a);
}

struct timespec
sbx_monotonic_in(uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000) * 1000000ULL;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000ULL);
    ts.tv_nsec = (long)(ns % 1000000000ULL);
    return ts;
}

bool
sbx_str_starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool
sbx_on_tmpfs(const char *path)
{
    struct statfs st;
    return statfs(path, &st) == 0 && (unsigned long)st.f_type == TMPFS_MAGIC;
}

int
sbx_boot_id(char out[SBX_BOOT_ID_SIZE])
{
    out[0] = '\0';
    sbx_autoclose int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : sbx_read_full(fd, out, SBX_BOOT_ID_SIZE - 1);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return out[0] ? 0 : -1;
}

bool
sbx_file_is(const char *path, const char *text)
{
    sbx_autofree char *data = NULL;
    sbx_autoerror sbx_error *ignored = NULL;
    size_t len = 0;
    if (sbx_read_file(path, strlen(text) + 1, &data, &len, &ignored) < 0 || !data)
        return false;
    return len == strlen(text) && memcmp(data, text, len) == 0;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not valid. */
size_t
sbx_utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static rlim_t nofile_orig_soft; /* 0: not raised */
static unsigned park_base;      /* sbx_fd_park: 0 when off */

unsigned long
sbx_nofile_raise(void)
{
    struct rlimit cur;
    if (getrlimit(RLIMIT_NOFILE, &cur) < 0)
        return 0;
    rlim_t orig = cur.rlim_cur;
    rlim_t want = 1048576; /* the kernel's default fs.nr_open */
    char *s = NULL;
    sbx_error *ignored = NULL;
    if (sbx_read_file("/proc/sys/fs/nr_open", 64, &s, NULL, &ignored) == 0 && s) {
        unsigned long long v = strtoull(s, NULL, 10);
        if (v > 0)
            want = (rlim_t)v;
    }
    free(s);
    sbx_error_clear(&ignored);
    struct rlimit up = {want, want};
    if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max < want && setrlimit(RLIMIT_NOFILE, &up) == 0)
        cur = up;
    else if (cur.rlim_cur < cur.rlim_max) {
        cur.rlim_cur = cur.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &cur) < 0)
            (void)getrlimit(RLIMIT_NOFILE, &cur);
    }
    if (cur.rlim_cur != orig)
        nofile_orig_soft = orig;
    /* Most of the table for the parked descriptors, at least 1024 below for the others. */
    rlim_t quarter = cur.rlim_cur == RLIM_INFINITY ? 65536 : cur.rlim_cur / 4;
    park_base = quarter >= 1024 ? (unsigned)(quarter < 65536 ? quarter : 65536) : 0;
    return (unsigned long)cur.rlim_cur;
}

int
sbx_fd_park(int fd)
{
    if (fd < 0 || !park_base || fd >= (int)park_base)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, (int)park_base);
    if (moved < 0)
        return fd; /* the parked range is full: it stays where it is, and still works */
    (void)close(fd);
    return moved;
}

unsigned
sbx_fd_park_base(void)
{
    return park_base;
}

void
sbx_nofile_restore(void)
{
    struct rlimit cur;
    if (nofile_orig_soft && getrlimit(RLIMIT_NOFILE, &cur) == 0 &&
        cur.rlim_cur > nofile_orig_soft) {
        cur.rlim_cur = nofile_orig_soft;
        (void)setrlimit(RLIMIT_NOFILE, &cur);
    }
}
