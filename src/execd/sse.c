/*
 * sse.c - the event frames of COMPAT 2.3: bare `{json}\n\n`, `type` first, ms `timestamp`
 * last, on every SSE stream (commands, sessions, code).
 */
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "common/util.h"
#include "execd/proc.h"

void
execd_sse_begin(struct evbuffer *b, const char *type)
{
    evbuffer_add_printf(b, "{\"type\":\"%s\"", type);
}

void
execd_sse_end(struct evbuffer *b)
{
    evbuffer_add_printf(b, ",\"timestamp\":%lld}\n\n", (long long)sbx_wall_ms());
}

void
execd_sse_text(struct evbuffer *b, const char *type, const char *text, size_t n)
{
    execd_sse_begin(b, type);
    evbuffer_add(b, ",\"text\":", 8);
    execd_json_quote(b, text, n);
    execd_sse_end(b);
}

void
execd_sse_headers(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
}
