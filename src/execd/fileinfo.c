/*
 * fileinfo.c - FileInfo JSON (COMPAT 2.5), user/group names without NSS, permissions.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/files.h"

/* id <-> name through /etc/passwd or /etc/group, read directly (static binary: no NSS). */
static bool
lookup_passwd(uid_t *uid, const char *name, char *out, size_t outn)
{
    sbx_autofclose FILE *f = fopen("/etc/passwd", "re");
    struct passwd pw;
    struct passwd *res = NULL;
    char buf[4096];
    while (f && fgetpwent_r(f, &pw, buf, sizeof(buf), &res) == 0) {
        if (name ? strcmp(pw.pw_name, name) == 0 : pw.pw_uid == *uid) {
            *uid = pw.pw_uid;
            if (out)
                (void)snprintf(out, outn, "%s", pw.pw_name);
            return true;
        }
    }
    return false;
}

static bool
lookup_group(gid_t *gid, const char *name, char *out, size_t outn)
{
    sbx_autofclose FILE *f = fopen("/etc/group", "re");
    struct group gr;
    struct group *res = NULL;
    char buf[4096];
    while (f && fgetgrent_r(f, &gr, buf, sizeof(buf), &res) == 0) {
        if (name ? strcmp(gr.gr_name, name) == 0 : gr.gr_gid == *gid) {
            *gid = gr.gr_gid;
            if (out)
                (void)snprintf(out, outn, "%s", gr.gr_name);
            return true;
        }
    }
    return false;
}

/* Tiny cache: a search over thousands of files owned by the same user scans passwd once. */
struct name_cache {
    unsigned id;
    bool group;
    char name[64];
};
static struct name_cache cache[8];
static unsigned cache_next;

static void
id_name(unsigned id, bool group, char *out, size_t n)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(cache); i++) {
        if (cache[i].name[0] && cache[i].id == id && cache[i].group == group) {
            (void)snprintf(out, n, "%s", cache[i].name);
            return;
        }
    }
    uid_t u = id;
    gid_t g = id;
    bool ok = group ? lookup_group(&g, NULL, out, n) : lookup_passwd(&u, NULL, out, n);
    if (!ok)
        (void)snprintf(out, n, "%u", id);
    struct name_cache *c = &cache[cache_next++ % SBX_ARRAY_SIZE(cache)];
    c->id = id;
    c->group = group;
    (void)snprintf(c->name, sizeof(c->name), "%s", out);
}

void
execd_names_forget(void)
{
    memset(cache, 0, sizeof(cache));
}

static long
mode_digits(mode_t m)
{
    char buf[16];
    (void)snprintf(buf, sizeof(buf), "%o", (unsigned)(m & 07777));
    return strtol(buf, NULL, 10);
}

static const char *
file_type(mode_t m)
{
    if (S_ISREG(m))
        return "file";
    if (S_ISDIR(m))
        return "directory";
    if (S_ISLNK(m))
        return "symlink";
    return "other";
}

json_t *
execd_file_info(const char *path, const struct stat *st)
{
    char mt[40];
    char ct[40];
    char owner[64];
    char group[64];
    execd_rfc3339(mt, sizeof(mt),
                  (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
    struct statx sx;
    int64_t born = (int64_t)st->st_ctim.tv_sec * 1000 + st->st_ctim.tv_nsec / 1000000;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx) == 0 &&
        (sx.stx_mask & STATX_BTIME))
        born = (int64_t)sx.stx_btime.tv_sec * 1000 + sx.stx_btime.tv_nsec / 1000000;
    execd_rfc3339(ct, sizeof(ct), born);
    id_name(st->st_uid, false, owner, sizeof(owner));
    id_name(st->st_gid, true, group, sizeof(group));
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I}", "path", path, "type",
                     file_type(st->st_mode), "size", (json_int_t)st->st_size, "modified_at", mt,
                     "created_at", ct, "owner", owner, "group", group, "mode",
                     (json_int_t)mode_digits(st->st_mode));
}

/* mode as the decimal digits of the octal value: 755 means 0755 (COMPAT 2.5). */
static int
parse_mode(json_t *m, mode_t *out)
{
    if (!m || json_is_null(m)) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) > 7777)
        return -1;
    json_int_t v = json_integer_value(m);
    mode_t r = 0;
    for (json_int_t mul = 1; v > 0; v /= 10, mul *= 8) {
        if (v % 10 > 7)
            return -1;
        r += (mode_t)((v % 10) * mul);
    }
    *out = r;
    return 0;
}

int
execd_perm_check(json_t *perm, const char **why)
{
    mode_t m;
    if (!json_is_object(perm)) {
        *why = "permission must be an object";
        return -1;
    }
    json_t *o = json_object_get(perm, "owner");
    json_t *g = json_object_get(perm, "group");
    if ((o && !json_is_null(o) && !json_is_string(o)) ||
        (g && !json_is_null(g) && !json_is_string(g))) {
        *why = "owner and group must be strings";
        return -1;
    }
    if (parse_mode(json_object_get(perm, "mode"), &m) < 0) {
        *why = "mode must be octal digits written as an integer, e.g. 755";
        return -1;
    }
    return 0;
}

int
execd_perm_apply(const char *path, json_t *perm)
{
    mode_t m = 0;
    (void)parse_mode(json_object_get(perm, "mode"), &m);
    if (m && chmod(path, m) < 0)
        return -1;
    const char *owner = json_string_value(json_object_get(perm, "owner"));
    const char *group = json_string_value(json_object_get(perm, "group"));
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if ((!owner || !*owner) && (!group || !*group)) {
        uid = getuid(); /* COMPAT 2.5: no owner and no group means the daemon's ids */
        gid = getgid();
    }
    if (owner && *owner && !lookup_passwd(&uid, owner, NULL, 0))
        uid = (uid_t)-1; /* unknown names are ignored, like the reference */
    if (group && *group && !lookup_group(&gid, group, NULL, 0))
        gid = (gid_t)-1;
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && lchown(path, uid, gid) < 0)
        return errno == EPERM && uid == getuid() ? 0 : -1;
    return 0;
}
