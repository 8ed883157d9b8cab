/*
 * metrics.h - counters and histograms for GET /metrics (Prometheus text format).
 */
#ifndef SBX_SERVER_METRICS_H
#define SBX_SERVER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "server/manager.h"

enum sbx_metrics_op {
    SBX_OP_CREATE,
    SBX_OP_START,
    SBX_OP_STOP,
    SBX_OP_PAUSE,
    SBX_OP_RESUME,
    SBX_OP_DELETE,
    SBX_OP_COUNT
};

/* A lifecycle operation finished (its time counted when it succeeded). */
void sbx_metrics_op(enum sbx_metrics_op op, double seconds, bool ok);
/* A provider reported an error (code: an sbx_errc); provider must live as long as the server. */
void sbx_metrics_provider_error(const char *provider, int code);
/* A record written to the store. */
void sbx_metrics_store_write(double seconds);
/* A request through the router ended. */
void sbx_metrics_router(double seconds, uint64_t bytes_in, uint64_t bytes_out, bool failed);
/* The liveness check asked a provider for the status of a sandbox (the reaper). */
void sbx_metrics_liveness_check(void);
/* A router request (or upgraded connection) opened (+1) or closed (-1). */
void sbx_metrics_router_open(int delta);
/* The whole exposition into b. */
void sbx_metrics_render(struct sbx_mgr *mgr, struct sbx_buf *b);

/* GET /metrics: the API key unless server.metrics_auth is false. */
struct sbx_http_handler;
extern const struct sbx_http_handler sbx_metrics_handler;

#endif
