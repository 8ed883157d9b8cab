/*
 * pty_ws.c - GET /pty/{id}/ws: WebSocket clients of a PTY session (COMPAT 2.6).
 *
 * evhttp (libevent 2.1) has no upgrade support, so the handler takes the connection's
 * bufferevent over: the upload hook stops following it, our callbacks replace evhttp's, the 101
 * is written straight into its output and the request stays unanswered on the connection until
 * we free the connection ourselves (evhttp_connection_free, which frees the request too). When
 * evhttp frees the connection first (execd stopping), its close callback tells us.
 *
 * Frames from clients are parsed strictly (common/websocket.c: masked, no reserved bits,
 * whole control frames); a protocol violation gets an INVALID_FRAME error frame and close
 * 1002, a bad message (not JSON, unknown type, bad field) only the error frame.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/websocket.h"
#include "common/xalloc.h"
#include "execd/pty.h"
#include "execd/upload.h"

/* ---- sending ---- */

static void
ws_send(struct pty_client *c, enum sbx_ws_op op, const void *pre, size_t pn, const void *p,
        size_t n)
{
    if (c->closing)
        return;
    uint8_t head[10];
    size_t hl = sbx_ws_head(head, op, pn + n);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add(out, head, hl);
    if (pn)
        evbuffer_add(out, pre, pn);
    if (n)
        evbuffer_add(out, p, n);
}

static void
send_json(struct pty_client *c, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s)
        ws_send(c, SBX_WS_TEXT, NULL, 0, s, strlen(s));
    free(s);
}

void
pty_client_error(struct pty_client *c, const char *code, const char *msg)
{
    send_json(c, json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "error", msg));
}

/* ---- lifetime ---- */

static void
detach(struct pty_client *c)
{
    struct execd_pty *s = c->s;
    if (!s)
        return;
    c->s = NULL;
    if (s->holder == c) {
        s->holder = NULL;
        pty_resume(s); /* nobody pushes back any more */
        return;
    }
    for (struct pty_client **pp = &s->viewers; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

static void on_evcon_close(struct evhttp_connection *evcon, void *arg);

/* free_conn: false when evhttp is freeing the connection itself. */
static void
client_free(struct pty_client *c, bool free_conn)
{
    detach(c);
    if (c->ping)
        event_free(c->ping);
    if (c->defer)
        event_free(c->defer);
    sbx_buf_dispose(&c->msg.buf);
    bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
    evhttp_connection_set_closecb(c->evcon, NULL, NULL);
    if (free_conn)
        evhttp_connection_free(c->evcon); /* closes the socket, frees the upgrade request */
    free(c);
}

static void
on_evcon_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    client_free(arg, false);
}

void
pty_client_close(struct pty_client *c, int code, const char *reason)
{
    if (c->closing)
        return;
    uint8_t pre[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    size_t rl = strnlen(reason, 120);
    ws_send(c, SBX_WS_CLOSE, pre, 2, reason, rl);
    c->closing = true;
    detach(c);
    /* reading goes on (and discards): see linger() */
    /* freed by the write callback once the frame is out; now if nothing is queued at all */
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        event_active(c->defer, EV_TIMEOUT, 0);
}

/* ---- output ---- */

static void
send_exit(struct pty_client *c)
{
    send_json(c, json_pack("{s:s, s:i}", "type", "exit", "exit_code", c->s->exit_code));
    pty_client_close(c, SBX_WS_CLOSE_NORMAL, "");
}

void
pty_client_pump(struct pty_client *c)
{
    struct execd_pty *s = c->s;
    if (c->closing || !s)
        return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (evbuffer_get_length(out) < PTY_HIGH) {
        uint8_t ch = PTY_CH_STDOUT;
        const uint8_t *p = NULL;
        size_t n = pty_ring_next(s, c, &ch, &p);
        if (n == 0)
            break;
        if (c->cursor < c->replay_end || c->need_offset) {
            uint8_t pre[9] = {PTY_CH_REPLAY};
            for (int i = 0; i < 8; i++)
                pre[1 + i] = (uint8_t)(c->cursor >> (56 - 8 * i));
            ws_send(c, SBX_WS_BINARY, pre, sizeof(pre), p, n);
        } else {
            ws_send(c, SBX_WS_BINARY, &ch, 1, p, n);
        }
        c->cursor += n;
        c->need_offset = false;
    }
    if (s->finished && c->cursor >= s->total)
        send_exit(c);
}

/* ---- messages from the client ---- */

static void
do_stdin(struct pty_client *c, const void *p, size_t n)
{
    const char *why = NULL;
    if (n > 0 && pty_write_stdin(c->s, p, n, &why) < 0)
        pty_client_error(c, "STDIN_WRITE_FAILED", why);
}

static void
do_control(struct pty_client *c, const struct pty_msg *m)
{
    const char *why = NULL;
    switch (m->kind) {
    case PTY_MSG_STDIN:
        do_stdin(c, m->data, m->len);
        break;
    case PTY_MSG_EOF: /* sbx: close the process's stdin (pipe mode) */
        if (pty_close_stdin(c->s, &why) < 0)
            pty_client_error(c, "INVALID_FRAME", why);
        break;
    case PTY_MSG_RESIZE:
        pty_resize(c->s, m->cols, m->rows);
        break;
    case PTY_MSG_SIGNAL:
        if (pty_signal(c->s, m->sig) < 0)
            pty_client_error(c, "RUNTIME_ERROR", "the process is not running");
        break;
    case PTY_MSG_PING:
        send_json(c, json_pack("{s:s}", "type", "pong"));
        break;
    case PTY_MSG_NONE:
    default:
        break;
    }
}

/* A whole message: what it is first (a viewer is told it is read-only before anything about
 * the fields), then acted on. */
static void
on_message(struct pty_client *c, const struct pty_msg_in *in)
{
    struct pty_msg m;
    const char *why = NULL;
    int rc = pty_msg_parse(in->op, in->p, in->n, &m, &why);
    if (c->viewer && m.kind != PTY_MSG_NONE && m.kind != PTY_MSG_PING) /* sbx: ?viewer=1 */
        pty_client_error(c, "INVALID_FRAME", "a viewer is read-only (no stdin, resize, signal)");
    else if (rc < 0)
        pty_client_error(c, "INVALID_FRAME", why);
    else
        do_control(c, &m);
    pty_msg_dispose(&m);
}

static void
protocol_error(struct pty_client *c, int code, const char *why)
{
    pty_client_error(c, "INVALID_FRAME", why);
    pty_client_close(c, code, why);
}

/* A data frame: whole, or one piece of a fragmented message. */
static void
on_data_frame(struct pty_client *c, const struct sbx_ws_frame *f)
{
    struct pty_msg_in in;
    int rc = pty_msg_frame(&c->msg, f, &in);
    if (rc == PTY_FRAME_PROTOCOL)
        protocol_error(c, SBX_WS_CLOSE_PROTOCOL, "unexpected continuation state");
    else if (rc == PTY_FRAME_TOO_BIG)
        protocol_error(c, SBX_WS_CLOSE_TOO_BIG, "message larger than 64 KiB");
    else if (rc == PTY_FRAME_MESSAGE)
        on_message(c, &in);
}

static void
on_frame(struct pty_client *c, const struct sbx_ws_frame *f)
{
    switch (f->op) {
    case SBX_WS_PING:
        ws_send(c, SBX_WS_PONG, NULL, 0, f->payload, f->len);
        break;
    case SBX_WS_PONG:
        break;
    case SBX_WS_CLOSE:
        pty_client_close(c, SBX_WS_CLOSE_NORMAL, "");
        break;
    case SBX_WS_CONT:
    case SBX_WS_TEXT:
    case SBX_WS_BINARY:
        on_data_frame(c, f);
        break;
    }
}

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct pty_client *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (!c->closing) {
        size_t n = evbuffer_get_length(in);
        size_t want = n < PTY_MAX_MSG + 14 ? n : PTY_MAX_MSG + 14;
        uint8_t *buf = evbuffer_pullup(in, (ssize_t)want);
        /* a stdin frame while stdin is full waits (parsing unmasks it: checked before) */
        if (buf && (buf[0] & 0x0f) == SBX_WS_BINARY && c->s && c->s->holder == c &&
            pty_stdin_stall(c->s)) {
            bufferevent_disable(bev, EV_READ); /* TCP pushes back on the client */
            return;
        }
        struct sbx_ws_frame f;
        const char *why = NULL;
        long r = buf ? sbx_ws_parse(buf, want, PTY_MAX_MSG, &f, &why) : 0;
        if (r < 0) {
            bool big = why && strstr(why, "limit");
            protocol_error(c, big ? SBX_WS_CLOSE_TOO_BIG : SBX_WS_CLOSE_PROTOCOL, why);
            break;
        }
        if (r == 0)
            break;
        on_frame(c, &f);
        evbuffer_drain(in, (size_t)r);
    }
    if (c->closing)
        evbuffer_drain(in, evbuffer_get_length(in));
}

/* Our close frame is out: shut our side (FIN after the last byte) and wait for the client to
 * close its own, reading and discarding what it still sends (a close frame, a pong, stdin
 * that crossed our close). Closing at once with unread input would make the kernel answer
 * with a reset, and a reset makes the client's kernel drop the output it has not read yet:
 * the end of the stream would be lost (a fast command whose client sent anything late). */
static void
linger(struct pty_client *c)
{
    if (c->lingering)
        return;
    c->lingering = true;
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0 || shutdown(fd, SHUT_WR) < 0) {
        client_free(c, true);
        return;
    }
    struct timeval t = {.tv_sec = PTY_LINGER_SEC};
    bufferevent_set_timeouts(c->bev, &t, NULL);
    bufferevent_enable(c->bev, EV_READ); /* EOF, an error or the timeout: on_event frees it */
}

static void
on_write(struct bufferevent *bev, void *arg)
{
    struct pty_client *c = arg;
    if (c->closing) {
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            linger(c);
        return;
    }
    struct execd_pty *s = c->s;
    pty_client_pump(c);
    if (s && s->holder == c)
        pty_resume(s);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct pty_client *c = arg;
    if (what & BEV_EVENT_TIMEOUT)
        sbx_debug("pty: a client stopped reading or answering pings: dropped");
    client_free(c, true); /* EOF, error, timeout */
}

void
pty_client_stdin_drained(struct pty_client *c)
{
    if (c->closing)
        return;
    bufferevent_enable(c->bev, EV_READ);
    event_active(c->defer, EV_TIMEOUT, 0); /* the frames already buffered */
}

static void
on_ping(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ws_send(arg, SBX_WS_PING, NULL, 0, NULL, 0);
}

static void
on_defer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct pty_client *c = arg;
    if (!c->closing)
        on_read(c->bev, c); /* bytes that came with the request head */
    else if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        linger(c); /* else the write callback does once all is sent */
}

/* ---- the handshake ---- */

struct attach_opts {
    bool pipe;
    bool takeover;
    bool viewer;
    bool has_since;
    uint64_t since;
    unsigned cols;
    unsigned rows;
};

static bool
query_flag(struct evhttp_request *req, const char *name, bool dflt)
{
    sbx_autofree char *v = execd_query(req, name);
    if (!v)
        return dflt;
    return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0;
}

static bool
query_uint(struct evhttp_request *req, const char *name, uint64_t max, uint64_t *out)
{
    sbx_autofree char *v = execd_query(req, name);
    if (!v)
        return false;
    uint64_t u = 0;
    if (sbx_parse_u64(v, &u, NULL) < 0 || u > max)
        return false;
    *out = u;
    return true;
}

static void
parse_opts(struct evhttp_request *req, struct attach_opts *o)
{
    sbx_autofree char *pty = execd_query(req, "pty");
    o->pipe = pty && (strcmp(pty, "0") == 0 || strcasecmp(pty, "false") == 0);
    o->takeover = query_flag(req, "takeover", false);
    o->viewer = query_flag(req, "viewer", false);
    o->has_since = query_uint(req, "since", INT64_MAX, &o->since);
    uint64_t v = 0;
    o->cols = query_uint(req, "cols", 10000, &v) && v > 0 ? (unsigned)v : 0;
    o->rows = query_uint(req, "rows", 10000, &v) && v > 0 ? (unsigned)v : 0;
}

static bool
header_has_token(struct evhttp_request *req, const char *name, const char *token)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    size_t tl = strlen(token);
    while (h && *h) {
        h += strspn(h, " \t,");
        size_t n = strcspn(h, " \t,");
        if (n == tl && strncasecmp(h, token, n) == 0)
            return true;
        h += n;
    }
    return false;
}

/* RFC 6455 4.2.1: the accept key, or false (a 400 was sent). */
static bool
check_handshake(struct evhttp_request *req, char accept[29])
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *ver = evhttp_find_header(h, "Sec-WebSocket-Version");
    if (!header_has_token(req, "Upgrade", "websocket") ||
        !header_has_token(req, "Connection", "upgrade") || !ver || strcmp(ver, "13") != 0 ||
        sbx_ws_accept_key(evhttp_find_header(h, "Sec-WebSocket-Key"), accept) < 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "want a WebSocket handshake (version 13)");
        return false;
    }
    return true;
}

static struct pty_client *
take_connection(struct execd *ex, struct evhttp_request *req, const char *accept)
{
    struct pty_client *c = sbx_xcalloc(1, sizeof(*c));
    c->evcon = evhttp_request_get_connection(req);
    c->bev = evhttp_connection_get_bufferevent(c->evcon);
    sbx_buf_init(&c->msg.buf, PTY_MAX_MSG);
    execd_upload_forget(c->bev);
    evhttp_connection_set_closecb(c->evcon, on_evcon_close, c);
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_setwatermark(c->bev, EV_WRITE, PTY_HIGH / 2, 0);
    struct timeval deadline = {.tv_sec = PTY_DEADLINE_SEC};
    bufferevent_set_timeouts(c->bev, &deadline, &deadline);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    evbuffer_add_printf(bufferevent_get_output(c->bev),
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                        accept);
    c->ping = event_new(ex->base, -1, EV_PERSIST, on_ping, c);
    struct timeval every = {.tv_sec = PTY_PING_SEC};
    event_add(c->ping, &every);
    c->defer = event_new(ex->base, -1, 0, on_defer, c);
    event_active(c->defer, EV_TIMEOUT, 0); /* frames sent right behind the head */
    return c;
}

static void
join(struct execd_pty *s, struct pty_client *c, const struct attach_opts *o)
{
    c->s = s;
    c->viewer = o->viewer;
    c->replay_end = s->total;
    c->cursor = o->has_since && o->since < s->total ? o->since : s->total;
    if (o->viewer) {
        c->next = s->viewers;
        s->viewers = c;
        return;
    }
    if (s->holder) { /* takeover=1 (checked before) */
        struct pty_client *old = s->holder;
        pty_client_error(old, "TAKEN_OVER", "another client took this session over");
        pty_client_close(old, PTY_CLOSE_TAKEN, "TAKEN_OVER");
    }
    s->holder = c;
}

void
execd_pty_attach(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_pty *s = pty_find(ex, id);
    if (!s) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no PTY session %s", id);
        return;
    }
    struct attach_opts o = {0};
    parse_opts(req, &o);
    char accept[29];
    if (!check_handshake(req, accept))
        return;
    if (!o.viewer && s->holder && !o.takeover) {
        execd_reply_error(req, 409, "ALREADY_CONNECTED",
                          "a client is attached to this session (takeover=1 replaces it, "
                          "viewer=1 watches)");
        return;
    }
    struct pty_client *c = take_connection(ex, req, accept);
    join(s, c, &o);
    if (o.cols && o.rows && !o.viewer)
        pty_resize(s, o.cols, o.rows);
    sbx_autoerror sbx_error *err = NULL;
    bool failed = !s->started && pty_start(s, o.pipe, &err) < 0;
    send_json(c, json_pack("{s:s, s:s, s:s}", "type", "connected", "session_id", s->id, "mode",
                           s->pipe_mode ? "pipe" : "pty"));
    if (failed) {
        sbx_info("pty %s: %s", s->id, sbx_error_msg(err));
        pty_client_error(c, "START_FAILED", sbx_error_msg(err));
        pty_client_close(c, 1011, "START_FAILED");
        return;
    }
    pty_client_pump(c);
}
