/*
 * credtls.c - the credential proxy's HTTPS side (port 443; see credproxy.c for the rest and
 * docs/network.md "Credential proxy").
 *
 * Per connection: the ClientHello is peeked at (not consumed) for its SNI name. Unless a
 * binding could apply to that name (scheme https, the port, the host) AND the original
 * destination is an address sbx's resolver answered to this sandbox for that very name, the
 * connection is spliced to the destination untouched: the sandbox's TLS goes end to end, the
 * proxy never sees its plaintext. Otherwise the proxy terminates it with a leaf for the SNI
 * name signed by the sandbox's own CA (tlsca.c; the sandbox trusts it through its CA bundle,
 * the key is only in the server), opens its own TLS to the destination verifying it as any
 * client would (the system's CAs, plus the configured extra CA), and then treats the first
 * request as plain HTTP is treated (credproxy.c): injected only if the binding matches and the
 * request's Host is the SNI name; everything after it relayed.
 *
 * Why this holds against a hostile sandbox: the name a credential is sent for is checked three
 * times: against the resolver's answers for the destination (as for plain HTTP), against the
 * SNI the TLS session is for, and by the upstream's certificate (which must be valid for that
 * name: an upstream that is not the name's cannot complete the handshake, so nothing is sent).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "egress/credproxy_int.h"
#include "egress/tlsca.h"

#define HELLO_MAX (16384 + 5)

/* ---- the ClientHello's SNI ---- */

struct rd {
    const unsigned char *p;
    size_t n;
};

static bool
take(struct rd *r, size_t k, const unsigned char **out)
{
    if (r->n < k)
        return false;
    if (out)
        *out = r->p;
    r->p += k;
    r->n -= k;
    return true;
}

static bool
take_len(struct rd *r, size_t width, struct rd *sub)
{
    const unsigned char *b = NULL;
    if (!take(r, width, &b))
        return false;
    size_t len = width == 1   ? b[0]
                 : width == 2 ? ((size_t)b[0] << 8 | b[1])
                              : ((size_t)b[0] << 16 | (size_t)b[1] << 8 | b[2]);
    const unsigned char *p = NULL;
    if (!take(r, len, &p))
        return false;
    *sub = (struct rd){p, len};
    return true;
}

/* The host_name of a server_name extension's data into name (lowercase), or false: only a
 * DNS host name (sbx_credproxy_dns_name), the only names a leaf is ever made for. */
static bool
sni_of_ext(struct rd ext, char name[256])
{
    struct rd list;
    const unsigned char *type = NULL;
    struct rd host;
    if (!take_len(&ext, 2, &list) || !take(&list, 1, &type) || *type != 0 ||
        !take_len(&list, 2, &host) || !sbx_credproxy_dns_name((const char *)host.p, host.n))
        return false;
    for (size_t i = 0; i < host.n; i++) {
        unsigned char c = host.p[i];
        name[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    name[host.n] = '\0';
    return true;
}

bool
sbx_credtls_hello_sni(const unsigned char *buf, size_t n, char name[256])
{
    struct rd r = {buf, n};
    const unsigned char *h = NULL;
    struct rd rec;
    struct rd hs;
    struct rd skip;
    struct rd exts;
    if (!take(&r, 1, &h) || *h != 22 || !take(&r, 2, NULL) || !take_len(&r, 2, &rec) ||
        !take(&rec, 1, &h) || *h != 1 || !take_len(&rec, 3, &hs) || !take(&hs, 2 + 32, NULL) ||
        !take_len(&hs, 1, &skip) || !take_len(&hs, 2, &skip) || !take_len(&hs, 1, &skip) ||
        !take_len(&hs, 2, &exts))
        return false;
    while (exts.n >= 4) {
        const unsigned char *t = NULL;
        struct rd ext;
        if (!take(&exts, 2, &t) || !take_len(&exts, 2, &ext))
            return false;
        if (t[0] == 0 && t[1] == 0)
            return sni_of_ext(ext, name);
    }
    return false;
}

/* Peek at the first record (without consuming it) until it is whole, HEAD_S or the end. */
static bool
peek_hello(const struct conn *c, char name[256])
{
    unsigned char buf[HELLO_MAX];
    uint64_t deadline = sbx_now_ms() + (uint64_t)HEAD_S * 1000;
    for (;;) {
        uint64_t now = sbx_now_ms();
        if (now >= deadline || !sbx_credproxy_wait_readable(c->cp, c->fd, (int)(deadline - now)))
            return false;
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_PEEK);
        if (n <= 0)
            return false;
        size_t need = n >= 5 ? 5 + ((size_t)buf[3] << 8 | buf[4]) : 5;
        if ((size_t)n >= need || (size_t)n == sizeof buf)
            return sbx_credtls_hello_sni(buf, (size_t)n, name);
        (void)usleep(2000); /* the rest of the record is on its way (poll says readable) */
    }
}

/* ---- TLS both ways ---- */

struct tls_pair {
    SSL *down; /* the sandbox's side (we are the server) */
    SSL *up;   /* the destination's (we are the client) */
    int down_fd, up_fd;
};

static void
tls_pair_free(struct tls_pair *t)
{
    SSL_free(t->down);
    SSL_free(t->up);
    if (t->up_fd >= 0)
        (void)close(t->up_fd);
}

static void
set_timeouts(int fd, int s)
{
    struct timeval tv = {.tv_sec = s};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static bool
ssl_write_all(SSL *s, const char *p, size_t n)
{
    while (n > 0) {
        int w = SSL_write(s, p, n > 65536 ? 65536 : (int)n);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* The sandbox's side: a leaf for name from the sandbox's CA (ca: its PEM key and cert). */
static SSL *
accept_down(const struct conn *c, char *const ca[2], const char *id, const char *name)
{
    SSL_CTX *ctx = NULL;
    sbx_autoerror sbx_error *err = NULL;
    SSL *s = NULL;
    if (sbx_tlsca_leaf_ctx(ca[0], ca[1], name, &ctx, &err) == 0 && (s = SSL_new(ctx)) &&
        (SSL_set_fd(s, c->fd) != 1 || SSL_accept(s) != 1)) {
        SSL_free(s);
        s = NULL;
    }
    if (err)
        sbx_warn("sandbox %s: credential proxy for `%s`: %s", id, name, sbx_error_msg(err));
    SSL_CTX_free(ctx); /* (the SSL holds its own reference) */
    return s;
}

/* The destination's side: verified for name as any client would. */
static SSL *
connect_up(struct sbx_credproxy *cp, int fd, const char *name)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    const char *extra = sbx_egress_upstream_ca(cp->e);
    SSL *s = NULL;
    if (ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) &&
        SSL_CTX_set_default_verify_paths(ctx) &&
        (!extra || SSL_CTX_load_verify_locations(ctx, extra, NULL) == 1)) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        s = SSL_new(ctx);
    }
    if (s &&
        (SSL_set_tlsext_host_name(s, name) != 1 || SSL_set1_host(s, name) != 1 ||
         SSL_set_fd(s, fd) != 1 || SSL_connect(s) != 1 || SSL_get_verify_result(s) != X509_V_OK)) {
        SSL_free(s);
        s = NULL;
    }
    SSL_CTX_free(ctx);
    return s;
}

/* Relay until either side ends, IDLE_S without a byte, or the proxy stops. */
static void
relay_tls(const struct sbx_credproxy *cp, const struct tls_pair *t)
{
    char buf[16384];
    SSL *ends[2] = {t->down, t->up};
    for (;;) {
        struct pollfd p[3] = {{.fd = t->down_fd, .events = POLLIN},
                              {.fd = t->up_fd, .events = POLLIN},
                              {.fd = cp->stop_pipe[0], .events = POLLIN}};
        bool pending = SSL_pending(t->down) > 0 || SSL_pending(t->up) > 0;
        int n = poll(p, 3, pending ? 0 : IDLE_S * 1000);
        if (n < 0 && errno == EINTR)
            continue;
        if ((n <= 0 && !pending) || p[2].revents)
            return;
        for (int i = 0; i < 2; i++) {
            if (!p[i].revents && SSL_pending(ends[i]) == 0)
                continue;
            int r = SSL_read(ends[i], buf, sizeof buf);
            if (r <= 0 || !ssl_write_all(ends[1 - i], buf, (size_t)r))
                return;
        }
    }
}

/* Read the first request head through t->down (HEAD_MAX, HEAD_S), decide, send it on. */
static bool
first_request(const struct sbx_credproxy_req *q, struct tls_pair *t)
{
    char *head = sbx_xmalloc(HEAD_MAX + 1);
    char *parsed = sbx_xmalloc(HEAD_MAX + 1);
    size_t got = 0;
    ssize_t hl = 0;
    struct sbx_http_req req;
    while (got < HEAD_MAX && hl == 0) {
        int n = SSL_read(t->down, head + got, (int)(HEAD_MAX - got));
        if (n <= 0)
            break;
        got += (size_t)n;
        memcpy(parsed, head, got);
        hl = sbx_http_req_head(parsed, got, HEAD_MAX, &req);
    }
    size_t len = 0;
    char *out = hl > 0 ? sbx_credproxy_decide(q, &req, &len) : NULL;
    bool ok = got > 0;
    if (ok && out)
        ok = ssl_write_all(t->up, out, len) && ssl_write_all(t->up, head + hl, got - (size_t)hl);
    else if (ok)
        ok = ssl_write_all(t->up, head, got);
    if (out) {
        explicit_bzero(out, len);
        free(out);
    }
    free(head);
    free(parsed);
    return ok;
}

static void
intercept(struct conn *c, char *const ca[2], const struct sbx_credproxy_req *q)
{
    struct tls_pair t = {.down_fd = c->fd, .up_fd = -1};
    set_timeouts(c->fd, HEAD_S);
    t.down = accept_down(c, ca, q->id, q->sni);
    if (t.down)
        t.up_fd = sbx_credproxy_connect_upstream(q->dst, c->netns);
    if (t.up_fd >= 0) {
        set_timeouts(t.up_fd, HEAD_S);
        t.up = connect_up(c->cp, t.up_fd, q->sni);
        if (!t.up)
            sbx_warn("sandbox %s: credential proxy: the TLS of `%s` could not be verified", q->id,
                     q->sni);
    }
    if (t.up && first_request(q, &t)) {
        set_timeouts(c->fd, IDLE_S);
        set_timeouts(t.up_fd, IDLE_S);
        relay_tls(c->cp, &t);
    }
    ERR_clear_error();
    tls_pair_free(&t);
}

void
sbx_credtls_serve(struct conn *c, const struct sockaddr_in *dst, const char *id,
                  const json_t *bindings)
{
    char name[256];
    unsigned port = ntohs(dst->sin_port);
    bool mine = peek_hello(c, name) && sbx_credproxy_candidate(bindings, name, port) &&
                sbx_egress_answered(c->cp->e, id, name, dst->sin_addr);
    /* a sandbox without a CA (its image has no CA bundle to add one to) cannot trust a leaf:
     * its HTTPS is spliced */
    char *ca[2] = {NULL, NULL};
    sbx_autoerror sbx_error *err = NULL;
    if (mine && sbx_egress_ca(c->cp->e, id, &ca[0], &ca[1], &err) == 0) {
        struct sbx_credproxy_req q = {
            .cp = c->cp, .id = id, .bindings = bindings, .dst = dst, .sni = name};
        intercept(c, ca, &q);
        explicit_bzero(ca[0], strlen(ca[0]));
        free(ca[0]);
        free(ca[1]);
        return;
    }
    /* not ours to open: the sandbox's TLS goes end to end (the ClientHello is still queued) */
    int up = sbx_credproxy_connect_upstream(dst, c->netns);
    if (up >= 0) {
        sbx_credproxy_relay(c->cp, c->fd, up);
        (void)close(up);
    }
}
