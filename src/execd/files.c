/*
 * files.c - files and directories endpoints (COMPAT 2.2, 2.5) except upload and download.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/http.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/files.h"
#include "execd/path.h"

#define MAX_LISTING 100000       /* entries in one search or listing answer */
#define MAX_REPLACE (256u << 20) /* largest file /files/replace rewrites in memory */

char *
execd_req_path(struct evhttp_request *req, const char *raw)
{
    char *p = NULL;
    const char *why = NULL;
    if (!raw || execd_path_clean(raw, strlen(raw), &p, &why) < 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "bad path `%s`: %s", raw ? raw : "",
                          raw ? why : "missing");
        return NULL;
    }
    return p;
}

void
execd_reply_errno(struct evhttp_request *req, int err, const char *what, const char *path)
{
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): execd is single-threaded */
    const char *msg = strerror(err);
    if (err == ENOENT)
        execd_reply_error(req, 404, "FILE_NOT_FOUND", "%s `%s`: %s", what, path, msg);
    else if (err == ELOOP || err == ENOTDIR || err == ENAMETOOLONG || err == EISDIR ||
             err == EEXIST || err == ENOTEMPTY)
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s `%s`: %s", what, path, msg);
    else
        execd_reply_error(req, 500, "RUNTIME_ERROR", "%s `%s`: %s", what, path, msg);
}

/* The repeated `path` query parameters, normalised; NULL after answering 400. */
static char **
req_paths(struct evhttp_request *req, size_t *n)
{
    char **raw = NULL;
    *n = execd_query_all(req, "path", &raw);
    if (*n == 0) {
        execd_strv_free(raw);
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `path`");
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        char *clean = execd_req_path(req, raw[i]);
        if (!clean) {
            execd_strv_free(raw);
            return NULL;
        }
        free(raw[i]);
        raw[i] = clean;
    }
    return raw;
}

void
execd_files_info(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    char **given = NULL;
    size_t n = execd_query_all(req, "path", &given);
    size_t m = 0;
    char **paths = n ? req_paths(req, &m) : NULL;
    if (!paths) {
        if (n == 0)
            execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `path`");
        execd_strv_free(given);
        return;
    }
    json_t *out = json_object();
    for (size_t i = 0; i < m; i++) {
        struct stat st;
        if (lstat(paths[i], &st) < 0) {
            execd_reply_errno(req, errno, "stat", paths[i]);
            json_decref(out);
            goto done;
        }
        (void)json_object_set_new(out, given[i], execd_file_info(paths[i], &st));
    }
    execd_reply_json(req, 200, out);
done:
    execd_strv_free(paths);
    execd_strv_free(given);
}

static void
remove_paths(struct evhttp_request *req, bool dirs)
{
    size_t n = 0;
    char **paths = req_paths(req, &n);
    if (!paths)
        return;
    for (size_t i = 0; i < n; i++) {
        sbx_autoerror sbx_error *err = NULL;
        int r = dirs ? sbx_rm_rf(paths[i], &err) : unlink(paths[i]);
        if (r < 0 && (dirs || errno != ENOENT)) {
            if (dirs)
                execd_reply_error(req, 500, "RUNTIME_ERROR", "%s", sbx_error_msg(err));
            else
                execd_reply_errno(req, errno == EISDIR ? EPERM : errno, "remove", paths[i]);
            execd_strv_free(paths);
            return;
        }
    }
    execd_strv_free(paths);
    execd_reply_empty(req);
}

void
execd_files_remove(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    remove_paths(req, false);
}

void
execd_dirs_remove(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    remove_paths(req, true);
}

/* Body {"<path>": {...}, ...}: check every key and value before touching anything. */
static json_t *
path_map_body(struct evhttp_request *req, bool perms)
{
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return NULL;
    const char *k;
    json_t *v;
    const char *why = "request body must be an object keyed by path";
    bool ok = json_is_object(j);
    json_object_foreach (j, k, v) {
        char *p = NULL;
        if (execd_path_clean(k, strlen(k), &p, &why) < 0 ||
            (perms && execd_perm_check(v, &why) < 0) || (!perms && !json_is_object(v))) {
            ok = false;
            free(p);
            break;
        }
        free(p);
    }
    if (!ok) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s", why);
        json_decref(j);
        return NULL;
    }
    return j;
}

void
execd_files_permissions(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    json_t *j = path_map_body(req, true);
    if (!j)
        return;
    const char *k;
    json_t *v;
    json_object_foreach (j, k, v) {
        sbx_autofree char *p = NULL;
        const char *why;
        (void)execd_path_clean(k, strlen(k), &p, &why);
        if (execd_perm_apply(p, v) < 0) {
            execd_reply_errno(req, errno, "chmod", p);
            json_decref(j);
            return;
        }
    }
    json_decref(j);
    execd_reply_empty(req);
}

void
execd_dirs_create(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    json_t *j = path_map_body(req, true);
    if (!j)
        return;
    const char *k;
    json_t *v;
    json_object_foreach (j, k, v) {
        sbx_autofree char *p = NULL;
        const char *why;
        sbx_autoerror sbx_error *err = NULL;
        (void)execd_path_clean(k, strlen(k), &p, &why);
        if (sbx_mkdir_p(p, 0755, &err) < 0) {
            execd_reply_errno(req, err->sys_errno ? err->sys_errno : EIO, "mkdir", p);
            json_decref(j);
            return;
        }
        if (execd_perm_apply(p, v) < 0) {
            execd_reply_errno(req, errno, "chmod", p);
            json_decref(j);
            return;
        }
    }
    json_decref(j);
    execd_reply_empty(req);
}

static int
move_one(struct evhttp_request *req, json_t *item)
{
    const char *src = json_string_value(json_object_get(item, "src"));
    const char *dst = json_string_value(json_object_get(item, "dest"));
    sbx_autofree char *s = execd_req_path(req, src);
    if (!s)
        return -1;
    sbx_autofree char *d = execd_req_path(req, dst);
    if (!d)
        return -1;
    sbx_autofree char *parent = sbx_xstrdup(d);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        (void)sbx_mkdir_p(parent, 0755, NULL);
    }
    /* the destination must not exist (COMPAT 2.2): never silently replace a file */
    if (renameat2(AT_FDCWD, s, AT_FDCWD, d, RENAME_NOREPLACE) < 0) {
        execd_reply_errno(req, errno, "move", s);
        return -1;
    }
    return 0;
}

void
execd_files_move(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    size_t i;
    json_t *item;
    bool ok = json_is_array(j);
    json_array_foreach (j, i, item) {
        ok = ok && json_is_string(json_object_get(item, "src")) &&
             json_is_string(json_object_get(item, "dest"));
    }
    if (!ok) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "want [{\"src\", \"dest\"}, ...]");
        json_decref(j);
        return;
    }
    json_array_foreach (j, i, item) {
        if (move_one(req, item) < 0) {
            json_decref(j);
            return;
        }
    }
    json_decref(j);
    execd_reply_empty(req);
}

/* ---- search (nftw keeps no state for us: a file-scope context, execd is single-threaded) */

static struct {
    const char *pattern;
    json_t *out;
} search_ctx;

/* Kernel pseudo filesystems are never searched into (unless the search starts there): they
 * are huge and not files anyone uploaded. Other mount points are: an overlay root reports a
 * different device for some files, so a same-device rule (FTW_MOUNT) would miss them. */
static bool
pseudo_fs_dir(const char *path, int level)
{
    return level > 0 &&
           (strcmp(path, "/proc") == 0 || strcmp(path, "/sys") == 0 || strcmp(path, "/dev") == 0);
}

static int
search_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    if (type == FTW_D)
        return pseudo_fs_dir(path, ftw->level) ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
    if (type == FTW_DP || type == FTW_DNR)
        return FTW_CONTINUE;
    const char *base = path + ftw->base;
    bool all = strcmp(search_ctx.pattern, "**") == 0 || strcmp(search_ctx.pattern, "*") == 0;
    if (all || fnmatch(search_ctx.pattern, base, 0) == 0)
        (void)json_array_append_new(search_ctx.out, execd_file_info(path, st));
    return json_array_size(search_ctx.out) >= MAX_LISTING ? FTW_STOP : FTW_CONTINUE;
}

void
execd_files_search(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    sbx_autofree char *raw = execd_query(req, "path");
    sbx_autofree char *pattern = execd_query(req, "pattern");
    if (!raw) {
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `path`");
        return;
    }
    sbx_autofree char *dir = execd_req_path(req, raw);
    if (!dir)
        return;
    struct stat st;
    if (stat(dir, &st) < 0) {
        execd_reply_errno(req, errno, "search", dir);
        return;
    }
    search_ctx.pattern = pattern && *pattern ? pattern : "**";
    search_ctx.out = json_array();
    /* FTW_PHYS: symlinks are reported, never followed (no loops, no escaping the tree) */
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): execd is single-threaded */
    (void)nftw(dir, search_visit, 32, FTW_PHYS | FTW_ACTIONRETVAL);
    execd_reply_json(req, 200, search_ctx.out);
    search_ctx.out = NULL;
}

/* ---- directory listing: lexical order, parents before children, no symlink descent */

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
list_dir(const char *dir, int depth, json_t *out)
{
    sbx_autoclosedir DIR *d = opendir(dir);
    if (!d || depth <= 0)
        return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): one thread, one DIR stream */
    while ((e = readdir(d)) != NULL && n < MAX_LISTING) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        names = sbx_xrealloc(names, (n + 1) * sizeof(*names));
        names[n++] = sbx_xstrdup(e->d_name);
    }
    if (n > 1)
        qsort(names, n, sizeof(*names), name_cmp);
    for (size_t i = 0; i < n; i++) {
        sbx_autofree char *p = strcmp(dir, "/") == 0 ? sbx_xasprintf("/%s", names[i])
                                                     : sbx_xasprintf("%s/%s", dir, names[i]);
        struct stat st;
        if (lstat(p, &st) == 0 && json_array_size(out) < MAX_LISTING) {
            (void)json_array_append_new(out, execd_file_info(p, &st));
            if (S_ISDIR(st.st_mode))
                list_dir(p, depth - 1, out);
        }
        free(names[i]);
    }
    free(names);
}

void
execd_dirs_list(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    sbx_autofree char *raw = execd_query(req, "path");
    sbx_autofree char *dep = execd_query(req, "depth");
    uint64_t depth = 1;
    if (!raw) {
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `path`");
        return;
    }
    if (dep && *dep && (sbx_parse_u64(dep, &depth, NULL) < 0 || depth > 64)) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`depth` must be 0..64");
        return;
    }
    sbx_autofree char *dir = execd_req_path(req, raw);
    if (!dir)
        return;
    struct stat st;
    if (lstat(dir, &st) < 0) {
        execd_reply_errno(req, errno, "list", dir);
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`%s` is not a directory%s", dir,
                          S_ISLNK(st.st_mode) ? " (symlinks are not followed)" : "");
        return;
    }
    json_t *out = json_array();
    list_dir(dir, (int)depth, out);
    execd_reply_json(req, 200, out);
}

/* ---- replace */

static size_t
count_and_replace(const char *data, size_t len, const char *old, const char *new_,
                  struct sbx_buf *out)
{
    size_t ol = strlen(old);
    size_t count = 0;
    const char *p = data;
    const char *end = data + len;
    const char *hit;
    while ((hit = memmem(p, (size_t)(end - p), old, ol)) != NULL) {
        (void)sbx_buf_append(out, p, (size_t)(hit - p), NULL);
        (void)sbx_buf_append_str(out, new_, NULL);
        p = hit + ol;
        count++;
    }
    (void)sbx_buf_append(out, p, (size_t)(end - p), NULL);
    return count;
}

static int
replace_one(struct evhttp_request *req, const char *path, json_t *spec, json_t *counts)
{
    const char *old = json_string_value(json_object_get(spec, "old"));
    const char *new_ = json_string_value(json_object_get(spec, "new"));
    if (!old || !*old || (!new_ && json_object_get(spec, "new"))) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`old` must be a non-empty string");
        return -1;
    }
    sbx_autofree char *data = NULL;
    size_t len = 0;
    struct stat st;
    if (stat(path, &st) < 0 || sbx_read_file(path, MAX_REPLACE, &data, &len, NULL) < 0) {
        execd_reply_errno(req, errno ? errno : EFBIG, "replace in", path);
        return -1;
    }
    struct sbx_buf out;
    sbx_buf_init(&out, (size_t)MAX_REPLACE * 4);
    size_t n = count_and_replace(data, len, old, new_ ? new_ : "", &out);
    int r = n ? sbx_write_file_atomic(path, out.data, out.len, st.st_mode & 07777, NULL) : 0;
    sbx_buf_dispose(&out);
    if (r < 0) {
        execd_reply_errno(req, EIO, "replace in", path);
        return -1;
    }
    (void)json_object_set_new(counts, path, json_pack("{s:I}", "replacedCount", (json_int_t)n));
    return 0;
}

void
execd_files_replace(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    json_t *j = path_map_body(req, false);
    if (!j)
        return;
    sbx_autofree char *verbose = execd_query(req, "verbose");
    json_t *counts = json_object();
    const char *k;
    json_t *v;
    json_object_foreach (j, k, v) {
        sbx_autofree char *p = NULL;
        const char *why;
        (void)execd_path_clean(k, strlen(k), &p, &why);
        if (replace_one(req, p, v, counts) < 0) {
            json_decref(counts);
            json_decref(j);
            return;
        }
    }
    json_decref(j);
    if (verbose && strcmp(verbose, "true") == 0) {
        execd_reply_json(req, 200, counts);
        return;
    }
    json_decref(counts);
    execd_reply_empty(req);
}
