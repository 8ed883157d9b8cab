/*
 * pty_fuzz.c - what a WebSocket client of a PTY session sends (execd/pty_msg.c): the input is
 * either one whole message (first byte odd: bit 1 picks binary or text) or a stream of client
 * frames (first byte even), parsed as pty_ws.c does, assembled and read. A message is never
 * longer than the limit nor outside what was sent; a parsed message has a kind and its fields
 * in range (sizes 1..10000, a signal from the list, stdin inside the message); a refusal
 * always says why.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/websocket.h"
#include "execd/pty.h"
#include "execd/pty_msg.h"
#include "fuzz/fuzz.h"

static void
check_fields(const struct pty_msg *m, const struct pty_msg_in *in)
{
    switch (m->kind) {
    case PTY_MSG_STDIN:
        if (!m->data && m->len)
            __builtin_trap();
        if (in->op == SBX_WS_BINARY && (m->data != (const char *)in->p + 1 || m->len != in->n - 1))
            __builtin_trap();
        if (in->op == SBX_WS_TEXT && m->len > in->n)
            __builtin_trap();
        break;
    case PTY_MSG_RESIZE:
        if (m->cols < 1 || m->cols > PTY_MSG_DIM_MAX || m->rows < 1 || m->rows > PTY_MSG_DIM_MAX)
            __builtin_trap();
        break;
    case PTY_MSG_SIGNAL:
        if (m->sig < 1 || m->sig >= 32 || m->sig == SIGSEGV)
            __builtin_trap();
        break;
    case PTY_MSG_NONE:
        __builtin_trap(); /* parsed, yet of no kind */
    case PTY_MSG_EOF:
    case PTY_MSG_PING:
    default:
        break;
    }
}

static void
message(const struct pty_msg_in *in)
{
    struct pty_msg m;
    const char *why = NULL;
    if (pty_msg_parse(in->op, in->p, in->n, &m, &why) == 0)
        check_fields(&m, in);
    else if (!why)
        __builtin_trap();
    pty_msg_dispose(&m);
}

static void
frames(uint8_t *buf, size_t size)
{
    struct pty_msg_asm a = {0};
    sbx_buf_init(&a.buf, PTY_MAX_MSG);
    size_t off = 0;
    for (;;) {
        struct sbx_ws_frame f;
        const char *why = NULL;
        long used = sbx_ws_parse(buf + off, size - off, PTY_MAX_MSG, &f, &why);
        if (used <= 0)
            break;
        off += (size_t)used;
        if (f.op != SBX_WS_CONT && f.op != SBX_WS_TEXT && f.op != SBX_WS_BINARY)
            continue; /* control frames: pty_ws.c answers them itself */
        struct pty_msg_in in;
        int rc = pty_msg_frame(&a, &f, &in);
        if (rc < 0)
            break; /* pty_ws.c closes the connection */
        if (rc == PTY_FRAME_MESSAGE) {
            if (in.n > PTY_MAX_MSG || (in.op != SBX_WS_TEXT && in.op != SBX_WS_BINARY))
                __builtin_trap();
            message(&in);
        }
    }
    sbx_buf_dispose(&a.buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    if (data[0] & 1) {
        struct pty_msg_in in = {
            .op = (data[0] & 2) ? SBX_WS_BINARY : SBX_WS_TEXT, .p = buf, .n = size - 1};
        message(&in);
    } else {
        frames(buf, size - 1);
    }
    free(buf);
    return 0;
}
