/*
 * httpd.c - libmicrohttpd glue: request lifecycle, auth, request ids, JSON replies.
 *
 * One thread per connection (MHD's internal poll thread accepts): a handler may block (create
 * waits for its worker; the router streams) without stalling other clients. URLs reach us raw:
 * the unescape callback is a no-op so that the router forwards exactly what it got and route
 * matching never sees a decoded `/`.
 */
#include "server/httpd.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/apierr.h"
#include "server/connguard.h"
#include "server/sandbox.h"
#include "server/srvutil.h"

/* An idle keep-alive connection (or a client that stops sending mid-request) is closed after
 * this; a handler that is busy (a create, a streamed proxy response) is not idle. */
#define IDLE_TIMEOUT_S 60

void
sbx_reply_error(struct sbx_reply *out, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(out->message);
    out->message = sbx_xvasprintf(fmt, ap);
    va_end(ap);
    out->status = status;
    out->code = code;
}

void
sbx_reply_from(struct sbx_reply *out, const sbx_error *err, const char *code)
{
    int status = 500;
    const char *table_code = NULL;
    sbx_apierr_lookup(sbx_error_code(err), &status, &table_code);
    sbx_reply_error(out, status, code ? code : table_code, "%s", sbx_error_msg(err));
}

const char *
sbx_req_header(struct sbx_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct query_iter {
    const char *name;
    void (*fn)(const char *value, void *ud);
    void *ud;
};

static enum MHD_Result
query_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct query_iter *it = cls;
    sbx_autofree char *k = sbx_srv_url_decode(key, strlen(key), true);
    if (!k || strcmp(k, it->name) != 0)
        return MHD_YES;
    sbx_autofree char *v = sbx_srv_url_decode(value ? value : "", value ? strlen(value) : 0, true);
    /* A value that does not decode is passed as NULL so the handler can reject it. */
    it->fn(v, it->ud);
    return MHD_YES;
}

void
sbx_req_query_each(struct sbx_req *r, const char *name, void (*fn)(const char *value, void *ud),
                   void *ud)
{
    struct query_iter it = {.name = name, .fn = fn, .ud = ud};
    (void)MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_cb, &it);
}

void
sbx_http_common_headers(struct sbx_req *r, struct MHD_Response *resp)
{
    (void)MHD_add_response_header(resp, "X-Request-ID", r->rid);
    (void)MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
}

static enum MHD_Result
send_json_loc(struct sbx_req *r, int status, json_t *body, const char *location)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct MHD_Response *resp =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (text)
        (void)MHD_add_response_header(resp, "Content-Type", "application/json");
    if (location)
        (void)MHD_add_response_header(resp, "Location", location);
    if (r->close)
        (void)MHD_add_response_header(resp, "Connection", "close");
    sbx_http_common_headers(r, resp);
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

static enum MHD_Result
send_json(struct sbx_req *r, int status, json_t *body)
{
    return send_json_loc(r, status, body, NULL);
}

enum MHD_Result
sbx_http_send_error(struct sbx_req *r, int status, const char *code, const char *message)
{
    if (status >= 500 && status != 502)
        sbx_warn("%s %s -> %d %s: %s (request %s)", r->method, r->path, status, code, message,
                 r->rid);
    else
        sbx_debug("%s %s -> %d %s: %s", r->method, r->path, status, code, message);
    json_t *body = json_pack("{s:s, s:s}", "code", code, "message", message);
    enum MHD_Result ret = send_json(r, status, body);
    json_decref(body);
    return ret;
}

static enum MHD_Result
send_file(struct sbx_req *r, struct sbx_reply *rep)
{
    struct stat st;
    int fd = rep->file_fd;
    rep->file_fd = -1;
    if (fstat(fd, &st) < 0) {
        (void)close(fd);
        return sbx_http_send_error(r, 500, "GENERAL::INTERNAL_ERROR", "stat the reply's file");
    }
    /* MHD owns fd from here (closed with the response). */
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        (void)close(fd);
        return sbx_http_send_error(r, 500, "GENERAL::INTERNAL_ERROR", "file response");
    }
    (void)MHD_add_response_header(resp, "Content-Type", rep->file_type);
    sbx_http_common_headers(r, resp);
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)rep->status, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

enum MHD_Result
sbx_http_send_reply(struct sbx_req *r, struct sbx_reply *rep)
{
    enum MHD_Result ret;
    if (rep->file_fd > 0 && rep->status < 400) {
        ret = send_file(r, rep);
        json_decref(rep->body);
        free(rep->message);
        free(rep->location);
        return ret;
    }
    if (rep->file_fd > 0)
        (void)close(rep->file_fd);
    /* An error is {code, message}; a handler may add fields to that envelope (/health). */
    bool envelope = json_is_string(json_object_get(rep->body, "code")) &&
                    json_is_string(json_object_get(rep->body, "message"));
    if (rep->status >= 400 && !envelope)
        ret = sbx_http_send_error(r, rep->status, rep->code ? rep->code : "GENERAL::UNKNOWN_ERROR",
                                  rep->message ? rep->message : "error");
    else
        ret = send_json_loc(r, rep->status, rep->body, rep->location);
    json_decref(rep->body);
    free(rep->message);
    free(rep->location);
    return ret;
}

/* ---- request setup ---- */

static void
set_request_id(struct sbx_req *r)
{
    const char *given = sbx_req_header(r, "X-Request-ID");
    if (given) {
        while (*given == ' ' || *given == '\t')
            given++;
        size_t n = strlen(given);
        while (n > 0 && (given[n - 1] == ' ' || given[n - 1] == '\t'))
            n--;
        bool ok = n > 0 && n < sizeof r->rid;
        for (size_t i = 0; ok && i < n; i++)
            ok = given[i] > 0x20 && given[i] < 0x7f;
        if (ok) {
            memcpy(r->rid, given, n);
            r->rid[n] = '\0';
            sbx_log_set_request_id(r->rid);
            return;
        }
    }
    sbx_srv_uuid4_hex(r->rid);
    sbx_log_set_request_id(r->rid);
}

const char *
sbx_http_public_addr(struct sbx_req *r)
{
    if (r->srv->cfg->public_addr)
        return r->srv->cfg->public_addr;
    const char *host = sbx_req_header(r, "Host");
    bool ok = host && *host && strlen(host) < 256 &&
              strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") ==
                  strlen(host);
    return ok ? host : r->srv->cfg->listen;
}

/* The API key the request carries: `OPEN-SANDBOX-API-KEY: k` or `Authorization: Bearer k`. */
static const char *
given_key(struct sbx_req *r)
{
    const char *key = sbx_req_header(r, "OPEN-SANDBOX-API-KEY");
    const char *authz = sbx_req_header(r, "Authorization");
    if (!key && authz && strncasecmp(authz, "Bearer ", 7) == 0)
        key = authz + 7;
    return key;
}

bool
sbx_http_key_ok(struct sbx_req *r)
{
    const char *key = given_key(r);
    return key && *key && sbx_srv_secret_equal(key, r->srv->api_key);
}

static enum MHD_Result
check_auth(struct sbx_req *r, bool *ok)
{
    const char *key = given_key(r);
    *ok = false;
    /* A 401 ends its connection: every connection that outlives its first request has shown
     * the key (connguard.c counts on it). */
    r->close = true;
    if (!key || !*key)
        return sbx_http_send_error(r, 401, "MISSING_API_KEY",
                                   "Authentication credentials are missing: send the "
                                   "OPEN-SANDBOX-API-KEY header");
    if (!sbx_srv_secret_equal(key, r->srv->api_key))
        return sbx_http_send_error(r, 401, "INVALID_API_KEY", "Invalid API key");
    r->close = false;
    *ok = true;
    return MHD_YES;
}

static enum MHD_Result
send_preflight(struct sbx_req *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    sbx_http_common_headers(r, resp);
    (void)MHD_add_response_header(resp, "Access-Control-Allow-Methods",
                                  "GET, POST, PUT, PATCH, DELETE, OPTIONS");
    (void)MHD_add_response_header(resp, "Access-Control-Allow-Headers", "*");
    enum MHD_Result ret = MHD_queue_response(r->conn, 204, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

static const struct sbx_http_handler *
handler(const struct sbx_req *r)
{
    return r->srv->handlers[r->route.id];
}

static uint64_t
body_limit(const struct sbx_req *r)
{
    uint64_t own = handler(r)->body_limit;
    return own ? own : (uint64_t)r->srv->cfg->max_body_bytes;
}

static enum MHD_Result
check_body_size(struct sbx_req *r)
{
    const char *cl = sbx_req_header(r, "Content-Length");
    uint64_t n = 0;
    if (cl && sbx_parse_u64(cl, &n, NULL) == 0 && n > body_limit(r))
        return sbx_http_send_error(r, 413, "GENERAL::PAYLOAD_TOO_LARGE",
                                   "request body is larger than the limit");
    return MHD_YES;
}

struct framing {
    unsigned n_cl, n_te;
    bool te_other; /* a transfer coding other than `chunked` */
};

static enum MHD_Result
count_framing(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    struct framing *f = cls;
    if (strcasecmp(k, "Content-Length") == 0)
        f->n_cl++;
    if (strcasecmp(k, "Transfer-Encoding") == 0) {
        f->n_te++;
        f->te_other = f->te_other || !v || strcasecmp(v, "chunked") != 0;
    }
    return MHD_YES;
}

/* A request whose body framing two parsers could read differently is refused (RFC 9112 §6.3
 * allows it; the router forwards bodies to sandboxes, whose HTTP servers are anyone's): both
 * Content-Length and Transfer-Encoding, Content-Length twice, Transfer-Encoding twice or with
 * a coding other than `chunked` (which libmicrohttpd would otherwise accept). */
static enum MHD_Result
check_framing(struct sbx_req *r, bool *ok)
{
    struct framing f = {0};
    (void)MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
    *ok = false;
    /* Where this request's body ends is in doubt, so where the next request begins is too:
     * the connection closes after the answer. */
    r->close = true;
    if (f.n_cl && f.n_te)
        return sbx_http_send_error(r, 400, "GENERAL::BAD_REQUEST",
                                   "both Content-Length and Transfer-Encoding (RFC 9112 6.3)");
    if (f.n_cl > 1)
        return sbx_http_send_error(r, 400, "GENERAL::BAD_REQUEST", "more than one Content-Length");
    if (f.n_te > 1 || f.te_other)
        return sbx_http_send_error(r, 400, "GENERAL::BAD_REQUEST",
                                   "Transfer-Encoding must be exactly `chunked`");
    r->close = false;
    *ok = true;
    return MHD_YES;
}

/* Who may use the route: its own credential only (own_auth_code), its alternative credential
 * or the API key, the API key alone, or anyone (route.c: the public routes). */
static enum MHD_Result
authenticate(struct sbx_req *r, bool *ok)
{
    const struct sbx_http_handler *h = handler(r);
    bool alt = h->alt_auth && h->alt_auth(r);
    *ok = true;
    if (h->own_auth_code && !alt) {
        *ok = false;
        r->close = true;
        return sbx_http_send_error(r, 401, h->own_auth_code, h->own_auth_message);
    }
    if (h->own_auth_code || alt || !sbx_route_needs_auth(r->route.id))
        return MHD_YES;
    return check_auth(r, ok);
}

static enum MHD_Result
first_call(struct sbx_req *r)
{
    set_request_id(r);
    bool framing_ok = false;
    enum MHD_Result fr = check_framing(r, &framing_ok);
    if (!framing_ok)
        return fr;
    sbx_route_match(r->method, r->path, &r->route);
    r->sensitive = r->route.id == SBX_ROUTE_SECRET_SET;
    if (handler(r)->reroute)
        handler(r)->reroute(r);
    if (r->route.id == SBX_ROUTE_PREFLIGHT)
        return send_preflight(r);
    bool ok = false;
    enum MHD_Result ret = authenticate(r, &ok);
    if (!ok)
        return ret;
    return handler(r)->begin ? handler(r)->begin(r) : check_body_size(r);
}

static enum MHD_Result
final_call(struct sbx_req *r)
{
    const struct sbx_http_handler *h = handler(r);
    if (!h->data && r->too_big)
        return sbx_http_send_error(r, 413, "GENERAL::PAYLOAD_TOO_LARGE",
                                   "request body is larger than the limit");
    return h->end(r);
}

static enum MHD_Result
request_step(struct sbx_req *r, struct MHD_Connection *conn, const char *url, const char *method,
             const char *data, size_t *data_size)
{
    if (!r->started) {
        r->started = true;
        sbx_connguard_head_done(r->srv->guard, conn);
        r->conn = conn;
        r->method = method;
        r->path = url;
        return first_call(r);
    }
    if (r->done) {
        *data_size = 0; /* an early error was queued: drop the rest of the body */
        return MHD_YES;
    }
    if (*data_size) {
        size_t n = *data_size;
        *data_size = 0;
        if (handler(r)->data)
            return handler(r)->data(r, data, n);
        if (!r->too_big && sbx_buf_append(&r->body, data, n, NULL) < 0)
            r->too_big = true;
        return MHD_YES;
    }
    return final_call(r);
}

static enum MHD_Result
/* NOLINTNEXTLINE(readability-function-size): the signature is libmicrohttpd's */
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
           const char *version, const char *data, size_t *data_size, void **con_cls)
{
    (void)version;
    (void)cls;
    struct sbx_req *r = *con_cls;
    /* every line logged while this request is handled carries its id (the id is made in
     * the first call: set there too) */
    sbx_log_set_request_id(r->started ? r->rid : NULL);
    enum MHD_Result ret = request_step(r, conn, url, method, data, data_size);
    sbx_log_set_request_id(NULL);
    return ret;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    struct sbx_req *r = *con_cls;
    if (!r)
        return;
    if (r->started && handler(r)->done)
        handler(r)->done(r);
    /* A secret's value travelled in this body: do not leave it in freed memory. */
    if (r->sensitive && r->body.data)
        sodium_memzero(r->body.data, r->body.cap);
    sbx_buf_dispose(&r->body);
    free(r->raw_uri);
    free(r);
    *con_cls = NULL;
}

/* Called first for every request with the raw request target: the request context is made
 * here so the router can forward the query string byte for byte. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    struct sbx_req *r = sbx_xcalloc(1, sizeof *r);
    r->srv = cls;
    r->raw_uri = sbx_xstrdup(uri ? uri : "/");
    sbx_buf_init(&r->body, (size_t)r->srv->cfg->max_body_bytes);
    return r;
}

static size_t
no_unescape(void *cls, struct MHD_Connection *c, char *uri)
{
    (void)cls;
    (void)c;
    return strlen(uri);
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    sbx_debug("microhttpd: %s", msg);
}

/* "HOST:PORT" with an IPv4 host or "[IPv6]:PORT". */
static int
parse_listen(const char *s, struct sockaddr_storage *ss, bool *v6, sbx_error **err)
{
    const char *colon = strrchr(s, ':');
    uint64_t port = 0;
    if (!colon || sbx_parse_u64(colon + 1, &port, NULL) < 0 || port > 65535)
        return sbx_error_set(err, SBX_EINVAL, 0, "listen address `%s`: want HOST:PORT", s);
    sbx_autofree char *host = sbx_xstrndup(s, (size_t)(colon - s));
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    size_t hl = strlen(host);
    *v6 = hl > 2 && host[0] == '[' && host[hl - 1] == ']';
    if (*v6) {
        host[hl - 1] = '\0';
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) == 1)
            return 0;
    } else {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        if (strcmp(host, "localhost") == 0)
            (void)snprintf(host, hl + 1, "127.0.0.1");
        if (inet_pton(AF_INET, host, &in4->sin_addr) == 1)
            return 0;
    }
    return sbx_error_set(err, SBX_EINVAL, 0, "listen address `%s`: bad IP address", s);
}

int
sbx_http_check_listen(const char *listen, sbx_error **err)
{
    struct sockaddr_storage ss;
    bool v6 = false;
    return parse_listen(listen, &ss, &v6, err);
}

int
sbx_http_start(struct sbx_srv *srv, sbx_error **err)
{
    struct sockaddr_storage ss;
    bool v6 = false;
    if (parse_listen(srv->cfg->listen, &ss, &v6, err) < 0)
        return -SBX_EINVAL;
    if (sbx_connguard_start(&srv->guard, (uint64_t)srv->cfg->request_head_timeout_s * 1000, err) <
        0)
        return -SBX_EGENERIC;
    pthread_mutex_init(&srv->splice_mu, NULL);
    pthread_cond_init(&srv->splice_cv, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    srv->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
        MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, srv, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)srv->cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)srv->cfg->max_connections_per_client, MHD_OPTION_NOTIFY_CONNECTION,
        sbx_connguard_notify, srv->guard, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv, MHD_OPTION_END);
    if (!srv->daemon) {
        sbx_connguard_stop(srv->guard);
        srv->guard = NULL;
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "cannot listen on %s (in use?)",
                             srv->cfg->listen);
    }
    return 0;
}

/* Shut down every upgraded connection (router splices, desktop bridges) and wait until their
 * threads are gone: MHD must not stop under them. */
static void
close_upgraded(struct sbx_srv *srv)
{
    pthread_mutex_lock(&srv->splice_mu);
    for (struct sbx_upgraded *u = srv->splices; u; u = u->next) {
        (void)shutdown(u->up, SHUT_RDWR);
        (void)shutdown(u->client, SHUT_RDWR);
    }
    while (srv->n_splices > 0)
        pthread_cond_wait(&srv->splice_cv, &srv->splice_mu);
    pthread_mutex_unlock(&srv->splice_mu);
}

void
sbx_http_stop(struct sbx_srv *srv)
{
    atomic_store(&srv->stopping, true);
    if (!srv->daemon)
        return;
    close_upgraded(srv);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    sbx_connguard_stop(srv->guard);
    srv->guard = NULL;
    pthread_cond_destroy(&srv->splice_cv);
    pthread_mutex_destroy(&srv->splice_mu);
}
