/*
 * test_httphead.c - the request heads of common/httphead.c (sbx_http_req_head), which the
 * credential proxy reads from sandboxes: strict, a head two parsers could read differently is
 * refused (and then never rewritten). Response heads are tested through the router
 * (server/router, the differential test against h11).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/httphead.h"

static ssize_t
parse(const char *text, struct sbx_http_req *r)
{
    static char buf[1024];
    size_t n = strlen(text);
    memcpy(buf, text, n + 1);
    return sbx_http_req_head(buf, n, 256, r);
}

static void
test_good(void **state)
{
    (void)state;
    struct sbx_http_req r;
    const char *h = "POST /v1/x?y=1 HTTP/1.1\r\nHost: api.test\r\nX-A:  b c \r\n\r\nbody";
    assert_int_equal(parse(h, &r), (ssize_t)(strlen(h) - 4));
    assert_string_equal(r.method, "POST");
    assert_string_equal(r.target, "/v1/x?y=1");
    assert_int_equal(r.minor, 1);
    assert_int_equal(r.head.n, 2);
    assert_string_equal(r.head.name[0], "Host");
    assert_string_equal(r.head.value[0], "api.test");
    assert_string_equal(r.head.value[1], "b c");
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &r), 18);
    assert_int_equal(r.head.n, 0);
    assert_int_equal(r.minor, 0);
}

static void
test_incomplete_and_long(void **state)
{
    (void)state;
    struct sbx_http_req r;
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n", &r), 0);
    assert_int_equal(parse("", &r), 0);
    char big[600];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "GET /", 5);
    assert_int_equal(parse(big, &r), -1); /* no blank line within max (256) */
    assert_non_null(r.head.why);
}

static void
test_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "get / HTTP/1.1\r\n\r\n",                  /* lower-case method */
        "GET  / HTTP/1.1\r\n\r\n",                 /* two spaces */
        "GET / HTTP/2.0\r\n\r\n",                  /* not 1.x */
        "GET / HTTP/1.1 \r\n\r\n",                 /* trailing space */
        "GET /a\tb HTTP/1.1\r\n\r\n",              /* a control in the target */
        "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", /* a bare LF */
        "GET / HTTP/1.1\r\n folded\r\n\r\n",       /* obs-fold */
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",   /* not a token */
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\n\r\n", /* a method longer than 16 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sbx_http_req r;
        assert_int_equal(parse(bad[i], &r), -1);
        assert_non_null(r.head.why);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_incomplete_and_long),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
