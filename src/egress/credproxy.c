/*
 * credproxy.c - the credential proxy (see credproxy.h, docs/network.md "Credential proxy").
 *
 * Bridge mode: one thread accepts on gateway:80 and :443; netns mode: the resolver's poll loop
 * hands over each connection of a sandbox's listener (sbx_credproxy_accept). Each connection
 * gets a thread of its own, at most CONNS_MAX at once (beyond, a connection is closed at
 * once). Per connection: the sandbox is its source address (bridge) or its listener's (netns);
 * the original destination is SO_ORIGINAL_DST (the DNAT's or the redirect's); the first
 * request head is read (at most HEAD_MAX bytes, within HEAD_S); then the upstream (the
 * original destination) is connected and the head is sent, rewritten when a binding applies
 * or could (then with `Connection: close` alone), else as it came; then bytes are relayed both ways
 * until both sides end or IDLE_S pass without a byte.
 *
 * Why a sandbox cannot have a credential sent where it should not go:
 * - The host of the request (its Host header) is only a claim. A credential is added only if
 *   the connection's original destination is an address sbx's resolver answered to this very
 *   sandbox for that host name, under its current policy, within the answer's TTL
 *   (sbx_egress_answered). A sandbox allowed to reach evil.test that connects there with
 *   `Host: api.test` gets its request forwarded to evil.test untouched.
 * - Only the first request of a connection is parsed. On a connection a binding could apply
 *   to (sbx_credproxy_watched: HTTPS opened by the proxy; plain HTTP whose Host has an http
 *   binding, whatever the path or method) it is always rewritten, with `Connection: close`
 *   whether a credential is added or not, so the upstream answers it and closes (RFC 9112
 *   9.6: it must not process a further request): a keep-alive client's next request comes on
 *   a new connection, where it is read and decided on anew (issue 15: `GET /public` then
 *   `POST /v1/chat` on one connection). Bytes after the first head (its body, a pipelined
 *   request) are relayed as they came: never rewritten, never given a credential, so a
 *   pipelined request that was not checked gets none even from an upstream that ignores the
 *   close. An upgrade (WebSocket) keeps `upgrade` beside `close`: a 101 is no final response,
 *   the upgraded connection goes on; a refused upgrade closes like any request. Any other
 *   connection is relayed byte for byte.
 * - The head is parsed strictly (common/httphead.c: the router's parser); a head it refuses,
 *   an absolute-form target, a Host that is not a plain name, a path with dot segments or
 *   encoded separators are never rewritten (forwarded untouched, i.e. with no credential).
 * - The sandbox's own copies of the injected headers are removed, so the upstream never sees
 *   two values of which the sandbox chose one.
 * - Values come from the caller's store at each request and are only ever written to the
 *   upstream socket: never logged, never sent to the sandbox.
 * - The upstream is the original destination, which the DNAT only takes where the forward
 *   chain would have let the sandbox go itself (net/nft.c, credproxy_check): the proxy
 *   reaches nothing the sandbox could not. Netns mode (docker): the redirect comes after the
 *   namespace's filter chain, and the upstream connection is made inside the sandbox's own
 *   namespace (upstream_socket), so it meets the same rules and network as the sandbox's.
 */
#include "egress/credproxy.h"
#include "egress/credproxy_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/httphead.h"
#include "common/netns.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h */
#endif

#define CONNS_MAX  64
#define INJECT_MAX 16 /* headers one binding adds */

/* ---- matching a binding ---- */

static bool
has_str(const json_t *arr, const char *s)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (arr, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

static bool
has_port(const json_t *arr, unsigned port)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (arr, i, v) {
        if (json_integer_value(v) == (json_int_t)port)
            return true;
    }
    return false;
}

/* host (lowercase) against `name` or `*.name` (every name below name, not name itself) */
static bool
host_matches(const json_t *hosts, const char *host)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (hosts, i, v) {
        const char *p = json_string_value(v);
        size_t hl = strlen(host);
        if (p && strncmp(p, "*.", 2) == 0) {
            size_t sl = strlen(p + 1); /* ".name" */
            if (hl > sl && strcasecmp(host + hl - sl, p + 1) == 0)
                return true;
        } else if (p && strcasecmp(p, host) == 0) {
            return true;
        }
    }
    return false;
}

/* path (no query) against `/exact` or `/prefix*` */
static bool
path_matches(const json_t *paths, const char *path, size_t n)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (paths, i, v) {
        const char *p = json_string_value(v);
        size_t pl = p ? strlen(p) : 0;
        if (!p)
            continue;
        if (pl && p[pl - 1] == '*' ? n >= pl - 1 && strncmp(path, p, pl - 1) == 0
                                   : pl == n && strncmp(path, p, n) == 0)
            return true;
    }
    return false;
}

/* A path an upstream could read as another one (dot segments, encoded `.`, `/` or `\`, a dot
 * segment with `;` parameters, which servlet containers drop, a `#`, which is no fragment in a
 * request and may be read as path) is never given a credential: a binding for /v1/(anything)
 * must not cover /v1/../admin, /v1/..;/admin or /v1/#/../../admin. */
static bool
path_plain(const char *path, size_t n)
{
    static const char *const bad[] = {"/./", "/../", "/.;", "/..;", "%2e",
                                      "%2f", "%5c",  "\\",  "#",    NULL};
    char tmp[HEAD_MAX + 2];
    if (n + 2 > sizeof tmp)
        return false;
    (void)snprintf(tmp, sizeof tmp, "%.*s/", (int)n, path);
    for (size_t i = 0; bad[i]; i++) {
        if (strcasestr(tmp, bad[i]))
            return false;
    }
    return true;
}

bool
sbx_credproxy_dns_name(const char *p, size_t n)
{
    size_t label = 0;
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '.' && label == 0)
            return false; /* an empty label (a leading dot, two dots) */
        if (c == '.')
            label = 0;
        else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-') ||
                 ++label > 63)
            return false;
    }
    return label > 0; /* no final dot */
}

/* ":port" after a Host's name: 1-5 digits whose value is the connection's port. */
static bool
host_port_is(const char *s, unsigned port)
{
    size_t d = strspn(s, "0123456789");
    return d >= 1 && d <= 5 && s[d] == '\0' && strtoul(s, NULL, 10) == port;
}

/* What a request claims: its host name (lowercase, from its one Host header, a port there
 * only if it is the connection's) and its path. false: nothing to match (never rewritten). */
static bool
request_host(const struct sbx_http_req *r, unsigned port, char host[256])
{
    const char *h = NULL;
    for (size_t i = 0; i < r->head.n; i++) {
        if (strcasecmp(r->head.name[i], "host") == 0) {
            if (h)
                return false; /* two Host headers: refused by RFC 9112, never guessed at */
            h = r->head.value[i];
        }
    }
    size_t n = h ? strcspn(h, ":") : 0;
    size_t name_n = n > 0 && h[n - 1] == '.' ? n - 1 : n; /* a final dot: the same name */
    if (!h || !sbx_credproxy_dns_name(h, name_n) || (h[n] == ':' && !host_port_is(h + n + 1, port)))
        return false;
    for (size_t i = 0; i < name_n; i++)
        host[i] = (char)((h[i] >= 'A' && h[i] <= 'Z') ? h[i] + 32 : h[i]);
    host[name_n] = '\0';
    return true;
}

/* The first binding that matches the request, or NULL. */
static const json_t *
find_binding(const json_t *bindings, const struct sbx_http_req *r, const char *host,
             const char *scheme, unsigned port)
{
    const char *path = r->target;
    size_t pn = strcspn(path, "?"); /* (a '#' is refused by path_plain) */
    if (path[0] != '/' || !path_plain(path, pn))
        return NULL; /* absolute-form, authority-form, `*`, or a path read two ways */
    size_t i = 0;
    json_t *b = NULL;
    json_array_foreach (bindings, i, b) {
        const json_t *m = json_object_get(b, "match");
        if (has_str(json_object_get(m, "schemes"), scheme) &&
            has_port(json_object_get(m, "ports"), port) &&
            host_matches(json_object_get(m, "hosts"), host) &&
            has_str(json_object_get(m, "methods"), r->method) &&
            path_matches(json_object_get(m, "paths"), path, pn))
            return b;
    }
    return NULL;
}

const json_t *
sbx_credproxy_match(const json_t *bindings, const struct sbx_http_req *req, unsigned port,
                    const char *sni, char host[256])
{
    if (!request_host(req, port, host) || (sni && strcmp(host, sni) != 0))
        return NULL; /* HTTPS: the Host must be the name the TLS connection was made for */
    return find_binding(bindings, req, host, sni ? "https" : "http", port);
}

/* Could a request of this scheme to host:port get a binding (whatever its method and path)? */
static bool
candidate(const json_t *bindings, const char *host, unsigned port, const char *scheme)
{
    size_t i = 0;
    json_t *b = NULL;
    json_array_foreach (bindings, i, b) {
        const json_t *m = json_object_get(b, "match");
        if (has_str(json_object_get(m, "schemes"), scheme) &&
            has_port(json_object_get(m, "ports"), port) &&
            host_matches(json_object_get(m, "hosts"), host))
            return true;
    }
    return false;
}

bool
sbx_credproxy_candidate(const json_t *bindings, const char *host, unsigned port)
{
    return candidate(bindings, host, port, "https");
}

bool
sbx_credproxy_watched(const json_t *bindings, const struct sbx_http_req *req, unsigned port,
                      const char *sni)
{
    char host[256];
    /* HTTPS: the connection is only opened when its SNI name is a candidate (credtls.c) */
    return sni || (request_host(req, port, host) && candidate(bindings, host, port, "http"));
}

/* ---- the rewritten head ---- */

struct inject {
    const char *name[INJECT_MAX];
    char *value[INJECT_MAX];
    size_t n;
};

static void
inject_free(struct inject *in)
{
    for (size_t i = 0; i < in->n; i++) {
        explicit_bzero(in->value[i], strlen(in->value[i]));
        free(in->value[i]);
    }
    in->n = 0;
}

static int
inject_one(struct inject *in, const char *name, const char *prefix, const json_t *values,
           const char *cred)
{
    const char *v = json_string_value(json_object_get(values, cred ? cred : ""));
    if (!v || !name || in->n == INJECT_MAX)
        return -1; /* a credential deleted meanwhile: nothing is injected */
    in->name[in->n] = name;
    in->value[in->n++] = sbx_xasprintf("%s%s", prefix, v);
    return 0;
}

/* The headers binding b's auth adds, with values. -1: one is missing (none is added). */
static int
inject_of(const json_t *b, const json_t *values, struct inject *in)
{
    if (!b)
        return 0; /* a head that only asks the upstream to close */
    const json_t *a = json_object_get(b, "auth");
    const char *type = json_string_value(json_object_get(a, "type"));
    const char *cred = json_string_value(json_object_get(a, "credential"));
    int r = -1;
    if (type && strcmp(type, "bearer") == 0)
        r = inject_one(in, "Authorization", "Bearer ", values, cred);
    else if (type && strcmp(type, "basic") == 0) /* the value is base64(user:password) */
        r = inject_one(in, "Authorization", "Basic ", values, cred);
    else if (type && strcmp(type, "apiKey") == 0)
        r = inject_one(in, json_string_value(json_object_get(a, "name")), "", values, cred);
    else if (type && strcmp(type, "customHeaders") == 0) {
        size_t i = 0;
        json_t *h = NULL;
        r = 0;
        json_array_foreach (json_object_get(a, "headers"), i, h) {
            if (r == 0)
                r = inject_one(in, json_string_value(json_object_get(h, "name")), "", values,
                               json_string_value(json_object_get(h, "credential")));
        }
    }
    if (r < 0)
        inject_free(in);
    return r;
}

/* A header of the sandbox's that the rewritten head leaves out: one the binding injects (the
 * sandbox's own copy of it) or a hop-by-hop one (the head carries its own Connection). */
static bool
dropped(const char *name, const struct inject *in)
{
    if (strcasecmp(name, "connection") == 0 || strcasecmp(name, "keep-alive") == 0 ||
        strcasecmp(name, "proxy-connection") == 0)
        return true;
    for (size_t i = 0; i < in->n; i++) {
        if (strcasecmp(name, in->name[i]) == 0)
            return true;
    }
    return false;
}

/* Does a comma-separated list hold token (case-insensitive, OWS around items)? */
static bool
has_token(const char *list, const char *token)
{
    size_t tl = strlen(token);
    for (const char *p = list; *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t k = n;
        while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t'))
            k--;
        if (k == tl && strncasecmp(p, token, tl) == 0)
            return true;
        p += n;
    }
    return false;
}

/* Does r ask for a protocol upgrade (an Upgrade header and `upgrade` in its Connection): a
 * WebSocket handshake? */
static bool
asks_upgrade(const struct sbx_http_req *r)
{
    bool upgrade = false;
    bool token = false;
    for (size_t i = 0; i < r->head.n; i++) {
        if (strcasecmp(r->head.name[i], "upgrade") == 0)
            upgrade = true;
        else if (strcasecmp(r->head.name[i], "connection") == 0 &&
                 has_token(r->head.value[i], "upgrade"))
            token = true;
    }
    return upgrade && token;
}

/* The head to send instead of r's: its request line, its headers but the dropped ones, the
 * injected ones, `Connection: close` (`Connection: upgrade, close` for an upgrade: a server
 * that switches protocols answers 101, which is no final response, so the WebSocket goes on;
 * one that refuses answers a final response and closes). Wiped and freed by the caller. */
static char *
rewrite(const struct sbx_http_req *r, const struct inject *in, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f)
        return NULL;
    fprintf(f, "%s %s HTTP/1.%d\r\n", r->method, r->target, r->minor);
    for (size_t i = 0; i < r->head.n; i++) {
        if (!dropped(r->head.name[i], in))
            fprintf(f, "%s: %s\r\n", r->head.name[i], r->head.value[i]);
    }
    for (size_t i = 0; i < in->n; i++)
        fprintf(f, "%s: %s\r\n", in->name[i], in->value[i]);
    fputs(asks_upgrade(r) ? "Connection: upgrade, close\r\n\r\n" : "Connection: close\r\n\r\n", f);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

char *
sbx_credproxy_head_for(const json_t *b, const json_t *values, const struct sbx_http_req *req,
                       size_t *len)
{
    struct inject in = {0};
    char *out = inject_of(b, values, &in) == 0 ? rewrite(req, &in, len) : NULL;
    inject_free(&in);
    return out;
}

/* ---- one connection ---- */

struct flow {
    struct conn *c;
    struct sockaddr_in dst; /* the original destination */
    json_t *bindings;
    char head[HEAD_MAX + 1];
    size_t got;      /* bytes of head[] read */
    ssize_t headlen; /* > 0: a complete request head */
};

/* Wait for fd to be readable within ms; false on the proxy's stop, a timeout or an error. */
bool
sbx_credproxy_wait_readable(const struct sbx_credproxy *cp, int fd, int ms)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = cp->stop_pipe[0], .events = POLLIN}};
    int n = 0;
    while ((n = poll(p, 2, ms)) < 0 && errno == EINTR)
        ;
    return n > 0 && !p[1].revents;
}

/* Read until the head's blank line, HEAD_MAX bytes, the sandbox's end or HEAD_S. */
static void
read_head(struct flow *f, struct sbx_http_req *req)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)HEAD_S * 1000;
    f->headlen = 0;
    while (f->got < HEAD_MAX && f->headlen == 0) {
        uint64_t now = sbx_now_ms();
        if (now >= deadline ||
            !sbx_credproxy_wait_readable(f->c->cp, f->c->fd, (int)(deadline - now)))
            break;
        ssize_t n = recv(f->c->fd, f->head + f->got, HEAD_MAX - f->got, 0);
        if (n <= 0)
            break;
        f->got += (size_t)n;
        /* parsed on a copy: the bytes as they came are what an untouched request sends */
        char copy[HEAD_MAX + 1];
        memcpy(copy, f->head, f->got);
        f->headlen = sbx_http_req_head(copy, f->got, HEAD_MAX, req);
    }
}

/* The head with binding b's credential, or NULL (b is NULL, the destination is not the
 * host's, a value is missing). */
static char *
injected_head(const struct sbx_credproxy_req *q, const struct sbx_http_req *req, const json_t *b,
              const char *host, size_t *len)
{
    if (!b)
        return NULL;
    const char *bname = json_string_value(json_object_get(b, "name"));
    /* the destination must be the host's: see the top of this file */
    if (!sbx_egress_answered(q->cp->e, q->id, host, q->dst->sin_addr)) {
        char a[INET_ADDRSTRLEN];
        (void)inet_ntop(AF_INET, &q->dst->sin_addr, a, sizeof a);
        sbx_warn("sandbox %s: binding `%s` not applied: %s was not resolved for `%s` by this "
                 "sandbox's resolver (a Host header naming another host?)",
                 q->id, bname, a, host);
        return NULL;
    }
    json_t *values = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_egress_values(q->cp->e, q->id, &values, &err) < 0) {
        sbx_warn("sandbox %s: binding `%s` not applied: %s", q->id, bname, sbx_error_msg(err));
        return NULL;
    }
    char *out = sbx_credproxy_head_for(b, values, req, len);
    json_decref(values); /* (jansson does not wipe: the store's copy is as short-lived) */
    if (out)
        sbx_debug("sandbox %s: binding `%s` applied to %s %s", q->id, bname, req->method, host);
    return out;
}

char *
sbx_credproxy_decide(const struct sbx_credproxy_req *q, const struct sbx_http_req *req, size_t *len)
{
    char host[256];
    unsigned port = ntohs(q->dst->sin_port);
    const json_t *b = sbx_credproxy_match(q->bindings, req, port, q->sni, host);
    char *out = injected_head(q, req, b, host, len);
    /* a request no binding applies to, on a connection one could apply to (keep-alive: the
     * next request may match): closed after its answer, the next one comes on a new
     * connection, read and decided on anew */
    if (!out && sbx_credproxy_watched(q->bindings, req, port, q->sni))
        out = sbx_credproxy_head_for(NULL, NULL, req, len);
    return out;
}

bool
sbx_credproxy_send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Inside the sandbox's namespace: the socket of the proxy's upstream connection there, marked
 * so that the namespace's redirect lets it pass (it still meets the namespace's filter and,
 * past it, the sandbox's network: the proxy reaches nothing the sandbox could not). */
struct up_socket {
    int fd;
};

static void
up_socket_fn(void *arg)
{
    struct up_socket *u = arg;
    uint32_t mark = SBX_CREDPROXY_MARK;
    u->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (u->fd >= 0 && setsockopt(u->fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0) {
        (void)close(u->fd);
        u->fd = -1; /* unmarked, it would be redirected to the proxy again */
    }
}

static int
upstream_socket(int netns)
{
    if (netns < 0)
        return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct up_socket u = {.fd = -1};
    if (sbx_netns_run(netns, up_socket_fn, &u) < 0 && u.fd >= 0) {
        (void)close(u.fd);
        u.fd = -1;
    }
    return u.fd;
}

int
sbx_credproxy_connect_upstream(const struct sockaddr_in *dst, int netns)
{
    int fd = upstream_socket(netns);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)dst, sizeof *dst) < 0 && errno != EINPROGRESS) {
        (void)close(fd);
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (poll(&p, 1, CONNECT_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
        soerr != 0 || fcntl(fd, F_SETFL, 0) < 0) {
        (void)close(fd);
        return -1;
    }
    return fd;
}

/* Both ways until both ends are done, IDLE_S pass without a byte or the proxy stops. */
void
sbx_credproxy_relay(const struct sbx_credproxy *cp, int a, int b)
{
    struct pollfd p[3] = {{.fd = a, .events = POLLIN},
                          {.fd = b, .events = POLLIN},
                          {.fd = cp->stop_pipe[0], .events = POLLIN}};
    char buf[16384];
    int open_dirs = 2;
    while (open_dirs > 0) {
        int n = poll(p, 3, IDLE_S * 1000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || p[2].revents)
            return;
        for (int i = 0; i < 2; i++) {
            if (!p[i].revents)
                continue;
            ssize_t r = recv(p[i].fd, buf, sizeof buf, 0);
            int other = p[1 - i].fd;
            if (r > 0 && sbx_credproxy_send_all(other, buf, (size_t)r))
                continue;
            if (r != 0)
                return;                     /* an error either way: both go */
            (void)shutdown(other, SHUT_WR); /* this side ended: pass the end on */
            p[i].fd = -1;
            open_dirs--;
        }
    }
}

static void
serve(struct flow *f)
{
    struct sbx_http_req req;
    read_head(f, &req);
    if (f->got == 0)
        return;
    char parsed[HEAD_MAX + 1];
    size_t len = 0;
    sbx_autofree char *out = NULL;
    if (f->headlen > 0) {
        memcpy(parsed, f->head, f->got); /* req's pointers: into a parse of this copy */
        struct sbx_credproxy_req q = {
            .cp = f->c->cp, .id = f->c->id, .bindings = f->bindings, .dst = &f->dst};
        if (sbx_http_req_head(parsed, f->got, HEAD_MAX, &req) > 0)
            out = sbx_credproxy_decide(&q, &req, &len);
    }
    sbx_autoclose int up = sbx_credproxy_connect_upstream(&f->dst, f->c->netns);
    bool ok = up >= 0;
    if (ok && out)
        ok = sbx_credproxy_send_all(up, out, len) &&
             sbx_credproxy_send_all(up, f->head + f->headlen, f->got - (size_t)f->headlen);
    else if (ok)
        ok = sbx_credproxy_send_all(up, f->head, f->got);
    if (out)
        explicit_bzero(out, len);
    if (ok)
        sbx_credproxy_relay(f->c->cp, f->c->fd, up);
}

/* The original destination; false when there is none worth connecting to (not NAT'ed: a
 * connection straight to the listener; NAT'ed to the listener's own address, or to loopback,
 * which is the sandbox's own). */
static bool
original_dst(const struct conn *c, struct sockaddr_in *dst)
{
    socklen_t l = sizeof *dst;
    if (getsockopt(c->fd, SOL_IP, SO_ORIGINAL_DST, dst, &l) < 0 || dst->sin_family != AF_INET)
        return false;
    return dst->sin_addr.s_addr != c->cp->listen.s_addr &&
           (ntohl(dst->sin_addr.s_addr) >> 24) != 127 &&
           ntohs(dst->sin_port) == (c->tls ? 443 : 80);
}

/* The sandbox's bindings (c->id filled in bridge mode); NULL: it has no vault (any more). */
static json_t *
bindings_for(struct conn *c)
{
    if (c->netns < 0)
        return sbx_egress_bindings_of(c->cp->e, c->src, c->id);
    return sbx_egress_bindings_id(c->cp->e, c->id);
}

static void
conn_done(struct sbx_credproxy *cp)
{
    pthread_mutex_lock(&cp->mu);
    cp->conns--;
    pthread_cond_broadcast(&cp->cv);
    pthread_mutex_unlock(&cp->mu);
}

static void *
conn_main(void *arg)
{
    struct conn *c = arg;
    struct flow *f = sbx_xcalloc(1, sizeof *f);
    f->c = c;
    if (original_dst(c, &f->dst) && (f->bindings = bindings_for(c)) != NULL) {
        if (c->tls)
            sbx_credtls_serve(c, &f->dst, c->id, f->bindings);
        else
            serve(f);
    }
    json_decref(f->bindings);
    free(f);
    (void)close(c->fd);
    if (c->netns >= 0)
        (void)close(c->netns);
    conn_done(c->cp);
    free(c);
    return NULL;
}

/* ---- the listener ---- */

static bool
conn_take(struct sbx_credproxy *cp)
{
    pthread_mutex_lock(&cp->mu);
    bool ok = !cp->stopping && cp->conns < CONNS_MAX;
    cp->conns += ok;
    pthread_mutex_unlock(&cp->mu);
    return ok;
}

static bool
spawn_conn(struct conn *c)
{
    pthread_t t;
    pthread_attr_t at;
    (void)pthread_attr_init(&at);
    (void)pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    (void)pthread_attr_setstacksize(&at, (size_t)256 * 1024);
    bool ok = pthread_create(&t, &at, conn_main, c) == 0;
    (void)pthread_attr_destroy(&at);
    return ok;
}

/* Accept one connection on lfd; netns: the sandbox's namespace (dup'ed), or -1 (bridge). */
static void
accept_conn(struct sbx_credproxy *cp, int lfd, bool tls, const char *id, int netns)
{
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    int fd = accept4(lfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    int ns = netns >= 0 ? fcntl(netns, F_DUPFD_CLOEXEC, 3) : -1;
    if (fl != sizeof from || (netns >= 0 && ns < 0) || !conn_take(cp)) {
        (void)close(fd); /* beyond CONNS_MAX: refused, never queued */
        if (ns >= 0)
            (void)close(ns);
        return;
    }
    struct conn *c = sbx_xcalloc(1, sizeof *c);
    *c = (struct conn){.cp = cp, .fd = fd, .src = from.sin_addr, .tls = tls, .netns = ns};
    (void)snprintf(c->id, sizeof c->id, "%s", id ? id : "");
    if (!spawn_conn(c)) {
        (void)close(fd);
        if (ns >= 0)
            (void)close(ns);
        free(c);
        conn_done(cp);
    }
}

static void
accept_one(struct sbx_credproxy *cp, int lfd, bool tls)
{
    accept_conn(cp, lfd, tls, NULL, -1);
}

void
sbx_credproxy_accept(struct sbx_credproxy *cp, int lfd, bool tls, const char *id, int netns_fd)
{
    if (cp && id && netns_fd >= 0)
        accept_conn(cp, lfd, tls, id, netns_fd);
}

static void *
accept_loop(void *arg)
{
    struct sbx_credproxy *cp = arg;
    for (;;) {
        struct pollfd p[3] = {{.fd = cp->fd[0], .events = POLLIN},
                              {.fd = cp->fd[1], .events = POLLIN},
                              {.fd = cp->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 3, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[2].revents)
            return NULL;
        for (int i = 0; i < 2; i++) {
            if (p[i].revents)
                accept_one(cp, cp->fd[i], i == 1);
        }
    }
}

static int
bind_listener(struct sbx_credproxy *cp, int i, unsigned port, sbx_error **err)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = cp->listen};
    int one = 1;
    cp->fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (cp->fd[i] < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "credential proxy: socket");
    (void)setsockopt(cp->fd[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    char a[INET_ADDRSTRLEN];
    (void)inet_ntop(AF_INET, &cp->listen, a, sizeof a);
    if (bind(cp->fd[i], (struct sockaddr *)&sa, sizeof sa) < 0 || listen(cp->fd[i], 128) < 0)
        return sbx_error_set(err, errno == EADDRINUSE ? SBX_EEXISTS : SBX_EGENERIC, errno,
                             "credential proxy: bind/listen %s:%u", a, port);
    return 0;
}

int
sbx_credproxy_new(struct sbx_credproxy **out, struct sbx_egress *e, sbx_error **err)
{
    struct sbx_credproxy *cp = sbx_xcalloc(1, sizeof *cp);
    cp->e = e;
    cp->listen.s_addr = htonl(INADDR_LOOPBACK);
    cp->fd[0] = cp->fd[1] = cp->stop_pipe[0] = cp->stop_pipe[1] = -1;
    pthread_mutex_init(&cp->mu, NULL);
    pthread_cond_init(&cp->cv, NULL);
    if (pipe2(cp->stop_pipe, O_CLOEXEC) < 0) {
        int saved = errno;
        sbx_credproxy_close(cp);
        return sbx_error_set(err, SBX_EGENERIC, saved, "credential proxy: pipe");
    }
    *out = cp;
    return 0;
}

int
sbx_credproxy_open(struct sbx_credproxy **out, struct sbx_egress *e, struct in_addr listen,
                   sbx_error **err)
{
    struct sbx_credproxy *cp = NULL;
    int r = sbx_credproxy_new(&cp, e, err);
    if (r < 0 || !cp)
        return r < 0 ? r : -SBX_EGENERIC;
    cp->listen = listen;
    r = bind_listener(cp, 0, 80, err);
    if (r == 0)
        r = bind_listener(cp, 1, 443, err);
    if (r == 0 && pthread_create(&cp->accept_t, NULL, accept_loop, cp) != 0)
        r = sbx_error_set(err, SBX_ENOMEM, 0, "credential proxy: thread");
    cp->started = r == 0;
    if (r < 0) {
        sbx_credproxy_close(cp);
        return r;
    }
    *out = cp;
    return 0;
}

void
sbx_credproxy_close(struct sbx_credproxy *cp)
{
    if (!cp)
        return;
    pthread_mutex_lock(&cp->mu);
    cp->stopping = true;
    pthread_mutex_unlock(&cp->mu);
    if (cp->stop_pipe[1] >= 0)
        (void)!write(cp->stop_pipe[1], "x", 1);
    if (cp->started)
        (void)pthread_join(cp->accept_t, NULL);
    /* connections see the stop pipe (at most CONNECT_MS more) */
    pthread_mutex_lock(&cp->mu);
    while (cp->conns)
        pthread_cond_wait(&cp->cv, &cp->mu);
    pthread_mutex_unlock(&cp->mu);
    for (int i = 0; i < 2; i++) {
        if (cp->stop_pipe[i] >= 0)
            (void)close(cp->stop_pipe[i]);
    }
    for (int i = 0; i < 2; i++) {
        if (cp->fd[i] >= 0)
            (void)close(cp->fd[i]);
    }
    pthread_mutex_destroy(&cp->mu);
    pthread_cond_destroy(&cp->cv);
    free(cp);
}
