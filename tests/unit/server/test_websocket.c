#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/websocket.h"

static void
test_accept_key(void **state)
{
    (void)state;
    char out[29];
    /* RFC 6455 section 1.3's example */
    assert_int_equal(sbx_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_int_equal(sbx_ws_accept_key(NULL, out), -1);
    assert_int_equal(sbx_ws_accept_key("", out), -1);
    assert_int_equal(sbx_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ", out), -1);    /* 22 chars */
    assert_int_equal(sbx_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=x", out), -1);  /* no == */
    assert_int_equal(sbx_ws_accept_key("dGhl!HNhbXBsZSBub25jZQ==", out), -1);  /* not base64 */
    assert_int_equal(sbx_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ===", out), -1); /* 25 chars */
}

/* A masked client frame of op with payload p (n bytes) into buf; returns its length. */
static size_t
client_frame(uint8_t *buf, unsigned first, const uint8_t *p, size_t n)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t hl = 2;
    buf[0] = (uint8_t)first;
    if (n < 126) {
        buf[1] = (uint8_t)(0x80 | n);
    } else if (n <= 0xffff) {
        buf[1] = 0x80 | 126;
        buf[2] = (uint8_t)(n >> 8);
        buf[3] = (uint8_t)n;
        hl = 4;
    } else {
        buf[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++)
            buf[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
        hl = 10;
    }
    memcpy(buf + hl, mask, 4);
    for (size_t i = 0; i < n; i++)
        buf[hl + 4 + i] = p[i] ^ mask[i & 3];
    return hl + 4 + n;
}

static void
test_parse_lengths(void **state)
{
    (void)state;
    static uint8_t buf[70000 + 14];
    static uint8_t payload[70000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7);
    static const size_t sizes[] = {0, 1, 125, 126, 127, 65535, 65536, 70000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        size_t len = client_frame(buf, 0x82, payload, n);
        struct sbx_ws_frame f;
        const char *why = NULL;
        /* every prefix is "need more" */
        for (size_t cut = 0; cut < len; cut += (len > 200 ? 997 : 1))
            assert_int_equal(sbx_ws_parse(buf, cut, 1 << 20, &f, &why), 0);
        assert_int_equal(sbx_ws_parse(buf, len, 1 << 20, &f, &why), (long)len);
        assert_int_equal(f.op, SBX_WS_BINARY);
        assert_true(f.fin);
        assert_int_equal(f.len, n);
        assert_memory_equal(f.payload, payload, n);
    }
}

static void
test_parse_two_frames(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t a = client_frame(buf, 0x02, (const uint8_t *)"RFB ", 4); /* not FIN */
    size_t b = client_frame(buf + a, 0x80, (const uint8_t *)"003", 3);
    struct sbx_ws_frame f;
    const char *why = NULL;
    assert_int_equal(sbx_ws_parse(buf, a + b, 100, &f, &why), (long)a);
    assert_false(f.fin);
    assert_memory_equal(f.payload, "RFB ", 4);
    assert_int_equal(sbx_ws_parse(buf + a, b, 100, &f, &why), (long)b);
    assert_int_equal(f.op, SBX_WS_CONT);
    assert_true(f.fin);
    assert_memory_equal(f.payload, "003", 3);
}

static void
test_parse_violations(void **state)
{
    (void)state;
    uint8_t buf[300];
    uint8_t big[200] = {0};
    struct sbx_ws_frame f;
    const char *why = NULL;
    /* unmasked */
    uint8_t unmasked[] = {0x82, 0x01, 'x'};
    assert_int_equal(sbx_ws_parse(unmasked, sizeof unmasked, 100, &f, &why), -1);
    assert_non_null(strstr(why, "masked"));
    /* reserved bits (no extension agreed) */
    size_t n = client_frame(buf, 0xc2, big, 1);
    assert_int_equal(sbx_ws_parse(buf, n, 100, &f, &why), -1);
    assert_non_null(strstr(why, "reserved"));
    /* unknown opcodes */
    n = client_frame(buf, 0x83, big, 1);
    assert_int_equal(sbx_ws_parse(buf, n, 100, &f, &why), -1);
    n = client_frame(buf, 0x8b, big, 1);
    assert_int_equal(sbx_ws_parse(buf, n, 100, &f, &why), -1);
    /* a fragmented ping, a 126-byte close */
    n = client_frame(buf, 0x09, big, 1);
    assert_int_equal(sbx_ws_parse(buf, n, 1000, &f, &why), -1);
    n = client_frame(buf, 0x88, big, 126);
    assert_int_equal(sbx_ws_parse(buf, n, 1000, &f, &why), -1);
    assert_non_null(strstr(why, "control"));
    /* over the limit: refused from the head alone, before the payload arrives */
    (void)client_frame(buf, 0x82, big, 200);
    assert_int_equal(sbx_ws_parse(buf, 4, 199, &f, &why), -1);
    assert_non_null(strstr(why, "limit"));
    /* a 64-bit length with the top bit set */
    uint8_t huge[14] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4};
    assert_int_equal(sbx_ws_parse(huge, sizeof huge, 1000, &f, &why), -1);
    /* control frames up to 125 bytes are fine */
    n = client_frame(buf, 0x89, big, 125);
    assert_int_equal(sbx_ws_parse(buf, n, 1000, &f, &why), (long)n);
    assert_int_equal(f.op, SBX_WS_PING);
}

static void
test_head(void **state)
{
    (void)state;
    uint8_t h[10];
    assert_int_equal(sbx_ws_head(h, SBX_WS_BINARY, 5), 2);
    assert_int_equal(h[0], 0x82);
    assert_int_equal(h[1], 5);
    assert_int_equal(sbx_ws_head(h, SBX_WS_BINARY, 125), 2);
    assert_int_equal(sbx_ws_head(h, SBX_WS_BINARY, 126), 4);
    assert_int_equal(h[1], 126);
    assert_int_equal((h[2] << 8) | h[3], 126);
    assert_int_equal(sbx_ws_head(h, SBX_WS_CLOSE, 65535), 4);
    assert_int_equal(h[0], 0x88);
    assert_int_equal(sbx_ws_head(h, SBX_WS_BINARY, 65536), 10);
    assert_int_equal(h[1], 127);
    assert_int_equal(h[7], 1);
    assert_int_equal(h[8], 0);
    assert_int_equal(h[9], 0);
}

/* The client side: a masked frame we build parses as a client frame; a server's frame parses
 * with sbx_ws_parse_server and a masked one is refused there. */
static void
test_client_side(void **state)
{
    (void)state;
    const uint8_t mask[4] = {1, 2, 3, 4};
    uint8_t buf[14 + 300];
    uint8_t payload[300];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)i;
    size_t hl = sbx_ws_head_masked(buf, SBX_WS_BINARY, sizeof(payload), mask);
    assert_int_equal(hl, 8); /* 2 + 2 (126 form) + 4 of mask */
    memcpy(buf + hl, payload, sizeof(payload));
    sbx_ws_mask(buf + hl, sizeof(payload), mask);
    struct sbx_ws_frame f;
    const char *why = NULL;
    assert_int_equal(sbx_ws_parse(buf, hl + sizeof(payload), 1024, &f, &why),
                     (long)(hl + sizeof(payload)));
    assert_int_equal(f.op, SBX_WS_BINARY);
    assert_memory_equal(f.payload, payload, sizeof(payload));
    /* masked: not a server's frame */
    hl = sbx_ws_head_masked(buf, SBX_WS_TEXT, 2, mask);
    assert_int_equal(sbx_ws_parse_server(buf, hl + 2, 1024, &f, &why), -1);
    assert_non_null(strstr(why, "must not be masked"));
    /* a server's frame */
    hl = sbx_ws_head(buf, SBX_WS_TEXT, 2);
    buf[hl] = 'h';
    buf[hl + 1] = 'i';
    assert_int_equal(sbx_ws_parse_server(buf, hl + 2, 1024, &f, &why), (long)hl + 2);
    assert_int_equal(f.len, 2);
    assert_memory_equal(f.payload, "hi", 2);
    assert_int_equal(sbx_ws_parse_server(buf, hl + 1, 1024, &f, &why), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key),
        cmocka_unit_test(test_parse_lengths),
        cmocka_unit_test(test_parse_two_frames),
        cmocka_unit_test(test_parse_violations),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_client_side),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
