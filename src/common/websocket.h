/*
 * websocket.h - RFC 6455: the handshake's accept key and frames, for both sides.
 *
 * Pure functions over buffers (no I/O), so the parser is unit-tested and fuzzed on its own. The
 * server's desktop view (desktop_view.c) and execd's PTY sessions (execd/pty.c) run the server
 * side on an upgraded connection; the CLI's terminal client (cli/wsclient.c) the client side.
 * Library sbx_ws (nettle's SHA-1 and base64).
 */
#ifndef SBX_COMMON_WEBSOCKET_H
#define SBX_COMMON_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sbx_ws_op {
    SBX_WS_CONT = 0x0,
    SBX_WS_TEXT = 0x1,
    SBX_WS_BINARY = 0x2,
    SBX_WS_CLOSE = 0x8,
    SBX_WS_PING = 0x9,
    SBX_WS_PONG = 0xA,
};

/* Close codes (RFC 6455 7.4.1) sbx sends. */
#define SBX_WS_CLOSE_NORMAL   1000
#define SBX_WS_CLOSE_GOING    1001
#define SBX_WS_CLOSE_PROTOCOL 1002
#define SBX_WS_CLOSE_DATA     1003
#define SBX_WS_CLOSE_POLICY   1008
#define SBX_WS_CLOSE_TOO_BIG  1009

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: base64(SHA-1(key + GUID)), 28
 * characters and a NUL. Returns -1 when the key is not the base64 of 16 bytes (RFC 6455 4.1). */
int sbx_ws_accept_key(const char *client_key, char out[29]);

struct sbx_ws_frame {
    enum sbx_ws_op op;
    bool fin;
    uint8_t *payload; /* inside the parsed buffer, unmasked in place */
    size_t len;
};

/* Parse one client frame at the start of buf (n bytes). Returns the bytes it takes (payload
 * unmasked in place), 0 when more bytes are needed, or -1 when the frame breaks the protocol:
 * unmasked (clients must mask), reserved bits or opcodes, a fragmented or over-125-byte control
 * frame, or a payload over max (why says which; the connection must then be closed). */
long sbx_ws_parse(uint8_t *buf, size_t n, size_t max, struct sbx_ws_frame *out, const char **why);

/* The same for a frame a server sent (to a client): it must not be masked. */
long sbx_ws_parse_server(uint8_t *buf, size_t n, size_t max, struct sbx_ws_frame *out,
                         const char **why);

/* The head of a server frame (unmasked, FIN set) of len payload bytes: at most 10 bytes in head.
 * Returns its length. */
size_t sbx_ws_head(uint8_t head[10], enum sbx_ws_op op, size_t len);

/* The head of a client frame (masked with mask, FIN set): at most 14 bytes. The payload must be
 * masked with sbx_ws_mask before it is sent. */
size_t sbx_ws_head_masked(uint8_t head[14], enum sbx_ws_op op, size_t len, const uint8_t mask[4]);
void sbx_ws_mask(uint8_t *p, size_t n, const uint8_t mask[4]);

#endif
