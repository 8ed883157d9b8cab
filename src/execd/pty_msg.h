/*
 * pty_msg.h - what a WebSocket client of a PTY session sends (COMPAT 2.6), parsed apart from
 * acting on it: data frames assembled into messages, and a message read as stdin (binary
 * 0x00 + bytes, or {"type":"stdin","data":...}), eof, resize, signal or ping. Pure apart from
 * allocation (fuzz/pty_fuzz.c); pty_ws.c does the I/O and the actions.
 */
#ifndef SBX_EXECD_PTY_MSG_H
#define SBX_EXECD_PTY_MSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/websocket.h"

#define PTY_MSG_DIM_MAX 10000u /* columns and rows of a resize */

enum pty_msg_kind {
    PTY_MSG_NONE, /* not known (yet): not a JSON object with a known `type` */
    PTY_MSG_STDIN,
    PTY_MSG_EOF,
    PTY_MSG_RESIZE,
    PTY_MSG_SIGNAL,
    PTY_MSG_PING,
};

struct pty_msg {
    enum pty_msg_kind kind;
    const char *data; /* stdin: inside the message, or inside json */
    size_t len;
    unsigned cols, rows; /* resize: 1..PTY_MSG_DIM_MAX */
    int sig;             /* signal: one of the names pty_msg_signal knows */
    json_t *json;        /* a JSON message, kept for data: pty_msg_dispose */
};

/* Read one whole message (op: SBX_WS_TEXT or SBX_WS_BINARY). 0 with m filled; -1 with *why,
 * m->kind then says what it was meant to be when that much was clear. Dispose m either way. */
int pty_msg_parse(int op, const uint8_t *p, size_t n, struct pty_msg *m, const char **why);
void pty_msg_dispose(struct pty_msg *m);

/* A signal's name ("INT", "SIGINT", any case) among those a client may send; -1 if none. */
int pty_msg_signal(const char *name);

/* Messages assembled from data frames (RFC 6455 5.4). */
struct pty_msg_asm {
    struct sbx_buf buf; /* a fragmented message so far (sbx_buf_init'ed by the owner) */
    int op;             /* its opcode, 0 when none is under way */
    bool ready;         /* buf holds a whole message handed out: emptied on the next frame */
};

/* A whole message to read. */
struct pty_msg_in {
    int op;
    const uint8_t *p;
    size_t n;
};

enum {
    PTY_FRAME_MORE = 0,      /* a piece of a message: more frames to come */
    PTY_FRAME_MESSAGE = 1,   /* *in is a whole message (valid until the next frame) */
    PTY_FRAME_PROTOCOL = -1, /* a continuation out of place: close 1002 */
    PTY_FRAME_TOO_BIG = -2,  /* the message outgrew buf's limit: close 1009 */
};

/* Take one data frame (SBX_WS_CONT, _TEXT or _BINARY). */
int pty_msg_frame(struct pty_msg_asm *a, const struct sbx_ws_frame *f, struct pty_msg_in *in);

#endif
