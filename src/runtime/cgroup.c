/*
 * cgroup.c - backend choice and helpers shared by the v1 and v2 cgroup backends.
 */
#include "runtime/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"

int
sbx_cg_detect(const struct sbx_cg_ops **out, const char *root, sbx_error **err)
{
    struct statfs st;
    if (statfs(root, &st) < 0)
        return sbx_error_set(err, SBX_EUNAVAIL, errno, "statfs `%s`", root);
    if ((unsigned long)st.f_type == CGROUP2_SUPER_MAGIC) {
        *out = &sbx_cg_v2_ops;
        return 0;
    }
    /* A hybrid host also has <root>/unified (cgroup2) but without controllers: use v1. */
    sbx_autofree char *mem = sbx_xasprintf("%s/memory", root);
    if (access(mem, F_OK) == 0) {
        *out = &sbx_cg_v1_ops;
        return 0;
    }
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "no usable cgroup hierarchy at `%s`", root);
}

static bool
list_has(const char *list, size_t n, const char *word)
{
    size_t wl = strlen(word);
    const char *p = list;
    const char *end = list + n;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (len == wl && memcmp(p, word, wl) == 0)
            return true;
        p += len + 1;
    }
    return false;
}

char *
sbx_cg_self_path(const char *self, const char *controller)
{
    /* Lines are "id:controllers:path"; v2 is "0::path". */
    for (const char *line = self; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            size_t clen = (size_t)(c2 - c1 - 1);
            bool match = controller ? list_has(c1 + 1, clen, controller)
                                    : (clen == 0 && strncmp(line, "0:", 2) == 0);
            if (match)
                return sbx_xstrndup(c2 + 1, len - (size_t)(c2 + 1 - line));
        }
        line = nl ? nl + 1 : NULL;
    }
    return sbx_xstrdup("/");
}

size_t
sbx_cg_unique_dirs(const struct sbx_cg *cg, const char **out, size_t max)
{
    size_t n = 0;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        const char *d = cg->dir[r];
        bool seen = false;
        for (size_t i = 0; d && i < n; i++)
            seen = seen || strcmp(out[i], d) == 0;
        if (d && !seen && n < max)
            out[n++] = d;
    }
    return n;
}

const char *
sbx_cg_any_dir(const struct sbx_cg *cg)
{
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (cg->dir[r])
            return cg->dir[r];
    }
    return NULL;
}

void
sbx_cg_release(struct sbx_cg *cg)
{
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        free(cg->dir[r]);
        cg->dir[r] = NULL;
    }
}

int
sbx_cg_write(const struct sbx_cg *cg, const char *dir, const char *file, const char *val,
             sbx_error **err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    /* cgroupfs files always exist; only the unit tests' fake tree needs O_CREAT. */
    int flags = O_WRONLY | O_CLOEXEC | (cg && cg->fake ? O_CREAT | O_TRUNC : 0);
    sbx_autoclose int fd = open(path, flags, 0644);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", path);
    if (sbx_write_all(fd, val, strlen(val)) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "write `%s` to `%s`", val, path);
    return 0;
}

int
sbx_cg_join_self(const int *fds, size_t n)
{
    int ret = 0;
    for (size_t i = 0; i < n; i++) {
        if (ret == 0 && write(fds[i], "0", 1) != 1)
            ret = -errno;
        (void)close(fds[i]);
    }
    return ret;
}

int
sbx_cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out, sbx_error **err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    sbx_autofree char *text = NULL;
    int ret = sbx_read_file(path, 1 << 16, &text, NULL, err);
    if (ret < 0)
        return ret;
    size_t kl = strlen(key);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
            return sbx_parse_u64(line + kl + 1, out, err);
        line = nl ? nl + 1 : NULL;
    }
    *out = 0;
    return 0;
}

int
sbx_cg_mkdir(const char *dir, sbx_error **err)
{
    if (mkdir(dir, 0755) == 0 || errno == EEXIST)
        return 0;
    /* The kernel's ENOSPC here means it has no cgroup to give: a memory cgroup's id (at most
     * 65,535 on the host) is held until its last charged page is reclaimed, so deleted
     * sandboxes' "dying" cgroups count too; or a parent's cgroup.max.descendants or
     * cgroup.max.depth (v2). "No space left on device" alone sends people to df. */
    if (errno == ENOSPC)
        return sbx_error_set(err, SBX_ELIMIT, ENOSPC,
                             "mkdir `%s`: the host has no cgroup left to give (memory cgroup ids: "
                             "at most 65535, dying ones of deleted sandboxes included, see the "
                             "memory line of /proc/cgroups; or a parent's cgroup.max.descendants)",
                             dir);
    return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", dir);
}

int
sbx_cg_rmdir(const char *dir, sbx_error **err)
{
    /* The last task of a sandbox can still be leaving the cgroup just after its init was
     * reaped; a few short retries cover that without polling in the common case. */
    for (int i = 0; i < 200; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            break;
        struct timespec ts = {0, 1000000};
        (void)nanosleep(&ts, NULL);
    }
    return sbx_error_set(err, SBX_EGENERIC, errno, "rmdir `%s`", dir);
}

int
sbx_cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
    char path[4096];
    char buf[64];
    (void)snprintf(path, sizeof path, "%s/%s", dir, file);
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return sbx_parse_u64(buf, out, NULL) < 0 ? -1 : 0;
}
