/*
 * term.c - the local end of a PTY session: a WebSocket client (common/websocket.c's frames)
 * over a connection to the server's router (TCP for ws://, TLS for wss://: term_conn.c), and
 * the local terminal in raw mode.
 *
 * Raw mode turns ISIG off, so Ctrl-C, Ctrl-Z and Ctrl-\ are bytes sent to the sandbox, where
 * the pty's line discipline signals the sandbox's foreground process group, as on a local
 * terminal. The terminal's settings are restored on every way out: the end of the session,
 * an error, SIGTERM/SIGHUP/SIGQUIT (caught through a self-pipe and handled in the loop).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>
#include <nettle/base64.h>

#include "cli/cli.h"
#include "cli/term.h"
#include "cli/term_conn.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/websocket.h"
#include "common/xalloc.h"

#define TERM_MAX_FRAME (16u << 20)
#define TERM_HEAD_MAX  (64u << 10)
#define TERM_OUT_HIGH  (256u << 10) /* queued for the server: stdin is not read above this */
#define TERM_OUT_MAX   (64u << 20)  /* a server that reads nothing at all for this long */

struct term {
    const char *verb;
    struct term_conn conn;
    int sig_r; /* self-pipe: signals to the loop */
    bool raw;
    struct termios saved;
    struct sbx_buf in;  /* bytes from the server not parsed yet */
    struct sbx_buf out; /* frames for the server not sent yet (the socket was full) */
    int exit_code;      /* -1 until the exit message */
    bool done;
    /* pipe mode (`sbx exec` without -t): ?pty=0, the local stdio as they are */
    bool pipe;
    bool stdin_done; /* EOF sent (or stdin never forwarded) */
    bool out_broken; /* our stdout or stderr is a closed pipe */
    int n_int;       /* SIGINTs forwarded */
    long timeout_ms; /* 0: none */
    bool timed_out;
    int in_fd;  /* the command's stdin comes from here (pipe mode; else the terminal) */
    int out_fd; /* its stdout goes here */
};

static int sig_w = -1;

static void
on_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    int e = errno;
    (void)!write(sig_w, &b, 1);
    errno = e;
}

static void
restore(struct term *t)
{
    if (t->raw)
        (void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
    t->raw = false;
}

static void term_fail(struct term *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
term_fail(struct term *t, const char *fmt, ...)
{
    restore(t);
    fprintf(stderr, "sbx %s: ", t->verb);
    va_list ap;
    va_start(ap, fmt);
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): false positive, va_start above */
    (void)vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- the connection ---- */

/* Send what waits in t->out without blocking: the loop never waits on a full socket while
 * the server has output for us (a command that writes much before it reads its stdin would
 * otherwise never be read, and never read). Sent in the loop when the socket is writable. */
static int
flush_out(struct term *t)
{
    size_t off = 0;
    while (off < t->out.len) {
        ssize_t w = term_conn_send(&t->conn, t->out.data + off, t->out.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    if (off) {
        memmove(t->out.data, t->out.data + off, t->out.len - off);
        t->out.len -= off;
    }
    return 0;
}

static int
ws_send(struct term *t, enum sbx_ws_op op, const void *pre, size_t pn, const void *p, size_t n)
{
    uint8_t head[14];
    uint8_t mask[4];
    if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
        return -1;
    size_t hl = sbx_ws_head_masked(head, op, pn + n, mask);
    uint8_t *frame = sbx_xmalloc(hl + pn + n);
    memcpy(frame, head, hl);
    if (pn)
        memcpy(frame + hl, pre, pn);
    if (n)
        memcpy(frame + hl + pn, p, n);
    sbx_ws_mask(frame + hl, pn + n, mask);
    int r = sbx_buf_append(&t->out, frame, hl + pn + n, NULL);
    free(frame);
    return r < 0 ? -1 : flush_out(t);
}

static int
send_json(struct term *t, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    int r = s ? ws_send(t, SBX_WS_TEXT, NULL, 0, s, strlen(s)) : -1;
    free(s);
    return r;
}

static char *
handshake_request(const char *hostport, const char *path, const char *key, char **headers)
{
    struct sbx_buf b;
    sbx_buf_init(&b, TERM_HEAD_MAX);
    (void)sbx_buf_printf(&b, NULL,
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                         "Sec-WebSocket-Version: 13\r\n",
                         path, hostport, key);
    for (size_t i = 0; headers && headers[i]; i++)
        (void)sbx_buf_printf(&b, NULL, "%s\r\n", headers[i]);
    (void)sbx_buf_append_str(&b, "\r\n", NULL);
    return sbx_buf_steal(&b);
}

/* The answer's head; bytes after it stay in t->in. NULL when the connection closed first. */
static char *
read_head(struct term *t)
{
    char buf[4096];
    for (;;) {
        const char *end = t->in.data ? memmem(t->in.data, t->in.len, "\r\n\r\n", 4) : NULL;
        if (end) {
            size_t hl = (size_t)(end - t->in.data) + 4;
            char *head = sbx_xstrndup(t->in.data, hl);
            memmove(t->in.data, t->in.data + hl, t->in.len - hl);
            t->in.len -= hl;
            return head;
        }
        ssize_t n = term_conn_recv_wait(&t->conn, buf, sizeof(buf));
        if (n <= 0 || sbx_buf_append(&t->in, buf, (size_t)n, NULL) < 0)
            return NULL;
    }
}

/* A refusal: execd's or the server's {code, message} when the body came along. */
static void
report_refusal(struct term *t, const char *head)
{
    const char *msg = NULL;
    json_t *j = t->in.len ? json_loadb(t->in.data, t->in.len, 0, NULL) : NULL;
    msg = json_string_value(json_object_get(j, "message"));
    sbx_autofree char *line = sbx_xstrndup(head, strcspn(head, "\r\n"));
    if (msg) {
        sbx_autofree char *both = sbx_xasprintf("%s: %s", line, msg);
        term_fail(t, "attach: %s", both);
    } else {
        term_fail(t, "attach: %s", line);
    }
    json_decref(j);
}

static bool
accept_ok(const char *head, const char *want)
{
    for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
        const char *name = l + 2;
        if (strncasecmp(name, "Sec-WebSocket-Accept:", 21) == 0) {
            const char *v = name + 21;
            v += strspn(v, " \t");
            return strncmp(v, want, 28) == 0;
        }
    }
    return false;
}

static int
upgrade(struct term *t, const char *url, char **headers)
{
    char why[512];
    if (term_conn_open(&t->conn, url, why, sizeof(why)) < 0) {
        term_fail(t, "attach: %s", why);
        return -1;
    }
    uint8_t raw[16];
    char key[25];
    char want[29];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return -1;
    base64_encode_raw(key, sizeof(raw), raw); /* 24 characters, "==" at the end */
    key[24] = '\0';
    (void)sbx_ws_accept_key(key, want);
    sbx_autofree char *hostport = sbx_xasprintf("%s:%s", t->conn.host, t->conn.port);
    sbx_autofree char *req = handshake_request(hostport, t->conn.path, key, headers);
    sbx_autofree char *head = NULL;
    if (term_conn_send_all(&t->conn, req, strlen(req)) < 0 || !(head = read_head(t))) {
        term_fail(t, "attach: %s", "the connection closed during the handshake");
        return -1;
    }
    if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
        report_refusal(t, head);
        return -1;
    }
    if (!accept_ok(head, want)) {
        term_fail(t, "attach: %s", "bad Sec-WebSocket-Accept in the answer");
        return -1;
    }
    return 0;
}

/* ---- frames from the server ---- */

static void
on_text(struct term *t, const uint8_t *p, size_t n)
{
    json_t *j = json_loadb((const char *)p, n, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type && strcmp(type, "exit") == 0) {
        t->exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
    } else if (type && strcmp(type, "error") == 0) {
        const char *msg = json_string_value(json_object_get(j, "error"));
        fprintf(stderr, "%ssbx %s: %s: %s%s", t->raw ? "\r\n" : "", t->verb,
                json_string_value(json_object_get(j, "code")) ?: "error", msg ? msg : "",
                t->raw ? "\r\n" : "\n");
    }
    json_decref(j);
}

static void
on_frame(struct term *t, const struct sbx_ws_frame *f)
{
    if (f->op == SBX_WS_BINARY && f->len >= 1) {
        uint8_t ch = f->payload[0];
        size_t skip = ch == 0x03 ? 9 : 1; /* replay frames carry their offset */
        if (f->len >= skip &&
            sbx_write_all(ch == 0x02 ? STDERR_FILENO : t->out_fd, f->payload + skip,
                          f->len - skip) < 0 &&
            errno == EPIPE) {
            t->out_broken = true; /* as a local `cmd | head`: the command is ended */
            t->done = true;
        }
    } else if (f->op == SBX_WS_TEXT) {
        on_text(t, f->payload, f->len);
    } else if (f->op == SBX_WS_PING) {
        (void)ws_send(t, SBX_WS_PONG, NULL, 0, f->payload, f->len);
    } else if (f->op == SBX_WS_CLOSE) {
        (void)ws_send(t, SBX_WS_CLOSE, NULL, 0, f->payload, f->len < 2 ? f->len : 2);
        t->done = true;
    }
}

/* Parse what arrived; false when the server broke the protocol. */
static bool
parse_frames(struct term *t)
{
    size_t used = 0;
    while (!t->done) {
        struct sbx_ws_frame f;
        const char *why = NULL;
        long r = sbx_ws_parse_server((uint8_t *)t->in.data + used, t->in.len - used, TERM_MAX_FRAME,
                                     &f, &why);
        if (r < 0) {
            term_fail(t, "the server broke the WebSocket protocol: %s", why);
            return false;
        }
        if (r == 0)
            break;
        on_frame(t, &f);
        used += (size_t)r;
    }
    memmove(t->in.data, t->in.data + used, t->in.len - used);
    t->in.len -= used;
    return true;
}

/* Read until the connection has nothing more: over TLS, libcurl may hold decrypted bytes the
 * socket no longer shows, so one read per poll could leave a frame waiting. */
static bool
on_socket(struct term *t)
{
    uint8_t buf[65536];
    for (;;) {
        ssize_t n = term_conn_recv(&t->conn, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0) {
            t->done = true;
            return true;
        }
        if (sbx_buf_append(&t->in, buf, (size_t)n, NULL) < 0) {
            term_fail(t, "%s", "a frame from the server over 16 MiB");
            return false;
        }
        if (!parse_frames(t))
            return false;
        if (t->done)
            return true;
    }
}

/* ---- the local terminal ---- */

static int
send_size(struct term *t)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0 || ws.ws_row == 0)
        return 0;
    return send_json(
        t, json_pack("{s:s, s:i, s:i}", "type", "resize", "cols", ws.ws_col, "rows", ws.ws_row));
}

static int
send_eof(struct term *t)
{
    t->stdin_done = true;
    return send_json(t, json_pack("{s:s}", "type", "eof"));
}

static bool
on_stdin(struct term *t)
{
    uint8_t buf[32768];
    ssize_t n = read(t->in_fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0 && t->pipe)
        return send_eof(t) == 0; /* the command reads EOF, as through a local pipe */
    if (n <= 0)
        return false; /* the terminal went away */
    uint8_t ch = 0x00;
    return ws_send(t, SBX_WS_BINARY, &ch, 1, buf, (size_t)n) == 0;
}

/* A signal from the self-pipe: false when it ends the session. */
static bool
on_sigpipe(struct term *t, int *sig)
{
    unsigned char b = 0;
    if (read(t->sig_r, &b, 1) != 1)
        return true;
    if (b == SIGWINCH)
        return t->pipe || send_size(t) == 0;
    if (t->pipe && (b != SIGINT || ++t->n_int < 3)) { /* docker's sig-proxy */
        const char *name = sigabbrev_np(b);
        return send_json(t, json_pack("{s:s, s:s}", "type", "signal", "signal", name)) == 0;
    }
    *sig = b;
    return false;
}

static int
install_signals(struct term *t)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    t->sig_r = p[0];
    sig_w = p[1];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGWINCH, SIGTERM, SIGHUP, SIGQUIT, SIGINT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        (void)sigaction(sigs[i], &sa, NULL);
    return 0;
}

static int
make_raw(struct term *t)
{
    if (tcgetattr(STDIN_FILENO, &t->saved) < 0)
        return -1;
    struct termios r = t->saved;
    cfmakeraw(&r);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &r) < 0)
        return -1;
    t->raw = true;
    return 0;
}

/* poll's timeout: what is left of --timeout; at the deadline the command is killed. */
static int
poll_timeout(struct term *t, int64_t deadline)
{
    if (!t->timeout_ms || t->timed_out)
        return -1;
    int64_t left = deadline - (int64_t)sbx_now_ms();
    if (left > 0)
        return left > INT32_MAX ? INT32_MAX : (int)left;
    t->timed_out = true;
    (void)send_json(t, json_pack("{s:s, s:s}", "type", "signal", "signal", "KILL"));
    return -1;
}

/* Returns the signal that ended the session, 0 otherwise. */
static int
loop(struct term *t)
{
    struct pollfd fds[3] = {
        {.fd = t->conn.fd, .events = POLLIN},
        {.fd = STDIN_FILENO, .events = POLLIN},
        {.fd = t->sig_r, .events = POLLIN},
    };
    int sig = 0;
    int64_t deadline = (int64_t)sbx_now_ms() + t->timeout_ms;
    /* Frames that came with the handshake's answer, and (over TLS) any libcurl still holds. */
    if ((t->in.len && !parse_frames(t)) || !on_socket(t))
        return 0;
    while (!t->done) {
        /* stdin is read only while what we have for the server is small: no unbounded queue */
        fds[1].fd = t->stdin_done || t->out.len >= TERM_OUT_HIGH ? -1 : t->in_fd;
        fds[0].events = (short)(POLLIN | (t->out.len ? POLLOUT : 0));
        int r = poll(fds, 3, poll_timeout(t, deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        bool go = true;
        if ((fds[0].revents & POLLOUT) && flush_out(t) < 0)
            go = false;
        if (go && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
            go = on_socket(t);
        if (go && !t->done && fds[1].revents)
            go = on_stdin(t);
        if (go && fds[2].revents)
            go = on_sigpipe(t, &sig);
        if (!go)
            break;
    }
    return sig;
}

static char *
attach_url(const struct term *t, const char *ws)
{
    if (t->pipe)
        return sbx_xasprintf("%s?pty=0", ws);
    struct winsize w;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col && w.ws_row)
        return sbx_xasprintf("%s?cols=%u&rows=%u", ws, w.ws_col, w.ws_row);
    return sbx_xstrdup(ws);
}

static int
run_session(struct term *t, const char *ws, char **headers)
{
    sbx_autofree char *url = attach_url(t, ws);
    if (upgrade(t, url, headers) < 0 || (!t->pipe && make_raw(t) < 0))
        return SBX_TERM_FAILED;
    if (t->pipe && t->stdin_done && send_eof(t) < 0)
        return SBX_TERM_FAILED;
    int sig = loop(t);
    restore(t);
    if (t->out_broken)
        return 128 + SIGPIPE;
    if (t->timed_out) {
        fprintf(stderr, "sbx %s: timed out after %ld ms: the command was killed\n", t->verb,
                t->timeout_ms);
        return 128 + SIGKILL;
    }
    if (sig && t->pipe) {
        fprintf(stderr, "sbx %s: SIG%s: the command was killed\n", t->verb, sigabbrev_np(sig));
        return 128 + sig;
    }
    if (sig) {
        fprintf(stderr, "sbx %s: SIG%s: the session stays in the sandbox until it exits\n", t->verb,
                sigabbrev_np(sig));
        return 128 + sig;
    }
    if (t->exit_code < 0) {
        fprintf(stderr, "sbx %s: the connection ended before the session did\n", t->verb);
        return SBX_TERM_FAILED;
    }
    return t->exit_code;
}

/* The session id in ".../pty/SESSION/ws". */
static char *
session_of(const char *ws)
{
    const char *p = strstr(ws, "/pty/");
    const char *e = p ? strstr(p + 5, "/ws") : NULL;
    return e ? sbx_xstrndup(p + 5, (size_t)(e - p - 5)) : NULL;
}

static int
attach(sbx_client *c, struct term *t, const char *id, const sbx_pty_options *po)
{
    char *ws = NULL;
    char **headers = NULL;
    if (sbx_pty_open_opts(&ws, &headers, c, id, po) < 0) {
        fprintf(stderr, "sbx %s: %s: %s\n", t->verb, id, sbx_client_last_error(c));
        return SBX_TERM_FAILED;
    }
    sbx_buf_init(&t->in, TERM_MAX_FRAME + 64);
    sbx_buf_init(&t->out, TERM_OUT_MAX);
    int rc = install_signals(t) < 0 ? SBX_TERM_FAILED : run_session(t, ws, headers);
    restore(t);
    /* A session that ended is removed (execd keeps at most 64); pipe mode also ends one that
     * still runs (a timeout, our stdout closed, the third Ctrl-C), as `docker exec` does. */
    sbx_autofree char *sid = session_of(ws);
    if (sid && (t->pipe || t->exit_code >= 0))
        (void)sbx_pty_delete(c, id, sid);
    sbx_buf_dispose(&t->in);
    sbx_buf_dispose(&t->out);
    sbx_pty_headers_free(headers);
    free(ws);
    term_conn_close(&t->conn);
    return rc;
}

int
sbx_cli_term_opts(sbx_client *c, const char *verb, const char *id,
                  const struct sbx_cli_pipe_opts *o)
{
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr,
                "sbx %s: stdin is not a terminal (a PTY session needs one; `sbx exec ID -- CMD`"
                " runs a command without it)\n",
                verb);
        return SBX_TERM_FAILED;
    }
    sbx_pty_options po;
    sbx_pty_options_init(&po);
    po.command = o->command;
    po.cwd = o->cwd;
    struct term t = {.verb = verb,
                     .conn = {.fd = -1},
                     .sig_r = -1,
                     .exit_code = -1,
                     .timeout_ms = o->timeout_ms,
                     .in_fd = STDIN_FILENO,
                     .out_fd = STDOUT_FILENO};
    return attach(c, &t, id, &po);
}

int
sbx_cli_term(sbx_client *c, const char *verb, const char *id, const char *command)
{
    struct sbx_cli_pipe_opts o = {.command = command};
    return sbx_cli_term_opts(c, verb, id, &o);
}

int
sbx_cli_pipe(sbx_client *c, const char *verb, const char *id, const struct sbx_cli_pipe_opts *o)
{
    sbx_pty_options po;
    sbx_pty_options_init(&po);
    po.command = o->command;
    po.cwd = o->cwd;
    struct term t = {.verb = verb,
                     .conn = {.fd = -1},
                     .sig_r = -1,
                     .exit_code = -1,
                     .pipe = true,
                     .stdin_done = !o->stdin_open,
                     .timeout_ms = o->timeout_ms,
                     .in_fd = o->in_fd > 0 ? o->in_fd : STDIN_FILENO,
                     .out_fd = o->out_fd > 0 ? o->out_fd : STDOUT_FILENO};
    (void)signal(SIGPIPE, SIG_IGN); /* a closed stdout is seen as EPIPE */
    return attach(c, &t, id, &po);
}
