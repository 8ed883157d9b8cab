/*
 * zmtp.c - ZMTP 3.0 (rfc.zeromq.org/spec/23) client side, NULL mechanism only.
 *
 *   greeting  0xFF, 8 x pad, 0x7F, major 3, minor 0, "NULL" padded to 20, as-server, 31 x 0
 *   frame     flags (bit0 MORE, bit1 LONG, bit2 COMMAND), size (1 byte, or 8 bytes big
 *             endian when LONG), body
 *   READY     command body: 5 "READY", then properties: name length (1), name, value length
 *             (4, big endian), value; "Socket-Type" names the peer's socket type
 *   SUB       subscribes with a message whose single frame is 0x01 + prefix (3.0 style; a
 *             3.1 peer accepts it too)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/xalloc.h"
#include "execd/zmtp.h"

#define FLAG_MORE    0x01
#define FLAG_LONG    0x02
#define FLAG_COMMAND 0x04

/* ---- pure helpers ---- */

void
zmtp_greeting(uint8_t out[ZMTP_GREETING_LEN])
{
    memset(out, 0, ZMTP_GREETING_LEN);
    out[0] = 0xff;
    out[9] = 0x7f;
    out[10] = 3; /* major */
    out[11] = 0; /* minor: 3.0, so the peer uses 3.0 subscriptions and no heartbeats */
    memcpy(out + 12, "NULL", 4);
    out[32] = 0; /* as-server: no */
}

int
zmtp_check_greeting(const uint8_t g[ZMTP_GREETING_LEN], const char **why)
{
    static const uint8_t null_mech[20] = "NULL";
    if (g[0] != 0xff || g[9] != 0x7f) {
        *why = "not a ZMTP peer (bad signature)";
        return -1;
    }
    if (g[10] < 3) {
        *why = "ZMTP version below 3.0";
        return -1;
    }
    if (memcmp(g + 12, null_mech, sizeof(null_mech)) != 0) {
        *why = "peer wants a security mechanism other than NULL";
        return -1;
    }
    return 0;
}

size_t
zmtp_frame_header(uint8_t out[9], uint64_t size, bool more, bool command)
{
    uint8_t flags = (uint8_t)((more ? FLAG_MORE : 0) | (command ? FLAG_COMMAND : 0));
    if (size <= 255) {
        out[0] = flags;
        out[1] = (uint8_t)size;
        return 2;
    }
    out[0] = flags | FLAG_LONG;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (uint8_t)(size >> (56 - 8 * i));
    return 9;
}

static const char *
type_name(enum zmtp_type t)
{
    return t == ZMTP_DEALER ? "DEALER" : "SUB";
}

static void
add_property(struct evbuffer *out, const char *name, const char *value)
{
    uint8_t nl = (uint8_t)strlen(name);
    uint32_t vl = (uint32_t)strlen(value);
    uint8_t be[4] = {(uint8_t)(vl >> 24), (uint8_t)(vl >> 16), (uint8_t)(vl >> 8), (uint8_t)vl};
    evbuffer_add(out, &nl, 1);
    evbuffer_add(out, name, nl);
    evbuffer_add(out, be, 4);
    evbuffer_add(out, value, vl);
}

void
zmtp_ready_body(struct evbuffer *out, enum zmtp_type t)
{
    evbuffer_add(out, "\x05READY", 6);
    add_property(out, "Socket-Type", type_name(t));
}

int
zmtp_ready_socket_type(const uint8_t *body, size_t n, char *type, size_t typen)
{
    if (n < 6 || memcmp(body, "\x05READY", 6) != 0)
        return -1;
    size_t i = 6;
    int found = -1;
    while (i < n) {
        size_t nl = body[i++];
        if (nl == 0 || n - i < nl + 4)
            return -1;
        const uint8_t *name = body + i;
        i += nl;
        uint32_t vl = (uint32_t)body[i] << 24 | (uint32_t)body[i + 1] << 16 |
                      (uint32_t)body[i + 2] << 8 | body[i + 3];
        i += 4;
        if (n - i < vl)
            return -1;
        if (nl == 11 && strncasecmp((const char *)name, "Socket-Type", 11) == 0) {
            if (vl >= typen)
                return -1;
            memcpy(type, body + i, vl);
            type[vl] = '\0';
            found = 0;
        }
        i += vl;
    }
    return found;
}

bool
zmtp_peer_ok(enum zmtp_type t, const char *peer)
{
    if (t == ZMTP_DEALER)
        return strcmp(peer, "ROUTER") == 0 || strcmp(peer, "DEALER") == 0 ||
               strcmp(peer, "REP") == 0;
    return strcmp(peer, "PUB") == 0 || strcmp(peer, "XPUB") == 0;
}

/* ---- decoder ---- */

void
zmtp_decoder_init(struct zmtp_decoder *d, enum zmtp_type t)
{
    memset(d, 0, sizeof(*d));
    d->type = t;
    d->state = ZMTP_D_GREETING;
}

static void
msg_reset(struct zmtp_msg *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->parts[i].data);
    m->n = 0;
    m->bytes = 0;
}

void
zmtp_decoder_clear(struct zmtp_decoder *d)
{
    msg_reset(&d->msg);
    free(d->msg.parts);
    d->msg.parts = NULL;
    d->msg.cap = 0;
}

static int
fail(struct zmtp_decoder *d, const char *why)
{
    d->state = ZMTP_D_FAILED;
    (void)snprintf(d->why, sizeof(d->why), "%s", why);
    msg_reset(&d->msg);
    return -1;
}

/* The next frame's header when complete: 1, 0 when more bytes are needed, -1 when bad. */
static int
peek_header(struct evbuffer *in, uint8_t *flags, uint64_t *size, size_t *hlen)
{
    size_t have = evbuffer_get_length(in);
    if (have < 2)
        return 0;
    uint8_t h[9];
    evbuffer_copyout(in, h, have < 9 ? have : 9);
    *flags = h[0];
    if (h[0] & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND))
        return -1;
    if (!(h[0] & FLAG_LONG)) {
        *size = h[1];
        *hlen = 2;
        return 1;
    }
    if (have < 9)
        return 0;
    uint64_t s = 0;
    for (int i = 1; i < 9; i++)
        s = s << 8 | h[i];
    *size = s;
    *hlen = 9;
    return 1;
}

static int
on_command(struct zmtp_decoder *d, const uint8_t *body, size_t n)
{
    if (d->state == ZMTP_D_READY) {
        if (n >= 6 && memcmp(body,
                             "\x05"
                             "ERROR",
                             6) == 0)
            return fail(d, "peer refused the handshake (ERROR)");
        char peer[32];
        if (zmtp_ready_socket_type(body, n, peer, sizeof(peer)) < 0)
            return fail(d, "malformed READY command");
        if (!zmtp_peer_ok(d->type, peer))
            return fail(d, "incompatible peer socket type");
        d->state = ZMTP_D_OPEN;
        return 1;
    }
    return 0; /* commands after the handshake (3.1 PING, ...) are not used: ignored */
}

static int
on_frame(struct zmtp_decoder *d, uint8_t flags, uint8_t *body, size_t n, zmtp_msg_fn on_msg,
         void *arg)
{
    struct zmtp_msg *m = &d->msg;
    if (d->state != ZMTP_D_OPEN) {
        free(body);
        return fail(d, "message before the handshake finished");
    }
    if (m->n == ZMTP_MAX_PARTS || m->bytes + n > ZMTP_MAX_MSG) {
        free(body);
        return fail(d, "message too large");
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 8;
        m->parts = sbx_xrealloc(m->parts, m->cap * sizeof(*m->parts));
    }
    m->parts[m->n].data = body;
    m->parts[m->n].len = n;
    m->n++;
    m->bytes += n;
    if (!(flags & FLAG_MORE)) {
        on_msg(m, arg);
        msg_reset(m);
    }
    return 0;
}

int
zmtp_decoder_run(struct zmtp_decoder *d, struct evbuffer *in, zmtp_msg_fn on_msg, void *arg)
{
    int handshake = 0;
    if (d->state == ZMTP_D_FAILED)
        return -1;
    if (d->state == ZMTP_D_GREETING) {
        if (evbuffer_get_length(in) < ZMTP_GREETING_LEN)
            return 0;
        uint8_t g[ZMTP_GREETING_LEN];
        evbuffer_remove(in, g, sizeof(g));
        const char *why = NULL;
        if (zmtp_check_greeting(g, &why) < 0)
            return fail(d, why);
        d->state = ZMTP_D_READY;
    }
    for (;;) {
        uint8_t flags = 0;
        uint64_t size = 0;
        size_t hlen = 0;
        int r = peek_header(in, &flags, &size, &hlen);
        if (r < 0)
            return fail(d, "malformed frame flags");
        if (r == 0)
            return handshake;
        if (size > ZMTP_MAX_FRAME)
            return fail(d, "frame too large");
        if (evbuffer_get_length(in) < hlen + size)
            return handshake;
        evbuffer_drain(in, hlen);
        uint8_t *body = sbx_xmalloc(size ? size : 1);
        evbuffer_remove(in, body, size);
        if (flags & FLAG_COMMAND) {
            r = (flags & FLAG_MORE) ? fail(d, "command frame with MORE")
                                    : on_command(d, body, size);
            free(body);
        } else {
            r = on_frame(d, flags, body, size, on_msg, arg);
        }
        if (r < 0)
            return -1;
        if (r == 1)
            handshake = 1;
    }
}

/* ---- connection ---- */

struct zmtp_conn {
    struct bufferevent *bev;
    struct zmtp_decoder dec;
    struct zmtp_handlers h;
    void *arg;
    bool dead;
};

static void
conn_msg(const struct zmtp_msg *m, void *arg)
{
    struct zmtp_conn *c = arg;
    if (!c->dead && c->h.message)
        c->h.message(c, m, c->arg);
}

static void
conn_close(struct zmtp_conn *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    if (c->h.closed)
        c->h.closed(c, why, c->arg);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct zmtp_conn *c = arg;
    int r = zmtp_decoder_run(&c->dec, bufferevent_get_input(bev), conn_msg, c);
    if (r < 0) {
        conn_close(c, c->dec.why);
        return;
    }
    if (r == 1 && !c->dead && c->h.ready)
        c->h.ready(c, c->arg);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct zmtp_conn *c = arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_close(c,
                   what & BEV_EVENT_EOF ? "connection closed by the kernel" : "connection error");
}

static void
send_handshake(struct zmtp_conn *c)
{
    uint8_t g[ZMTP_GREETING_LEN];
    zmtp_greeting(g);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add(out, g, sizeof(g));
    struct evbuffer *body = evbuffer_new();
    zmtp_ready_body(body, c->dec.type);
    uint8_t hdr[9];
    size_t hl = zmtp_frame_header(hdr, evbuffer_get_length(body), false, true);
    evbuffer_add(out, hdr, hl);
    evbuffer_add_buffer(out, body);
    evbuffer_free(body);
}

struct zmtp_conn *
zmtp_connect_unix(struct event_base *base, const char *path, enum zmtp_type t,
                  const struct zmtp_handlers *h, void *arg)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    /* a unix connect completes at once or fails (EAGAIN only with a full backlog) */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    struct zmtp_conn *c = sbx_xcalloc(1, sizeof(*c));
    c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->bev) {
        close(fd);
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    c->h = *h;
    c->arg = arg;
    zmtp_decoder_init(&c->dec, t);
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    send_handshake(c);
    return c;
}

void
zmtp_send(struct zmtp_conn *c, const struct iovec *parts, size_t n)
{
    if (c->dead)
        return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    for (size_t i = 0; i < n; i++) {
        uint8_t hdr[9];
        size_t hl = zmtp_frame_header(hdr, parts[i].iov_len, i + 1 < n, false);
        evbuffer_add(out, hdr, hl);
        evbuffer_add(out, parts[i].iov_base, parts[i].iov_len);
    }
}

bool
zmtp_is_ready(const struct zmtp_conn *c)
{
    return !c->dead && c->dec.state == ZMTP_D_OPEN;
}

void
zmtp_conn_free(struct zmtp_conn *c)
{
    if (!c)
        return;
    bufferevent_free(c->bev);
    zmtp_decoder_clear(&c->dec);
    free(c);
}
