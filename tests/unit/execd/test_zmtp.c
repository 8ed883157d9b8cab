#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "execd/zmtp.h"

/* ---- a peer's byte stream, built by hand ---- */

static void
add_frame(struct evbuffer *b, const void *data, size_t n, bool more, bool command)
{
    uint8_t hdr[9];
    size_t hl = zmtp_frame_header(hdr, n, more, command);
    evbuffer_add(b, hdr, hl);
    evbuffer_add(b, data, n);
}

static void
add_ready(struct evbuffer *b, const char *type)
{
    struct evbuffer *body = evbuffer_new();
    evbuffer_add(body, "\x05READY", 6);
    uint8_t nl = 11;
    uint32_t vl = (uint32_t)strlen(type);
    uint8_t be[4] = {0, 0, 0, (uint8_t)vl};
    evbuffer_add(body, &nl, 1);
    evbuffer_add(body, "Socket-Type", 11);
    evbuffer_add(body, be, 4);
    evbuffer_add(body, type, vl);
    /* an unknown property is skipped */
    evbuffer_add(body, "\x08Identity\x00\x00\x00\x00", 13);
    size_t n = evbuffer_get_length(body);
    add_frame(b, evbuffer_pullup(body, -1), n, false, true);
    evbuffer_free(body);
}

static struct evbuffer *
peer_stream(const char *type)
{
    struct evbuffer *b = evbuffer_new();
    uint8_t g[ZMTP_GREETING_LEN];
    zmtp_greeting(g);
    g[11] = 1; /* a 3.1 peer is fine */
    g[32] = 1; /* as-server */
    evbuffer_add(b, g, sizeof(g));
    add_ready(b, type);
    return b;
}

struct seen {
    int msgs;
    size_t parts[8];
    char first[64];
    size_t long_len;
};

static void
on_msg(const struct zmtp_msg *m, void *arg)
{
    struct seen *s = arg;
    if (s->msgs < 8)
        s->parts[s->msgs] = m->n;
    if (s->msgs == 0 && m->n > 0)
        (void)snprintf(s->first, sizeof(s->first), "%.*s", (int)m->parts[0].len,
                       (const char *)m->parts[0].data);
    for (size_t i = 0; i < m->n; i++) {
        if (m->parts[i].len > 255)
            s->long_len = m->parts[i].len;
    }
    s->msgs++;
}

static void
test_greeting(void **state)
{
    (void)state;
    uint8_t g[ZMTP_GREETING_LEN];
    const char *why = NULL;
    zmtp_greeting(g);
    assert_int_equal(g[0], 0xff);
    assert_int_equal(g[9], 0x7f);
    assert_int_equal(g[10], 3);
    assert_int_equal(g[11], 0);
    assert_memory_equal(g + 12, "NULL", 4);
    assert_int_equal(zmtp_check_greeting(g, &why), 0);
    g[0] = 0;
    assert_int_equal(zmtp_check_greeting(g, &why), -1);
    zmtp_greeting(g);
    g[10] = 2;
    assert_int_equal(zmtp_check_greeting(g, &why), -1);
    zmtp_greeting(g);
    memcpy(g + 12, "CURVE", 5);
    assert_int_equal(zmtp_check_greeting(g, &why), -1);
    assert_non_null(strstr(why, "mechanism"));
}

static void
test_frame_header(void **state)
{
    (void)state;
    uint8_t h[9];
    assert_int_equal(zmtp_frame_header(h, 5, true, false), 2);
    assert_int_equal(h[0], 0x01);
    assert_int_equal(h[1], 5);
    assert_int_equal(zmtp_frame_header(h, 255, false, true), 2);
    assert_int_equal(h[0], 0x04);
    assert_int_equal(zmtp_frame_header(h, 256, false, false), 9);
    assert_int_equal(h[0], 0x02);
    assert_int_equal(h[7], 1);
    assert_int_equal(h[8], 0);
    assert_int_equal(zmtp_frame_header(h, 0x0102030405060708ull, true, false), 9);
    assert_int_equal(h[0], 0x03);
    assert_int_equal(h[1], 1);
    assert_int_equal(h[8], 8);
}

static void
test_ready(void **state)
{
    (void)state;
    struct evbuffer *b = evbuffer_new();
    zmtp_ready_body(b, ZMTP_SUB);
    size_t n = evbuffer_get_length(b);
    char type[32];
    assert_int_equal(zmtp_ready_socket_type(evbuffer_pullup(b, -1), n, type, sizeof(type)), 0);
    assert_string_equal(type, "SUB");
    /* truncated anywhere: refused, never read past the end */
    const uint8_t *body = evbuffer_pullup(b, -1);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(zmtp_ready_socket_type(body, cut, type, sizeof(type)), -1);
    evbuffer_free(b);
    assert_true(zmtp_peer_ok(ZMTP_DEALER, "ROUTER"));
    assert_true(zmtp_peer_ok(ZMTP_SUB, "PUB"));
    assert_true(zmtp_peer_ok(ZMTP_SUB, "XPUB"));
    assert_false(zmtp_peer_ok(ZMTP_SUB, "ROUTER"));
    assert_false(zmtp_peer_ok(ZMTP_DEALER, "PUB"));
}

static void
build_messages(struct evbuffer *b)
{
    add_frame(b, "id", 2, true, false);
    add_frame(b, "<IDS|MSG>", 9, true, false);
    add_frame(b, "", 0, false, false); /* an empty last frame */
    char big[300];
    memset(big, 'x', sizeof(big));
    add_frame(b, big, sizeof(big), false, false);
}

static void
test_decoder_whole_and_bytewise(void **state)
{
    (void)state;
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        struct evbuffer *all = peer_stream("ROUTER");
        build_messages(all);
        struct zmtp_decoder d;
        zmtp_decoder_init(&d, ZMTP_DEALER);
        struct seen s = {0};
        int handshakes = 0;
        struct evbuffer *in = evbuffer_new();
        while (evbuffer_get_length(all) > 0) {
            size_t take = bytewise ? 1 : evbuffer_get_length(all);
            evbuffer_remove_buffer(all, in, take);
            int r = zmtp_decoder_run(&d, in, on_msg, &s);
            assert_true(r >= 0);
            handshakes += r;
        }
        assert_int_equal(handshakes, 1);
        assert_int_equal(d.state, ZMTP_D_OPEN);
        assert_int_equal(s.msgs, 2);
        assert_int_equal(s.parts[0], 3);
        assert_int_equal(s.parts[1], 1);
        assert_string_equal(s.first, "id");
        assert_int_equal(s.long_len, 300);
        assert_int_equal(evbuffer_get_length(in), 0);
        zmtp_decoder_clear(&d);
        evbuffer_free(in);
        evbuffer_free(all);
    }
}

static int
run_stream(struct evbuffer *b, enum zmtp_type t, struct zmtp_decoder *d)
{
    struct seen s = {0};
    zmtp_decoder_init(d, t);
    int r = zmtp_decoder_run(d, b, on_msg, &s);
    return r;
}

static void
test_decoder_errors(void **state)
{
    (void)state;
    struct zmtp_decoder d;
    /* a PUB is no partner for a DEALER */
    struct evbuffer *b = peer_stream("PUB");
    assert_int_equal(run_stream(b, ZMTP_DEALER, &d), -1);
    assert_non_null(strstr(d.why, "socket type"));
    zmtp_decoder_clear(&d);
    evbuffer_free(b);
    /* a message before READY */
    b = evbuffer_new();
    uint8_t g[ZMTP_GREETING_LEN];
    zmtp_greeting(g);
    evbuffer_add(b, g, sizeof(g));
    add_frame(b, "x", 1, false, false);
    assert_int_equal(run_stream(b, ZMTP_DEALER, &d), -1);
    zmtp_decoder_clear(&d);
    evbuffer_free(b);
    /* reserved flag bits */
    b = peer_stream("ROUTER");
    evbuffer_add(b, "\x80\x01x", 3);
    assert_int_equal(run_stream(b, ZMTP_DEALER, &d), -1);
    zmtp_decoder_clear(&d);
    evbuffer_free(b);
    /* a frame larger than the limit is refused from its header, before any allocation */
    b = peer_stream("ROUTER");
    evbuffer_add(b, "\x02\x00\x00\x01\x00\x00\x00\x00\x00", 9);
    assert_int_equal(run_stream(b, ZMTP_DEALER, &d), -1);
    assert_non_null(strstr(d.why, "too large"));
    zmtp_decoder_clear(&d);
    evbuffer_free(b);
    /* the peer's ERROR command, and a command with MORE */
    b = evbuffer_new();
    evbuffer_add(b, g, sizeof(g));
    add_frame(b,
              "\x05"
              "ERROR\x03"
              "bad",
              10, false, true);
    assert_int_equal(run_stream(b, ZMTP_DEALER, &d), -1);
    zmtp_decoder_clear(&d);
    evbuffer_free(b);
    b = evbuffer_new();
    evbuffer_add(b, g, sizeof(g));
    add_frame(b, "\x05READY", 6, true, true);
    assert_int_equal(run_stream(b, ZMTP_DEALER, &d), -1);
    zmtp_decoder_clear(&d);
    evbuffer_free(b);
    /* once failed, it stays failed */
    b = peer_stream("ROUTER");
    assert_int_equal(zmtp_decoder_run(&d, b, on_msg, NULL), -1);
    evbuffer_free(b);
}

/* ---- a real unix socket: our greeting and READY reach the peer, its message reaches us ---- */

struct conn_test {
    struct event_base *base;
    bool ready;
    int msgs;
    bool closed;
};

static void
c_ready(struct zmtp_conn *c, void *arg)
{
    struct conn_test *t = arg;
    t->ready = true;
    struct iovec parts[2] = {{.iov_base = "hello", .iov_len = 5}, {.iov_base = "", .iov_len = 0}};
    zmtp_send(c, parts, 2);
}

static void
c_msg(struct zmtp_conn *c, const struct zmtp_msg *m, void *arg)
{
    (void)c;
    struct conn_test *t = arg;
    assert_int_equal(m->n, 1);
    assert_memory_equal(m->parts[0].data, "pong", 4);
    t->msgs++;
    event_base_loopbreak(t->base);
}

static void
c_closed(struct zmtp_conn *c, const char *why, void *arg)
{
    (void)c;
    (void)why;
    struct conn_test *t = arg;
    t->closed = true;
    event_base_loopbreak(t->base);
}

static void
peer_msg(const struct zmtp_msg *m, void *arg)
{
    int *n = arg;
    assert_int_equal(m->n, 2);
    assert_memory_equal(m->parts[0].data, "hello", 5);
    assert_int_equal(m->parts[1].len, 0);
    (*n)++;
}

static void
test_connection(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-zmtp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/s", dir);
    struct conn_test t = {.base = event_base_new()};
    struct zmtp_handlers h = {.ready = c_ready, .message = c_msg, .closed = c_closed};
    /* nobody listens yet: the caller retries later */
    assert_null(zmtp_connect_unix(t.base, path, ZMTP_DEALER, &h, &t));
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(ls, 1), 0);
    struct zmtp_conn *c = zmtp_connect_unix(t.base, path, ZMTP_DEALER, &h, &t);
    assert_non_null(c);
    int fd = accept(ls, NULL, NULL);
    assert_true(fd >= 0);
    struct evbuffer *out = peer_stream("ROUTER");
    add_frame(out, "pong", 4, false, false);
    size_t n = evbuffer_get_length(out);
    assert_int_equal(write(fd, evbuffer_pullup(out, -1), n), (ssize_t)n);
    evbuffer_free(out);
    event_base_dispatch(t.base);
    assert_true(t.ready);
    assert_int_equal(t.msgs, 1);
    assert_true(zmtp_is_ready(c));
    event_base_loop(t.base, EVLOOP_NONBLOCK); /* flush what c_ready queued */
    /* what we sent, seen by a decoder playing the peer */
    struct zmtp_decoder d;
    zmtp_decoder_init(&d, ZMTP_DEALER);
    struct evbuffer *in = evbuffer_new();
    int got = 0;
    int hs = 0;
    while (got == 0) {
        char buf[512];
        ssize_t r = read(fd, buf, sizeof(buf));
        assert_true(r > 0);
        evbuffer_add(in, buf, (size_t)r);
        int rr = zmtp_decoder_run(&d, in, peer_msg, &got);
        assert_true(rr >= 0);
        hs += rr;
    }
    assert_int_equal(hs, 1);
    zmtp_decoder_clear(&d);
    evbuffer_free(in);
    /* the peer leaves: closed is reported */
    close(fd);
    event_base_dispatch(t.base);
    assert_true(t.closed);
    assert_false(zmtp_is_ready(c));
    zmtp_conn_free(c);
    close(ls);
    unlink(path);
    rmdir(dir);
    event_base_free(t.base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greeting),       cmocka_unit_test(test_frame_header),
        cmocka_unit_test(test_ready),          cmocka_unit_test(test_decoder_whole_and_bytewise),
        cmocka_unit_test(test_decoder_errors), cmocka_unit_test(test_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
