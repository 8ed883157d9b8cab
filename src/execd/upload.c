/*
 * upload.c - POST /files/upload streamed to disk underneath evhttp.
 *
 * libevent 2.1's evhttp hands a server request to us only after its whole body is in memory
 * (there is no per-request chunk callback on the server side in 2.1), which would put a 1 GiB
 * upload in RAM. So every connection's input buffer gets a hook (an evbuffer callback, run as
 * bytes arrive and before evhttp parses them) that follows the HTTP/1.1 framing:
 *   - request heads and bodies of other requests pass through untouched;
 *   - the head of an upload is rewritten to `Content-Length: 0` (so evhttp dispatches it at
 *     once) and its body bytes are taken out of the buffer and fed to the multipart parser,
 *     which writes each file to a temp file in the destination directory;
 *   - when the body is complete the (already dispatched) request gets its answer.
 * While the body streams, evhttp's bufferevent callbacks are swapped for ours (evhttp would
 * abort on input in its "writing" state) and restored before the reply.
 * Content-Length bodies are read straight from the socket in large reads once the request is
 * dispatched; chunked bodies go through the bufferevent and a small de-chunker.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "common/chunked.h"
#include "execd/files.h"
#include "execd/multipart.h"
#include "execd/pagecache.h"
#include "execd/path.h"
#include "execd/upload.h"

#define HEAD_MAX        (EXECD_MAX_HEADERS + 1024)
#define WRITE_BUF       (256u << 10)
#define SOCK_READ       (256u << 10)
#define MAX_META        (64u << 10)
#define UPLOAD_IDLE_SEC 300 /* an upload body that stalls this long is abandoned */

enum conn_state {
    C_HEAD,
    C_BODY_PASS,
    C_CHUNK_PASS,
    C_UPLOAD,
    C_DISCARD,
    C_PASS
};

struct upload;

struct conn {
    struct conn *next;
    struct execd *ex;
    struct bufferevent *bev;
    enum conn_state state;
    uint64_t remaining; /* Content-Length bytes left of the current body */
    struct sbx_chunked chunk;
    bool chunked;
    struct sbx_buf head;
    bool busy; /* we are changing the input buffer ourselves: ignore the callbacks */
    struct upload *up;
    struct evbuffer *pending; /* bytes after an upload that is not answered yet (pipelining) */
    int fd;                   /* the socket, and its inode: tells whether it is still open */
    ino_t ino;
    /* evhttp's bufferevent callbacks, while ours are installed */
    bufferevent_data_cb saved_read;
    bufferevent_data_cb saved_write;
    bufferevent_event_cb saved_event;
    void *saved_arg;
};

struct upload {
    struct conn *c;
    struct evhttp_request *req; /* set once evhttp dispatched it */
    bool body_done;
    struct event *sock_ev; /* direct socket reads of a Content-Length body */
    char *rbuf;
    bool expect_continue;
    uint64_t received;
    struct execd_mp mp;
    bool mp_ok;
    /* the current metadata/file pair */
    enum {
        P_NONE,
        P_META,
        P_FILE,
        P_OTHER
    } part;
    struct sbx_buf meta;
    json_t *meta_json; /* metadata waiting for its file part */
    unsigned n_meta;
    unsigned n_file;
    int fd;
    char *tmp_path;
    char *dst_path;
    char *wbuf;
    size_t wlen;
    uint64_t written;  /* bytes of the file written so far */
    uint64_t wb_start; /* writeback was started for [0, wb_start) */
    /* the answer */
    int status;
    const char *code;
    char message[256];
};

static struct conn *conns;
static struct execd *upload_ex;

/* ---- the answer ---- */

static void up_fail(struct upload *u, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
up_fail(struct upload *u, int status, const char *code, const char *fmt, ...)
{
    if (u->status)
        return; /* the first error wins */
    u->status = status;
    u->code = code;
    va_list ap;
    va_start(ap, fmt);
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): false positive, va_start above */
    (void)vsnprintf(u->message, sizeof(u->message), fmt, ap);
    va_end(ap);
}

static void
file_abort(struct upload *u)
{
    if (u->fd >= 0) {
        close(u->fd);
        (void)unlink(u->tmp_path); /* a failed upload leaves no partial file */
    }
    u->fd = -1;
    free(u->tmp_path);
    free(u->dst_path);
    u->tmp_path = NULL;
    u->dst_path = NULL;
    u->wlen = 0;
    u->written = 0;
    u->wb_start = 0;
}

static void
upload_free(struct upload *u)
{
    file_abort(u);
    if (u->sock_ev)
        event_free(u->sock_ev);
    free(u->rbuf);
    json_decref(u->meta_json);
    sbx_buf_dispose(&u->meta);
    free(u->wbuf);
    free(u);
}

/* ---- the sink: multipart callbacks ---- */

/* A failed write or store of the file: a full filesystem (or quota) is the client's problem to
 * solve, not a server fault, so it gets its own status. The temp file is removed by
 * file_abort when the upload ends, so nothing partial is left either way. */
static void
store_fail(struct upload *u, const char *what, int e)
{
    /* NOLINTBEGIN(concurrency-mt-unsafe): one thread */
    if (e == ENOSPC || e == EDQUOT)
        up_fail(u, 507, "INSUFFICIENT_STORAGE", "%s `%s`: %s (the upload was not stored)", what,
                u->dst_path, strerror(e));
    else
        up_fail(u, 500, "RUNTIME_ERROR", "%s `%s`: %s", what, u->dst_path, strerror(e));
    /* NOLINTEND(concurrency-mt-unsafe) */
}

/* Write-behind and drop-behind, once per window written (pagecache.h): start the writeback of
 * the window just filled, wait for the one before it and drop it from the page cache. Without
 * it a big upload piles up as dirty page cache (charged to the sandbox's memory cgroup, where
 * cgroup v1 has no dirty throttling) that the final fsync then writes out all at once, after
 * the whole body was received; with it the disk works while the body arrives, at most two
 * windows are dirty, the fsync finds little left to do, and the file takes ~16 MiB of cache
 * instead of its size. Waiting is backpressure: a disk slower than the network slows the
 * client down through TCP. These calls are hints: their errors are ignored, and the fsync in
 * file_end reports any writeback error. On tmpfs they do nothing (the pages are the file). */
static void
write_behind(struct upload *u)
{
    while (u->written - u->wb_start >= EXECD_PC_WINDOW) {
        (void)sync_file_range(u->fd, (off_t)u->wb_start, EXECD_PC_WINDOW, SYNC_FILE_RANGE_WRITE);
        if (u->wb_start >= EXECD_PC_WINDOW) {
            uint64_t prev = u->wb_start - EXECD_PC_WINDOW;
            (void)sync_file_range(u->fd, (off_t)prev, EXECD_PC_WINDOW,
                                  SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                      SYNC_FILE_RANGE_WAIT_AFTER);
            execd_pc_drop(u->fd, prev, EXECD_PC_WINDOW);
        }
        u->wb_start += EXECD_PC_WINDOW;
    }
}

static int
file_write(struct upload *u, const char *p, size_t n)
{
    if (sbx_write_all(u->fd, p, n) < 0) {
        store_fail(u, "write", errno);
        return -1;
    }
    u->written += n;
    write_behind(u);
    return 0;
}

static int
wflush(struct upload *u)
{
    if (u->wlen && file_write(u, u->wbuf, u->wlen) < 0)
        return -1;
    u->wlen = 0;
    return 0;
}

static int
file_begin(struct upload *u)
{
    if (!u->meta_json) {
        up_fail(u, 400, "INVALID_FILE_METADATA", "file part %u has no metadata part before it",
                u->n_file);
        return -1;
    }
    const char *raw = json_string_value(json_object_get(u->meta_json, "path"));
    const char *why = "missing";
    char *dst = NULL;
    if (!raw || execd_path_clean(raw, strlen(raw), &dst, &why) < 0 || strcmp(dst, "/") == 0) {
        up_fail(u, 400, "INVALID_FILE_METADATA", "metadata `path`: %s", why);
        free(dst);
        return -1;
    }
    u->dst_path = dst;
    sbx_autofree char *dir = sbx_xstrdup(dst);
    *strrchr(dir, '/') = '\0';
    (void)sbx_mkdir_p(dir[0] ? dir : "/", 0755, NULL);
    u->tmp_path = sbx_xasprintf("%s/.sbx-upload-XXXXXX", dir);
    u->fd = mkostemp(u->tmp_path, O_CLOEXEC);
    if (u->fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            up_fail(u, 400, "RUNTIME_ERROR", "create `%s`: %s", dst,
                    strerror(e)); /* NOLINT(concurrency-mt-unsafe): one thread */
        else
            store_fail(u, "create", e);
        return -1;
    }
    if (!u->wbuf)
        u->wbuf = sbx_xmalloc(WRITE_BUF);
    return 0;
}

static int
file_end(struct upload *u)
{
    json_t *perm = u->meta_json;
    if (wflush(u) < 0)
        return -1;
    if (fsync(u->fd) < 0 || rename(u->tmp_path, u->dst_path) < 0) {
        store_fail(u, "store", errno);
        return -1;
    }
    if (u->wb_start > 0) /* a file of a window or more: its last windows go too (all clean) */
        execd_pc_drop(u->fd, 0, 0);
    close(u->fd);
    u->fd = -1;
    u->written = 0;
    u->wb_start = 0;
    if (!json_object_get(perm, "mode") || json_integer_value(json_object_get(perm, "mode")) == 0)
        (void)json_object_set_new(perm, "mode", json_integer(644));
    if (execd_perm_apply(u->dst_path, perm) < 0)
        sbx_warn("upload `%s`: permissions not applied", u->dst_path);
    free(u->tmp_path);
    free(u->dst_path);
    u->tmp_path = NULL;
    u->dst_path = NULL;
    json_decref(u->meta_json);
    u->meta_json = NULL;
    return 0;
}

static int
meta_end(struct upload *u)
{
    json_error_t jerr;
    json_t *j = json_loadb(sbx_buf_str(&u->meta), u->meta.len, 0, &jerr);
    sbx_buf_reset(&u->meta);
    const char *why = NULL;
    if (!json_is_object(j) || !json_is_string(json_object_get(j, "path")) ||
        execd_perm_check(j, &why) < 0) {
        json_decref(j);
        up_fail(u, 400, "INVALID_FILE_METADATA",
                "metadata part %u: want {\"path\", \"mode\"?...}%s%s", u->n_meta, why ? ": " : "",
                why ? why : "");
        return -1;
    }
    if (u->meta_json) {
        json_decref(j);
        up_fail(u, 400, "INVALID_FILE_CONTENT", "metadata part %u has no file part", u->n_meta - 1);
        return -1;
    }
    u->meta_json = j;
    return 0;
}

static int
mp_begin(void *ctx, const struct execd_mp_part *part)
{
    struct upload *u = ctx;
    if (strcmp(part->name, "metadata") == 0) {
        u->part = P_META;
        u->n_meta++;
        return 0;
    }
    if (strcmp(part->name, "file") == 0) {
        u->part = P_FILE;
        u->n_file++;
        return file_begin(u);
    }
    u->part = P_OTHER;
    return 0;
}

static int
mp_data(void *ctx, const char *p, size_t n)
{
    struct upload *u = ctx;
    switch (u->part) {
    case P_META:
        if (sbx_buf_append(&u->meta, p, n, NULL) < 0) {
            up_fail(u, 400, "INVALID_FILE_METADATA", "metadata part over %u bytes", MAX_META);
            return -1;
        }
        return 0;
    case P_FILE:
        if (u->wlen == 0 && n >= WRITE_BUF / 2) /* big spans go straight to the file */
            return file_write(u, p, n);
        while (n > 0) {
            size_t k = WRITE_BUF - u->wlen < n ? WRITE_BUF - u->wlen : n;
            memcpy(u->wbuf + u->wlen, p, k);
            u->wlen += k;
            p += k;
            n -= k;
            if (u->wlen == WRITE_BUF && wflush(u) < 0)
                return -1;
        }
        return 0;
    case P_NONE:
    case P_OTHER:
    default:
        return 0;
    }
}

static int
mp_end(void *ctx)
{
    struct upload *u = ctx;
    int r = 0;
    if (u->part == P_META)
        r = meta_end(u);
    else if (u->part == P_FILE)
        r = file_end(u);
    u->part = P_NONE;
    return r;
}

static const struct execd_mp_callbacks mp_cbs = {.begin = mp_begin, .data = mp_data, .end = mp_end};

/* ---- body bytes ---- */

static void upload_maybe_reply(struct upload *u);

static void
body_feed(struct upload *u, const char *p, size_t n)
{
    u->received += n;
    if (u->status || !u->mp_ok)
        return; /* already failed: the rest of the body is read and dropped */
    if (u->received > u->c->ex->cfg.max_upload) {
        up_fail(u, 413, "INVALID_FILE", "upload larger than %llu bytes",
                (unsigned long long)u->c->ex->cfg.max_upload);
        file_abort(u);
        return;
    }
    if (execd_mp_feed(&u->mp, p, n) < 0) {
        up_fail(u, 400, "INVALID_FILE", "bad multipart body: %s", u->mp.error);
        file_abort(u);
    }
}

static void
body_end(struct upload *u)
{
    u->body_done = true;
    if (!u->status && u->mp_ok && execd_mp_finish(&u->mp) < 0)
        up_fail(u, 400, "INVALID_FILE", "bad multipart body: %s", u->mp.error);
    if (!u->status && u->n_meta != u->n_file)
        up_fail(u, 400, u->n_meta > u->n_file ? "INVALID_FILE_CONTENT" : "INVALID_FILE_METADATA",
                "%u metadata parts but %u file parts", u->n_meta, u->n_file);
    if (!u->status && u->n_file == 0)
        up_fail(u, 400, "INVALID_FILE", "no file in the upload");
    file_abort(u);
    u->c->state = C_HEAD;
    upload_maybe_reply(u);
}

/* ---- connection framing ---- */

static void on_input_idle(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg);
static void on_input_active(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg);

static void
conn_unlink(struct conn *c)
{
    for (struct conn **pp = &conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

/* The wrapper around evhttp's event callback: a connection that dies while we hold state
 * for it frees that state first. */
static void conn_drop(struct conn *c, evbuffer_cb_func next, void *next_arg);

static void
on_bev_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    bufferevent_event_cb saved = c->saved_event;
    void *saved_arg = c->saved_arg;
    struct evhttp_request *req = c->up ? c->up->req : NULL;
    if (req)
        sbx_info("upload: client went away");
    bufferevent_incref(bev); /* conn_drop lets go of ours; evhttp still needs it below */
    conn_drop(c, NULL, NULL);
    if (saved)
        saved(bev, what, saved_arg); /* evhttp frees the connection */
    execd_http_abandon(req);
    bufferevent_decref(bev);
}

static void
on_bev_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->saved_read)
        c->saved_read(bev, c->saved_arg);
}

static void
on_bev_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->saved_write)
        c->saved_write(bev, c->saved_arg);
}

/* libevent gives a bufferevent one argument for all its callbacks, so all three are wrapped
 * while ours are installed. evhttp replaces them whenever it changes state; they are
 * re-installed on the next input. */
static void
conn_hook_events(struct conn *c)
{
    bufferevent_data_cb r;
    bufferevent_data_cb w;
    bufferevent_event_cb e;
    void *arg;
    bufferevent_getcb(c->bev, &r, &w, &e, &arg);
    if (e == on_bev_event)
        return;
    c->saved_event = e;
    c->saved_arg = arg;
    c->saved_read = r;
    c->saved_write = w;
    bufferevent_setcb(c->bev, r ? on_bev_read : NULL, w ? on_bev_write : NULL, on_bev_event, c);
}

static void
conn_unhook(struct conn *c)
{
    bufferevent_data_cb r;
    bufferevent_data_cb w;
    bufferevent_event_cb e;
    void *arg;
    bufferevent_getcb(c->bev, &r, &w, &e, &arg);
    if (e == on_bev_event && arg == c)
        bufferevent_setcb(c->bev, c->saved_read, c->saved_write, c->saved_event, c->saved_arg);
}

/* Stop following c: its input goes to `next` (or straight to evhttp), its state is freed, and
 * our reference on the bufferevent is dropped. */
static void
conn_drop(struct conn *c, evbuffer_cb_func next, void *next_arg)
{
    struct bufferevent *bev = c->bev;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer *pending = c->pending;
    conn_unhook(c);
    evbuffer_remove_cb(in, on_input_active, c);
    if (next)
        evbuffer_add_cb(in, next, next_arg);
    conn_unlink(c);
    if (c->up)
        upload_free(c->up); /* removes its temp file; evhttp frees the request */
    sbx_buf_dispose(&c->head);
    free(c);
    if (pending && next == on_input_idle) {
        /* held pipelined bytes go through the hook again, as new input (the bufferevent keeps
         * the end of its input frozen outside its own reads) */
        evbuffer_unfreeze(in, 0);
        evbuffer_add_buffer(in, pending);
        evbuffer_freeze(in, 0);
    }
    if (pending)
        evbuffer_free(pending);
    bufferevent_decref(bev);
}

/* Back to idle: no state is kept for a connection between requests. */
static void
conn_release(struct conn *c)
{
    conn_drop(c, on_input_idle, c->bev);
}

/* evhttp may free a connection while its callbacks, not ours, are installed (e.g. after it
 * answered an error itself). The reference we hold keeps the bufferevent's memory valid; a
 * closed socket (or one whose fd number now names another socket) marks the state as dead. */
static bool
conn_alive(const struct conn *c)
{
    struct stat st;
    return c->fd >= 0 && fstat(c->fd, &st) == 0 && st.st_ino == c->ino;
}

static void
conn_sweep(void)
{
    struct conn *next;
    for (struct conn *c = conns; c; c = next) {
        next = c->next;
        if (!conn_alive(c))
            conn_drop(c, NULL, NULL);
    }
}

struct head_info {
    bool upload;
    bool chunked;
    bool has_cl;
    bool bad_cl;
    bool expect;
    uint64_t cl;
    char ctype[256];
};

static bool
is_upload_target(struct execd *ex, const char *t, size_t n)
{
    size_t pl = strcspn(t, "? ");
    if (pl > n)
        pl = n;
    char prefix[32];
    int k = snprintf(prefix, sizeof(prefix), "/proxy/%u", ex->cfg.port);
    if (k > 0 && pl > (size_t)k && strncmp(t, prefix, (size_t)k) == 0) {
        t += k;
        pl -= (size_t)k;
    }
    return pl == 13 && strncmp(t, "/files/upload", 13) == 0;
}

static void
head_field(struct head_info *hi, const char *name, size_t nl, const char *v, size_t vl)
{
    if (nl == 14 && strncasecmp(name, "Content-Length", 14) == 0) {
        char num[24];
        uint64_t cl = 0;
        (void)snprintf(num, sizeof(num), "%.*s", (int)(vl < 23 ? vl : 23), v);
        if (vl > 20 || sbx_parse_u64(num, &cl, NULL) < 0 || (hi->has_cl && cl != hi->cl))
            hi->bad_cl = true;
        hi->cl = cl;
        hi->has_cl = true;
    } else if (nl == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0) {
        hi->chunked = hi->chunked || memmem(v, vl, "chunked", 7) || memmem(v, vl, "CHUNKED", 7);
    } else if (nl == 6 && strncasecmp(name, "Expect", 6) == 0) {
        hi->expect = vl == 12 && strncasecmp(v, "100-continue", 12) == 0;
    } else if (nl == 12 && strncasecmp(name, "Content-Type", 12) == 0) {
        (void)snprintf(hi->ctype, sizeof(hi->ctype), "%.*s", (int)vl, v);
    }
}

/* Walk the header lines of a complete head (request line first). */
static void
parse_head(struct execd *ex, const char *h, size_t n, struct head_info *hi)
{
    memset(hi, 0, sizeof(*hi));
    const char *end = h + n;
    const char *eol = memchr(h, '\n', n);
    if (!eol)
        return;
    const char *sp = memchr(h, ' ', (size_t)(eol - h));
    hi->upload = sp && sp - h == 4 && strncmp(h, "POST", 4) == 0 &&
                 is_upload_target(ex, sp + 1, (size_t)(eol - sp - 1));
    for (const char *line = eol + 1; line < end; line = eol + 1) {
        eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon)
            continue;
        const char *v = colon + 1;
        const char *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        head_field(hi, line, (size_t)(colon - line), v, (size_t)(ve - v));
    }
}

/* The upload's head as evhttp sees it: no body, so it is dispatched at once. */
static void
rewrite_head(struct evbuffer *out, const char *h, size_t n)
{
    const char *end = h + n;
    for (const char *line = h; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        const char *next = eol ? eol + 1 : end;
        size_t len = (size_t)(next - line);
        bool drop = strncasecmp(line, "Content-Length:", 15) == 0 ||
                    strncasecmp(line, "Transfer-Encoding:", 18) == 0 ||
                    strncasecmp(line, "Expect:", 7) == 0 || len <= 2;
        if (!drop)
            evbuffer_add(out, line, len);
        line = next;
    }
    evbuffer_add(out, "Content-Length: 0\r\n\r\n", 21);
}

static void
send_continue(struct conn *c)
{
    /* evhttp is not writing (this request was not dispatched yet) and its output is empty,
     * so the interim response can go to the socket directly, ahead of anything else. */
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) != 0)
        return;
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)!send(bufferevent_getfd(c->bev), msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void
start_upload(struct conn *c, const struct head_info *hi)
{
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    u->c = c;
    u->fd = -1;
    u->expect_continue = hi->expect;
    sbx_buf_init(&u->meta, MAX_META);
    c->up = u;
    char boundary[EXECD_MP_MAX_BOUNDARY + 1];
    if (execd_mp_boundary(hi->ctype, boundary, sizeof(boundary)) == 0) {
        execd_mp_init(&u->mp, boundary, &mp_cbs, u);
        u->mp_ok = true;
    } else {
        up_fail(u, 400, "INVALID_FILE", "want a multipart/form-data body with a boundary");
    }
    if (hi->has_cl && hi->cl > c->ex->cfg.max_upload)
        up_fail(u, 413, "INVALID_FILE", "upload of %llu bytes is over the %llu byte limit",
                (unsigned long long)hi->cl, (unsigned long long)c->ex->cfg.max_upload);
    c->chunked = hi->chunked;
    c->remaining = hi->cl;
    c->chunk = (struct sbx_chunked){.strict = false}; /* evhttp's reading: chunked.h */
    c->state = C_UPLOAD;
    if (hi->expect && !u->status)
        send_continue(c);
    if (!hi->chunked && c->remaining == 0)
        body_end(u);
}

static void
handle_head(struct conn *c, struct evbuffer *out)
{
    struct head_info hi;
    parse_head(c->ex, c->head.data, c->head.len, &hi);
    sbx_debug("upload hook: head of %zu bytes, upload=%d cl=%llu chunked=%d", c->head.len,
              hi.upload, (unsigned long long)hi.cl, hi.chunked);
    if (!hi.upload || hi.bad_cl || (hi.chunked && hi.has_cl)) {
        /* not ours, or ambiguous framing that evhttp rejects: pass it on unchanged */
        evbuffer_add(out, c->head.data, c->head.len);
        c->state = hi.bad_cl || (hi.chunked && hi.has_cl) ? C_PASS
                   : hi.chunked                           ? C_CHUNK_PASS
                   : hi.cl > 0                            ? C_BODY_PASS
                                                          : C_HEAD;
        c->remaining = hi.cl;
        c->chunk = (struct sbx_chunked){.strict = false}; /* evhttp's reading: chunked.h */
    } else {
        rewrite_head(out, c->head.data, c->head.len);
        start_upload(c, &hi);
    }
    sbx_buf_reset(&c->head);
}

static void
head_step(struct conn *c, struct evbuffer *in, struct evbuffer *out)
{
    char tmp[4096];
    size_t old = c->head.len;
    int n = evbuffer_remove(in, tmp, sizeof(tmp));
    if (n <= 0)
        return;
    if (sbx_buf_append(&c->head, tmp, (size_t)n, NULL) < 0) {
        c->state = C_PASS; /* over the header limit: evhttp answers that */
        evbuffer_add(out, tmp, (size_t)n);
        return;
    }
    size_t from = old > 3 ? old - 3 : 0;
    const char *end = memmem(c->head.data + from, c->head.len - from, "\r\n\r\n", 4);
    if (!end)
        return;
    size_t hl = (size_t)(end - c->head.data) + 4;
    if (hl < c->head.len)
        evbuffer_prepend(in, c->head.data + hl, c->head.len - hl);
    c->head.len = hl;
    c->head.data[hl] = '\0';
    handle_head(c, out);
}

/* Run body bytes at the front of `in` (up to max) through fn, then drain them. */
static void
upload_bytes(struct conn *c, struct evbuffer *in, size_t max)
{
    struct evbuffer_iovec v[16];
    int nv = evbuffer_peek(in, (ev_ssize_t)max, NULL, v, 16);
    size_t done = 0;
    for (int i = 0; i < nv && i < 16 && done < max; i++) {
        size_t k = v[i].iov_len < max - done ? v[i].iov_len : max - done;
        body_feed(c->up, v[i].iov_base, k);
        done += k;
    }
    evbuffer_drain(in, done);
    c->remaining -= done;
    if (c->remaining == 0)
        body_end(c->up);
}

static void
upload_chunked(struct conn *c, struct evbuffer *in)
{
    struct evbuffer_iovec v;
    if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
        return;
    const char *data = NULL;
    size_t dlen = 0;
    ssize_t used = sbx_chunked_step(&c->chunk, v.iov_base, v.iov_len, &data, &dlen);
    if (used < 0) {
        up_fail(c->up, 400, "INVALID_FILE", "malformed chunked body");
        c->state = C_DISCARD;
        body_end(c->up);
        return;
    }
    if (dlen)
        body_feed(c->up, data, dlen);
    evbuffer_drain(in, (size_t)used);
    if (c->chunk.state == CH_DONE)
        body_end(c->up);
}

static void
pass_chunked(struct conn *c, struct evbuffer *in, struct evbuffer *out)
{
    struct evbuffer_iovec v;
    if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
        return;
    const char *data = NULL;
    size_t dlen = 0;
    ssize_t used = sbx_chunked_step(&c->chunk, v.iov_base, v.iov_len, &data, &dlen);
    if (used < 0) {
        c->state = C_PASS; /* evhttp rejects the body; we stop following this connection */
        return;
    }
    evbuffer_remove_buffer(in, out, (size_t)used);
    if (c->chunk.state == CH_DONE)
        c->state = C_HEAD;
}

static void
process(struct conn *c, struct evbuffer *in, struct evbuffer *out)
{
    size_t len;
    while ((len = evbuffer_get_length(in)) > 0) {
        switch (c->state) {
        case C_PASS:
            evbuffer_add_buffer(out, in);
            return;
        case C_DISCARD:
            evbuffer_drain(in, len);
            return;
        case C_HEAD:
            if (c->up) { /* the previous upload is not answered yet: hold what follows */
                if (!c->pending)
                    c->pending = evbuffer_new();
                evbuffer_add_buffer(c->pending, in);
                return;
            }
            head_step(c, in, out);
            break;
        case C_CHUNK_PASS:
            pass_chunked(c, in, out);
            break;
        case C_BODY_PASS: {
            size_t k = c->remaining < len ? (size_t)c->remaining : len;
            evbuffer_remove_buffer(in, out, k);
            c->remaining -= k;
            if (c->remaining == 0)
                c->state = C_HEAD;
            break;
        }
        case C_UPLOAD:
            if (!c->up) {
                c->state = C_DISCARD;
                break;
            }
            if (c->up->body_done)
                c->state = C_HEAD;
            else if (c->chunked)
                upload_chunked(c, in);
            else
                upload_bytes(c, in, c->remaining < len ? (size_t)c->remaining : len);
            break;
        default:
            return;
        }
    }
}

static bool
conn_idle(const struct conn *c)
{
    return c->state == C_HEAD && c->head.len == 0 && !c->up;
}

static void
on_input_discard(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    (void)arg;
    if (info->n_added)
        evbuffer_drain(buf, evbuffer_get_length(buf));
}

static void
on_input_active(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct conn *c = arg;
    if (c->busy || info->n_added == 0)
        return;
    c->busy = true;
    conn_hook_events(c);
    size_t len = evbuffer_get_length(buf);
    struct evbuffer *fresh = evbuffer_new();
    struct evbuffer *front = evbuffer_new();
    evbuffer_remove_buffer(buf, front, len - info->n_added);
    evbuffer_add_buffer(fresh, buf);
    evbuffer_add_buffer(buf, front);
    process(c, fresh, buf);
    evbuffer_free(fresh);
    evbuffer_free(front);
    c->busy = false;
    if (c->state == C_DISCARD && !c->up)
        conn_drop(c, on_input_discard, NULL);
    else if (c->state == C_PASS && !c->up)
        conn_drop(c, NULL, NULL); /* framing we do not follow: evhttp gets the raw bytes */
    else if (conn_idle(c))
        conn_release(c);
}

static void
on_input_idle(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    if (info->n_added == 0)
        return;
    struct bufferevent *bev = arg;
    conn_sweep();
    struct conn *c = sbx_xcalloc(1, sizeof(*c));
    c->bev = bev;
    c->ex = upload_ex;
    bufferevent_incref(bev);
    c->fd = bufferevent_getfd(bev);
    struct stat st;
    c->ino = c->fd >= 0 && fstat(c->fd, &st) == 0 ? st.st_ino : 0;
    sbx_buf_init(&c->head, HEAD_MAX);
    evbuffer_remove_cb(buf, on_input_idle, bev);
    evbuffer_add_cb(buf, on_input_active, c);
    c->next = conns;
    conns = c;
    on_input_active(buf, info, c);
}

/* ---- the request ---- */

static void
upload_reply(struct upload *u)
{
    struct conn *c = u->c;
    struct evhttp_request *req = u->req;
    conn_unhook(c);
    if (!u->body_done || c->state == C_DISCARD) {
        /* the rest of the body will not be read: the connection cannot be reused */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        c->state = C_DISCARD;
    }
    c->up = NULL;
    int status = u->status;
    const char *code = u->code;
    char msg[sizeof(u->message)];
    memcpy(msg, u->message, sizeof(msg));
    upload_free(u);
    if (status)
        execd_reply_error(req, status, code, "%s", msg);
    else
        execd_reply_empty(req);
}

static void
upload_maybe_reply(struct upload *u)
{
    if (!u->req)
        return;
    if (u->body_done || (u->status == 413 && u->expect_continue))
        upload_reply(u);
}

/* After the answer went out: forget the connection (or drop what a broken body left). */
static void
conn_after_reply(struct conn *c)
{
    if (c->busy)
        return;
    if (conn_idle(c)) {
        conn_release(c);
    } else if (c->state == C_DISCARD && !c->up) {
        conn_drop(c, on_input_discard, NULL);
    }
}

static void
on_sock_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct upload *u = c->up;
    if (what & EV_TIMEOUT) { /* a client that stopped sending mid-body */
        on_bev_event(c->bev, BEV_EVENT_TIMEOUT | BEV_EVENT_READING, c);
        return;
    }
    size_t want = c->remaining < SOCK_READ ? (size_t)c->remaining : SOCK_READ;
    ssize_t n = read(fd, u->rbuf, want);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        on_bev_event(c->bev, BEV_EVENT_EOF | BEV_EVENT_READING, c);
        return;
    }
    c->remaining -= (uint64_t)n;
    body_feed(u, u->rbuf, (size_t)n);
    if (c->remaining > 0)
        return;
    event_del(u->sock_ev);
    body_end(u); /* answers the request and frees u */
    conn_after_reply(c);
}

static struct conn *
conn_of(struct evhttp_request *req)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    for (struct conn *c = conns; c; c = c->next) {
        if (c->bev == bev && c->up && !c->up->req)
            return c;
    }
    return NULL;
}

void
execd_files_upload(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    struct conn *c = conn_of(req);
    if (!c) {
        execd_reply_error(req, 400, "INVALID_FILE", "want a multipart/form-data upload body");
        return;
    }
    struct upload *u = c->up;
    u->req = req;
    if (u->body_done || (u->status == 413 && u->expect_continue)) {
        upload_reply(u);
        conn_after_reply(c);
        return;
    }
    /* evhttp is "writing" this request now: its read callback must not see the body bytes
     * (our input hook takes them), but reading stays on so a vanished client is noticed. */
    conn_hook_events(c);
    bufferevent_setcb(c->bev, NULL, c->saved_write ? on_bev_write : NULL, on_bev_event, c);
    c->saved_read = NULL; /* evhttp installs its own callbacks again when it replies */
    if (c->chunked) {
        bufferevent_enable(c->bev, EV_READ);
        return;
    }
    /* A Content-Length body is read from the socket directly, in large reads (the
     * bufferevent reads 4 KiB at a time), exactly up to its end. */
    bufferevent_disable(c->bev, EV_READ);
    u->rbuf = sbx_xmalloc(SOCK_READ);
    u->sock_ev = event_new(bufferevent_get_base(c->bev), bufferevent_getfd(c->bev),
                           EV_READ | EV_PERSIST, on_sock_read, c);
    struct timeval idle = {.tv_sec = UPLOAD_IDLE_SEC};
    event_add(u->sock_ev, &idle);
}

static struct bufferevent *
on_new_connection(struct event_base *base, void *arg)
{
    (void)arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    bufferevent_set_max_single_read(bev, SOCK_READ);
    evbuffer_add_cb(bufferevent_get_input(bev), on_input_idle, bev);
    return bev;
}

void
execd_upload_install(struct execd *ex)
{
    upload_ex = ex;
    evhttp_set_bevcb(ex->http, on_new_connection, ex);
}

void
execd_upload_forget(struct bufferevent *bev)
{
    for (struct conn *c = conns; c; c = c->next) {
        if (c->bev == bev) {
            conn_drop(c, NULL, NULL);
            return;
        }
    }
    (void)evbuffer_remove_cb(bufferevent_get_input(bev), on_input_idle, bev);
}

void
execd_upload_stop(struct execd *ex)
{
    (void)ex;
    while (conns)
        conn_drop(conns, NULL, NULL);
}
