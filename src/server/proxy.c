/*
 * proxy.c - the router: /sandboxes/{id}/proxy/{port}/... forwarded through
 * provider.connect(port).
 *
 * One upstream connection per request (Connection: close), request body streamed as it
 * arrives, response streamed back chunk by chunk (SSE is never buffered), WebSocket and other
 * upgrades spliced both ways on a thread of their own.
 *
 * Errors while the client is still sending a body: most clients (Python's http.client, the
 * SDKs' fetch) only read the answer once they have sent everything, so an answer sent early
 * followed by a close reaches them as a broken pipe, not as an error. So the router reads the
 * rest of the body and drops it, then answers: a sandbox that cannot be reached is a 404/409/
 * 502 with {code, message}; an upstream that answered early and closed (e.g. execd refusing an
 * upload) has that answer forwarded. Only a client that sent `Expect: 100-continue` (and is
 * waiting for leave to send) is answered at once.
 *
 * Security: the route requires the API key like the rest of the API; credentials meant for
 * this server (API key, Authorization, Cookie) are stripped, a client-sent
 * X-EXECD-ACCESS-TOKEN is dropped and the real one is added only by the provider, and `.`/`..`
 * path segments (also percent-encoded) are refused so the forwarded path means what it says.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/chunked.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/api_fields.h"
#include "server/httpd.h"
#include "common/httphead.h"
#include "server/proxy.h"
#include "server/metrics.h"
#include "server/srvutil.h"

#define HEAD_MAX   SBX_HTTP_HEAD_MAX
#define IO_BUF     ((size_t)32 * 1024)
#define POLL_SLICE 1000
/* Subprotocols of the router's own (see sbx_proxy_ws_key_ok): the API key as a browser can
 * send it on a WebSocket, and the name the router answers with when the sandbox picks none. */
#define KEY_PROTO     "sbx-api-key."
#define CONSOLE_PROTO "sbx-console"
#define PROTO_HEADER  "Sec-WebSocket-Protocol"

struct sbx_proxy {
    struct sbx_srv *srv;
    int fd;
    /* an error decided before the body was read: answered once it has been drained */
    int err_status;
    const char *err_code;
    char *err_msg;
    bool chunked_up; /* we frame the request body as chunked */
    bool failed;     /* writing upstream failed */
    bool upgrade;    /* the client asked for an upgrade */
    bool console;    /* sbx-console was offered: answered if the sandbox picks none */
    char *buf;       /* bytes read from upstream not yet consumed */
    size_t off, len, cap;
    bool resp_chunked;
    int64_t remaining;            /* content-length left, -1 = until EOF */
    struct sbx_chunked ch;        /* the body's chunked coding, strict: the sandbox is hostile */
    uint64_t t0_ns;               /* for GET /metrics: when the request began */
    uint64_t bytes_in, bytes_out; /* body bytes to the sandbox, bytes read from it */
};

static void
proxy_free(struct sbx_proxy *p)
{
    if (!p)
        return;
    sbx_metrics_router((double)(sbx_now_ns() - p->t0_ns) / 1e9, p->bytes_in, p->bytes_out,
                       p->failed || p->err_status != 0);
    sbx_metrics_router_open(-1);
    if (p->fd >= 0)
        (void)close(p->fd);
    free(p->err_msg);
    free(p->buf);
    free(p);
}

/* ---- request side ---- */

static bool
dot_segment(const char *seg, size_t n)
{
    sbx_autofree char *d = sbx_srv_url_decode(seg, n, false);
    return !d || strcmp(d, ".") == 0 || strcmp(d, "..") == 0 || strchr(d, '/') != NULL ||
           strchr(d, '\\') != NULL;
}

/* Refuse `.`, `..` (also encoded) and encoded separators in the forwarded path. */
static bool
path_ok(const char *rest)
{
    const char *p = rest;
    while (*p == '/') {
        p++;
        size_t n = strcspn(p, "/?");
        if (n > 0 && dot_segment(p, n))
            return false;
        p += n;
    }
    return true;
}

static bool
skip_request_header(const char *k)
{
    static const char *const drop[] = {
        "Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "TE", "Trailer",
        "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "Authorization", "Cookie",
        "OPEN-SANDBOX-API-KEY", SBX_ACCESS_HEADER, "X-EXECD-ACCESS-TOKEN", "X-Request-ID",
        "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
        /* libmicrohttpd already answered 100-continue */
        "Expect"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(drop); i++) {
        if (strcasecmp(k, drop[i]) == 0)
            return true;
    }
    return false;
}

/* Whether a subprotocol (n bytes at s) is one of the router's own, never forwarded. */
static bool
own_proto(const char *s, size_t n)
{
    return (n == sizeof CONSOLE_PROTO - 1 && memcmp(s, CONSOLE_PROTO, n) == 0) ||
           (n >= sizeof KEY_PROTO - 1 && memcmp(s, KEY_PROTO, sizeof KEY_PROTO - 1) == 0);
}

/* Sec-WebSocket-Protocol without the router's own subprotocols (the key above all); nothing
 * when none is left. */
static void
copy_protocols(struct sbx_buf *h, const char *v)
{
    bool first = true;
    while (v && *v) {
        v += strspn(v, " \t,");
        size_t n = strcspn(v, " \t,");
        if (n > 0 && !own_proto(v, n)) {
            (void)sbx_buf_printf(h, NULL, "%s%.*s", first ? PROTO_HEADER ": " : ", ", (int)n, v);
            first = false;
        }
        v += n;
    }
    if (!first)
        (void)sbx_buf_append_str(h, "\r\n", NULL);
}

static enum MHD_Result
copy_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    if (strcasecmp(k, PROTO_HEADER) == 0)
        copy_protocols(cls, v);
    else if (!skip_request_header(k))
        (void)sbx_buf_printf(cls, NULL, "%s: %s\r\n", k, v ? v : "");
    return MHD_YES;
}

struct proto_scan {
    const char *key; /* the server's API key */
    bool key_ok;     /* sbx-api-key.<hex> of that key was offered */
    bool console;    /* sbx-console was offered */
};

static void
scan_protocols(struct proto_scan *ps, const char *v)
{
    while (v && *v) {
        v += strspn(v, " \t,");
        size_t n = strcspn(v, " \t,");
        size_t kp = sizeof KEY_PROTO - 1;
        if (n == sizeof CONSOLE_PROTO - 1 && memcmp(v, CONSOLE_PROTO, n) == 0)
            ps->console = true;
        char key[129];
        size_t klen = 0;
        if (n > kp && memcmp(v, KEY_PROTO, kp) == 0 && n - kp < 2 * sizeof key &&
            sodium_hex2bin((unsigned char *)key, sizeof key - 1, v + kp, n - kp, NULL, &klen,
                           NULL) == 0) {
            key[klen] = '\0';
            ps->key_ok = ps->key_ok || (klen == strlen(key) && sbx_srv_secret_equal(key, ps->key));
            sodium_memzero(key, sizeof key);
        }
        v += n;
    }
}

static enum MHD_Result
scan_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    if (strcasecmp(k, PROTO_HEADER) == 0)
        scan_protocols(cls, v);
    return MHD_YES;
}

static struct proto_scan
offered_protocols(struct sbx_req *r)
{
    struct proto_scan ps = {.key = r->srv->api_key};
    (void)MHD_get_connection_values(r->conn, MHD_HEADER_KIND, scan_header, &ps);
    return ps;
}

static bool
wants_upgrade(struct sbx_req *r)
{
    const char *up = sbx_req_header(r, "Upgrade");
    const char *conn = sbx_req_header(r, "Connection");
    return up && conn && strcasestr(conn, "upgrade");
}

/* A WebSocket request through the router that offers the API key as the subprotocol
 * `sbx-api-key.<hex of the key>` (a browser's WebSocket cannot send headers): true when that
 * key is the server's. The router never forwards that subprotocol. */
static bool
ws_key_ok(struct sbx_req *r)
{
    return wants_upgrade(r) && offered_protocols(r).key_ok;
}

static void
add_framing(struct sbx_req *r, struct sbx_proxy *p, struct sbx_buf *h)
{
    const char *cl = sbx_req_header(r, "Content-Length");
    const char *te = sbx_req_header(r, "Transfer-Encoding");
    if (cl)
        (void)sbx_buf_printf(h, NULL, "Content-Length: %s\r\n", cl);
    else if (te && strcasestr(te, "chunked")) {
        p->chunked_up = true;
        (void)sbx_buf_printf(h, NULL, "Transfer-Encoding: chunked\r\n");
    }
    if (p->upgrade)
        (void)sbx_buf_printf(h, NULL, "Connection: Upgrade\r\nUpgrade: %s\r\n",
                             sbx_req_header(r, "Upgrade"));
    else
        (void)sbx_buf_printf(h, NULL, "Connection: close\r\n");
}

static void
add_extra_headers(struct sbx_req *r, json_t *extra, struct sbx_buf *h)
{
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach (extra, k, v) {
        if (strcasecmp(k, "Host") != 0) /* already in the request line's block */
            (void)sbx_buf_printf(h, NULL, "%s: %s\r\n", k, json_string_value(v));
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char ip[64] = "unknown";
    if (ci && ci->client_addr)
        (void)getnameinfo(ci->client_addr,
                          ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                 : sizeof(struct sockaddr_in),
                          ip, sizeof ip, NULL, 0, NI_NUMERICHOST);
    const char *host = sbx_req_header(r, "Host");
    (void)sbx_buf_printf(h, NULL,
                         "X-Forwarded-For: %s\r\nX-Forwarded-Proto: http\r\n"
                         "X-Forwarded-Host: %s\r\nX-Request-ID: %s\r\n",
                         ip, host ? host : "", r->rid);
}

static int
build_head(struct sbx_req *r, struct sbx_proxy *p, int port, json_t *extra, struct sbx_buf *h)
{
    const char *q = strchr(r->raw_uri, '?');
    const char *rest = *r->route.rest ? r->route.rest : "/";
    /* A remote provider's proxy routes by Host (Daytona's preview host): it may say which. */
    const char *host = json_string_value(json_object_get(extra, "Host"));
    if (host)
        (void)sbx_buf_printf(h, NULL, "%s %s%s HTTP/1.1\r\nHost: %s\r\n", r->method, rest,
                             q ? q : "", host);
    else
        (void)sbx_buf_printf(h, NULL, "%s %s%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", r->method, rest,
                             q ? q : "", port);
    (void)MHD_get_connection_values(r->conn, MHD_HEADER_KIND, copy_header, h);
    add_framing(r, p, h);
    add_extra_headers(r, extra, h);
    return sbx_buf_append_str(h, "\r\n", NULL);
}

/* True when a request body follows the head and the client is already sending it. */
static bool
body_in_flight(struct sbx_req *r)
{
    const char *cl = sbx_req_header(r, "Content-Length");
    const char *te = sbx_req_header(r, "Transfer-Encoding");
    const char *expect = sbx_req_header(r, "Expect");
    uint64_t n = 0;
    bool body = (cl && (sbx_parse_u64(cl, &n, NULL) < 0 || n > 0)) || (te && *te);
    return body && !(expect && strcasecmp(expect, "100-continue") == 0);
}

/* Answer an error now, or after the body has been read and dropped (see the top comment). */
static enum MHD_Result
fail(struct sbx_req *r, int status, const char *code, const char *msg)
{
    struct sbx_proxy *p = r->proxy;
    if (!p || !body_in_flight(r))
        return sbx_http_send_error(r, status, code, msg);
    p->err_status = status;
    p->err_code = code;
    free(p->err_msg);
    p->err_msg = sbx_xstrdup(msg);
    p->failed = true;
    return MHD_YES;
}

static enum MHD_Result
connect_error(struct sbx_req *r, const sbx_error *err)
{
    int code = sbx_error_code(err);
    if (code == SBX_ENOTFOUND)
        return fail(r, 404, "SANDBOX::SANDBOX_NOT_FOUND", sbx_error_msg(err));
    if (code == SBX_ECONFLICT)
        return fail(r, 409, "SANDBOX::SANDBOX_NOT_RUNNING", sbx_error_msg(err));
    if (code == SBX_EUNAVAIL) /* its provider cannot be built (a secret is not set) */
        return fail(r, 503, "SANDBOX::PROVIDER_UNAVAILABLE", sbx_error_msg(err));
    return fail(r, 502, "SANDBOX::PROXY_CONNECT_FAILED", sbx_error_msg(err));
}

static enum MHD_Result
proxy_begin(struct sbx_req *r)
{
    struct sbx_proxy *p = sbx_xcalloc(1, sizeof *p);
    p->t0_ns = sbx_now_ns();
    sbx_metrics_router_open(1);
    p->srv = r->srv;
    p->fd = -1;
    p->remaining = -1;
    p->upgrade = wants_upgrade(r);
    p->console = p->upgrade && offered_protocols(r).console;
    r->proxy = p;
    int port = sbx_route_port(r->route.port);
    if (!sbx_srv_is_uuid(r->route.sandbox_id))
        return fail(r, 404, "SANDBOX::SANDBOX_NOT_FOUND", "no such sandbox");
    if (port < 0)
        return fail(r, 400, "SANDBOX::INVALID_PORT", "port must be 1-65535");
    if (!path_ok(r->route.rest))
        return fail(r, 400, "SANDBOX::INVALID_PARAMETER",
                    "`.`, `..` and encoded separators are not allowed in the proxied path");
    json_t *extra = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_mgr_connect(r->srv->mgr, r->route.sandbox_id, port, &p->fd, &extra, &err) < 0)
        return connect_error(r, err);
    sbx_mgr_touch(r->srv->mgr, r->route.sandbox_id);
    struct sbx_buf head;
    sbx_buf_init(&head, HEAD_MAX);
    int rc = build_head(r, p, port, extra, &head);
    json_decref(extra);
    if (rc < 0 || sbx_write_all(p->fd, head.data, head.len) < 0) {
        sbx_buf_dispose(&head);
        return fail(r, 502, "SANDBOX::PROXY_ERROR", "cannot send the request to the sandbox");
    }
    sbx_buf_dispose(&head);
    return MHD_YES;
}

static enum MHD_Result
proxy_data(struct sbx_req *r, const char *data, size_t n)
{
    struct sbx_proxy *p = r->proxy;
    if (p->failed)
        return MHD_YES;
    p->bytes_in += n;
    char hdr[32];
    int hn = snprintf(hdr, sizeof hdr, "%zx\r\n", n);
    if ((p->chunked_up && sbx_write_all(p->fd, hdr, (size_t)hn) < 0) ||
        sbx_write_all(p->fd, data, n) < 0 || (p->chunked_up && sbx_write_all(p->fd, "\r\n", 2) < 0))
        p->failed = true;
    return MHD_YES;
}

/* ---- response side ---- */

/* Wait for upstream data in slices so a shutting-down server is noticed. */
static ssize_t
up_read(struct sbx_proxy *p, char *dst, size_t n)
{
    for (;;) {
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, POLL_SLICE);
        if (atomic_load(&p->srv->stopping))
            return -1;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -1;
        if (pr == 0)
            continue;
        ssize_t got = read(p->fd, dst, n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got > 0)
            p->bytes_out += (uint64_t)got;
        return got;
    }
}

/* Read more upstream bytes into p->buf (compacting first). 0 on EOF, -1 on error. */
static ssize_t
fill(struct sbx_proxy *p)
{
    if (p->off > 0) {
        memmove(p->buf, p->buf + p->off, p->len - p->off);
        p->len -= p->off;
        p->off = 0;
    }
    if (p->cap - p->len < IO_BUF) {
        p->cap = p->len + IO_BUF;
        p->buf = sbx_xrealloc(p->buf, p->cap);
    }
    ssize_t got = up_read(p, p->buf + p->len, p->cap - p->len);
    if (got > 0)
        p->len += (size_t)got;
    return got;
}

static bool
skip_response_header(const char *k)
{
    /* Framing and hop-by-hop headers are the router's own. The rest would act on the API's
     * origin (the router answers on the server's origin, where API keys and the console
     * live), so a sandbox does not get to set them: cookies, site data wiping, HSTS, pinning,
     * alternative services, service worker scope, and CORS (the API sets its own). */
    static const char *const drop[] = {"Connection",
                                       "Keep-Alive",
                                       "Transfer-Encoding",
                                       "Content-Length",
                                       "Trailer",
                                       "TE",
                                       "Upgrade",
                                       "Proxy-Authenticate",
                                       "Date",
                                       "X-Request-ID",
                                       "Set-Cookie",
                                       "Set-Cookie2",
                                       "Clear-Site-Data",
                                       "Strict-Transport-Security",
                                       "Public-Key-Pins",
                                       "Public-Key-Pins-Report-Only",
                                       "Alt-Svc",
                                       "Service-Worker-Allowed",
                                       "X-Content-Type-Options"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(drop); i++) {
        if (strcasecmp(k, drop[i]) == 0)
            return true;
    }
    return strncasecmp(k, "Access-Control-", 15) == 0;
}

static void
add_headers(const struct sbx_http_head *h, struct MHD_Response *resp)
{
    for (size_t i = 0; i < h->n; i++) {
        if (!skip_response_header(h->name[i]))
            (void)MHD_add_response_header(resp, h->name[i], h->value[i]);
    }
    /* Whatever a sandbox serves through the router runs in an opaque origin (a browser
     * treats the document as sandboxed: no access to the API's origin, its storage or its
     * cookies), and is never sniffed into something else. */
    (void)MHD_add_response_header(resp, "Content-Security-Policy", "sandbox");
    (void)MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

/* The upstream body's chunked coding decoded into out: what is there now, at most max bytes.
 * A chunk's data is handed to the decoder max bytes at a time, so whatever it consumes fits. */
static ssize_t
read_chunked(struct sbx_proxy *p, char *out, size_t max)
{
    while (p->ch.state != CH_DONE) {
        if (p->off == p->len && fill(p) <= 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        size_t n = p->len - p->off;
        const char *data = NULL;
        size_t dlen = 0;
        ssize_t used = sbx_chunked_step(&p->ch, p->buf + p->off, n < max ? n : max, &data, &dlen);
        if (used < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        p->off += (size_t)used;
        if (dlen) {
            memcpy(out, data, dlen);
            return (ssize_t)dlen;
        }
    }
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static ssize_t
read_plain(struct sbx_proxy *p, char *out, size_t max)
{
    if (p->remaining == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (p->remaining > 0 && (uint64_t)p->remaining < max)
        max = (size_t)p->remaining;
    ssize_t n = 0;
    if (p->off < p->len) {
        n = (ssize_t)(p->len - p->off < max ? p->len - p->off : max);
        memcpy(out, p->buf + p->off, (size_t)n);
        p->off += (size_t)n;
    } else {
        n = up_read(p, out, max);
    }
    if (n == 0 && p->remaining < 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (n <= 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (p->remaining > 0)
        p->remaining -= n;
    return n;
}

/* MHD pulls the body from here; each call returns what is there now, so every SSE event goes
 * out as soon as execd sends it. */
static ssize_t
body_reader(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct sbx_proxy *p = cls;
    return p->resp_chunked ? read_chunked(p, out, max) : read_plain(p, out, max);
}

/* ---- upgrade (WebSocket) ---- */

struct sbx_splice {
    struct sbx_upgraded link; /* up: the sandbox; client: MHD's socket */
    struct sbx_srv *srv;
    struct MHD_UpgradeResponseHandle *urh;
    char *pending; /* upstream bytes read past the 101 head, for the client */
    size_t pending_len;
};

/* One direction of a splice: bytes read from `from` not yet written to `to`. Both sockets
 * are non-blocking (MHD hands its socket over so): a side that does not read makes the other
 * side's reads stop (its buffer stays full), never an error, and neither direction waits for
 * the other (a client blocked sending stdin still gets its output). */
struct flow {
    int from;
    int to;
    char buf[IO_BUF];
    size_t off;
    size_t len;
};

static bool
would_block(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* Read into an empty buffer when `from` has something. -1 at EOF or on an error. */
static int
flow_read(struct flow *f, short revents)
{
    if (f->len || !(revents & (POLLIN | POLLHUP | POLLERR)))
        return 0;
    ssize_t n = read(f->from, f->buf, sizeof f->buf);
    if (n < 0 && would_block())
        return 0;
    if (n <= 0)
        return -1;
    f->off = 0;
    f->len = (size_t)n;
    return 0;
}

static int
flow_write(struct flow *f, short revents)
{
    if (!f->len || !(revents & (POLLOUT | POLLERR | POLLHUP)))
        return 0;
    ssize_t n = write(f->to, f->buf + f->off, f->len);
    if (n < 0 && would_block())
        return 0;
    if (n <= 0)
        return -1;
    f->off += (size_t)n;
    f->len -= (size_t)n;
    return 0;
}

/* The sandbox's side ended: the rest of its bytes to the client, then our FIN, then what the
 * client still sends is read and dropped until it closes (at most LINGER_MS). Closing with
 * unread input would reset the connection, and a reset makes the client's kernel drop the
 * output the client has not read yet (the end of a command's output, its exit frame). */
#define LINGER_MS 5000

static void
linger_client(int client, struct flow *u2c)
{
    (void)fcntl(client, F_SETFL, fcntl(client, F_GETFL) & ~O_NONBLOCK);
    if ((u2c->len && sbx_write_all(client, u2c->buf + u2c->off, u2c->len) < 0) ||
        shutdown(client, SHUT_WR) < 0)
        return;
    int64_t end = (int64_t)sbx_now_ms() + LINGER_MS;
    char sink[4096];
    for (;;) {
        int64_t left = end - (int64_t)sbx_now_ms();
        struct pollfd pfd = {.fd = client, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0 || read(client, sink, sizeof sink) <= 0)
            return;
    }
}

static void
splice_loop(int client, int up)
{
    bool up_done = false;
    (void)fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
    (void)fcntl(up, F_SETFL, fcntl(up, F_GETFL) | O_NONBLOCK);
    struct flow *c2u = sbx_xcalloc(1, sizeof *c2u);
    struct flow *u2c = sbx_xcalloc(1, sizeof *u2c);
    *c2u = (struct flow){.from = client, .to = up};
    *u2c = (struct flow){.from = up, .to = client};
    for (;;) {
        struct pollfd pfd[2] = {
            {.fd = client, .events = (short)((c2u->len ? 0 : POLLIN) | (u2c->len ? POLLOUT : 0))},
            {.fd = up, .events = (short)((u2c->len ? 0 : POLLIN) | (c2u->len ? POLLOUT : 0))},
        };
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (flow_write(c2u, pfd[1].revents) < 0 || flow_write(u2c, pfd[0].revents) < 0 ||
            flow_read(c2u, pfd[0].revents) < 0)
            break;
        if (flow_read(u2c, pfd[1].revents) < 0) {
            up_done = true;
            break;
        }
    }
    if (up_done) /* the sandbox closed: what it sent last still goes to the client */
        linger_client(client, u2c);
    free(c2u);
    free(u2c);
}

void
sbx_upgraded_link(struct sbx_srv *srv, struct sbx_upgraded *u)
{
    pthread_mutex_lock(&srv->splice_mu);
    u->next = srv->splices;
    srv->splices = u;
    srv->n_splices++;
    pthread_mutex_unlock(&srv->splice_mu);
}

void
sbx_upgraded_unlink(struct sbx_srv *srv, struct sbx_upgraded *u)
{
    pthread_mutex_lock(&srv->splice_mu);
    for (struct sbx_upgraded **pp = &srv->splices; *pp; pp = &(*pp)->next) {
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    }
    pthread_mutex_unlock(&srv->splice_mu);
}

void
sbx_upgraded_done(struct sbx_srv *srv)
{
    pthread_mutex_lock(&srv->splice_mu);
    srv->n_splices--;
    pthread_cond_broadcast(&srv->splice_cv);
    pthread_mutex_unlock(&srv->splice_mu);
}

static void *
splice_main(void *arg)
{
    struct sbx_splice *j = arg;
    int client = j->link.client;
    int up = j->link.up;
    (void)fcntl(client, F_SETFL, fcntl(client, F_GETFL) & ~O_NONBLOCK);
    if (j->pending_len == 0 || sbx_write_all(client, j->pending, j->pending_len) == 0)
        splice_loop(client, up);
    struct sbx_srv *srv = j->srv;
    sbx_upgraded_unlink(srv, &j->link);
    (void)close(up);
    (void)MHD_upgrade_action(j->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(j->pending);
    free(j);
    sbx_upgraded_done(srv);
    return NULL;
}

static void
/* NOLINTNEXTLINE(readability-function-size): the signature is libmicrohttpd's */
on_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
            size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    (void)c;
    (void)con_cls;
    struct sbx_proxy *p = cls;
    struct sbx_splice *j = sbx_xcalloc(1, sizeof *j);
    j->srv = p->srv;
    j->link.up = sbx_steal_fd(&p->fd);
    j->link.client = sock;
    j->urh = urh;
    j->pending_len = p->len - p->off;
    j->pending = sbx_xmalloc(j->pending_len + 1);
    memcpy(j->pending, p->buf + p->off, j->pending_len);
    sbx_upgraded_link(j->srv, &j->link);
    pthread_t t;
    if ((extra_in_size && sbx_write_all(j->link.up, extra_in, extra_in_size) < 0) ||
        pthread_create(&t, NULL, splice_main, j) != 0) {
        splice_main(j);
        return;
    }
    (void)pthread_detach(t);
}

/* ---- end of request: read the head, answer ---- */

static enum MHD_Result
queue(struct sbx_req *r, struct MHD_Response *resp, int status)
{
    sbx_http_common_headers(r, resp);
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

static enum MHD_Result
answer(struct sbx_req *r, struct sbx_proxy *p, const struct sbx_http_resp *rh)
{
    const struct sbx_http_head *h = &rh->head;
    struct MHD_Response *resp = NULL;
    if (rh->status == 101) {
        /* Only an upgrade the client asked for: a 101 it did not ask for would hand the
         * client's connection to the sandbox in a protocol the client never agreed to. */
        if (!p->upgrade)
            return sbx_http_send_error(r, 502, "SANDBOX::PROXY_ERROR",
                                       "the sandbox switched protocols although the request "
                                       "asked for no upgrade");
        resp = MHD_create_response_for_upgrade(on_upgraded, p);
        add_headers(h, resp);
        (void)MHD_add_response_header(resp, "Upgrade", sbx_req_header(r, "Upgrade"));
        /* A browser fails a handshake that picks none of the subprotocols it offered. */
        if (p->console && !MHD_get_response_header(resp, PROTO_HEADER))
            (void)MHD_add_response_header(resp, PROTO_HEADER, CONSOLE_PROTO);
        return queue(r, resp, 101);
    }
    enum sbx_http_body framing = sbx_http_body_framing(rh, r->method);
    p->resp_chunked = framing == SBX_BODY_CHUNKED;
    p->ch = (struct sbx_chunked){.strict = true};
    p->remaining = framing == SBX_BODY_LENGTH ? h->content_length : -1;
    if (framing == SBX_BODY_NONE) {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else {
        uint64_t size = framing == SBX_BODY_LENGTH ? (uint64_t)p->remaining : MHD_SIZE_UNKNOWN;
        resp = MHD_create_response_from_callback(size, IO_BUF, body_reader, p, NULL);
    }
    add_headers(h, resp);
    return queue(r, resp, rh->status);
}

/* Read response heads until a final one: interim 1xx heads other than 101 are checked like
 * any head and dropped. On success rh points into p->buf and p->off at the body. */
static int
read_final_head(struct sbx_proxy *p, struct sbx_http_resp *rh)
{
    for (;;) {
        ssize_t n = sbx_http_resp_head(p->buf + p->off, p->len - p->off, rh);
        if (n < 0)
            return -1;
        if (n == 0 && fill(p) <= 0) {
            rh->head.why = "the sandbox closed the connection before a whole response head";
            return -1;
        }
        p->off += (size_t)n;
        if (n > 0 && !sbx_http_interim(rh->status))
            return 0;
    }
}

static enum MHD_Result
proxy_end(struct sbx_req *r)
{
    struct sbx_proxy *p = r->proxy;
    if (p->err_status) /* decided before the body; the body has been drained by now */
        return sbx_http_send_error(r, p->err_status, p->err_code, p->err_msg);
    if (p->chunked_up && !p->failed && sbx_write_all(p->fd, "0\r\n\r\n", 5) < 0)
        p->failed = true;
    struct sbx_http_resp rh = {0};
    /* Even when sending the body failed, the upstream may have answered before it closed
     * (a refused upload): that answer is what the client should see. */
    if (read_final_head(p, &rh) < 0) {
        if (p->failed && p->len == 0)
            return sbx_http_send_error(r, 502, "SANDBOX::PROXY_ERROR",
                                       "the sandbox closed the connection before the request "
                                       "was sent, without an answer");
        char msg[200];
        (void)snprintf(msg, sizeof msg, "the sandbox sent no valid response: %s",
                       rh.head.why ? rh.head.why : "no head");
        return sbx_http_send_error(r, 502, "SANDBOX::PROXY_ERROR", msg);
    }
    return answer(r, p, &rh);
}

static void
proxy_done(struct sbx_req *r)
{
    proxy_free(r->proxy);
    r->proxy = NULL;
}

/* A secureAccess sandbox's own token opens its router routes, and nothing else: not another
 * sandbox's routes (the token is compared with the named sandbox's), not the API. A browser's
 * WebSocket offers the API key as a subprotocol instead of a header (ws_key_ok). */
static bool
proxy_alt_auth(struct sbx_req *r)
{
    const char *tok = sbx_req_header(r, SBX_ACCESS_HEADER);
    if (tok && sbx_srv_is_uuid(r->route.sandbox_id) &&
        sbx_mgr_access_ok(r->srv->mgr, r->route.sandbox_id, tok))
        return true;
    return ws_key_ok(r);
}

const struct sbx_http_handler sbx_proxy_handler = {
    .alt_auth = proxy_alt_auth,
    .begin = proxy_begin,
    .data = proxy_data,
    .end = proxy_end,
    .done = proxy_done,
};
