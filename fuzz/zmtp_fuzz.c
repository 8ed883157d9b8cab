/*
 * zmtp_fuzz.c - the ZMTP decoder fed in pieces, and every message it yields through the
 * Jupyter message parser (with and without a key). Input: byte 0 bit 0 set = prepend a valid
 * greeting and READY (so most inputs reach the frame parser), byte 1 = piece size; the rest
 * is the peer's byte stream. Checks: messages stay within the limits, what is left over is
 * never more than was fed, the READY property parser never reads past its input.
 */
#include <string.h>

#include <event2/buffer.h>

#include "execd/jmsg.h"
#include "execd/zmtp.h"
#include "fuzz/fuzz.h"

static const char key[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static void
on_msg(const struct zmtp_msg *m, void *arg)
{
    (void)arg;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n; i++)
        total += m->parts[i].len;
    if (m->n == 0 || m->n > ZMTP_MAX_PARTS || total > ZMTP_MAX_MSG)
        __builtin_trap();
    struct jmsg j;
    const char *why = NULL;
    if (jmsg_parse(m, (const uint8_t *)key, strlen(key), &j, &why) == 0)
        jmsg_clear(&j);
    if (jmsg_parse(m, (const uint8_t *)"", 0, &j, &why) == 0) {
        if (!j.msg_type || !j.parent_id || !json_is_object(j.content))
            __builtin_trap();
        jmsg_clear(&j);
    }
}

static void
prefix(struct evbuffer *b)
{
    uint8_t g[ZMTP_GREETING_LEN];
    zmtp_greeting(g);
    evbuffer_add(b, g, sizeof(g));
    static const char ready[] = "\x05READY\x0bSocket-Type\x00\x00\x00\x06ROUTER";
    uint8_t hdr[9];
    size_t hl = zmtp_frame_header(hdr, sizeof(ready) - 1, false, true);
    evbuffer_add(b, hdr, hl);
    evbuffer_add(b, ready, sizeof(ready) - 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char type[32];
    (void)zmtp_ready_socket_type(data + 2, size - 2, type, sizeof(type));
    struct evbuffer *all = evbuffer_new();
    if (data[0] & 1)
        prefix(all);
    evbuffer_add(all, data + 2, size - 2);
    size_t piece = data[1] ? data[1] : 4096;
    struct zmtp_decoder d;
    zmtp_decoder_init(&d, data[0] & 2 ? ZMTP_SUB : ZMTP_DEALER);
    struct evbuffer *in = evbuffer_new();
    size_t fed = 0;
    while (evbuffer_get_length(all) > 0) {
        size_t k = evbuffer_get_length(all) < piece ? evbuffer_get_length(all) : piece;
        evbuffer_remove_buffer(all, in, k);
        fed += k;
        if (zmtp_decoder_run(&d, in, on_msg, NULL) < 0)
            break;
        if (evbuffer_get_length(in) > fed)
            __builtin_trap();
    }
    zmtp_decoder_clear(&d);
    evbuffer_free(in);
    evbuffer_free(all);
    return 0;
}
