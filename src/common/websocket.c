/*
 * websocket.c - RFC 6455: accept key (nettle's SHA-1 and base64) and frames, both directions.
 */
#include "common/websocket.h"

#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <string.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

int
sbx_ws_accept_key(const char *client_key, char out[29])
{
    /* 16 random bytes in base64: 24 characters, the last two "==" (RFC 6455 4.1 point 7). */
    if (!client_key || strlen(client_key) != 24 || strcmp(client_key + 22, "==") != 0)
        return -1;
    uint8_t raw[18];
    size_t raw_len = sizeof raw;
    struct base64_decode_ctx dec;
    base64_decode_init(&dec);
    if (!base64_decode_update(&dec, &raw_len, raw, 24, client_key) || !base64_decode_final(&dec) ||
        raw_len != 16)
        return -1;
    struct sha1_ctx sha;
    uint8_t digest[SHA1_DIGEST_SIZE];
    sha1_init(&sha);
    sha1_update(&sha, 24, (const uint8_t *)client_key);
    sha1_update(&sha, sizeof WS_GUID - 1, (const uint8_t *)WS_GUID);
    sha1_digest(&sha, sizeof digest, digest);
    base64_encode_raw(out, sizeof digest, digest); /* 20 bytes -> 28 characters */
    out[28] = '\0';
    return 0;
}

static bool
is_control(unsigned op)
{
    return op >= 0x8;
}

static bool
known_op(unsigned op)
{
    return op <= SBX_WS_BINARY || (op >= SBX_WS_CLOSE && op <= SBX_WS_PONG);
}

static long
fail(const char **why, const char *msg)
{
    if (why)
        *why = msg;
    return -1;
}

/* The payload length after the first two bytes; *hl grows by the extended length's bytes.
 * Returns 0 when more bytes are needed, -1 for a length over 2^63. */
static int
payload_len(const uint8_t *buf, size_t n, size_t *hl, uint64_t *len)
{
    uint64_t l = buf[1] & 0x7f;
    size_t ext = l == 126 ? 2 : l == 127 ? 8 : 0;
    if (n < *hl + ext)
        return 0;
    if (ext) {
        l = 0;
        for (size_t i = 0; i < ext; i++)
            l = (l << 8) | buf[*hl + i];
        if (l >> 63)
            return -1;
    }
    *hl += ext;
    *len = l;
    return 1;
}

/* One frame; masked: a client's frame (must be masked), else a server's (must not be). */
static long
parse(uint8_t *buf, size_t n, size_t max, bool masked, struct sbx_ws_frame *out, const char **why)
{
    if (n < 2)
        return 0;
    unsigned op = buf[0] & 0x0f;
    if (buf[0] & 0x70)
        return fail(why, "reserved bits set (no extension was agreed)");
    if (!known_op(op))
        return fail(why, "unknown opcode");
    if (masked && !(buf[1] & 0x80))
        return fail(why, "client frames must be masked");
    if (!masked && (buf[1] & 0x80))
        return fail(why, "server frames must not be masked");
    size_t hl = 2;
    uint64_t len = 0;
    int r = payload_len(buf, n, &hl, &len);
    if (r <= 0)
        return r == 0 ? 0 : fail(why, "payload length out of range");
    bool fin = (buf[0] & 0x80) != 0;
    if (is_control(op) && (!fin || len > 125))
        return fail(why, "control frames must be whole and at most 125 bytes");
    if (len > max)
        return fail(why, "frame larger than the limit");
    size_t ml = masked ? 4 : 0;
    if (n < hl + ml || n - hl - ml < len)
        return 0;
    uint8_t *p = buf + hl + ml;
    if (masked)
        sbx_ws_mask(p, (size_t)len, buf + hl);
    *out = (struct sbx_ws_frame){.op = op, .fin = fin, .payload = p, .len = (size_t)len};
    return (long)(hl + ml + len);
}

long
sbx_ws_parse(uint8_t *buf, size_t n, size_t max, struct sbx_ws_frame *out, const char **why)
{
    return parse(buf, n, max, true, out, why);
}

long
sbx_ws_parse_server(uint8_t *buf, size_t n, size_t max, struct sbx_ws_frame *out, const char **why)
{
    return parse(buf, n, max, false, out, why);
}

void
sbx_ws_mask(uint8_t *p, size_t n, const uint8_t mask[4])
{
    for (size_t i = 0; i < n; i++)
        p[i] ^= mask[i & 3];
}

size_t
sbx_ws_head_masked(uint8_t head[14], enum sbx_ws_op op, size_t len, const uint8_t mask[4])
{
    size_t hl = sbx_ws_head(head, op, len);
    head[1] |= 0x80;
    memcpy(head + hl, mask, 4);
    return hl + 4;
}

size_t
sbx_ws_head(uint8_t head[10], enum sbx_ws_op op, size_t len)
{
    head[0] = (uint8_t)(0x80 | op);
    if (len < 126) {
        head[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xffff) {
        head[1] = 126;
        head[2] = (uint8_t)(len >> 8);
        head[3] = (uint8_t)len;
        return 4;
    }
    head[1] = 127;
    for (int i = 0; i < 8; i++)
        head[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    return 10;
}
