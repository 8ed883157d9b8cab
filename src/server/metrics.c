/*
 * metrics.c - the server's Prometheus metrics (GET /metrics, text exposition format 0.0.4).
 *
 * Recording is lock-free (relaxed atomics: a scrape may see a histogram's count one
 * observation ahead of its sum, which Prometheus tolerates); the sandbox counts by provider
 * and state are taken from the manager at scrape time, and the process figures from /proc.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "server/httpd.h"
#include "server/manager.h"
#include "server/metrics.h"
#include "server/provider.h"

/* seconds: from a 1 ms exec through the router to a 30 s image pull */
static const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                0.25,  0.5,    1,     2.5,  5,     10,   30};
#define NB (sizeof bounds / sizeof bounds[0])

struct histo {
    atomic_uint_fast64_t bucket[NB + 1]; /* the last: +Inf */
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_us;
};

static struct histo op_ok[SBX_OP_COUNT];
static atomic_uint_fast64_t op_failed[SBX_OP_COUNT];
static struct histo store_write;
static struct histo router_req;
static atomic_uint_fast64_t router_in, router_out, router_errors;
static atomic_int_fast64_t router_open;
static atomic_uint_fast64_t liveness_checks;

/* provider errors: a small fixed table (provider, error code) filled as they happen */
#define PERR_MAX 64
struct perr {
    _Atomic(const char *) provider; /* a provider's name, static for the server's life */
    atomic_int code;
    atomic_uint_fast64_t n;
};
static struct perr perrs[PERR_MAX];

static const char *const op_name[SBX_OP_COUNT] = {"create", "start",  "stop",
                                                  "pause",  "resume", "delete"};

static void
observe(struct histo *h, double seconds)
{
    size_t i = 0;
    while (i < NB && seconds > bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (uint64_t)(seconds * 1e6), memory_order_relaxed);
}

void
sbx_metrics_op(enum sbx_metrics_op op, double seconds, bool ok)
{
    if ((unsigned)op >= SBX_OP_COUNT)
        return;
    if (ok)
        observe(&op_ok[op], seconds);
    else
        atomic_fetch_add_explicit(&op_failed[op], 1, memory_order_relaxed);
}

void
sbx_metrics_provider_error(const char *provider, int code)
{
    for (size_t i = 0; i < PERR_MAX; i++) {
        const char *p = atomic_load(&perrs[i].provider);
        if (!p) {
            const char *none = NULL;
            if (!atomic_compare_exchange_strong(&perrs[i].provider, &none, provider)) {
                p = none; /* another thread took the slot: is it ours? */
            } else {
                atomic_store(&perrs[i].code, code);
                p = provider;
            }
        }
        if (p == provider && atomic_load(&perrs[i].code) == code) {
            atomic_fetch_add_explicit(&perrs[i].n, 1, memory_order_relaxed);
            return;
        }
    }
}

void
sbx_metrics_store_write(double seconds)
{
    observe(&store_write, seconds);
}

void
sbx_metrics_liveness_check(void)
{
    atomic_fetch_add_explicit(&liveness_checks, 1, memory_order_relaxed);
}

void
sbx_metrics_router(double seconds, uint64_t bytes_in, uint64_t bytes_out, bool failed)
{
    observe(&router_req, seconds);
    atomic_fetch_add_explicit(&router_in, bytes_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&router_out, bytes_out, memory_order_relaxed);
    if (failed)
        atomic_fetch_add_explicit(&router_errors, 1, memory_order_relaxed);
}

void
sbx_metrics_router_open(int delta)
{
    atomic_fetch_add_explicit(&router_open, delta, memory_order_relaxed);
}

static void
put_histo(struct sbx_buf *b, const char *name, const char *labels, const struct histo *h)
{
    uint64_t cum = 0;
    const char *sep = *labels ? "," : "";
    for (size_t i = 0; i <= NB; i++) {
        cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        if (i < NB)
            (void)sbx_buf_printf(b, NULL, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
                                 bounds[i], (unsigned long long)cum);
        else
            (void)sbx_buf_printf(b, NULL, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                                 (unsigned long long)cum);
    }
    (void)sbx_buf_printf(b, NULL, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels,
                         (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1e6, name,
                         labels,
                         (unsigned long long)atomic_load_explicit(&h->count, memory_order_relaxed));
}

static void
put_ops(struct sbx_buf *b)
{
    (void)sbx_buf_append_str(b,
                             "# HELP sbx_operation_seconds Lifecycle operations that succeeded, "
                             "by operation (create: to Running).\n"
                             "# TYPE sbx_operation_seconds histogram\n",
                             NULL);
    for (int i = 0; i < SBX_OP_COUNT; i++) {
        char l[48];
        (void)snprintf(l, sizeof l, "op=\"%s\"", op_name[i]);
        put_histo(b, "sbx_operation_seconds", l, &op_ok[i]);
    }
    (void)sbx_buf_append_str(b,
                             "# HELP sbx_operation_failures_total Lifecycle operations that "
                             "failed.\n# TYPE sbx_operation_failures_total counter\n",
                             NULL);
    for (int i = 0; i < SBX_OP_COUNT; i++)
        (void)sbx_buf_printf(b, NULL, "sbx_operation_failures_total{op=\"%s\"} %llu\n", op_name[i],
                             (unsigned long long)atomic_load(&op_failed[i]));
    (void)sbx_buf_append_str(b,
                             "# HELP sbx_provider_errors_total Errors a provider reported, by "
                             "provider and sbx error code.\n"
                             "# TYPE sbx_provider_errors_total counter\n",
                             NULL);
    for (size_t i = 0; i < PERR_MAX; i++) {
        const char *p = atomic_load(&perrs[i].provider);
        if (p)
            (void)sbx_buf_printf(b, NULL,
                                 "sbx_provider_errors_total{provider=\"%s\",code=\"%s\"} %llu\n", p,
                                 sbx_strerror(atomic_load(&perrs[i].code)),
                                 (unsigned long long)atomic_load(&perrs[i].n));
    }
}

static void
put_router(struct sbx_buf *b)
{
    (void)sbx_buf_append_str(b,
                             "# HELP sbx_router_request_seconds Requests through the router "
                             "(/sandboxes/{id}/proxy/...), from their head to their end.\n"
                             "# TYPE sbx_router_request_seconds histogram\n",
                             NULL);
    put_histo(b, "sbx_router_request_seconds", "", &router_req);
    (void)sbx_buf_printf(
        b, NULL,
        "# HELP sbx_router_bytes_total Bytes through the router, by direction.\n"
        "# TYPE sbx_router_bytes_total counter\n"
        "sbx_router_bytes_total{direction=\"to_sandbox\"} %llu\n"
        "sbx_router_bytes_total{direction=\"from_sandbox\"} %llu\n"
        "# HELP sbx_router_errors_total Router requests answered with an error of the router's.\n"
        "# TYPE sbx_router_errors_total counter\n"
        "sbx_router_errors_total %llu\n"
        "# HELP sbx_router_open_connections Router requests and upgraded connections open now.\n"
        "# TYPE sbx_router_open_connections gauge\n"
        "sbx_router_open_connections %lld\n",
        (unsigned long long)atomic_load(&router_in), (unsigned long long)atomic_load(&router_out),
        (unsigned long long)atomic_load(&router_errors), (long long)atomic_load(&router_open));
    (void)sbx_buf_append_str(b,
                             "# HELP sbx_store_write_seconds Writes of a sandbox record to the "
                             "store.\n# TYPE sbx_store_write_seconds histogram\n",
                             NULL);
    put_histo(b, "sbx_store_write_seconds", "", &store_write);
    (void)sbx_buf_printf(b, NULL,
                         "# HELP sbx_liveness_checks_total Status calls of the liveness check "
                         "(sandboxes a provider cannot watch, and watched ones whose workload "
                         "exited).\n# TYPE sbx_liveness_checks_total counter\n"
                         "sbx_liveness_checks_total %llu\n",
                         (unsigned long long)atomic_load(&liveness_checks));
}

static long
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    while (d && readdir(d)) // NOLINT(concurrency-mt-unsafe): a DIR of this call alone
        n++;
    if (d)
        (void)closedir(d);
    return n > 3 ? n - 3 : 0; /* ".", ".." and the DIR's own fd */
}

static long
status_field(const char *name)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    if (f)
        (void)fclose(f);
    return v;
}

static void
put_process(struct sbx_buf *b)
{
    (void)sbx_buf_printf(b, NULL,
                         "# HELP process_resident_memory_bytes The server's resident memory.\n"
                         "# TYPE process_resident_memory_bytes gauge\n"
                         "process_resident_memory_bytes %ld\n"
                         "# HELP process_open_fds Open file descriptors of the server.\n"
                         "# TYPE process_open_fds gauge\n"
                         "process_open_fds %ld\n"
                         "# HELP process_threads Threads of the server.\n"
                         "# TYPE process_threads gauge\n"
                         "process_threads %ld\n",
                         status_field("VmRSS") * 1024, count_fds(), status_field("Threads"));
}

/* A label value as the exposition format wants it: \\, \" and \n escaped. */
static void
put_label(struct sbx_buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            (void)sbx_buf_printf(b, NULL, "\\%c", *v);
        else if (*v == '\n')
            (void)sbx_buf_append_str(b, "\\n", NULL);
        else
            (void)sbx_buf_append(b, v, 1, NULL);
    }
}

/* Per-sandbox figures of the running and paused sandboxes whose provider can tell (native: its
 * cgroups): memory now, CPU seconds, tasks. */
static void
put_usage(struct sbx_buf *b, struct sbx_mgr *mgr, struct sbx_record **items, size_t n)
{
    static const struct {
        const char *name, *help, *type;
        double scale;
    } fam[] = {
        {"sbx_sandbox_memory_bytes", "Memory a sandbox is charged now (its cgroup's).", "gauge",
         1.0},
        {"sbx_sandbox_cpu_seconds_total", "CPU time a sandbox has used.", "counter", 1e-9},
        {"sbx_sandbox_pids", "Tasks in a sandbox now.", "gauge", 1.0},
    };
    struct sbx_provider_usage *u = sbx_xcalloc(n + 1, sizeof *u);
    bool *have = sbx_xcalloc(n + 1, sizeof *have);
    for (size_t i = 0; i < n; i++)
        have[i] = sbx_mgr_usage(mgr, items[i]->id, &u[i]) == 0;
    for (size_t f = 0; f < SBX_ARRAY_SIZE(fam); f++) {
        (void)sbx_buf_printf(b, NULL, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help,
                             fam[f].name, fam[f].type);
        for (size_t i = 0; i < n; i++) {
            uint64_t v = f == 0 ? u[i].memory_bytes : f == 1 ? u[i].cpu_ns : u[i].pids;
            if (!have[i] || v == UINT64_MAX)
                continue;
            (void)sbx_buf_printf(b, NULL, "%s{sandbox=\"%s\",provider=\"", fam[f].name,
                                 items[i]->id);
            put_label(b, items[i]->provider);
            (void)sbx_buf_printf(b, NULL, "\"} %.9g\n", (double)v * fam[f].scale);
        }
    }
    free(u);
    free(have);
}

void
sbx_metrics_render(struct sbx_mgr *mgr, struct sbx_buf *b)
{
    struct sbx_record **items = NULL;
    size_t n = 0;
    sbx_mgr_list(mgr, &items, &n);
    (void)sbx_buf_append_str(b,
                             "# HELP sbx_sandboxes Sandboxes the server knows, by provider and "
                             "state.\n# TYPE sbx_sandboxes gauge\n",
                             NULL);
    /* distinct (provider, state) pairs are few (providers x states): a small table */
    struct pair {
        const char *provider, *state;
        size_t n;
    } pairs[128];
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < np && (strcmp(pairs[k].provider, items[i]->provider) != 0 ||
                          strcmp(pairs[k].state, items[i]->state) != 0))
            k++;
        if (k == np && np < SBX_ARRAY_SIZE(pairs))
            pairs[np++] = (struct pair){items[i]->provider, items[i]->state, 0};
        if (k < np)
            pairs[k].n++;
    }
    for (size_t k = 0; k < np; k++) {
        (void)sbx_buf_append_str(b, "sbx_sandboxes{provider=\"", NULL);
        put_label(b, pairs[k].provider);
        (void)sbx_buf_append_str(b, "\",state=\"", NULL);
        put_label(b, pairs[k].state);
        (void)sbx_buf_printf(b, NULL, "\"} %zu\n", pairs[k].n);
    }
    put_usage(b, mgr, items, n);
    sbx_mgr_list_free(items, n);
    put_ops(b);
    put_router(b);
    put_process(b);
}

/* GET /metrics: Prometheus' text format (not JSON), built at each scrape. */
static enum MHD_Result
send_metrics(struct sbx_req *r)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 64u << 20);
    sbx_metrics_render(r->srv->mgr, &b);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(b.len, b.data ? b.data : (void *)"", MHD_RESPMEM_MUST_COPY);
    sbx_buf_dispose(&b);
    (void)MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    (void)MHD_add_response_header(resp, "X-Request-ID", r->rid);
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

/* server.metrics_auth = false: scrapers need no key (the operator chose so). */
static bool
metrics_public(struct sbx_req *r)
{
    return r->srv->cfg->metrics_public;
}

const struct sbx_http_handler sbx_metrics_handler = {.alt_auth = metrics_public,
                                                     .end = send_metrics};
