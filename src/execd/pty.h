/*
 * pty.h - PTY sessions (COMPAT 2.2 `/pty`, 2.6): the session and its process (pty.c), the
 * WebSocket clients attached to it (pty_ws.c).
 *
 * A session's output goes into a 1 MiB ring; every client has a cursor into it, so replay
 * (`?since=`), live output and a slow client are the same code: a client is sent what lies
 * between its cursor and the end of the ring while its socket's queue is short. Memory per
 * session is bounded by the ring plus PTY_HIGH queued per client: the one client (the holder)
 * pushes back on the process (the pty is not read while the holder lags PTY_LAG_MAX behind,
 * as a slow terminal would), a read-only viewer never does: it skips what left the ring.
 */
#ifndef SBX_EXECD_PTY_H
#define SBX_EXECD_PTY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "execd/execd.h"
#include "execd/pty_msg.h"

#define PTY_RING         (1u << 20)   /* replay ring per session (COMPAT 2.6) */
#define PTY_CHUNK        (64u << 10)  /* bytes per read and per output frame */
#define PTY_HIGH         (256u << 10) /* a client's queued bytes: no more pushed above this */
#define PTY_LAG_MAX      (512u << 10) /* the holder this far behind: the pty is not read */
#define PTY_MAX_MSG      (64u << 10)  /* largest message from a client */
#define PTY_STDIN_MAX    (1u << 20)   /* stdin waiting for the process */
#define PTY_STDIN_HIGH   (512u << 10) /* this much waiting: the holder's frames are not read */
#define PTY_MAX_SESSIONS 64
#define PTY_KEEP_SEC     600 /* an exited session is kept this long for replay */
#define PTY_PING_SEC     30
#define PTY_DEADLINE_SEC 60 /* nothing read from a client (or its queue stuck) this long */
#define PTY_LINGER_SEC   5  /* after our close: how long the client's own close is waited for */
#define PTY_MARKS        1024
#define PTY_CLOSE_TAKEN  4001

enum pty_channel {
    PTY_CH_STDIN = 0x00,
    PTY_CH_STDOUT = 0x01,
    PTY_CH_STDERR = 0x02,
    PTY_CH_REPLAY = 0x03,
};

struct pty_mark { /* pipe mode: output from off on came from channel ch */
    uint64_t off;
    uint8_t ch;
};

struct pty_client {
    struct pty_client *next;
    struct execd_pty *s; /* NULL once detached (closing) */
    struct evhttp_connection *evcon;
    struct bufferevent *bev;
    struct event *ping;
    struct event *defer;    /* runs the first read, or frees a client with nothing left to send */
    struct pty_msg_asm msg; /* messages assembled from frames */
    uint64_t cursor;        /* the next output offset to send */
    uint64_t replay_end;    /* output below this offset goes out as replay frames */
    bool need_offset;       /* bytes were skipped: the next frame says where it is */
    bool viewer;
    bool closing;   /* a close frame is queued: freed once it is sent */
    bool lingering; /* it is sent and our side shut: reading until the client closes */
};

struct execd_pty {
    struct execd_pty *next;
    struct execd *ex;
    char id[40];
    char *cwd;
    char *command;
    bool started;
    bool pipe_mode;
    bool reaped;
    bool finished; /* reaped and its output read: clients get the exit frame */
    bool paused;   /* output not read: the holder lags */
    pid_t pid;
    int exit_code;
    int fd_out; /* the pty master, or stdout's pipe */
    int fd_err; /* pipe mode: stderr's pipe */
    int fd_in;  /* the pty master (a dup), or stdin's pipe */
    bool out_eof;
    bool err_eof;
    struct event *ev_out;
    struct event *ev_err;
    struct event *ev_in;
    struct event *keep; /* frees an exited session after PTY_KEEP_SEC */
    struct evbuffer *stdin_q;
    bool stdin_eof;  /* sbx: the holder sent {"type":"eof"}: closed once stdin_q is written */
    bool stdin_full; /* the holder is not read until stdin_q drains below PTY_STDIN_HIGH */
    uint8_t *ring;
    uint64_t total; /* bytes of output so far: the output offset */
    struct pty_mark marks[PTY_MARKS];
    unsigned mark0;
    unsigned nmarks;
    unsigned short cols;
    unsigned short rows;
    struct pty_client *holder;
    struct pty_client *viewers;
};

/* ---- pty.c ---- */
struct execd_pty *pty_find(struct execd *ex, const char *id);
/* Start the process (first attach). */
int pty_start(struct execd_pty *s, bool pipe_mode, sbx_error **err);
/* Queue bytes for the process's stdin; -1 with *why when it cannot take them. */
int pty_write_stdin(struct execd_pty *s, const void *p, size_t n, const char **why);
/* Pipe mode: close the process's stdin once what is queued is written (sbx extension). */
int pty_close_stdin(struct execd_pty *s, const char **why);
/* True when stdin_q holds PTY_STDIN_HIGH or more: the caller stops reading its client (the
 * flag is set; pty_client_stdin_drained() is called when it drains). */
bool pty_stdin_stall(struct execd_pty *s);
void pty_resize(struct execd_pty *s, unsigned cols, unsigned rows);
/* A signal to the terminal's foreground process group (pipe mode: the process's group). */
int pty_signal(struct execd_pty *s, int sig);
/* Output from the ring for c: the channel at c's cursor and how many bytes of it follow
 * contiguously (at most PTY_CHUNK); 0 when c has everything. Moves a cursor that fell out of
 * the ring to the ring's start. */
size_t pty_ring_next(struct execd_pty *s, struct pty_client *c, uint8_t *ch, const uint8_t **p);
/* The holder may have caught up: read output again if it was paused. */
void pty_resume(struct execd_pty *s);
uint64_t pty_ring_start(const struct execd_pty *s);

/* ---- pty_ws.c ---- */
/* Send c what it has not seen (and the exit frame at the end of an exited session's output). */
void pty_client_pump(struct pty_client *c);
/* Close c with a close frame (code, reason); it is freed once the frame is sent. */
void pty_client_close(struct pty_client *c, int code, const char *reason);
/* The holder's stdin queue drained: read its frames again. */
void pty_client_stdin_drained(struct pty_client *c);
/* An error frame {"type":"error","code","error"}. */
void pty_client_error(struct pty_client *c, const char *code, const char *msg);

#endif
