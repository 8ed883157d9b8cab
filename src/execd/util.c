/*
 * util.c - ids, timestamps, JSON string quoting, constant-time comparison.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/listener.h>

#include "common/util.h"
#include "execd/execd.h"

void
execd_uuid4(char *buf, bool dashes)
{
    unsigned char b[16];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        /* getrandom on 16 bytes cannot be short once the pool is up; fall back anyway */
        uint64_t t = (uint64_t)clock();
        for (size_t i = 0; i < sizeof(b); i++)
            b[i] = (unsigned char)(t >> (i % 8 * 8)) ^ (unsigned char)(i * 131);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < sizeof(b); i++) {
        if (dashes && (i == 4 || i == 6 || i == 8 || i == 10))
            buf[o++] = '-';
        buf[o++] = hex[b[i] >> 4];
        buf[o++] = hex[b[i] & 15];
    }
    buf[o] = '\0';
}

void
execd_rfc3339(char *buf, size_t n, int64_t wall_ms)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[32];
    if (strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        base[0] = '\0';
    (void)snprintf(buf, n, "%s.%03dZ", base, (int)(wall_ms % 1000));
}

static void
quote_byte(struct evbuffer *out, unsigned char c)
{
    switch (c) {
    case '"':
        evbuffer_add(out, "\\\"", 2);
        break;
    case '\\':
        evbuffer_add(out, "\\\\", 2);
        break;
    case '\n':
        evbuffer_add(out, "\\n", 2);
        break;
    case '\r':
        evbuffer_add(out, "\\r", 2);
        break;
    case '\t':
        evbuffer_add(out, "\\t", 2);
        break;
    default:
        evbuffer_add_printf(out, "\\u%04x", c);
        break;
    }
}

void
execd_json_quote(struct evbuffer *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the pending run of bytes that need no escaping */
    evbuffer_add(out, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        size_t len = c < 0x80 ? 0 : sbx_utf8_len(p + i, n - i);
        if (len > 0) {
            i += len;
            continue;
        }
        evbuffer_add(out, p + run, i - run);
        if (c < 0x80)
            quote_byte(out, c);
        else
            evbuffer_add(out, "\\ufffd", 6); /* like Go's encoding/json */
        run = ++i;
    }
    evbuffer_add(out, p + run, n - run);
    evbuffer_add(out, "\"", 1);
}

bool
execd_token_equal(const char *a, const char *b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    volatile unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < lb; i++)
        diff |= (unsigned char)(a[i < la ? i : 0] ^ b[i]);
    return diff == 0;
}

/* A listening unix socket at path (an old one there replaced), 0666: who may do what is
 * decided per connection (the peer's credentials), not by the file's mode. */
int
execd_unix_listen(struct execd *ex, const char *path, int type, evconnlistener_cb cb,
                  struct evconnlistener **out, sbx_error **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return sbx_error_set(err, SBX_EINVAL, 0, "socket path too long: %s", path);
    (void)snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    (void)unlink(path);
    int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(path, 0666) < 0) {
        int e = errno;
        if (fd >= 0)
            (void)close(fd);
        return sbx_error_set(err, SBX_EGENERIC, e, "socket %s", path);
    }
    *out = evconnlistener_new(ex->base, cb, ex, LEV_OPT_CLOSE_ON_FREE, 64, fd);
    if (!*out) {
        (void)close(fd);
        return sbx_error_set(err, SBX_EGENERIC, 0, "listen on %s", path);
    }
    return 0;
}
