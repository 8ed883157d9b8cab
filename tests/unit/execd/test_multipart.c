#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "execd/multipart.h"

struct rec {
    struct sbx_buf log; /* "[name|filename]data;" per part */
};

static int
on_begin(void *ctx, const struct execd_mp_part *part)
{
    struct rec *r = ctx;
    return sbx_buf_printf(&r->log, NULL, "[%s|%s]", part->name, part->filename);
}

static int
on_data(void *ctx, const char *p, size_t n)
{
    struct rec *r = ctx;
    return sbx_buf_append(&r->log, p, n, NULL);
}

static int
on_end(void *ctx)
{
    struct rec *r = ctx;
    return sbx_buf_append_str(&r->log, ";", NULL);
}

static const struct execd_mp_callbacks cbs = {.begin = on_begin, .data = on_data, .end = on_end};

static const char body[] =
    "preamble\r\n--XyZ\r\n"
    "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
    "Content-Type: application/json\r\n\r\n{\"path\":\"/x\"}\r\n"
    "--XyZ  \r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\\\"b\"\r\n\r\n"
    "\r\n--Xy\r\r\n--XyY\r\n"
    "--XyZ--\r\nepilogue";
static const char want[] = "[metadata|metadata]{\"path\":\"/x\"};[file|a\"b]\r\n--Xy\r\r\n--XyY;";

/* Every split of the body into pieces of one size gives the same parts. */
static void
test_any_split(void **state)
{
    (void)state;
    for (size_t piece = 1; piece <= sizeof(body); piece++) {
        struct rec r;
        sbx_buf_init(&r.log, 1 << 16);
        struct execd_mp mp;
        execd_mp_init(&mp, "XyZ", &cbs, &r);
        for (size_t off = 0; off < sizeof(body) - 1; off += piece) {
            size_t n = sizeof(body) - 1 - off < piece ? sizeof(body) - 1 - off : piece;
            assert_int_equal(execd_mp_feed(&mp, body + off, n), 0);
        }
        assert_int_equal(execd_mp_finish(&mp), 0);
        assert_string_equal(sbx_buf_str(&r.log), want);
        sbx_buf_dispose(&r.log);
    }
}

static uint32_t
xorshift(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* Part contents made of delimiter pieces (CR, LF, '-', the boundary's letters) so that near
 * misses of "\r\n--XyZ" are everywhere, fed in pieces of random sizes: the parser gives back
 * exactly the contents (a delimiter cut by a piece's end, a CR right before one, a prefix that
 * turns out to be data...). */
static void
test_random_near_misses(void **state)
{
    (void)state;
    static const char alphabet[] = "\r\n-XyZa";
    uint32_t seed = 0x5b3c1a7u;
    for (int iter = 0; iter < 3000; iter++) {
        char content[2][400];
        size_t clen[2];
        for (int k = 0; k < 2; k++) {
            do {
                clen[k] = xorshift(&seed) % sizeof(content[k]);
                for (size_t i = 0; i < clen[k]; i++)
                    content[k][i] = alphabet[xorshift(&seed) % (sizeof(alphabet) - 1)];
            } while (memmem(content[k], clen[k], "\r\n--XyZ", 7));
        }
        struct sbx_buf body_b;
        struct sbx_buf want_b;
        sbx_buf_init(&body_b, 1 << 16);
        sbx_buf_init(&want_b, 1 << 16);
        for (int k = 0; k < 2; k++) {
            (void)sbx_buf_printf(&body_b, NULL,
                                 "%s--XyZ\r\nContent-Disposition: form-data; name=\"p%d\"\r\n\r\n",
                                 k ? "\r\n" : "", k);
            (void)sbx_buf_append(&body_b, content[k], clen[k], NULL);
            (void)sbx_buf_printf(&want_b, NULL, "[p%d|]", k);
            (void)sbx_buf_append(&want_b, content[k], clen[k], NULL);
            (void)sbx_buf_append_str(&want_b, ";", NULL);
        }
        (void)sbx_buf_append_str(&body_b, "\r\n--XyZ--\r\n", NULL);
        struct rec r;
        sbx_buf_init(&r.log, 1 << 16);
        struct execd_mp mp;
        execd_mp_init(&mp, "XyZ", &cbs, &r);
        size_t max_piece = iter % 3 == 0 ? body_b.len : 1 + xorshift(&seed) % 24;
        for (size_t off = 0; off < body_b.len;) {
            size_t n = 1 + xorshift(&seed) % max_piece;
            if (n > body_b.len - off)
                n = body_b.len - off;
            assert_int_equal(execd_mp_feed(&mp, body_b.data + off, n), 0);
            off += n;
        }
        assert_int_equal(execd_mp_finish(&mp), 0);
        assert_int_equal(r.log.len, want_b.len);
        assert_memory_equal(r.log.data, want_b.data, want_b.len);
        sbx_buf_dispose(&r.log);
        sbx_buf_dispose(&body_b);
        sbx_buf_dispose(&want_b);
    }
}

static void
test_errors(void **state)
{
    (void)state;
    const char *bad[] = {
        "--XyZ\r\nX: y\r\n\r\ndata\r\n--XyZ--", /* no Content-Disposition */
        "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nunterminated",
        "--XyZgarbage\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rec r;
        sbx_buf_init(&r.log, 1 << 16);
        struct execd_mp mp;
        execd_mp_init(&mp, "XyZ", &cbs, &r);
        int a = execd_mp_feed(&mp, bad[i], strlen(bad[i]));
        int b = execd_mp_finish(&mp);
        assert_true(a < 0 || b < 0);
        assert_non_null(mp.error);
        sbx_buf_dispose(&r.log);
    }
}

static void
test_boundary(void **state)
{
    (void)state;
    char b[80];
    assert_int_equal(execd_mp_boundary("multipart/form-data; boundary=abc", b, sizeof(b)), 0);
    assert_string_equal(b, "abc");
    assert_int_equal(execd_mp_boundary("multipart/form-data; boundary=\"a b\"; x=y", b, sizeof(b)),
                     0);
    assert_string_equal(b, "a b");
    assert_int_equal(execd_mp_boundary("text/plain; boundary=abc", b, sizeof(b)), -1);
    assert_int_equal(execd_mp_boundary("multipart/form-data", b, sizeof(b)), -1);
    assert_int_equal(execd_mp_boundary("multipart/form-data; boundary=a\rb", b, sizeof(b)), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_any_split),
        cmocka_unit_test(test_random_near_misses),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
