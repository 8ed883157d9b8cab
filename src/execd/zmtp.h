/*
 * zmtp.h - a minimal ZMTP 3.0 client (NULL mechanism): what a Jupyter kernel client needs,
 * a DEALER for the shell channel and a SUB for iopub, over a unix (ipc) or TCP socket.
 *
 * Why not libzmq (docs/execd.md "Kernels"): Debian's libzmq.a does not link statically
 * without stubbing GSSAPI (no static libgssapi_krb5), pulls libstdc++, pgm and norm (+3.5 MB)
 * and runs its own I/O threads next to execd's single libevent loop.
 *
 * The decoder is pure (an evbuffer in, callbacks out) so it is unit tested and fuzzed
 * (fuzz/zmtp_fuzz.c); the connection wraps it in a bufferevent.
 */
#ifndef SBX_EXECD_ZMTP_H
#define SBX_EXECD_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct event_base;
struct evbuffer;

#define ZMTP_GREETING_LEN 64
#define ZMTP_MAX_FRAME    (256ull << 20) /* one frame; larger is a protocol error */
#define ZMTP_MAX_MSG      (512ull << 20) /* all frames of one message */
#define ZMTP_MAX_PARTS    1024

enum zmtp_type {
    ZMTP_DEALER,
    ZMTP_SUB
};

struct zmtp_part {
    uint8_t *data;
    size_t len;
};

/* One multipart message; parts owned by the decoder until the callback returns. */
struct zmtp_msg {
    struct zmtp_part *parts;
    size_t n;
    size_t cap;
    uint64_t bytes;
};

/* ---- pure helpers ---- */

/* Our greeting: signature, version 3.0, mechanism NULL, as-server 0. */
void zmtp_greeting(uint8_t out[ZMTP_GREETING_LEN]);
/* 0 when g (64 bytes) is a ZMTP >= 3.0 greeting with the NULL mechanism, else -1 and *why. */
int zmtp_check_greeting(const uint8_t g[ZMTP_GREETING_LEN], const char **why);
/* Frame header for a body of size bytes into out; returns its length (2 or 9). */
size_t zmtp_frame_header(uint8_t out[9], uint64_t size, bool more, bool command);
/* The READY command body announcing socket type t (appended to out). */
void zmtp_ready_body(struct evbuffer *out, enum zmtp_type t);
/* The Socket-Type property of a READY body, copied to type (NUL-terminated); -1 if the body
 * is malformed or has none. */
int zmtp_ready_socket_type(const uint8_t *body, size_t n, char *type, size_t typen);
/* Is a peer of socket type `peer` a valid partner for our socket type t? */
bool zmtp_peer_ok(enum zmtp_type t, const char *peer);

/* ---- the incremental decoder ---- */

struct zmtp_decoder {
    enum {
        ZMTP_D_GREETING,
        ZMTP_D_READY,
        ZMTP_D_OPEN,
        ZMTP_D_FAILED
    } state;
    enum zmtp_type type;
    struct zmtp_msg msg; /* the message being assembled */
    char why[128];       /* set when state == ZMTP_D_FAILED */
};

/* A complete message arrived (parts valid during the call only). */
typedef void (*zmtp_msg_fn)(const struct zmtp_msg *m, void *arg);

void zmtp_decoder_init(struct zmtp_decoder *d, enum zmtp_type t);
void zmtp_decoder_clear(struct zmtp_decoder *d);
/* Consume what is complete in `in` (greeting, READY, frames); calls on_msg per message.
 * Returns 1 when the handshake finished during this call, 0 otherwise, -1 on a protocol error
 * (d->why; the connection must be dropped). Never reads past what `in` holds. */
int zmtp_decoder_run(struct zmtp_decoder *d, struct evbuffer *in, zmtp_msg_fn on_msg, void *arg);

/* ---- a connection driven by the event loop ---- */

struct zmtp_conn;
/* ready: the handshake finished; closed: the peer went away or broke the protocol (why). */
struct zmtp_handlers {
    void (*ready)(struct zmtp_conn *c, void *arg);
    void (*message)(struct zmtp_conn *c, const struct zmtp_msg *m, void *arg);
    void (*closed)(struct zmtp_conn *c, const char *why, void *arg);
};

/* Connect to a unix socket path (ipc transport). NULL with errno when connect() fails (the
 * kernel has not bound it yet: ENOENT, ECONNREFUSED): try again later. Sends the greeting
 * and READY at once. */
struct zmtp_conn *zmtp_connect_unix(struct event_base *base, const char *path, enum zmtp_type t,
                                    const struct zmtp_handlers *h, void *arg);
/* Queue one multipart message (n parts). */
void zmtp_send(struct zmtp_conn *c, const struct iovec *parts, size_t n);
bool zmtp_is_ready(const struct zmtp_conn *c);
void zmtp_conn_free(struct zmtp_conn *c);

#endif
