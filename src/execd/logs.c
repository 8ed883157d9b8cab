/*
 * logs.c - execd's own log and its entrypoint's output, kept in a bounded ring in memory.
 *
 * Where a container runtime would hand PID 1 a log file on the host, a sandbox's execd gets
 * only the sandbox's /dev/null: a host file behind /proc/1/fd/1 was a way out of every limit
 * (any process could write it without bound, truncate it, chmod it). So what execd logs, and
 * what the entrypoint prints (its stdout and stderr are a pipe to us), goes into a ring of
 * fixed size here — the oldest bytes are dropped first — and out through `GET /logs` like any
 * other execd call. Everything is still written to our stderr as well (best effort), which is
 * where it shows when execd runs as a plain process (tests, the process provider).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"

struct execd_logs {
    char *buf;
    size_t cap;
    size_t head; /* next write position */
    size_t len;  /* bytes held (<= cap) */
    uint64_t dropped;
    int out_rd; /* the entrypoint's output pipe, -1 when none */
    struct event *ev;
};

static void
ring_put(struct execd_logs *l, const char *p, size_t n)
{
    if (l->cap == 0) { /* no ring: everything is dropped (and nothing divides by 0) */
        l->dropped += n;
        return;
    }
    if (n >= l->cap) { /* only the last cap bytes can stay */
        l->dropped += l->len + (n - l->cap);
        p += n - l->cap;
        n = l->cap;
        l->head = 0;
        l->len = 0;
    }
    size_t over = l->len + n > l->cap ? l->len + n - l->cap : 0;
    l->dropped += over;
    l->len -= over;
    size_t first = n < l->cap - l->head ? n : l->cap - l->head;
    memcpy(l->buf + l->head, p, first);
    memcpy(l->buf, p + first, n - first);
    l->head = (l->head + n) % l->cap;
    l->len += n;
}

static void
to_stderr(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w <= 0)
            return; /* best effort: a full or broken stderr must not stop us */
        p += w;
        n -= (size_t)w;
    }
}

static void
log_sink(enum sbx_log_level level, const char *line, void *payload)
{
    (void)level;
    struct execd_logs *l = payload;
    size_t n = strlen(line);
    ring_put(l, line, n);
    ring_put(l, "\n", 1);
    char nl = '\n';
    to_stderr(line, n);
    to_stderr(&nl, 1);
}

static void
on_output(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct execd_logs *l = arg;
    char buf[16384];
    for (int i = 0; i < 16; i++) { /* a bounded slice per wakeup: others get their turn */
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            ring_put(l, buf, (size_t)n);
            to_stderr(buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno != EAGAIN) { /* every writer closed: keep what we have */
            event_del(l->ev);
            (void)close(l->out_rd);
            l->out_rd = -1;
        }
        return;
    }
}

int
execd_logs_init(struct execd *ex, size_t cap)
{
    struct execd_logs *l = sbx_xcalloc(1, sizeof *l);
    l->cap = cap ? cap : EXECD_DEFAULT_LOG_RING;
    l->buf = sbx_xmalloc(l->cap);
    l->out_rd = -1;
    ex->logs = l;
    sbx_log_set_sink(log_sink, l);
    return 0;
}

int
execd_logs_output_pipe(struct execd *ex)
{
    struct execd_logs *l = ex->logs;
    int p[2];
    if (!l || pipe2(p, O_CLOEXEC) < 0)
        return -1;
    (void)fcntl(p[0], F_SETFL, O_NONBLOCK);
    l->out_rd = p[0];
    l->ev = event_new(ex->base, p[0], EV_READ | EV_PERSIST, on_output, l);
    if (!l->ev || event_add(l->ev, NULL) < 0) {
        (void)close(p[0]);
        (void)close(p[1]);
        l->out_rd = -1;
        return -1;
    }
    return p[1];
}

void
execd_logs_get(struct execd *ex, struct evhttp_request *req)
{
    struct execd_logs *l = ex->logs;
    struct evbuffer *out = evbuffer_new();
    if (l && l->len) {
        size_t start = (l->head + l->cap - l->len) % l->cap;
        size_t first = l->len < l->cap - start ? l->len : l->cap - start;
        (void)evbuffer_add(out, l->buf + start, first);
        (void)evbuffer_add(out, l->buf, l->len - first);
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    (void)evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
    char dropped[32];
    (void)snprintf(dropped, sizeof dropped, "%llu", (unsigned long long)(l ? l->dropped : 0));
    (void)evhttp_add_header(h, "X-Sbx-Log-Dropped", dropped);
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

void
execd_logs_free(struct execd *ex)
{
    struct execd_logs *l = ex->logs;
    if (!l)
        return;
    sbx_log_set_sink(NULL, NULL);
    if (l->ev)
        event_free(l->ev);
    if (l->out_rd >= 0)
        (void)close(l->out_rd);
    free(l->buf);
    free(l);
    ex->logs = NULL;
}
