/*
 * download.c - GET /files/download: whole file, one byte range (206), or a line slice.
 *
 * The body is a file segment of the evbuffer (sendfile), so any size streams without being
 * read into memory. A body bigger than one page-cache window goes out window by window, and
 * the windows that were not cached when the download began are dropped from the page cache
 * once sent (pagecache.h): a cold 1 GiB download occupies ~8-16 MiB of cache, not 1 GiB,
 * while a file that was cached stays cached.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/download.h"
#include "execd/files.h"
#include "execd/pagecache.h"

#define MAX_LINE_SLICE (64u << 20)

static int
parse_num(const char **p, uint64_t *out)
{
    if (!isdigit((unsigned char)**p))
        return -1;
    uint64_t v = 0;
    while (isdigit((unsigned char)**p)) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(**p - '0');
        (*p)++;
    }
    *out = v;
    return 0;
}

int
execd_range_parse(const char *h, uint64_t size, uint64_t *start, uint64_t *len)
{
    const char *p = h;
    uint64_t a = 0;
    uint64_t b = 0;
    if (strncmp(p, "bytes=", 6) != 0)
        return -1;
    p += 6;
    while (*p == ' ')
        p++;
    if (*p == '-') { /* suffix: the last n bytes */
        p++;
        if (parse_num(&p, &b) < 0 || b == 0 || size == 0)
            return -1;
        a = b >= size ? 0 : size - b;
        b = size - 1;
    } else {
        if (parse_num(&p, &a) < 0 || *p++ != '-' || a >= size)
            return -1;
        if (*p == '\0' || *p == ',') {
            b = size - 1;
        } else if (parse_num(&p, &b) < 0 || b < a) {
            return -1;
        }
        if (b >= size)
            b = size - 1;
    }
    while (*p == ' ')
        p++;
    if (*p != '\0' && *p != ',') /* only the first of several ranges is served */
        return -1;
    *start = a;
    *len = b - a + 1;
    return 0;
}

/* attachment; filename="x", or the RFC 5987 form for names that need escaping. */
static char *
disposition(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    bool plain = true;
    for (const unsigned char *c = (const unsigned char *)base; *c; c++)
        plain = plain && *c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\' && *c != '%';
    if (plain)
        return sbx_xasprintf("attachment; filename=\"%s\"", base);
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 16);
    (void)sbx_buf_append_str(&b, "attachment; filename*=UTF-8''", NULL);
    for (const unsigned char *c = (const unsigned char *)base; *c; c++) {
        if (isalnum(*c) || strchr("-._~", *c))
            (void)sbx_buf_append(&b, c, 1, NULL);
        else
            (void)sbx_buf_printf(&b, NULL, "%%%02X", *c);
    }
    return sbx_buf_steal(&b);
}

static void
reply_lines(struct evhttp_request *req, FILE *f, uint64_t offset, uint64_t limit)
{
    struct evbuffer *b = evbuffer_new();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t lineno = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (++lineno < offset)
            continue;
        if ((limit && lineno >= offset + limit) || evbuffer_get_length(b) > MAX_LINE_SLICE)
            break;
        evbuffer_add(b, line, (size_t)n);
    }
    free(line);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static int
line_params(struct evhttp_request *req, uint64_t *offset, uint64_t *limit, bool *lines)
{
    sbx_autofree char *off = execd_query(req, "offset");
    sbx_autofree char *lim = execd_query(req, "limit");
    *lines = off || lim;
    *offset = 1;
    *limit = 0;
    if ((off && (sbx_parse_u64(off, offset, NULL) < 0 || *offset < 1)) ||
        (lim && (sbx_parse_u64(lim, limit, NULL) < 0 || *limit < 1))) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "`offset` and `limit` must be integers >= 1");
        return -1;
    }
    return 0;
}

/* Append [start, start+len) of fd (owned) as a sendfile segment: evbuffer_add_file would
 * mmap the file (a 1 GiB download would map 1 GiB into execd's RSS), or read it into memory
 * when the buffer is not marked as draining to a socket; this buffer is moved into the
 * connection's output as a whole, so it is marked. */
void
execd_add_file_segment(struct evbuffer *b, int fd, uint64_t start, uint64_t len)
{
    evbuffer_set_flags(b, EVBUFFER_FLAG_DRAINS_TO_FD);
    struct evbuffer_file_segment *seg = evbuffer_file_segment_new(
        fd, (ev_off_t)start, (ev_off_t)len,
        EVBUF_FS_CLOSE_ON_FREE | EVBUF_FS_DISABLE_MMAP | EVBUF_FS_DISABLE_LOCKING);
    if (!seg) {
        close(fd);
        return;
    }
    (void)evbuffer_add_file_segment(b, seg, 0, (ev_off_t)len);
    evbuffer_file_segment_free(seg); /* the buffer holds its own reference */
}

/* A body of more than one window, streamed one window at a time. */
struct dl {
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    int fd;
    uint64_t pos;  /* the next byte to send (the window in flight ends here) */
    uint64_t from; /* the window in flight starts here */
    uint64_t start;
    uint64_t end;
    uint64_t first; /* window index of the first byte */
    uint8_t *cold;  /* bit i: window first+i had no cached page when the download began */
};

static void
dl_free(struct dl *d)
{
    close(d->fd);
    free(d->cold);
    free(d);
}

static bool
dl_cold(const struct dl *d, uint64_t off)
{
    uint64_t i = off / EXECD_PC_WINDOW - d->first;
    return (d->cold[i / 8] >> (i % 8)) & 1;
}

static void dl_on_drained(struct evhttp_connection *evcon, void *arg);

static void
dl_send(struct dl *d)
{
    uint64_t wend = (d->pos / EXECD_PC_WINDOW + 1) * EXECD_PC_WINDOW;
    uint64_t k = (wend < d->end ? wend : d->end) - d->pos;
    struct evbuffer *b = evbuffer_new();
    evbuffer_set_flags(b, EVBUFFER_FLAG_DRAINS_TO_FD);
    /* the segments share d->fd (no CLOSE_ON_FREE): it is closed by dl_free, which runs after
     * the last one was sent, or when evhttp drops the connection, after which nothing is
     * sent from the segments it still holds */
    struct evbuffer_file_segment *seg = evbuffer_file_segment_new(
        d->fd, (ev_off_t)d->pos, (ev_off_t)k, EVBUF_FS_DISABLE_MMAP | EVBUF_FS_DISABLE_LOCKING);
    /* with sendfile and a known length these fail only when malloc does: fatal, as for
     * sbx_xmalloc (the headers are out, so the reply could not be finished honestly) */
    if (!seg || evbuffer_add_file_segment(b, seg, 0, (ev_off_t)k) < 0)
        abort();
    evbuffer_file_segment_free(seg); /* the buffer holds its own reference */
    d->from = d->pos;
    d->pos += k;
    evhttp_send_reply_chunk_with_cb(d->req, b, dl_on_drained, d);
    evbuffer_free(b);
}

/* Drop [off, off + len) if the download brought it into the cache. */
static void
dl_drop(const struct dl *d, uint64_t off, uint64_t len)
{
    if (len > 0 && dl_cold(d, off))
        execd_pc_drop(d->fd, off, len);
}

/* The window in flight was handed to the socket (the connection's output is empty): the
 * window before it is dropped if the download brought it into the cache, then the next one
 * goes out or the reply ends. Not the window just handed over: sendfile lends its pages to
 * the socket, and a page still queued there (up to the socket buffers' few MiB) is not
 * dropped. */
static void
dl_on_drained(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct dl *d = arg;
    if (d->from > d->start) {
        uint64_t prev = d->from - 1 - (d->from - 1) % EXECD_PC_WINDOW;
        if (prev < d->start)
            prev = d->start;
        dl_drop(d, prev, d->from - prev);
    }
    if (d->pos < d->end) {
        dl_send(d);
        return;
    }
    dl_drop(d, d->from, d->pos - d->from); /* what the socket still holds stays cached */
    evhttp_connection_set_closecb(d->evcon, NULL, NULL);
    evhttp_send_reply_end(d->req);
    dl_free(d);
}

static void
dl_on_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct dl *d = arg;
    execd_http_abandon(d->req);
    dl_free(d);
}

static void
dl_start(struct evhttp_request *req, int fd, uint64_t start, uint64_t len, int status,
         const char *reason)
{
    struct dl *d = sbx_xcalloc(1, sizeof(*d));
    d->req = req;
    d->evcon = evhttp_request_get_connection(req);
    d->fd = fd;
    d->pos = start;
    d->start = start;
    d->end = start + len;
    d->first = start / EXECD_PC_WINDOW;
    uint64_t n = (d->end - 1) / EXECD_PC_WINDOW - d->first + 1;
    d->cold = sbx_xcalloc((size_t)(n + 7) / 8, 1);
    /* which windows were cached is asked before anything is read: read-ahead of one window
     * brings in the start of the next */
    for (uint64_t i = 0; i < n; i++) {
        uint64_t w = (d->first + i) * EXECD_PC_WINDOW;
        if (!execd_pc_cached(fd, w, EXECD_PC_WINDOW))
            d->cold[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    char cl[32];
    (void)snprintf(cl, sizeof(cl), "%llu", (unsigned long long)len);
    /* with a Content-Length evhttp streams the body as is (no chunked encoding) */
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", cl);
    evhttp_send_reply_start(req, status, reason);
    evhttp_connection_set_closecb(d->evcon, dl_on_close, d);
    dl_send(d);
}

static void
send_file(struct evhttp_request *req, int fd, const char *path, uint64_t size)
{
    const char *range = evhttp_find_header(evhttp_request_get_input_headers(req), "Range");
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    uint64_t start = 0;
    uint64_t len = size;
    char cr[96];
    if (range && execd_range_parse(range, size, &start, &len) < 0) {
        (void)snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
        evhttp_add_header(h, "Content-Range", cr);
        close(fd);
        execd_reply_error(req, 416, "UNKNOWN", "range `%s` not satisfiable", range);
        return;
    }
    sbx_autofree char *disp = disposition(path);
    evhttp_add_header(h, "Content-Type", "application/octet-stream");
    evhttp_add_header(h, "Content-Disposition", disp);
    evhttp_add_header(h, "Accept-Ranges", "bytes");
    if (range) {
        (void)snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)start,
                       (unsigned long long)(start + len - 1), (unsigned long long)size);
        evhttp_add_header(h, "Content-Range", cr);
    }
    int status = range ? 206 : 200;
    const char *reason = range ? "Partial Content" : "OK";
    if (len > EXECD_PC_WINDOW) {
        dl_start(req, fd, start, len, status, reason); /* owns fd */
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (len > 0)
        execd_add_file_segment(b, fd, start, len); /* owns fd */
    else
        close(fd);
    evhttp_send_reply(req, status, reason, b);
    evbuffer_free(b);
}

void
execd_files_download(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    sbx_autofree char *raw = execd_query(req, "path");
    if (!raw) {
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `path`");
        return;
    }
    sbx_autofree char *path = execd_req_path(req, raw);
    uint64_t offset = 0;
    uint64_t limit = 0;
    bool lines = false;
    if (!path || line_params(req, &offset, &limit, &lines) < 0)
        return;
    bool has_range = evhttp_find_header(evhttp_request_get_input_headers(req), "Range");
    if (lines && has_range) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "`offset`/`limit` and a Range header are mutually exclusive");
        return;
    }
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        execd_reply_errno(req, errno, "open", path);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`%s` is not a regular file", path);
        return;
    }
    if (lines) {
        sbx_autofclose FILE *f = fdopen(sbx_steal_fd(&fd), "r");
        reply_lines(req, f, offset, limit);
        return;
    }
    send_file(req, sbx_steal_fd(&fd), path, (uint64_t)st.st_size);
}
