/*
 * http.c - the evhttp listener, routing, auth and the JSON reply helpers.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"
#include "execd/upload.h"

typedef void (*handler0_fn)(struct execd *ex, struct evhttp_request *req);
typedef void (*handler1_fn)(struct execd *ex, struct evhttp_request *req, const char *arg);

struct route {
    enum evhttp_cmd_type method;
    const char *pattern; /* "*" matches one path segment */
    handler0_fn fn0;
    handler1_fn fn1;
};

static void
ping(struct execd *ex, struct evhttp_request *req)
{
    (void)ex;
    execd_reply_empty(req);
}

#define R0(m, p, f)                                          \
    {                                                        \
        .method = EVHTTP_REQ_##m, .pattern = (p), .fn0 = (f) \
    }
#define R1(m, p, f)                                          \
    {                                                        \
        .method = EVHTTP_REQ_##m, .pattern = (p), .fn1 = (f) \
    }

static const struct route routes[] = {
    R0(GET, "/ping", ping),
    R0(POST, "/command", execd_cmd_post),
    R0(DELETE, "/command", execd_cmd_delete),
    R1(GET, "/command/status/*", execd_cmd_status),
    R1(GET, "/command/*/logs", execd_cmd_logs),
    R0(POST, "/session", execd_session_create),
    R1(POST, "/session/*/run", execd_session_run),
    R1(DELETE, "/session/*", execd_session_delete),
    R0(GET, "/files/info", execd_files_info),
    R0(DELETE, "/files", execd_files_remove),
    R0(POST, "/files/permissions", execd_files_permissions),
    R0(POST, "/files/mv", execd_files_move),
    R0(GET, "/files/search", execd_files_search),
    R0(POST, "/files/replace", execd_files_replace),
    R0(POST, "/files/upload", execd_files_upload),
    R0(GET, "/files/download", execd_files_download),
    R0(GET, "/directories/list", execd_dirs_list),
    R0(POST, "/directories", execd_dirs_create),
    R0(DELETE, "/directories", execd_dirs_remove),
    R0(GET, "/metrics", execd_metrics_get),
    R0(GET, "/logs", execd_logs_get),
    R0(GET, "/metrics/watch", execd_metrics_watch),
    R0(POST, "/code", execd_code_run),
    R0(DELETE, "/code", execd_code_interrupt_req),
    R0(POST, "/code/context", execd_code_context_create),
    R0(GET, "/code/contexts", execd_code_contexts_list),
    R0(DELETE, "/code/contexts", execd_code_contexts_delete),
    R1(GET, "/code/contexts/*", execd_code_context_get),
    R1(DELETE, "/code/contexts/*", execd_code_context_delete),
    R0(POST, "/pty", execd_pty_create),
    R1(GET, "/pty/*/ws", execd_pty_attach),
    R1(GET, "/pty/*", execd_pty_get),
    R1(DELETE, "/pty/*", execd_pty_delete),
    R0(GET, "/desktop", execd_desktop_status),
    R0(POST, "/desktop/start", execd_desktop_start),
    R0(POST, "/desktop/stop", execd_desktop_stop),
    R0(GET, "/desktop/screenshot", execd_desktop_screenshot),
    R0(GET, "/desktop/screen", execd_desktop_screen),
    R0(GET, "/desktop/cursor", execd_desktop_cursor),
    R0(POST, "/desktop/action", execd_desktop_action),
    R0(GET, "/desktop/windows", execd_desktop_windows),
    R1(POST, "/desktop/windows/*/activate", execd_desktop_window_activate),
    R1(POST, "/desktop/windows/*/close", execd_desktop_window_close),
    R0(GET, "/desktop/clipboard", execd_desktop_clipboard_get),
    R0(PUT, "/desktop/clipboard", execd_desktop_clipboard_set),
    R0(GET, "/desktop/accessibility", execd_desktop_a11y),
    R0(GET, "/desktop/recording", execd_desktop_recording_get),
    R0(POST, "/desktop/recording/start", execd_desktop_recording_start),
    R0(POST, "/desktop/recording/stop", execd_desktop_recording_stop),
};

/* Match path against pattern; the first "*" segment is copied to arg. */
static bool
route_match(const char *pattern, const char *path, char *arg, size_t argn)
{
    while (*pattern && *path) {
        if (*pattern == '*') {
            size_t n = strcspn(path, "/");
            if (n == 0 || n >= argn)
                return false;
            memcpy(arg, path, n);
            arg[n] = '\0';
            path += n;
            pattern++;
            continue;
        }
        if (*pattern++ != *path++)
            return false;
    }
    return *pattern == '\0' && *path == '\0';
}

void
execd_reply_error(struct evhttp_request *req, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): false positive, va_start above */
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *j = json_pack("{s:s, s:s}", "code", code, "message", msg);
    if (status == 401) /* COMPAT 2.1: the reference answers {"error": ...} here */
        (void)json_object_set_new(j, "error", json_string(msg));
    execd_reply_json(req, status, j);
}

static const char *
reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 206:
        return "Partial Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 416:
        return "Range Not Satisfiable";
    case 501:
        return "Not Implemented";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

void
execd_reply_json(struct evhttp_request *req, int status, json_t *j)
{
    struct evbuffer *out = evbuffer_new();
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s)
        evbuffer_add(out, s, strlen(s));
    free(s);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_send_reply(req, status, reason(status), out);
    evbuffer_free(out);
}

void
execd_http_park(struct evhttp_request *req)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    bufferevent_data_cb r;
    bufferevent_data_cb w;
    bufferevent_event_cb e;
    void *arg;
    bufferevent_getcb(bev, &r, &w, &e, &arg);
    bufferevent_setcb(bev, NULL, w, e, arg);
}

void
execd_http_abandon(struct evhttp_request *req)
{
    if (req && !evhttp_request_get_connection(req))
        evhttp_request_free(req);
}

void
execd_reply_empty(struct evhttp_request *req)
{
    evhttp_send_reply(req, 200, "OK", NULL);
}

json_t *
execd_body_json(struct evhttp_request *req, bool *empty)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (empty)
        *empty = n == 0;
    if (n == 0 && empty)
        return NULL;
    if (n > EXECD_MAX_JSON_BODY) {
        execd_reply_error(req, 413, "INVALID_REQUEST_BODY", "request body over %u bytes",
                          EXECD_MAX_JSON_BODY);
        return NULL;
    }
    json_error_t jerr;
    const char *data = (const char *)evbuffer_pullup(in, -1);
    json_t *j = json_loadb(data ? data : "", n, 0, &jerr);
    if (!j)
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "malformed JSON: %s", jerr.text);
    return j;
}

static int
hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode a query component (%XX and '+'); NUL bytes were rejected before dispatch. */
static char *
query_decode(const char *s, size_t n)
{
    char *out = sbx_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi = 0;
        int lo = 0;
        if (s[i] == '%' && i + 2 < n + 1 && (hi = hexval(s[i + 1])) >= 0 &&
            (lo = hexval(s[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
            if (s[i] == '+')
                out[o - 1] = ' ';
        }
    }
    out[o] = '\0';
    return out;
}

size_t
execd_query_all(struct evhttp_request *req, const char *name, char ***out)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    size_t cnt = 0;
    char **v = sbx_xcalloc(1, sizeof(*v));
    size_t nl = strlen(name);
    while (q && *q) {
        size_t len = strcspn(q, "&");
        const char *eq = memchr(q, '=', len);
        size_t klen = eq ? (size_t)(eq - q) : len;
        sbx_autofree char *key = query_decode(q, klen);
        if (strlen(key) == nl && memcmp(key, name, nl) == 0) {
            v = sbx_xrealloc(v, (cnt + 2) * sizeof(*v));
            v[cnt++] = eq ? query_decode(eq + 1, len - klen - 1) : sbx_xstrdup("");
            v[cnt] = NULL;
        }
        q += len + (q[len] == '&');
    }
    *out = v;
    return cnt;
}

char *
execd_query(struct evhttp_request *req, const char *name)
{
    char **v = NULL;
    char *r = NULL;
    if (execd_query_all(req, name, &v) > 0) {
        r = v[0];
        v[0] = sbx_xstrdup("");
    }
    execd_strv_free(v);
    return r;
}

void
execd_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Security boundary: with a token configured, every route but /ping needs the header; the
 * comparison is constant-time so the token cannot be guessed byte by byte. */
static bool
authorized(struct execd *ex, struct evhttp_request *req, const char *path)
{
    if (!ex->cfg.token || strcmp(path, "/ping") == 0)
        return true;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), EXECD_TOKEN_HEADER);
    return h && execd_token_equal(h, ex->cfg.token);
}

/* "/proxy/<our port>/x" is the same as "/x" (COMPAT 2.2 self-proxy). */
static const char *
strip_self_proxy(struct execd *ex, const char *path)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof(prefix), "/proxy/%u/", ex->cfg.port);
    if (n > 0 && strncmp(path, prefix, (size_t)n) == 0)
        return path + n - 1;
    return path;
}

static void
dispatch(struct execd *ex, struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    char arg[256];
    bool path_known = false;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(routes); i++) {
        if (!route_match(routes[i].pattern, path, arg, sizeof(arg)))
            continue;
        path_known = true;
        if (routes[i].method != method)
            continue;
        if (routes[i].fn1)
            routes[i].fn1(ex, req, arg);
        else
            routes[i].fn0(ex, req);
        return;
    }
    if (path_known)
        execd_reply_error(req, 405, "METHOD_NOT_ALLOWED", "method not allowed on %s", path);
    else
        execd_reply_error(req, 404, "NOT_FOUND", "no such endpoint");
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct execd *ex = arg;
    const char *uri = evhttp_request_get_uri(req);
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *raw = u ? evhttp_uri_get_path(u) : NULL;
    if (!raw || strcasestr(uri, "%00")) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "malformed request target");
        return;
    }
    sbx_autofree char *path = query_decode(raw, strlen(raw));
    const char *p = strip_self_proxy(ex, path);
    if (!authorized(ex, req, p)) {
        execd_reply_error(req, 401, "UNAUTHORIZED",
                          "Unauthorized: invalid or missing header " EXECD_TOKEN_HEADER);
        return;
    }
    sbx_debug("%s %s", evhttp_request_get_command(req) == EVHTTP_REQ_GET ? "GET" : "REQ", uri);
    dispatch(ex, req, p);
}

/* Numeric addresses only, bound here: a static binary must not go near NSS (getaddrinfo). */
static int
listen_socket(const char *host, uint16_t port, sbx_error **err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    char h[64];
    size_t hl = strlen(host);
    bool brackets = hl > 2 && host[0] == '[' && host[hl - 1] == ']';
    (void)snprintf(h, sizeof(h), "%.*s", (int)(brackets ? hl - 2 : hl), host + brackets);
    socklen_t len = sizeof(*a4);
    if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
    } else if (inet_pton(AF_INET6, h, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        len = sizeof(*a6);
    } else {
        return sbx_error_set(err, SBX_EINVAL, 0, "listen address `%s` is not numeric", host);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    /* TCP_NODELAY (inherited by accepted sockets): SSE events are small writes; Nagle plus
     * delayed ACKs would hold the second one back ~40 ms */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 1024) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return sbx_error_set(err, SBX_EIO, e, "listen on %s:%u", host, port);
    }
    return fd;
}

int
execd_http_start(struct execd *ex, sbx_error **err)
{
    ex->http = evhttp_new(ex->base);
    if (!ex->http)
        return sbx_error_set(err, SBX_ENOMEM, 0, "evhttp_new");
    evhttp_set_max_headers_size(ex->http, EXECD_MAX_HEADERS);
    evhttp_set_max_body_size(ex->http, EXECD_MAX_JSON_BODY);
    evhttp_set_allowed_methods(ex->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE |
                                             EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD);
    evhttp_set_gencb(ex->http, on_request, ex);
    execd_upload_install(ex);
    int fd = listen_socket(ex->cfg.listen_host, ex->cfg.port, err);
    if (fd < 0)
        return fd;
    if (!evhttp_accept_socket_with_handle(ex->http, fd)) {
        close(fd);
        return sbx_error_set(err, SBX_EIO, 0, "evhttp_accept_socket");
    }
    return 0;
}

void
execd_http_stop(struct execd *ex)
{
    if (ex->http) {
        execd_upload_stop(ex);
        evhttp_free(ex->http);
        ex->http = NULL;
    }
}
