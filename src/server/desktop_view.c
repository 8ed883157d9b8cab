/*
 * desktop_view.c - a sandbox's live desktop in a browser.
 *
 *   POST /v1/sandboxes/{id}/desktop/view   (API key) a view token for one sandbox, 1 h by default
 *   GET  /desktop/view/{id}#token=T        the page (static; the token stays in the fragment)
 *   GET  /desktop/static/{view.js,boot.js,view.css}  the page's scripts and style (in sbx)
 *   GET  /desktop/novnc/{core,vendor}/...  Debian's noVNC (/usr/share/novnc), JavaScript only
 *   GET  /v1/sandboxes/{id}/desktop/vnc    WebSocket <-> the sandbox's VNC server (port 5900 of
 *                                          its own loopback), for the API key or a view token
 *
 * Why this is safe: the VNC server inside a sandbox has no password and listens only on the
 * sandbox's own 127.0.0.1 (session.c); the only way to it from outside is provider.connect,
 * which this bridge calls after checking the API key, or a view token bound to that one sandbox
 * (32 random bytes, compared in constant time, expiring, minted only with the API key). The
 * browser sends the token as a WebSocket subprotocol (`sbx-token.T`), never in a URL, so it is
 * in no request line, log or Referer. Everything served without a key is static and public
 * (the page, its script, noVNC's library code).
 */
#include "server/desktop_view.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "common/util.h"
#include "server/srvutil.h"
#include "common/websocket.h"

#define VNC_PORT      5900
#define TOKENS_MAX    4096
#define TOKEN_HEX     64
#define TTL_DEFAULT_S 3600
#define TTL_MAX_S     86400
#define NOVNC_DIR     "/usr/share/novnc"
#define IN_MAX        ((size_t)256 * 1024) /* a client frame, head included */
#define OUT_CHUNK     ((size_t)64 * 1024)
#define PROTO_TOKEN   "sbx-token."
#define CSP_PAGE                                                                            \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

extern const unsigned char sbx_view_html[], sbx_view_js[], sbx_view_css[], sbx_boot_js[];
extern const size_t sbx_view_html_len, sbx_view_js_len, sbx_view_css_len, sbx_boot_js_len;

/* ---- view tokens (in memory: a restarted server asks for new ones) ---- */

struct view_token {
    char token[TOKEN_HEX + 1];
    char sandbox[SBX_UUID_LEN + 1];
    int64_t expires_ms;
};

static pthread_mutex_t tokens_mu = PTHREAD_MUTEX_INITIALIZER;
static struct view_token tokens[TOKENS_MAX];

/* A slot for a new token: a free or expired one, else the one that expires first. */
static struct view_token *
free_slot(int64_t now)
{
    struct view_token *oldest = &tokens[0];
    for (size_t i = 0; i < TOKENS_MAX; i++) {
        if (tokens[i].expires_ms <= now)
            return &tokens[i];
        if (tokens[i].expires_ms < oldest->expires_ms)
            oldest = &tokens[i];
    }
    return oldest;
}

static void
token_add(const char *sandbox, const char *token, int64_t expires_ms)
{
    pthread_mutex_lock(&tokens_mu);
    struct view_token *t = free_slot(sbx_wall_ms());
    (void)snprintf(t->token, sizeof t->token, "%.*s", TOKEN_HEX, token);
    (void)snprintf(t->sandbox, sizeof t->sandbox, "%.*s", SBX_UUID_LEN, sandbox);
    t->expires_ms = expires_ms;
    pthread_mutex_unlock(&tokens_mu);
}

/* Every live token is compared (in constant time), so the time taken says nothing about which
 * prefix matched. */
static bool
token_ok(const char *sandbox, const char *token)
{
    if (strlen(token) != TOKEN_HEX)
        return false;
    bool ok = false;
    int64_t now = sbx_wall_ms();
    pthread_mutex_lock(&tokens_mu);
    for (size_t i = 0; i < TOKENS_MAX; i++) {
        if (tokens[i].expires_ms > now && sbx_srv_secret_equal(tokens[i].token, token) &&
            strcmp(tokens[i].sandbox, sandbox) == 0)
            ok = true;
    }
    pthread_mutex_unlock(&tokens_mu);
    return ok;
}

/* ---- POST /v1/sandboxes/{id}/desktop/view ---- */

static int
ttl_from(const struct sbx_req *r, int64_t *ttl, struct sbx_reply *out)
{
    *ttl = TTL_DEFAULT_S;
    if (r->body.len == 0)
        return 0;
    json_error_t jerr;
    json_t *body = json_loadb(r->body.data, r->body.len, 0, &jerr);
    json_t *v = json_object_get(body, "ttlSeconds");
    int rc = 0;
    if (!json_is_object(body)) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "the body must be a JSON object");
        rc = -1;
    } else if (v && (!json_is_integer(v) || json_integer_value(v) < 10 ||
                     json_integer_value(v) > TTL_MAX_S)) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`ttlSeconds` must be an integer from 10 to %d", TTL_MAX_S);
        rc = -1;
    } else if (v) {
        *ttl = json_integer_value(v);
    }
    json_decref(body);
    return rc;
}

void
sbx_view_mint(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = r->route.sandbox_id;
    int64_t ttl = 0;
    struct sbx_record *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (!sbx_srv_is_uuid(id)) {
        sbx_reply_error(out, 404, "SANDBOX::SANDBOX_NOT_FOUND", "sandbox `%.64s` not found", id);
        return;
    }
    if (ttl_from(r, &ttl, out) < 0)
        return;
    if (sbx_mgr_get(r->srv->mgr, id, &sb, &err) < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    sbx_record_free(sb);
    unsigned char raw[TOKEN_HEX / 2];
    char token[TOKEN_HEX + 1];
    randombytes_buf(raw, sizeof raw);
    (void)sodium_bin2hex(token, sizeof token, raw, sizeof raw);
    int64_t expires = sbx_wall_ms() + ttl * 1000;
    token_add(id, token, expires);
    char ts[32];
    sbx_srv_format_time(expires, ts);
    const char *host = sbx_http_public_addr(r);
    sbx_autofree char *page = sbx_xasprintf("/desktop/view/%s#token=%s", id, token);
    sbx_autofree char *url = sbx_xasprintf("http://%s%s", host, page);
    sbx_autofree char *ws = sbx_xasprintf("ws://%s/v1/sandboxes/%s/desktop/vnc", host, id);
    sbx_autofree char *proto = sbx_xasprintf(PROTO_TOKEN "%s", token);
    out->status = 201;
    out->body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "token", token, "url", url, "path",
                          page, "websocket", ws, "protocol", proto, "expiresAt", ts);
    sodium_memzero(token, sizeof token);
}

/* ---- static files ---- */

static enum MHD_Result
send_static(struct sbx_req *r, const void *data, size_t len, const char *type, bool page)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    (void)MHD_add_response_header(resp, "Content-Type", type);
    (void)MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    (void)MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (page) {
        (void)MHD_add_response_header(resp, "Content-Security-Policy", CSP_PAGE);
        (void)MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        /* framed only by this origin's own pages (the web console); the router's
         * answers run in an opaque origin (CSP sandbox), which 'self' does not match */
        (void)MHD_add_response_header(resp, "X-Frame-Options", "SAMEORIGIN");
    }
    (void)MHD_add_response_header(resp, "X-Request-ID", r->rid);
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

static enum MHD_Result
h_page(struct sbx_req *r)
{
    if (!sbx_srv_is_uuid(r->route.sandbox_id))
        return sbx_http_send_error(r, 404, "SANDBOX::SANDBOX_NOT_FOUND", "no such sandbox");
    return send_static(r, sbx_view_html, sbx_view_html_len, "text/html; charset=utf-8", true);
}

static enum MHD_Result
h_static(struct sbx_req *r)
{
    if (strcmp(r->route.rest, "view.js") == 0)
        return send_static(r, sbx_view_js, sbx_view_js_len, "text/javascript; charset=utf-8",
                           false);
    if (strcmp(r->route.rest, "boot.js") == 0)
        return send_static(r, sbx_boot_js, sbx_boot_js_len, "text/javascript; charset=utf-8",
                           false);
    if (strcmp(r->route.rest, "view.css") == 0)
        return send_static(r, sbx_view_css, sbx_view_css_len, "text/css; charset=utf-8", false);
    return sbx_http_send_error(r, 404, "GENERAL::NOT_FOUND", "no such file");
}

/* A noVNC path: `core/...` or `vendor/...`, ending in `.js`, of [A-Za-z0-9_.-/] with no empty,
 * `.` or `..` segment. Within those rules no path leaves NOVNC_DIR (a root-owned package dir). */
static bool
novnc_path_ok(const char *p)
{
    size_t n = strlen(p);
    if (n < 4 || n > 200 || strcmp(p + n - 3, ".js") != 0 ||
        (!sbx_str_starts(p, "core/") && !sbx_str_starts(p, "vendor/")))
        return false;
    if (strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/") != n)
        return false;
    for (const char *s = p; *s;) {
        size_t len = strcspn(s, "/");
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s += len + (s[len] == '/');
    }
    return true;
}

static enum MHD_Result
h_novnc(struct sbx_req *r)
{
    if (!novnc_path_ok(r->route.rest))
        return sbx_http_send_error(r, 404, "GENERAL::NOT_FOUND", "no such file");
    sbx_autofree char *path = sbx_xasprintf("%s/%s", NOVNC_DIR, r->route.rest);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            (void)close(fd);
        if (access(NOVNC_DIR "/core/rfb.js", R_OK) < 0)
            return sbx_http_send_error(r, 404, "DESKTOP::NOVNC_MISSING",
                                       "noVNC is not installed on the server: apt-get install "
                                       "novnc (scripts/deps.sh does)");
        return sbx_http_send_error(r, 404, "GENERAL::NOT_FOUND", "no such file");
    }
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    (void)MHD_add_response_header(resp, "Content-Type", "text/javascript; charset=utf-8");
    (void)MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    (void)MHD_add_response_header(resp, "Cache-Control", "max-age=3600");
    (void)MHD_add_response_header(resp, "X-Request-ID", r->rid);
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

/* ---- the WebSocket bridge ---- */

struct bridge {
    struct sbx_upgraded link; /* up: the sandbox's VNC server; client: the browser */
    struct sbx_srv *srv;
    struct MHD_UpgradeResponseHandle *urh;
    uint8_t in[IN_MAX];
    size_t in_len;
    uint8_t out[10 + OUT_CHUNK];
};

/* Write all of buf to a socket that may be non-blocking (MHD's upgraded one). */
static int
send_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, 30000) <= 0)
                return -1;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int
send_frame(struct bridge *b, enum sbx_ws_op op, const void *payload, size_t len)
{
    uint8_t head[10];
    size_t hl = sbx_ws_head(head, op, len);
    return send_all(b->link.client, head, hl) < 0 || send_all(b->link.client, payload, len) < 0 ? -1
                                                                                                : 0;
}

/* Send a close frame, then stop sending and drain what the client still sends (up to 2 s and
 * 4 MiB): a socket closed with unread input answers with a reset, which can destroy the close
 * frame before the client reads it (RFC 6455 7.1.1: the server closes the TCP side last). */
static void
send_close(struct bridge *b, unsigned code)
{
    uint8_t p[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    if (send_frame(b, SBX_WS_CLOSE, p, sizeof p) < 0)
        return;
    (void)shutdown(b->link.client, SHUT_WR);
    uint64_t end = sbx_now_ms() + 2000;
    size_t drained = 0;
    while (drained < (4u << 20)) {
        uint64_t now = sbx_now_ms();
        struct pollfd pfd = {.fd = b->link.client, .events = POLLIN};
        if (now >= end || poll(&pfd, 1, (int)(end - now)) <= 0)
            break;
        ssize_t n = read(b->link.client, b->in, sizeof b->in);
        if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN)))
            break;
        drained += n > 0 ? (size_t)n : 0;
    }
}

/* One frame from the browser. Returns 0 to go on, -1 to end (a close was sent when due). */
static int
on_frame(struct bridge *b, const struct sbx_ws_frame *f)
{
    switch (f->op) {
    case SBX_WS_BINARY:
    case SBX_WS_TEXT:
    case SBX_WS_CONT: /* RFB is a byte stream: message boundaries do not matter */
        return sbx_write_all(b->link.up, f->payload, f->len);
    case SBX_WS_PING:
        return send_frame(b, SBX_WS_PONG, f->payload, f->len);
    case SBX_WS_PONG:
        return 0;
    case SBX_WS_CLOSE:
    default:
        send_close(b, SBX_WS_CLOSE_NORMAL);
        return -1;
    }
}

static int handle_frames(struct bridge *b);

/* Read what the browser sent and handle every whole frame in it. */
static int
from_client(struct bridge *b)
{
    ssize_t n = read(b->link.client, b->in + b->in_len, sizeof b->in - b->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    b->in_len += (size_t)n;
    return handle_frames(b);
}

/* Handle every whole frame in b->in; keep the rest for the next read. */
static int
handle_frames(struct bridge *b)
{
    size_t off = 0;
    for (;;) {
        struct sbx_ws_frame f;
        const char *why = NULL;
        long used = sbx_ws_parse(b->in + off, b->in_len - off, IN_MAX - 14, &f, &why);
        if (used < 0) {
            sbx_info("desktop view: closing a WebSocket: %s", why);
            send_close(b, strstr(why, "limit") ? SBX_WS_CLOSE_TOO_BIG : SBX_WS_CLOSE_PROTOCOL);
            return -1;
        }
        if (used == 0)
            break;
        if (on_frame(b, &f) < 0)
            return -1;
        off += (size_t)used;
    }
    memmove(b->in, b->in + off, b->in_len - off);
    b->in_len -= off;
    return 0;
}

/* What the VNC server sent, to the browser as one binary frame. */
static int
from_vnc(struct bridge *b)
{
    ssize_t n = read(b->link.up, b->out + 10, OUT_CHUNK);
    if (n < 0 && errno == EINTR)
        return 0;
    if (n <= 0) {
        send_close(b, SBX_WS_CLOSE_NORMAL);
        return -1;
    }
    uint8_t head[10];
    size_t hl = sbx_ws_head(head, SBX_WS_BINARY, (size_t)n);
    memcpy(b->out + 10 - hl, head, hl);
    return send_all(b->link.client, b->out + 10 - hl, hl + (size_t)n);
}

static void *
bridge_main(void *arg)
{
    struct bridge *b = arg;
    struct pollfd pfd[2] = {{.fd = b->link.client, .events = POLLIN},
                            {.fd = b->link.up, .events = POLLIN}};
    /* Frames that came with the request head are handled first. */
    bool ok = b->in_len == 0 || handle_frames(b) == 0;
    while (ok) {
        if (poll(pfd, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
            ok = from_client(b) == 0;
        if (ok && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            ok = from_vnc(b) == 0;
    }
    struct sbx_srv *srv = b->srv;
    sbx_upgraded_unlink(srv, &b->link);
    (void)close(b->link.up);
    (void)MHD_upgrade_action(b->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(b);
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
    struct bridge *b = cls;
    b->link.client = sock;
    b->urh = urh;
    size_t n = extra_in_size < sizeof b->in ? extra_in_size : sizeof b->in;
    memcpy(b->in, extra_in, n);
    b->in_len = n;
    sbx_upgraded_link(b->srv, &b->link);
    pthread_t t;
    if (pthread_create(&t, NULL, bridge_main, b) != 0) {
        bridge_main(b);
        return;
    }
    (void)pthread_detach(t);
}

/* The subprotocols offered: whether `binary` is one, and the view token if one is. */
static void
offered(const char *h, bool *binary, char token[TOKEN_HEX + 1])
{
    *binary = false;
    token[0] = '\0';
    while (h && *h) {
        h += strspn(h, " \t,");
        size_t n = strcspn(h, " \t,");
        if (n == 6 && strncmp(h, "binary", 6) == 0)
            *binary = true;
        if (n == sizeof PROTO_TOKEN - 1 + TOKEN_HEX && strncmp(h, PROTO_TOKEN, 10) == 0) {
            memcpy(token, h + 10, TOKEN_HEX);
            token[TOKEN_HEX] = '\0';
        }
        h += n;
    }
}

static bool
header_has(struct sbx_req *r, const char *name, const char *word)
{
    const char *v = sbx_req_header(r, name);
    return v && strcasestr(v, word);
}

/* The checks of RFC 6455 4.2.1 that concern us; the accept key in accept. */
static enum MHD_Result
check_handshake(struct sbx_req *r, char accept[29], bool *ok)
{
    *ok = false;
    r->close = true;
    if (!header_has(r, "Upgrade", "websocket") || !header_has(r, "Connection", "upgrade"))
        return sbx_http_send_error(r, 400, "DESKTOP::NOT_A_WEBSOCKET",
                                   "this is the desktop's VNC stream: open it as a WebSocket");
    const char *ver = sbx_req_header(r, "Sec-WebSocket-Version");
    if (!ver || strcmp(ver, "13") != 0)
        return sbx_http_send_error(r, 400, "DESKTOP::BAD_WEBSOCKET_VERSION",
                                   "Sec-WebSocket-Version must be 13");
    if (sbx_ws_accept_key(sbx_req_header(r, "Sec-WebSocket-Key"), accept) < 0)
        return sbx_http_send_error(r, 400, "DESKTOP::BAD_WEBSOCKET_KEY",
                                   "Sec-WebSocket-Key must be the base64 of 16 bytes");
    r->close = false;
    *ok = true;
    return MHD_YES;
}

static enum MHD_Result
connect_failed(struct sbx_req *r, const sbx_error *err)
{
    int code = sbx_error_code(err);
    if (code == SBX_ENOTFOUND)
        return sbx_http_send_error(r, 404, "SANDBOX::SANDBOX_NOT_FOUND", sbx_error_msg(err));
    if (code == SBX_ECONFLICT)
        return sbx_http_send_error(r, 409, "SANDBOX::SANDBOX_NOT_RUNNING", sbx_error_msg(err));
    char msg[512];
    (void)snprintf(msg, sizeof msg,
                   "no desktop answers in this sandbox (start one: POST /desktop/start through "
                   "the router, `sbx desktop start`, or create with extensions[\"sbx.desktop\"]): "
                   "%s",
                   sbx_error_msg(err));
    return sbx_http_send_error(r, 409, "DESKTOP::NOT_RUNNING", msg);
}

static enum MHD_Result
h_vnc(struct sbx_req *r)
{
    const char *id = r->route.sandbox_id;
    char accept[29];
    bool ok = false;
    enum MHD_Result ret = check_handshake(r, accept, &ok);
    if (!ok)
        return ret;
    bool binary = false;
    char token[TOKEN_HEX + 1];
    offered(sbx_req_header(r, "Sec-WebSocket-Protocol"), &binary, token);
    if (!sbx_http_key_ok(r) && !(sbx_srv_is_uuid(id) && token[0] && token_ok(id, token))) {
        r->close = true;
        return sbx_http_send_error(r, 401, "DESKTOP::INVALID_VIEW_TOKEN",
                                   "send the API key, or a view token of this sandbox (POST "
                                   "/v1/sandboxes/{id}/desktop/view) as the subprotocol "
                                   "`sbx-token.TOKEN`");
    }
    if (!sbx_srv_is_uuid(id))
        return sbx_http_send_error(r, 404, "SANDBOX::SANDBOX_NOT_FOUND", "no such sandbox");
    int fd = -1;
    json_t *extra = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_mgr_connect(r->srv->mgr, id, VNC_PORT, &fd, &extra, &err) < 0)
        return connect_failed(r, err);
    json_decref(extra);
    struct bridge *b = sbx_xcalloc(1, sizeof *b);
    b->srv = r->srv;
    b->link.up = fd;
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgraded, b);
    (void)MHD_add_response_header(resp, "Upgrade", "websocket");
    (void)MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
    /* The browser fails a handshake that picks none of the subprotocols it offered. */
    if (binary || token[0]) {
        char proto[sizeof PROTO_TOKEN + TOKEN_HEX];
        (void)snprintf(proto, sizeof proto, "%s%s", binary ? "binary" : PROTO_TOKEN,
                       binary ? "" : token);
        (void)MHD_add_response_header(resp, "Sec-WebSocket-Protocol", proto);
        sodium_memzero(proto, sizeof proto);
    }
    sodium_memzero(token, sizeof token);
    (void)MHD_add_response_header(resp, "X-Request-ID", r->rid);
    ret = MHD_queue_response(r->conn, 101, resp);
    MHD_destroy_response(resp);
    r->done = true;
    if (ret != MHD_YES) { /* on_upgraded will not run */
        (void)close(b->link.up);
        free(b);
    }
    return ret;
}

static enum MHD_Result
view_handle(struct sbx_req *r)
{
    if (r->route.id == SBX_ROUTE_DESKTOP_VNC)
        return h_vnc(r);
    if (r->route.id == SBX_ROUTE_DESKTOP_PAGE)
        return h_page(r);
    if (r->route.id == SBX_ROUTE_DESKTOP_STATIC)
        return h_static(r);
    return h_novnc(r);
}

const struct sbx_http_handler sbx_view_handler = {.end = view_handle};
