/*
 * test_credproxy.c - what the credential proxy reads from a sandbox before it decides to add
 * a credential (src/egress/credproxy.c, credtls.c): the ClientHello's SNI, and the first
 * request's Host and path matched against a binding. Each case is an attempt to have a
 * credential added where the binding does not say (a Host whose port is not the connection's,
 * a path an upstream reads as one outside the binding's) or to get a name that is no DNS
 * name through (a leaf certificate is made for the SNI name).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "egress/credproxy_int.h"

static const char bindings_json[] =
    "[{\"name\":\"a\",\"match\":{\"schemes\":[\"http\",\"https\"],\"ports\":[80,443],"
    "\"hosts\":[\"api.test\",\"*.svc.test\"],\"methods\":[\"GET\"],"
    "\"paths\":[\"/v1/*\",\"/exact\"]}}]";

/* Does a GET of target with this Host header, on port (HTTPS for sni), match binding a? */
static bool
matches(const char *target, const char *host_header, unsigned port, const char *sni)
{
    json_t *bindings = json_loads(bindings_json, 0, NULL);
    assert_non_null(bindings);
    char *head = sbx_xasprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host_header);
    struct sbx_http_req req;
    assert_true(sbx_http_req_head(head, strlen(head), HEAD_MAX, &req) > 0);
    char host[256];
    bool m = sbx_credproxy_match(bindings, &req, port, sni, host) != NULL;
    free(head);
    json_decref(bindings);
    return m;
}

static void
test_match_plain(void **state)
{
    (void)state;
    assert_true(matches("/v1/models", "api.test", 80, NULL));
    assert_true(matches("/v1/models?q=/../x", "API.test.", 80, NULL));
    assert_true(matches("/v1/a;v=1/b", "api.test:80", 80, NULL));
    assert_true(matches("/exact", "x.svc.test:443", 443, "x.svc.test"));
    assert_false(matches("/exact", "api.test", 443, "x.svc.test")); /* not the TLS name */
    assert_false(matches("/v2/models", "api.test", 80, NULL));
    assert_false(matches("/v1/models", "svc.test", 80, NULL));
}

/* The port in Host is the connection's, written as a port is: digits, nothing after them. */
static void
test_host_port(void **state)
{
    (void)state;
    assert_false(matches("/v1/x", "api.test:8080", 80, NULL));
    assert_false(matches("/v1/x", "api.test:4294967376", 80, NULL)); /* 2^32 + 80 */
    assert_false(matches("/v1/x", "api.test:80x", 80, NULL));
    assert_false(matches("/v1/x", "api.test:80 80", 80, NULL));
    assert_false(matches("/v1/x", "api.test:", 80, NULL));
    assert_false(matches("/v1/x", "api.test:+80", 80, NULL));
}

/* A Host that is no DNS name: empty labels, a label over 63 bytes. */
static void
test_host_name(void **state)
{
    (void)state;
    assert_false(matches("/v1/x", "a..svc.test", 80, NULL));
    assert_false(matches("/v1/x", ".svc.test", 80, NULL));
    assert_false(matches("/v1/x", "api.test..", 80, NULL));
    char *long_label = sbx_xasprintf("%064d.svc.test", 0);
    assert_false(matches("/v1/x", long_label, 80, NULL));
    long_label[1] = '.'; /* 1 + 62 */
    assert_true(matches("/v1/x", long_label, 80, NULL));
    free(long_label);
}

/* Paths an upstream reads as outside /v1/: dot segments however written. */
static void
test_path_escapes(void **state)
{
    (void)state;
    assert_false(matches("/v1/../admin", "api.test", 80, NULL));
    assert_false(matches("/v1/..", "api.test", 80, NULL));
    assert_false(matches("/v1/%2e%2E/admin", "api.test", 80, NULL));
    assert_false(matches("/v1/..%2fadmin", "api.test", 80, NULL));
    assert_false(matches("/v1/..\\admin", "api.test", 80, NULL));
    /* `..;x` is `..` to servlet containers (Tomcat, Jetty drop a segment's parameters) */
    assert_false(matches("/v1/..;/admin", "api.test", 80, NULL));
    assert_false(matches("/v1/..;x=1/admin", "api.test", 80, NULL));
    assert_false(matches("/v1/.;/x", "api.test", 80, NULL));
    /* a '#' is no fragment in a request line: an upstream may take it and what follows as
     * path, so the path is not cut there */
    assert_false(matches("/v1/#/../../admin", "api.test", 80, NULL));
    assert_false(matches("/exact#x", "api.test", 80, NULL));
}

/* A TLS 1.2 ClientHello for x.svc.test (Python's ssl, i.e. OpenSSL 3). */
static const unsigned char hello12[] = {
#include "hello12.inc"
};

static bool
sni(const unsigned char *p, size_t n, char name[256])
{
    unsigned char *copy = sbx_xmalloc(n);
    memcpy(copy, p, n);
    bool ok = sbx_credtls_hello_sni(copy, n, name);
    free(copy);
    return ok;
}

/* hello12 with its SNI host name (10 bytes, x.svc.test) replaced by host's first 10 bytes. */
static bool
sni_as(const char host[static 10], char name[256])
{
    unsigned char h[sizeof hello12];
    memcpy(h, hello12, sizeof h);
    unsigned char *at = memmem(h, sizeof h, "x.svc.test", 10);
    assert_non_null(at);
    memcpy(at, host, 10);
    return sni(h, sizeof h, name);
}

static void
test_sni(void **state)
{
    (void)state;
    char name[256];
    assert_true(sni(hello12, sizeof hello12, name));
    assert_string_equal(name, "x.svc.test");
    assert_false(sni(hello12, sizeof hello12 - 1, name)); /* cut short */
    assert_false(sni(hello12, 5, name));
    assert_true(sni_as("X.SVC.Test", name));
    assert_string_equal(name, "x.svc.test");
    assert_false(sni_as("x..vc.test", name));
    assert_false(sni_as(".x.svc.tes", name));
    assert_false(sni_as("x.svc.tes.", name));
    assert_false(sni_as("x_svc.test", name));
    assert_false(sni_as("x.svc\0test", name));
}

static unsigned char *
put16(unsigned char *p, size_t v)
{
    *p++ = (unsigned char)(v >> 8);
    *p++ = (unsigned char)v;
    return p;
}

/* A minimal ClientHello (one cipher suite, one extension: server_name host) into h; its
 * length. */
static size_t
hello_for(const char *host, unsigned char h[512])
{
    size_t name_n = strlen(host);
    size_t ext_n = 2 + 1 + 2 + name_n;
    size_t hs_n = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 4 + ext_n;
    unsigned char *p = h;
    *p++ = 22;
    p = put16(p, 0x0301);
    p = put16(p, 4 + hs_n);
    *p++ = 1;
    *p++ = 0;
    p = put16(p, hs_n);
    p = put16(p, 0x0303);
    memset(p, 7, 32);
    p += 32;
    *p++ = 0;        /* session id */
    p = put16(p, 2); /* cipher suites */
    p = put16(p, 0x1301);
    *p++ = 1; /* compression: null */
    *p++ = 0;
    p = put16(p, 4 + ext_n); /* extensions */
    p = put16(p, 0);         /* server_name */
    p = put16(p, ext_n);
    p = put16(p, ext_n - 2);
    *p++ = 0; /* host_name */
    p = put16(p, name_n);
    memcpy(p, host, name_n);
    return (size_t)(p + name_n - h);
}

/* Labels of at most 63 bytes, at most 253 in all. */
static void
test_sni_lengths(void **state)
{
    (void)state;
    unsigned char h[512];
    char name[256];
    char host[300];
    (void)snprintf(host, sizeof host, "%063d.test", 0);
    assert_true(sni(h, hello_for(host, h), name));
    assert_string_equal(name, host);
    (void)snprintf(host, sizeof host, "%064d.test", 0);
    assert_false(sni(h, hello_for(host, h), name));
    (void)snprintf(host, sizeof host, "%063d.%063d.%063d.%061d", 0, 0, 0, 0); /* 253 */
    assert_true(sni(h, hello_for(host, h), name));
    assert_string_equal(name, host);
    (void)snprintf(host, sizeof host, "%063d.%063d.%063d.%062d", 0, 0, 0, 0); /* 254 */
    assert_false(sni(h, hello_for(host, h), name));
}

/* The head of `<method> /p HTTP/1.1` with these header lines, rewritten under binding b (NULL:
 * none), with values {"k": "sk-1"}. */
static char *
rewritten(const json_t *b, const char *lines)
{
    json_t *values = json_pack("{s:s}", "k", "sk-1");
    char *head = sbx_xasprintf("GET /p HTTP/1.1\r\n%s\r\n", lines);
    struct sbx_http_req req;
    assert_true(sbx_http_req_head(head, strlen(head), HEAD_MAX, &req) > 0);
    size_t len = 0;
    char *out = sbx_credproxy_head_for(b, values, &req, &len);
    assert_non_null(out);
    assert_int_equal(len, strlen(out));
    free(head);
    json_decref(values);
    return out;
}

/* A request on a watched connection that no binding applies to: its headers kept (its own
 * Authorization too: nothing is injected), its Connection/Keep-Alive replaced by close. */
static void
test_close_only(void **state)
{
    (void)state;
    char *out = rewritten(NULL, "Host: api.test\r\nAuthorization: Bearer mine\r\n"
                                "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n");
    assert_string_equal(out, "GET /p HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer mine\r\n"
                             "Connection: close\r\n\r\n");
    free(out);
}

/* An upgrade (WebSocket) keeps its upgrade token beside close; an Upgrade header without the
 * token, or the token without the header, is no upgrade. */
static void
test_upgrade(void **state)
{
    (void)state;
    json_t *b =
        json_loads("{\"name\":\"a\",\"auth\":{\"type\":\"bearer\",\"credential\":\"k\"}}", 0, NULL);
    assert_non_null(b);
    char *out = rewritten(b, "Host: api.test\r\nUpgrade: websocket\r\nConnection: keep-alive, "
                             "Upgrade\r\nSec-WebSocket-Version: 13\r\n");
    assert_string_equal(out, "GET /p HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\n"
                             "Sec-WebSocket-Version: 13\r\nAuthorization: Bearer sk-1\r\n"
                             "Connection: upgrade, close\r\n\r\n");
    free(out);
    out = rewritten(NULL, "Host: api.test\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n");
    assert_non_null(strstr(out, "\r\nConnection: close\r\n\r\n"));
    free(out);
    out = rewritten(NULL, "Host: api.test\r\nConnection: upgraded, x-upgrade\r\n"
                          "Upgrade: websocket\r\n");
    assert_non_null(strstr(out, "\r\nConnection: close\r\n\r\n"));
    free(out);
    out = rewritten(NULL, "Host: api.test\r\nConnection: Upgrade\r\n");
    assert_non_null(strstr(out, "\r\nConnection: close\r\n\r\n"));
    free(out);
    json_decref(b);
}

/* Which connections are watched (forwarded with close): HTTPS ones (only opened for a
 * candidate name), plain HTTP whose Host an http binding has on this port, any path/method. */
static bool
watched(const char *request_line, const char *host_header, unsigned port, const char *sni)
{
    json_t *bindings = json_loads(bindings_json, 0, NULL);
    char *head = sbx_xasprintf("%s\r\nHost: %s\r\n\r\n", request_line, host_header);
    struct sbx_http_req req;
    assert_true(sbx_http_req_head(head, strlen(head), HEAD_MAX, &req) > 0);
    bool w = sbx_credproxy_watched(bindings, &req, port, sni);
    free(head);
    json_decref(bindings);
    return w;
}

static void
test_watched(void **state)
{
    (void)state;
    assert_true(watched("GET /public HTTP/1.1", "api.test", 80, NULL));
    assert_true(watched("DELETE /v2/../x HTTP/1.1", "API.test.", 80, NULL));
    assert_true(watched("GET / HTTP/1.1", "a.svc.test:80", 80, NULL));
    assert_true(watched("GET / HTTP/1.1", "other.test", 443, "api.test"));
    assert_false(watched("GET /v1/x HTTP/1.1", "other.test", 80, NULL));
    assert_false(watched("GET /v1/x HTTP/1.1", "svc.test", 80, NULL));
    assert_false(watched("GET /v1/x HTTP/1.1", "api.test", 8080, NULL));
    assert_false(watched("GET /v1/x HTTP/1.1", "api.test:8080", 80, NULL));
    assert_false(watched("GET /v1/x HTTP/1.1", "10.0.0.1", 80, NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_plain), cmocka_unit_test(test_host_port),
        cmocka_unit_test(test_host_name),   cmocka_unit_test(test_path_escapes),
        cmocka_unit_test(test_sni),         cmocka_unit_test(test_sni_lengths),
        cmocka_unit_test(test_close_only),  cmocka_unit_test(test_upgrade),
        cmocka_unit_test(test_watched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
