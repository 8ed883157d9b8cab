/*
 * volumes.c - the native provider's volumes: host binds from an allow-list, pvc named volumes
 * under <state>/volumes (see volumes.h).
 *
 * A pvc on disk:
 *   <state>/volumes/<claimName>/data         what sandboxes mount
 *                              /volume.json  {claimName, createdBy, deleteOnSandboxTermination,
 *                                             pendingDelete, createdAt}
 *                              /users/<id>   one empty file per sandbox that mounted it
 * <state>/volumes is 0700: files a sandbox's root writes there (setuid ones included) are
 * out of reach of the host's other users. A volume is built as `.new-<claim>` and renamed into
 * place, and removed by a rename to `.trash-...` first, so a crash never leaves half of one;
 * the leftovers of either are swept when the provider starts.
 *
 * A user is live while its runtime record (<state>/run/<id>) exists, while its writable layer
 * is kept (it is stopped: its next start mounts the volume again), or while it is between
 * sbx_vols_attach and sbx_vols_started (its record is being made): one mutex covers every
 * change here, so a volume is never removed under a sandbox that is about to mount it.
 */
#ifdef SBX_HAVE_RUNTIME

#include "providers/volumes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"

struct prefix {
    char *given; /* as configured, without a trailing `/` ("/" stays "/") */
    char *real;  /* its realpath at startup: what paths below it are resolved in */
};

struct sbx_vols {
    char *dir;       /* <state>/volumes */
    char *run_dir;   /* <state>/run */
    char *state_dir; /* the runtime's state dir (kept layers) */
    struct prefix *prefixes;
    size_t n_prefixes;
    char *allowed_text; /* "a, b" for messages */
    pthread_mutex_t mu;
    char **starting; /* ids between attach and started */
    size_t n_starting, cap_starting;
};

/* ---- resolving without following symlinks ---- */

/* Open `rel` below dirfd as an O_PATH fd (> 2, so it can never be taken for stdio), or -errno.
 *
 * Why this is safe: RESOLVE_BENEATH refuses absolute paths and any `..` that would climb above
 * dirfd; RESOLVE_NO_SYMLINKS refuses every symlink on the way, the last component included (a
 * sandbox with a writable volume can plant `x -> /etc` in it, and a sandbox that later names
 * `x` must not be led out); RESOLVE_NO_MAGICLINKS refuses /proc-style links. The fd names the
 * object itself and the runtime binds from the fd, so nothing can be swapped in between. */
static int
open_beneath(int dirfd, const char *rel, bool dir)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0),
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
    if (fd < 0)
        return -errno;
    if (fd > 2)
        return fd;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int e = errno;
    (void)close(fd);
    return hi >= 0 ? hi : -e;
}

/* mkdir -p of rel below dirfd, each component opened with open_beneath (a symlink anywhere is
 * refused, never followed). Returns the fd of the last directory or -errno. */
static int
mkdir_beneath(int dirfd, const char *rel)
{
    int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    sbx_autofree char *copy = sbx_xstrdup(rel);
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST) {
            int e = errno;
            (void)close(cur);
            return -e;
        }
        int next = open_beneath(cur, c, true);
        (void)close(cur);
        if (next < 0)
            return next;
        cur = next;
    }
    return cur;
}

/* ---- the allow-list ---- */

static const struct prefix *
match_prefix(const struct sbx_vols *v, const char *path, const char **rest)
{
    for (size_t i = 0; i < v->n_prefixes; i++) {
        const char *g = v->prefixes[i].given;
        size_t n = strlen(g);
        if (strcmp(g, "/") == 0) {
            *rest = path + 1;
            return &v->prefixes[i];
        }
        if (strncmp(path, g, n) == 0 && (path[n] == '\0' || path[n] == '/')) {
            *rest = path[n] ? path + n + 1 : "";
            return &v->prefixes[i];
        }
    }
    return NULL;
}

/* Open a host volume's source (host.path, then subPath below it). <0 with *code. */
static int
open_host(const struct sbx_vols *v, const char *path, const char *sub, const char **code,
          sbx_error **err)
{
    const char *rest = NULL;
    const struct prefix *p = match_prefix(v, path, &rest);
    if (!p) {
        *code = "VOLUME::HOST_PATH_NOT_ALLOWED";
        return sbx_error_set(err, SBX_EPERM, 0,
                             "host path `%s` is not below an allowed host path (allowed: %s; "
                             "set providers.native.allowed_host_paths)",
                             path, v->allowed_text);
    }
    sbx_autoclose int root = open(p->real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        *code = "VOLUME::HOST_PATH_NOT_FOUND";
        return sbx_error_set(err, SBX_ENOTFOUND, errno, "allowed host path `%s`", p->given);
    }
    int fd = open_beneath(root, rest, false);
    if (fd < 0) {
        bool link = fd == -ELOOP || fd == -EXDEV;
        *code = link ? "VOLUME::HOST_PATH_NOT_ALLOWED" : "VOLUME::HOST_PATH_NOT_FOUND";
        return sbx_error_set(err, link ? SBX_EPERM : SBX_ENOTFOUND, link ? 0 : -fd,
                             link ? "host path `%s` crosses a symbolic link below `%s`"
                                  : "host path `%s`",
                             path, p->given);
    }
    if (!sub || !*sub)
        return fd;
    int sfd = open_beneath(fd, sub, false);
    (void)close(fd);
    if (sfd < 0) {
        bool link = sfd == -ELOOP || sfd == -EXDEV;
        *code = link ? "VOLUME::INVALID_SUB_PATH" : "VOLUME::HOST_PATH_NOT_FOUND";
        return sbx_error_set(err, link ? SBX_EPERM : SBX_ENOTFOUND, link ? 0 : -sfd,
                             link ? "subPath `%s` of `%s` crosses a symbolic link"
                                  : "subPath `%s` of `%s`",
                             sub, path);
    }
    return sfd;
}

/* ---- pvcs ---- */

static const char *
claim_of(const json_t *vol)
{
    return json_string_value(json_object_get(json_object_get(vol, "pvc"), "claimName"));
}

static bool
pvc_flag(const json_t *vol, const char *key, bool dflt)
{
    json_t *f = json_object_get(json_object_get(vol, "pvc"), key);
    return json_is_boolean(f) ? json_is_true(f) : dflt;
}

static char *
pvc_path(const struct sbx_vols *v, const char *claim, const char *sub)
{
    return sub ? sbx_xasprintf("%s/%s/%s", v->dir, claim, sub)
               : sbx_xasprintf("%s/%s", v->dir, claim);
}

static bool
pvc_exists(const struct sbx_vols *v, const char *claim)
{
    sbx_autofree char *data = pvc_path(v, claim, "data");
    struct stat st;
    return lstat(data, &st) == 0 && S_ISDIR(st.st_mode);
}

static json_t *
pvc_meta_read(const struct sbx_vols *v, const char *claim)
{
    sbx_autofree char *path = pvc_path(v, claim, "volume.json");
    sbx_autofree char *text = NULL;
    if (sbx_read_file(path, 1 << 16, &text, NULL, NULL) < 0)
        return NULL;
    return json_loads(text, 0, NULL);
}

static int
pvc_meta_write(const char *path, const json_t *meta, sbx_error **err)
{
    sbx_autofree char *text = json_dumps(meta, JSON_COMPACT);
    return sbx_write_file_atomic(path, text, strlen(text), 0600, err);
}

/* Make the volume `claim` for sandbox id: built aside, renamed into place. */
static int
pvc_create(const struct sbx_vols *v, const char *id, const json_t *vol, sbx_error **err)
{
    const char *claim = claim_of(vol);
    sbx_autofree char *tmp = sbx_xasprintf("%s/.new-%s", v->dir, claim);
    sbx_autofree char *data = sbx_xasprintf("%s/data", tmp);
    sbx_autofree char *users = sbx_xasprintf("%s/users", tmp);
    sbx_autofree char *meta_path = sbx_xasprintf("%s/volume.json", tmp);
    sbx_autofree char *final = pvc_path(v, claim, NULL);
    json_t *meta =
        json_pack("{s:s, s:s, s:b, s:b, s:I}", "claimName", claim, "createdBy", id,
                  "deleteOnSandboxTermination", pvc_flag(vol, "deleteOnSandboxTermination", false),
                  "pendingDelete", false, "createdAt", (json_int_t)sbx_wall_ms());
    int ret = sbx_rm_rf(tmp, err);
    if (ret == 0 && (mkdir(tmp, 0755) < 0 || mkdir(data, 0755) < 0 || mkdir(users, 0700) < 0))
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "make volume `%s`", claim);
    if (ret == 0)
        ret = pvc_meta_write(meta_path, meta, err);
    if (ret == 0 && rename(tmp, final) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "make volume `%s`", claim);
    json_decref(meta);
    if (ret < 0) {
        sbx_autoerror sbx_error *ignored = NULL;
        (void)sbx_rm_rf(tmp, &ignored);
        return sbx_error_wrap(err, "pvc `%s`", claim);
    }
    sbx_info("volume `%s`: created by sandbox %s", claim, id);
    return 0;
}

static bool
starting_locked(const struct sbx_vols *v, const char *id)
{
    for (size_t i = 0; i < v->n_starting; i++) {
        if (strcmp(v->starting[i], id) == 0)
            return true;
    }
    return false;
}

/* Some sandbox other than those already unregistered still uses the volume. */
static bool
pvc_in_use_locked(const struct sbx_vols *v, const char *claim)
{
    sbx_autofree char *users = pvc_path(v, claim, "users");
    sbx_autoclosedir DIR *d = opendir(users);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        sbx_autofree char *rec = sbx_xasprintf("%s/%s", v->run_dir, e->d_name);
        if (starting_locked(v, e->d_name) || access(rec, F_OK) == 0 ||
            sbx_rt_upper_kept(v->state_dir, e->d_name))
            return true;
    }
    return false;
}

/* Open the source of a pvc volume for sandbox id (made if asked, id registered). */
static int
open_pvc_locked(struct sbx_vols *v, const char *id, const json_t *vol, sbx_error **err)
{
    const char *claim = claim_of(vol);
    const char *sub = json_string_value(json_object_get(vol, "subPath"));
    if (!pvc_exists(v, claim)) {
        if (!pvc_flag(vol, "createIfNotExists", true))
            return sbx_error_set(err, SBX_ENOTFOUND, 0, "pvc `%s` does not exist", claim);
        if (pvc_create(v, id, vol, err) < 0)
            return -SBX_EGENERIC;
    }
    sbx_autofree char *user = pvc_path(v, claim, "users");
    sbx_autofree char *user_file = sbx_xasprintf("%s/%s", user, id);
    sbx_autoclose int uf = open(user_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (uf < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "register sandbox with pvc `%s`", claim);
    sbx_autofree char *data = pvc_path(v, claim, "data");
    sbx_autoclose int dfd = open(data, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open pvc `%s`", claim);
    /* subPath inside a pvc is made when missing (a sandbox's own corner of a shared volume),
     * without following any symlink a sandbox may have planted in it. */
    int fd = mkdir_beneath(dfd, sub ? sub : "");
    if (fd < 0)
        return sbx_error_set(err, SBX_EINVAL, -fd, "subPath `%s` of pvc `%s`", sub ? sub : "",
                             claim);
    return fd;
}

/* ---- the API ---- */

static void
sweep(const struct sbx_vols *v)
{
    sbx_autoclosedir DIR *d = opendir(v->dir);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (d && (e = readdir(d))) {
        if (!sbx_str_starts(e->d_name, ".new-") && !sbx_str_starts(e->d_name, ".trash-"))
            continue;
        sbx_autofree char *p = sbx_xasprintf("%s/%s", v->dir, e->d_name);
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_rm_rf(p, &err) < 0)
            sbx_warn("volumes: %s", sbx_error_msg(err));
    }
}

static int
add_prefix(struct sbx_vols *v, const json_t *item, size_t i, sbx_error **err)
{
    const char *s = json_string_value(item);
    if (!s || s[0] != '/')
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.allowed_host_paths[%zu] must be an absolute path",
                             i);
    char real[PATH_MAX];
    if (!realpath(s, real))
        return sbx_error_set(err, SBX_EINVAL, errno,
                             "providers.native.allowed_host_paths[%zu] `%s`", i, s);
    struct prefix *p = &v->prefixes[v->n_prefixes++];
    p->given = sbx_xstrdup(s);
    size_t n = strlen(p->given);
    while (n > 1 && p->given[n - 1] == '/')
        p->given[--n] = '\0';
    p->real = sbx_xstrdup(real);
    if (strcmp(p->given, "/") == 0)
        sbx_warn("providers.native.allowed_host_paths allows `/`: any host path can be mounted "
                 "into a sandbox");
    return 0;
}

int
sbx_vols_open(struct sbx_vols **out, const char *state_dir, const json_t *allowed, sbx_error **err)
{
    if (allowed && !json_is_array(allowed))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.allowed_host_paths must be a list of paths");
    struct sbx_vols *v = sbx_xcalloc(1, sizeof *v);
    pthread_mutex_init(&v->mu, NULL);
    v->dir = sbx_xasprintf("%s/volumes", state_dir);
    v->run_dir = sbx_xasprintf("%s/run", state_dir);
    v->state_dir = sbx_xstrdup(state_dir);
    v->prefixes = sbx_xcalloc(json_array_size(allowed) + 1, sizeof *v->prefixes);
    int ret = 0;
    for (size_t i = 0; ret == 0 && i < json_array_size(allowed); i++)
        ret = add_prefix(v, json_array_get(allowed, i), i, err);
    if (ret == 0)
        ret = sbx_mkdir_p(v->dir, 0700, err);
    if (ret < 0) {
        sbx_vols_free(v);
        return ret;
    }
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 16);
    for (size_t i = 0; i < v->n_prefixes; i++)
        (void)sbx_buf_printf(&b, NULL, "%s%s", i ? ", " : "", v->prefixes[i].given);
    v->allowed_text = sbx_xstrdup(v->n_prefixes ? sbx_buf_str(&b) : "none");
    sbx_buf_dispose(&b);
    sweep(v);
    *out = v;
    return 0;
}

void
sbx_vols_free(struct sbx_vols *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n_prefixes; i++) {
        free(v->prefixes[i].given);
        free(v->prefixes[i].real);
    }
    for (size_t i = 0; i < v->n_starting; i++)
        free(v->starting[i]);
    free(v->starting);
    free(v->prefixes);
    free(v->allowed_text);
    free(v->dir);
    free(v->run_dir);
    free(v->state_dir);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

static int
check_one(struct sbx_vols *v, const json_t *vol, const char **code, sbx_error **err)
{
    const char *sub = json_string_value(json_object_get(vol, "subPath"));
    if (json_object_get(vol, "ossfs")) {
        *code = "VOLUME::UNSUPPORTED_BACKEND";
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "the `ossfs` backend is not supported by the native provider "
                             "(use `host` or `pvc`)");
    }
    json_t *host = json_object_get(vol, "host");
    if (host) {
        int fd = open_host(v, json_string_value(json_object_get(host, "path")), sub, code, err);
        if (fd >= 0)
            (void)close(fd);
        return fd < 0 ? fd : 0;
    }
    const char *claim = claim_of(vol);
    if (!pvc_exists(v, claim)) {
        if (pvc_flag(vol, "createIfNotExists", true))
            return 0;
        *code = "VOLUME::PVC_NOT_FOUND";
        return sbx_error_set(err, SBX_ENOTFOUND, 0,
                             "pvc `%s` does not exist (and createIfNotExists is false)", claim);
    }
    if (!sub || !*sub)
        return 0;
    /* An existing subPath must not cross a symlink; a missing one is made at start. */
    sbx_autofree char *data = pvc_path(v, claim, "data");
    sbx_autoclose int dfd = open(data, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dfd < 0 ? -errno : open_beneath(dfd, sub, false);
    if (fd >= 0)
        (void)close(fd);
    if (fd == -ELOOP || fd == -EXDEV || fd == -ENOTDIR) {
        *code = "VOLUME::INVALID_SUB_PATH";
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "subPath `%s` of pvc `%s` crosses a symbolic link or a file", sub,
                             claim);
    }
    return 0;
}

int
sbx_vols_check(struct sbx_vols *v, const json_t *volumes, const char **code, sbx_error **err)
{
    for (size_t i = 0; i < json_array_size(volumes); i++) {
        if (check_one(v, json_array_get(volumes, i), code, err) < 0)
            return sbx_error_wrap(err, "volumes[%zu]", i);
    }
    return 0;
}

static char *
keep(struct sbx_vols_mounts *m, char *s)
{
    m->strs[m->n_strs++] = s;
    return s;
}

static void
mounts_release(struct sbx_vols_mounts *m)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->vols[i].src_fd > 0)
            (void)close(m->vols[i].src_fd);
    }
    for (size_t i = 0; i < m->n_strs; i++)
        free(m->strs[i]);
    free(m->vols);
    free(m->strs);
    memset(m, 0, sizeof *m);
}

static int
attach_locked(struct sbx_vols *v, const char *id, const json_t *volumes, struct sbx_vols_mounts *m,
              sbx_error **err)
{
    for (size_t i = 0; i < json_array_size(volumes); i++) {
        const json_t *vol = json_array_get(volumes, i);
        const char *sub = json_string_value(json_object_get(vol, "subPath"));
        json_t *host = json_object_get(vol, "host");
        const char *code = NULL;
        int fd =
            host ? open_host(v, json_string_value(json_object_get(host, "path")), sub, &code, err)
            : json_object_get(vol, "pvc")
                ? open_pvc_locked(v, id, vol, err)
                : sbx_error_set(err, SBX_EINVAL, 0, "unsupported backend");
        if (fd < 0)
            return sbx_error_wrap(err, "volume `%s`",
                                  json_string_value(json_object_get(vol, "name")));
        char *src =
            host ? sbx_xasprintf("%s%s%s", json_string_value(json_object_get(host, "path")),
                                 sub ? "/" : "", sub ? sub : "")
                 : sbx_xasprintf("pvc:%s%s%s", claim_of(vol), sub ? "/" : "", sub ? sub : "");
        m->vols[m->n++] = (struct sbx_rt_volume){
            .src = keep(m, src),
            .dst = keep(m, sbx_xstrdup(json_string_value(json_object_get(vol, "mountPath")))),
            .ro = json_is_true(json_object_get(vol, "readOnly")),
            .src_fd = fd};
    }
    return 0;
}

int
sbx_vols_attach(struct sbx_vols *v, const char *id, const json_t *volumes,
                struct sbx_vols_mounts *out, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    size_t n = json_array_size(volumes);
    out->vols = sbx_xcalloc(n + 1, sizeof *out->vols);
    out->strs = sbx_xcalloc(2 * n + 1, sizeof *out->strs);
    pthread_mutex_lock(&v->mu);
    int ret = attach_locked(v, id, volumes, out, err);
    if (ret == 0) {
        if (v->n_starting == v->cap_starting) {
            v->cap_starting = v->cap_starting ? v->cap_starting * 2 : 16;
            v->starting = sbx_xrealloc(v->starting, v->cap_starting * sizeof *v->starting);
        }
        v->starting[v->n_starting++] = sbx_xstrdup(id);
    }
    pthread_mutex_unlock(&v->mu);
    if (ret < 0)
        mounts_release(out);
    return ret;
}

void
sbx_vols_started(struct sbx_vols *v, const char *id, struct sbx_vols_mounts *m)
{
    pthread_mutex_lock(&v->mu);
    for (size_t i = 0; i < v->n_starting; i++) {
        if (strcmp(v->starting[i], id) == 0) {
            free(v->starting[i]);
            v->starting[i] = v->starting[--v->n_starting];
            break;
        }
    }
    pthread_mutex_unlock(&v->mu);
    mounts_release(m);
}

/* Drop id from volume `claim`; returns the trash path to remove (outside the lock) or NULL. */
static char *
detach_one_locked(struct sbx_vols *v, const char *id, const char *claim)
{
    sbx_autofree char *user = sbx_xasprintf("%s/%s/users/%s", v->dir, claim, id);
    (void)unlink(user);
    json_t *meta = pvc_meta_read(v, claim);
    if (!meta)
        return NULL;
    const char *creator = json_string_value(json_object_get(meta, "createdBy"));
    bool doomed = json_is_true(json_object_get(meta, "pendingDelete")) ||
                  (creator && strcmp(creator, id) == 0 &&
                   json_is_true(json_object_get(meta, "deleteOnSandboxTermination")));
    char *trash = NULL;
    if (doomed && pvc_in_use_locked(v, claim)) {
        /* the last live user removes it */
        (void)json_object_set_new(meta, "pendingDelete", json_true());
        sbx_autofree char *path = pvc_path(v, claim, "volume.json");
        sbx_autoerror sbx_error *err = NULL;
        if (pvc_meta_write(path, meta, &err) < 0)
            sbx_warn("volume `%s`: %s", claim, sbx_error_msg(err));
        sbx_info("volume `%s`: still in use, removed when its last sandbox goes", claim);
    } else if (doomed) {
        sbx_autofree char *path = pvc_path(v, claim, NULL);
        trash = sbx_xasprintf("%s/.trash-%s-%s", v->dir, claim, id);
        if (rename(path, trash) < 0) {
            sbx_warn("volume `%s`: remove: %m", claim);
            free(trash);
            trash = NULL;
        }
    }
    json_decref(meta);
    return trash;
}

void
sbx_vols_detach(struct sbx_vols *v, const char *id, const json_t *volumes)
{
    size_t n = json_array_size(volumes);
    char **trash = sbx_xcalloc(n + 1, sizeof *trash);
    size_t nt = 0;
    pthread_mutex_lock(&v->mu);
    for (size_t i = 0; i < n; i++) {
        const char *claim = claim_of(json_array_get(volumes, i));
        if (claim && pvc_exists(v, claim))
            trash[nt] = detach_one_locked(v, id, claim);
        nt += trash[nt] != NULL;
    }
    pthread_mutex_unlock(&v->mu);
    for (size_t i = 0; i < nt; i++) {
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_rm_rf(trash[i], &err) < 0)
            sbx_warn("volumes: %s", sbx_error_msg(err));
        else
            sbx_info("volume removed (%s)", trash[i]);
        free(trash[i]);
    }
    free(trash);
}

#endif /* SBX_HAVE_RUNTIME */
