/*
 * credmatch_fuzz.c - the credential proxy's matching of a sandbox's first request against the
 * sandbox's bindings (sbx_credproxy_match, src/egress/credproxy.c): its Host header and its
 * path are the sandbox's to choose. The first input byte picks the port and the TLS name
 * (none: plain HTTP); the rest is the request head. When a binding is claimed: the request had
 * one Host header, that is the host name (a DNS name, lowercase) with at most a final dot and
 * `:port` (digits, the connection's port); over HTTPS it is the TLS name; the host is one of
 * the binding's (exact, or below a `*.` name at a label boundary); the method is one of its
 * methods; and the path (up to a `?`) read as an upstream might read it (`;` parameters of a
 * segment dropped as servlet containers do, percent-decoded, `\` as `/`, dot segments resolved)
 * still matches the binding's path: a binding for /v1/(anything) never covers a path that reaches
 * /admin.
 * A request a binding is claimed for is on a watched connection (sbx_credproxy_watched). The
 * head sent instead of a request's (a binding's, or on a watched connection none: only
 * `Connection: close`) is one head: its request line, its headers but hop-by-hop ones and the
 * sandbox's copies of the injected ones, the injected ones, then `Connection: close`, or
 * `Connection: upgrade, close` exactly when the request has an Upgrade header and an `upgrade`
 * token in a Connection header.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/httphead.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "egress/credproxy_int.h"
#include "fuzz/fuzz.h"

static const char bindings_json[] =
    "[{\"name\":\"a\",\"match\":{\"schemes\":[\"http\",\"https\"],\"ports\":[80,443],"
    "\"hosts\":[\"api.test\",\"*.svc.test\"],\"methods\":[\"GET\",\"POST\"],"
    "\"paths\":[\"/v1/*\",\"/exact\"]},\"auth\":{\"type\":\"bearer\",\"credential\":\"k\"}},"
    "{\"name\":\"b\",\"match\":{\"schemes\":[\"https\"],\"ports\":[8443],"
    "\"hosts\":[\"*.b.test\"],\"methods\":[\"PUT\"],\"paths\":[\"/*\"]},"
    "\"auth\":{\"type\":\"customHeaders\",\"headers\":[{\"name\":\"X-Api-Key\","
    "\"credential\":\"h1\"},{\"name\":\"x-other\",\"credential\":\"h2\"}]}}]";
static const char values_json[] = "{\"k\":\"sk-1\",\"h1\":\"v1\",\"h2\":\"v 2\"}";

static const unsigned ports[4] = {80, 443, 8443, 8080};
static const char *const snis[4] = {NULL, "api.test", "x.svc.test", "y.b.test"};

/* The one Host header is host, a final dot, `:port` (digits, the value port), nothing else. */
static bool
host_header_is(const struct sbx_http_req *r, const char *host, unsigned port)
{
    const char *h = NULL;
    for (size_t i = 0; i < r->head.n; i++) {
        if (strcasecmp(r->head.name[i], "host") == 0) {
            if (h)
                return false;
            h = r->head.value[i];
        }
    }
    size_t n = strlen(host);
    if (!h || strncasecmp(h, host, n) != 0)
        return false;
    h += n;
    if (*h == '.')
        h++;
    if (*h == '\0')
        return true;
    if (*h++ != ':' || !*h || strspn(h, "0123456789") != strlen(h) || strlen(h) > 5)
        return false;
    uint64_t v = 0;
    return sbx_parse_u64(h, &v, NULL) == 0 && v == port;
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One segment (seg, n bytes, no '/') appended to out as an upstream reads it: `;...` dropped,
 * decoded, `\` as a separator; "." and ".." resolved against out. */
static void
segment(char *out, size_t *on, const char *seg, size_t n)
{
    char *dec = sbx_xmalloc(n + 1);
    size_t dn = 0;
    const char *semi = memchr(seg, ';', n);
    if (semi)
        n = (size_t)(semi - seg);
    for (size_t i = 0; i < n; i++) {
        if (seg[i] == '%' && i + 2 < n && hexval(seg[i + 1]) >= 0 && hexval(seg[i + 2]) >= 0) {
            dec[dn++] = (char)(hexval(seg[i + 1]) << 4 | hexval(seg[i + 2]));
            i += 2;
        } else {
            dec[dn++] = seg[i];
        }
    }
    /* decoded separators split it again */
    size_t s = 0;
    for (size_t i = 0; i <= dn; i++) {
        if (i < dn && dec[i] != '/' && dec[i] != '\\')
            continue;
        size_t k = i - s;
        if (k == 2 && dec[s] == '.' && dec[s + 1] == '.') {
            while (*on > 0 && out[--*on] != '/')
                ;
        } else if (!(k == 1 && dec[s] == '.')) {
            out[(*on)++] = '/';
            memcpy(out + *on, dec + s, k);
            *on += k;
        }
        s = i + 1;
    }
    free(dec);
}

/* path (n bytes, starting with '/') as an upstream reads it, into out (NUL-terminated). */
static void
upstream_path(const char *path, size_t n, char *out)
{
    size_t on = 0;
    size_t s = 1;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/')
            continue;
        segment(out, &on, path + s, i - s);
        s = i + 1;
    }
    if (on == 0)
        out[on++] = '/';
    out[on] = '\0';
}

static bool
covered(const json_t *paths, const char *p)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (paths, i, v) {
        const char *pat = json_string_value(v);
        size_t pl = strlen(pat);
        if (pat[pl - 1] == '*' ? strncmp(p, pat, pl - 1) == 0 : strcmp(p, pat) == 0)
            return true;
    }
    return false;
}

static bool
host_of(const json_t *hosts, const char *host)
{
    size_t i = 0;
    json_t *v = NULL;
    size_t hl = strlen(host);
    json_array_foreach (hosts, i, v) {
        const char *pat = json_string_value(v);
        size_t sl = strlen(pat + 1);
        if (pat[0] == '*' ? hl > sl && strcmp(host + hl - sl, pat + 1) == 0
                          : strcmp(host, pat) == 0)
            return true;
    }
    return false;
}

static bool
has_method(const json_t *methods, const char *m)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (methods, i, v) {
        if (strcmp(json_string_value(v), m) == 0)
            return true;
    }
    return false;
}

static void
check(const json_t *b, const struct sbx_http_req *r, const char *host, uint8_t mode)
{
    unsigned port = ports[mode & 3];
    const char *sni = snis[(mode >> 2) & 3];
    const json_t *m = json_object_get(b, "match");
    if (!fuzz_dns_name(host) || !host_header_is(r, host, port) || (sni && strcmp(host, sni) != 0) ||
        !host_of(json_object_get(m, "hosts"), host) ||
        !has_method(json_object_get(m, "methods"), r->method) || r->target[0] != '/')
        __builtin_trap();
    size_t pn = strcspn(r->target, "?"); /* a '#' is no fragment in a request: a byte */
    char *norm = sbx_xmalloc(pn + 2);
    upstream_path(r->target, pn, norm);
    if (!covered(json_object_get(m, "paths"), norm))
        __builtin_trap();
    free(norm);
}

/* Does r have an Upgrade header and a Connection header with an item (comma-separated, OWS
 * around it) that is the token `upgrade`? (`keep-alive,%2e Upgrade` has none.) */
static bool
upgrade_asked(const struct sbx_http_req *r)
{
    bool header = false;
    bool token = false;
    for (size_t i = 0; i < r->head.n; i++) {
        if (strcasecmp(r->head.name[i], "upgrade") == 0)
            header = true;
        if (strcasecmp(r->head.name[i], "connection") != 0)
            continue;
        char *copy = sbx_xstrdup(r->head.value[i]);
        char *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            t += strspn(t, " \t"); /* an item is one token with OWS around it */
            size_t n = strcspn(t, " \t");
            token = token || (n == 7 && t[n + strspn(t + n, " \t")] == '\0' &&
                              strncasecmp(t, "upgrade", 7) == 0);
        }
        free(copy);
    }
    return header && token;
}

/* The headers the rewritten head must have, in order: r's but hop-by-hop ones and the
 * sandbox's copies of the injected ones, the injected ones (kind 0: X-Api-Key, x-other;
 * 1: Authorization; 2: none), its Connection; the count. */
static size_t
expected(const struct sbx_http_req *r, int kind, const char *name[], const char *value[])
{
    static const char *const injected[3][3] = {
        {"X-Api-Key", "x-other", "v1"}, {"Authorization", NULL, "Bearer sk-1"}, {NULL, NULL, NULL}};
    const char *const *inj = injected[kind];
    size_t n = 0;
    for (size_t i = 0; i < r->head.n; i++) {
        const char *h = r->head.name[i];
        if (strcasecmp(h, "connection") != 0 && strcasecmp(h, "keep-alive") != 0 &&
            strcasecmp(h, "proxy-connection") != 0 && (!inj[0] || strcasecmp(h, inj[0]) != 0) &&
            (!inj[1] || strcasecmp(h, inj[1]) != 0)) {
            name[n] = h;
            value[n++] = r->head.value[i];
        }
    }
    if (inj[0]) {
        name[n] = inj[0];
        value[n++] = inj[2];
    }
    if (inj[1]) {
        name[n] = inj[1];
        value[n++] = "v 2";
    }
    name[n] = "Connection";
    value[n++] = upgrade_asked(r) ? "upgrade, close" : "close";
    return n;
}

/* The head sent instead of r's (under b, or none) is one head, r's request line, the expected
 * headers. */
static void
check_rewrite(const json_t *b, const json_t *values, const struct sbx_http_req *r)
{
    size_t len = 0;
    char *out = sbx_credproxy_head_for(b, values, r, &len);
    const char *name[SBX_HTTP_MAX_HEADERS + 4];
    const char *value[SBX_HTTP_MAX_HEADERS + 4];
    int kind = !b ? 2 : strcmp(json_string_value(json_object_get(b, "name")), "a") == 0;
    size_t n = expected(r, kind, name, value);
    struct sbx_http_req r2 = {0};
    if (!out)
        __builtin_trap();
    if (n <= SBX_HTTP_MAX_HEADERS) {
        if (sbx_http_req_head(out, len, len, &r2) != (ssize_t)len || r2.head.n != n ||
            strcmp(r2.method, r->method) != 0 || strcmp(r2.target, r->target) != 0 ||
            r2.minor != r->minor)
            __builtin_trap();
        for (size_t i = 0; i < n; i++) {
            if (strcmp(r2.head.name[i], name[i]) != 0 || strcmp(r2.head.value[i], value[i]) != 0)
                __builtin_trap();
        }
    }
    free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *bindings;
    static json_t *values;
    if (!bindings) {
        bindings = json_loads(bindings_json, 0, NULL);
        values = json_loads(values_json, 0, NULL);
    }
    if (size < 1 || size - 1 > HEAD_MAX)
        return 0;
    uint8_t mode = data[0];
    char *buf = sbx_xmalloc(size);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    struct sbx_http_req r = {0};
    char host[256];
    if (sbx_http_req_head(buf, size - 1, HEAD_MAX, &r) > 0) {
        unsigned port = ports[mode & 3];
        const char *sni = snis[(mode >> 2) & 3];
        const json_t *b = sbx_credproxy_match(bindings, &r, port, sni, host);
        bool watched = sbx_credproxy_watched(bindings, &r, port, sni);
        if (b) {
            check(b, &r, host, mode);
            check_rewrite(b, values, &r);
            if (!watched)
                __builtin_trap(); /* a claimed binding's connection is watched */
        }
        if (watched)
            check_rewrite(NULL, NULL, &r);
    }
    free(buf);
    return 0;
}
