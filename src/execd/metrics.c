/*
 * metrics.c - GET /metrics and /metrics/watch (COMPAT 2.8) from the sandbox's own view:
 * /proc/stat for CPU, the memory cgroup (v2 or v1) when it has a limit, else /proc/meminfo.
 *
 * CPU use needs two samples; the first request waits SAMPLE_MS on a timer (no thread, no
 * blocking), watchers get a sample every second. No timer runs when nobody asks.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"

#define SAMPLE_MS 500
#define WATCH_SEC 1

struct cpu_sample {
    unsigned long long busy;
    unsigned long long total;
};

struct execd_watch {
    struct execd_watch *next;
    struct execd *ex;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct event *timer;
    struct cpu_sample last;
    bool stream; /* /metrics/watch; else a one-shot /metrics */
};

static void
cpu_read(struct cpu_sample *s)
{
    memset(s, 0, sizeof(*s));
    sbx_autofclose FILE *f = fopen("/proc/stat", "re");
    unsigned long long v[10] = {0};
    if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                     &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) < 4)
        return;
    for (int i = 0; i < 8; i++) /* guest times are already in user/nice */
        s->total += v[i];
    s->busy = s->total - v[3] - v[4]; /* minus idle and iowait */
}

static double
cpu_pct(const struct cpu_sample *a, const struct cpu_sample *b)
{
    if (b->total <= a->total)
        return 0.0;
    double pct = 100.0 * (double)(b->busy - a->busy) / (double)(b->total - a->total);
    return pct < 0 ? 0 : pct > 100 ? 100 : pct;
}

static bool
read_u64_file(const char *path, unsigned long long *out)
{
    sbx_autofclose FILE *f = fopen(path, "re");
    return f && fscanf(f, "%llu", out) == 1;
}

static unsigned long long
meminfo(const char *key)
{
    sbx_autofclose FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ':')
            return strtoull(line + kl + 1, NULL, 10) * 1024ULL;
    }
    return 0;
}

/* Total and used bytes; a memory cgroup with a limit below the machine's wins. */
static void
mem_read(double *total_mib, double *used_mib)
{
    unsigned long long total = meminfo("MemTotal");
    unsigned long long used = total - meminfo("MemAvailable");
    unsigned long long lim = 0;
    unsigned long long cur = 0;
    if ((read_u64_file("/sys/fs/cgroup/memory.max", &lim) &&
         read_u64_file("/sys/fs/cgroup/memory.current", &cur)) ||
        (read_u64_file("/sys/fs/cgroup/memory/memory.limit_in_bytes", &lim) &&
         read_u64_file("/sys/fs/cgroup/memory/memory.usage_in_bytes", &cur))) {
        if (lim > 0 && lim < total) {
            total = lim;
            used = cur;
        }
    }
    if (used > total)
        used = total;
    *total_mib = (double)total / (1024.0 * 1024.0);
    *used_mib = (double)used / (1024.0 * 1024.0);
}

static json_t *
metrics_json(const struct cpu_sample *a, const struct cpu_sample *b)
{
    cpu_set_t set;
    double ncpu = 1;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        ncpu = CPU_COUNT(&set);
    double total = 0;
    double used = 0;
    mem_read(&total, &used);
    return json_pack("{s:f, s:f, s:f, s:f, s:I}", "cpu_count", ncpu, "cpu_used_pct", cpu_pct(a, b),
                     "mem_total_mib", total, "mem_used_mib", used, "timestamp",
                     (json_int_t)sbx_wall_ms());
}

static void
watch_free(struct execd_watch *w)
{
    for (struct execd_watch **pp = &w->ex->watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    if (w->req)
        evhttp_connection_set_closecb(w->evcon, NULL, NULL);
    event_free(w->timer);
    free(w);
}

static void
on_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct execd_watch *w = arg;
    struct evhttp_request *req = w->req;
    w->req = NULL;
    watch_free(w);
    execd_http_abandon(req);
}

static void
on_tick(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_watch *w = arg;
    struct cpu_sample now;
    cpu_read(&now);
    json_t *j = metrics_json(&w->last, &now);
    w->last = now;
    if (!w->stream) {
        evhttp_connection_set_closecb(w->evcon, NULL, NULL);
        execd_reply_json(w->req, 200, j);
        w->req = NULL;
        watch_free(w);
        return;
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "%s\n", s ? s : "{\"error\":\"encoding\"}");
    free(s);
    evhttp_send_reply_chunk(w->req, b);
    evbuffer_free(b);
}

static void
watch_start(struct execd *ex, struct evhttp_request *req, bool stream)
{
    struct execd_watch *w = sbx_xcalloc(1, sizeof(*w));
    w->ex = ex;
    w->req = req;
    w->stream = stream;
    w->evcon = evhttp_request_get_connection(req);
    cpu_read(&w->last);
    w->timer = event_new(ex->base, -1, stream ? EV_PERSIST : 0, on_tick, w);
    struct timeval tv = {.tv_sec = stream ? WATCH_SEC : 0,
                         .tv_usec = stream ? 0 : SAMPLE_MS * 1000};
    event_add(w->timer, &tv);
    w->next = ex->watches;
    ex->watches = w;
    if (stream) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Accel-Buffering", "no");
        evhttp_send_reply_start(req, 200, "OK");
    } else {
        execd_http_park(req);
    }
    evhttp_connection_set_closecb(w->evcon, on_close, w);
}

void
execd_metrics_get(struct execd *ex, struct evhttp_request *req)
{
    watch_start(ex, req, false);
}

void
execd_metrics_watch(struct execd *ex, struct evhttp_request *req)
{
    watch_start(ex, req, true);
}

void
execd_metrics_free_all(struct execd *ex)
{
    while (ex->watches) {
        struct execd_watch *w = ex->watches;
        ex->watches = w->next;
        w->next = NULL;
        if (w->req)
            evhttp_connection_set_closecb(w->evcon, NULL, NULL);
        event_free(w->timer);
        free(w);
    }
}
