/*
 * code.c - code interpreting (COMPAT 2.2, 2.3, 2.7): contexts and POST /code.
 *
 *   python           an ipykernel per context (kernel.c); the stream is made of its iopub
 *                    messages: execute_input -> execution_count, stream -> stdout/stderr,
 *                    execute_result/display_data -> result (text/plain renamed to text),
 *                    error -> status("error") + error; then execution_complete unless an
 *                    error was sent
 *   bash             a bash session per context (session.c): cwd and exports persist
 *   command / ""     with a context: like bash; without one: a one-off command, exactly
 *                    as POST /command (its `init` carries the command id)
 *
 * Without context.id, python and bash runs use a per-language default context created on
 * first use. A context runs one execution at a time: a concurrent run is refused with 500
 * "session is busy" (COMPAT 2.7) before anything is streamed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/kernel.h"
#include "execd/proc.h"

#define SUPPORTED       "python, bash, command"
#define NO_RUNTIME      "language runtime server not configured"
#define OUT_CAP         (16u << 20) /* kernel output queued for a slow client before dropping */
#define PING_SEC        3
#define REPLY_GRACE_MS  500  /* idle seen, execute_reply still missing: see on_no_reply */
#define SIGINT_AGAIN_MS 1000 /* an interrupt that did not take: see on_sigint_again */
#define SIGINT_MAX      10

enum lang {
    LANG_PYTHON,
    LANG_BASH,
    LANG_COMMAND,
    LANG_UNAVAILABLE,
    LANG_UNKNOWN
};

struct code_run {
    struct execd_ctx *ctx;
    struct evhttp_request *req; /* NULL once the client is gone */
    struct evhttp_connection *evcon;
    struct evbuffer *chunk;
    struct event *ping;
    struct event *grace;
    struct event *again;
    int sigints;
    char *code; /* until the kernel took it */
    char msg_id[40];
    uint64_t start_ms;
    bool streaming;    /* headers and `init` sent */
    bool executing;    /* the kernel announced it (execute_input): SIGINT now reaches the code */
    bool interrupt;    /* asked for (sent once executing) */
    bool kernel_error; /* the kernel published an error for this run */
    bool sent_count;
    bool error_sent;
    bool got_reply;
    bool got_idle;
    bool dropped;
    json_t *reply; /* execute_reply content */
};

struct execd_ctx {
    struct execd_ctx *next;
    struct execd *ex;
    char id[40];
    char *language;
    char *cwd;
    bool is_default;
    bool ever_ready;
    struct execd_session *session; /* bash / command contexts */
    struct execd_kernel *kernel;   /* python; NULL until started again after it died */
    struct code_run *run;
    struct evhttp_request *create_req; /* POST /code/context waiting for the kernel */
    struct evhttp_connection *create_evcon;
};

static enum lang
lang_of(const char *l)
{
    static const char *const unavailable[] = {"java", "javascript", "typescript", "go", "sql"};
    if (!l || !l[0] || strcmp(l, "command") == 0)
        return LANG_COMMAND;
    if (strcmp(l, "python") == 0)
        return LANG_PYTHON;
    if (strcmp(l, "bash") == 0)
        return LANG_BASH;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(unavailable); i++) {
        if (strcmp(l, unavailable[i]) == 0)
            return LANG_UNAVAILABLE;
    }
    return LANG_UNKNOWN;
}

/* Answer for a language execd cannot run; true when it did. */
static bool
reject_language(struct evhttp_request *req, const char *l)
{
    enum lang k = lang_of(l);
    if (k == LANG_UNAVAILABLE) {
        execd_reply_error(
            req, 500, "RUNTIME_ERROR",
            NO_RUNTIME ": `%s` is not available in sbx-execd (supported: " SUPPORTED ")", l);
        return true;
    }
    if (k == LANG_UNKNOWN) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "unknown language `%.64s` (supported: " SUPPORTED ")", l);
        return true;
    }
    return false;
}

/* ---- contexts ---- */

static struct execd_ctx *
ctx_find(struct execd *ex, const char *id)
{
    for (struct execd_ctx *c = ex->ctxs; c; c = c->next) {
        if (strcmp(c->id, id) == 0)
            return c;
    }
    return NULL;
}

static struct execd_ctx *
ctx_default(struct execd *ex, const char *language)
{
    for (struct execd_ctx *c = ex->ctxs; c; c = c->next) {
        if (c->is_default && language && strcmp(c->language, language) == 0)
            return c;
    }
    return NULL;
}

static json_t *
ctx_json(const struct execd_ctx *c, bool with_cwd)
{
    json_t *j = json_pack("{s:s, s:s}", "id", c->id, "language", c->language);
    if (with_cwd && c->cwd)
        (void)json_object_set_new(j, "cwd", json_string(c->cwd));
    return j;
}

static void run_abort(struct code_run *r, const char *why);
static void on_sigint_again(int fd, short what, void *arg);
static const struct execd_kernel_ops kernel_ops;

static void
ctx_free(struct execd_ctx *c)
{
    for (struct execd_ctx **pp = &c->ex->ctxs; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    if (c->run)
        run_abort(c->run, "the context was deleted");
    if (c->create_req) {
        evhttp_connection_set_closecb(c->create_evcon, NULL, NULL);
        execd_reply_error(c->create_req, 500, "RUNTIME_ERROR",
                          "the context was deleted while its kernel started");
    }
    if (c->session)
        execd_session_release(c->ex, c->session);
    execd_kernel_free(c->kernel);
    sbx_info("context %s (%s) deleted", c->id, c->language);
    free(c->language);
    free(c->cwd);
    free(c);
}

static struct execd_ctx *
ctx_new(struct execd *ex, const char *language, const char *cwd)
{
    struct execd_ctx *c = sbx_xcalloc(1, sizeof(*c));
    c->ex = ex;
    execd_uuid4(c->id, false);
    c->language = sbx_xstrdup(language && language[0] ? language : "command");
    c->cwd = cwd && cwd[0] ? sbx_xstrdup(cwd) : NULL;
    if (lang_of(language) == LANG_PYTHON) {
        c->kernel = execd_kernel_take_warm(ex, c->cwd, &kernel_ops, c);
        if (!c->kernel)
            c->kernel = execd_kernel_start(ex, c->id, c->cwd, &kernel_ops, c);
    } else
        c->session = execd_session_new(ex, c->cwd, false);
    c->next = ex->ctxs;
    ex->ctxs = c;
    return c;
}

/* ---- the stream of a kernel run ---- */

static void
run_flush(struct code_run *r)
{
    if (r->req && evbuffer_get_length(r->chunk) > 0)
        evhttp_send_reply_chunk(r->req, r->chunk);
    evbuffer_drain(r->chunk, evbuffer_get_length(r->chunk));
}

/* Output events are dropped (once noted on stderr) while the client is OUT_CAP behind: the
 * kernel's iopub cannot be paused without losing messages anyway. */
static bool
run_congested(struct code_run *r)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(r->evcon);
    bool full = evbuffer_get_length(bufferevent_get_output(bev)) > OUT_CAP;
    if (full && !r->dropped) {
        r->dropped = true;
        static const char note[] = "[sbx-execd: output dropped, the client reads too slowly]";
        execd_sse_text(r->chunk, "stderr", note, strlen(note));
        run_flush(r);
    }
    return full;
}

static void
emit_count(struct code_run *r, json_int_t n)
{
    if (r->sent_count || n <= 0)
        return;
    r->sent_count = true;
    execd_sse_begin(r->chunk, "execution_count");
    evbuffer_add_printf(r->chunk, ",\"execution_count\":%lld", (long long)n);
    execd_sse_end(r->chunk);
}

static void
emit_result(struct code_run *r, json_t *data)
{
    if (!json_is_object(data) || json_object_size(data) == 0)
        return;
    json_t *res = json_deep_copy(data);
    json_t *plain = json_object_get(res, "text/plain");
    if (plain) { /* COMPAT 2.3: the SDKs read results.text */
        (void)json_object_set(res, "text", plain);
        (void)json_object_del(res, "text/plain");
    }
    char *s = json_dumps(res, JSON_COMPACT);
    json_decref(res);
    if (!s)
        return;
    execd_sse_begin(r->chunk, "result");
    evbuffer_add_printf(r->chunk, ",\"results\":%s", s);
    execd_sse_end(r->chunk);
    free(s);
}

static void
emit_error(struct code_run *r, const char *ename, const char *evalue, json_t *traceback)
{
    r->error_sent = true;
    execd_sse_text(r->chunk, "status", "error", 5); /* what the reference sends first */
    json_t *tb = json_is_array(traceback) ? json_incref(traceback) : json_array();
    json_t *e = json_pack("{s:s, s:s, s:o}", "ename", ename ? ename : "Error", "evalue",
                          evalue ? evalue : "", "traceback", tb);
    char *s = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    execd_sse_begin(r->chunk, "error");
    evbuffer_add_printf(r->chunk, ",\"error\":%s", s ? s : "{}");
    execd_sse_end(r->chunk);
    free(s);
}

static void
run_free(struct code_run *r)
{
    if (r->ctx)
        r->ctx->run = NULL;
    if (r->ping)
        event_free(r->ping);
    if (r->grace)
        event_free(r->grace);
    if (r->again)
        event_free(r->again);
    evbuffer_free(r->chunk);
    json_decref(r->reply);
    free(r->code);
    free(r);
}

/* The execution is over (reply and idle seen): terminal event, end of the stream. */
/* The terminal event when the kernel sent no error on iopub: from execute_reply. */
static void
emit_terminal(struct code_run *r)
{
    const char *status = json_string_value(json_object_get(r->reply, "status"));
    if (!r->reply) {
        if (r->interrupt)
            emit_error(r, "KeyboardInterrupt", "", NULL);
        else
            emit_error(r, "KernelError", "the kernel went idle without an execute_reply", NULL);
    } else if (status && strcmp(status, "ok") == 0) {
        execd_sse_begin(r->chunk, "execution_complete");
        evbuffer_add_printf(r->chunk, ",\"execution_time\":%llu",
                            (unsigned long long)(sbx_now_ms() - r->start_ms));
        execd_sse_end(r->chunk);
    } else if (status && strcmp(status, "error") == 0) {
        emit_error(r, json_string_value(json_object_get(r->reply, "ename")),
                   json_string_value(json_object_get(r->reply, "evalue")),
                   json_object_get(r->reply, "traceback"));
    } else {
        sbx_autofree char *js = json_dumps(r->reply, JSON_COMPACT);
        sbx_debug("context %s: execute_reply %s", r->ctx ? r->ctx->id : "?", js);
        emit_error(r, "ExecutionAborted", "the kernel did not run the code", NULL);
    }
}

/* The execution is over (reply and idle seen): terminal event, end of the stream. */
static void
run_end(struct code_run *r)
{
    if (r->req) {
        if (!r->error_sent)
            emit_terminal(r);
        run_flush(r);
        evhttp_connection_set_closecb(r->evcon, NULL, NULL);
        evhttp_send_reply_end(r->req);
    }
    run_free(r);
}

/* Stop a run that cannot finish normally (context deleted, kernel gone). */
static void
run_abort(struct code_run *r, const char *why)
{
    if (r->req) {
        evhttp_connection_set_closecb(r->evcon, NULL, NULL);
        if (r->streaming) {
            emit_error(r, "ContextCancelled", why, NULL);
            run_flush(r);
            evhttp_send_reply_end(r->req);
        } else {
            execd_reply_error(r->req, 500, "RUNTIME_ERROR", "%s", why);
        }
    }
    run_free(r);
}

static void
on_ping(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct code_run *r = arg;
    if (!r->req || run_congested(r))
        return;
    execd_sse_text(r->chunk, "ping", "pong", 4);
    run_flush(r);
}

/* Interrupts. ipykernel ignores SIGINT until it runs the request's handler, and execute_input
 * is only published from there: an interrupt that comes earlier waits for it. And CPython
 * only looks at a signal between bytecodes: one that lands just before a blocking call (the
 * classic `time.sleep`) is seen when the call returns. So while the kernel has not reported
 * an error for the run, SIGINT is sent again every SIGINT_AGAIN_MS (it then interrupts the
 * call: the Python handler raises KeyboardInterrupt once however many arrived). */
static void
sigint_now(struct code_run *r)
{
    if (!r->ctx || !r->ctx->kernel)
        return;
    execd_kernel_interrupt(r->ctx->kernel);
    r->sigints++;
    if (!r->again)
        r->again = evtimer_new(r->ctx->ex->base, on_sigint_again, r);
    struct timeval tv = {.tv_sec = 0, .tv_usec = (long)SIGINT_AGAIN_MS * 1000};
    evtimer_add(r->again, &tv);
}

static void
on_sigint_again(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct code_run *r = arg;
    if (!r->kernel_error && !r->got_idle && r->sigints < SIGINT_MAX)
        sigint_now(r);
}

static void
run_interrupt(struct code_run *r)
{
    r->interrupt = true;
    if (r->executing && r->sigints == 0)
        sigint_now(r);
}

/* The client left: the kernel is interrupted; the context stays busy until the kernel
 * answered, so the next run cannot see this one's output. */
static void
on_run_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct code_run *r = arg;
    struct evhttp_request *req = r->req;
    r->req = NULL;
    if (!r->streaming) {
        run_free(r); /* the kernel never saw it */
    } else if (r->ctx && r->ctx->kernel) {
        sbx_info("context %s: client disconnected, interrupting the kernel", r->ctx->id);
        run_interrupt(r);
    }
    execd_http_abandon(req);
}

static void
run_begin(struct code_run *r)
{
    struct execd_ctx *c = r->ctx;
    r->streaming = true;
    execd_sse_headers(r->req);
    evhttp_send_reply_start(r->req, 200, "OK");
    execd_sse_text(r->chunk, "init", c->id, strlen(c->id));
    run_flush(r);
    r->ping = event_new(c->ex->base, -1, EV_PERSIST, on_ping, r);
    struct timeval tv = {.tv_sec = PING_SEC};
    event_add(r->ping, &tv);
    r->start_ms = sbx_now_ms();
    execd_kernel_execute(c->kernel, r->code, r->msg_id);
    free(r->code);
    r->code = NULL;
}

/* An interrupt that lands in ipykernel's request handler outside the cell (before or after
 * run_cell) is caught there ("KeyboardInterrupt caught in kernel") and no execute_reply is
 * ever sent; the kernel still goes idle. The reply normally follows idle within
 * microseconds (another socket), so a missing one after REPLY_GRACE_MS ends the run. */
static void
on_no_reply(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct code_run *r = arg;
    sbx_debug("context %s: no execute_reply after idle", r->ctx ? r->ctx->id : "?");
    run_end(r);
}

static void
run_idle(struct code_run *r)
{
    if (r->got_idle)
        return;
    r->got_idle = true;
    if (r->got_reply)
        return;
    r->grace = evtimer_new(r->ctx->ex->base, on_no_reply, r);
    struct timeval tv = {.tv_sec = 0, .tv_usec = (long)REPLY_GRACE_MS * 1000};
    evtimer_add(r->grace, &tv);
}

/* ---- kernel events ---- */

static void
on_kernel_ready(struct execd_kernel *k, void *arg)
{
    (void)k;
    struct execd_ctx *c = arg;
    c->ever_ready = true;
    if (c->create_req) {
        evhttp_connection_set_closecb(c->create_evcon, NULL, NULL);
        execd_reply_json(c->create_req, 200, ctx_json(c, true));
        c->create_req = NULL;
    }
    if (c->run && !c->run->streaming)
        run_begin(c->run);
}

static void
on_kernel_failed(struct execd_kernel *k, const char *why, void *arg)
{
    struct execd_ctx *c = arg;
    if (c->ex->stopping)
        sbx_debug("context %s: %s", c->id, why);
    else
        sbx_warn("context %s: %s", c->id, why);
    bool never = !c->ever_ready;
    if (c->run && c->run->streaming && c->run->req) {
        struct code_run *r = c->run;
        emit_error(r, "DeadKernelError", why, NULL);
        run_flush(r);
        evhttp_connection_set_closecb(r->evcon, NULL, NULL);
        evhttp_send_reply_end(r->req);
        r->req = NULL;
    }
    if (c->run) {
        sbx_autofree char *msg = sbx_xasprintf("%s: %s", never ? NO_RUNTIME : "kernel", why);
        run_abort(c->run, msg);
    }
    if (c->create_req) {
        evhttp_connection_set_closecb(c->create_evcon, NULL, NULL);
        execd_reply_error(c->create_req, 500, "RUNTIME_ERROR", NO_RUNTIME ": %s", why);
        c->create_req = NULL;
    }
    execd_kernel_free(k);
    c->kernel = NULL;
    if (never)
        ctx_free(c); /* never usable: it does not exist (the next default run starts over) */
}

static json_int_t
count_of(const struct jmsg *m)
{
    return json_integer_value(json_object_get(m->content, "execution_count"));
}

static void
on_kernel_iopub(struct execd_kernel *k, const struct jmsg *m, void *arg)
{
    (void)k;
    struct execd_ctx *c = arg;
    struct code_run *r = c->run;
    if (!r || !r->streaming || strcmp(m->parent_id, r->msg_id) != 0)
        return;
    const char *t = m->msg_type;
    if (strcmp(t, "execute_input") == 0) {
        r->executing = true;
        if (r->interrupt && r->sigints == 0)
            sigint_now(r);
    }
    if (strcmp(t, "error") == 0)
        r->kernel_error = true;
    if (strcmp(t, "status") == 0) {
        const char *st = json_string_value(json_object_get(m->content, "execution_state"));
        if (st && strcmp(st, "idle") == 0)
            run_idle(r);
    } else if (!r->req) {
        /* nobody listens any more */
    } else if (strcmp(t, "execute_input") == 0) {
        emit_count(r, count_of(m));
    } else if (strcmp(t, "stream") == 0) {
        const char *name = json_string_value(json_object_get(m->content, "name"));
        json_t *text = json_object_get(m->content, "text");
        if (json_string_length(text) > 0 && !run_congested(r))
            execd_sse_text(r->chunk, name && strcmp(name, "stderr") == 0 ? "stderr" : "stdout",
                           json_string_value(text), json_string_length(text));
    } else if (strcmp(t, "execute_result") == 0 || strcmp(t, "display_data") == 0 ||
               strcmp(t, "update_display_data") == 0) {
        emit_count(r, count_of(m));
        if (!run_congested(r))
            emit_result(r, json_object_get(m->content, "data"));
    } else if (strcmp(t, "error") == 0) {
        emit_error(r, json_string_value(json_object_get(m->content, "ename")),
                   json_string_value(json_object_get(m->content, "evalue")),
                   json_object_get(m->content, "traceback"));
    }
    run_flush(r);
    if (r->got_reply && r->got_idle)
        run_end(r);
}

static void
on_kernel_shell(struct execd_kernel *k, const struct jmsg *m, void *arg)
{
    (void)k;
    struct execd_ctx *c = arg;
    struct code_run *r = c->run;
    if (!r || !r->streaming || strcmp(m->msg_type, "execute_reply") != 0 ||
        strcmp(m->parent_id, r->msg_id) != 0)
        return;
    r->got_reply = true;
    json_decref(r->reply);
    r->reply = json_incref(m->content);
    if (r->got_idle)
        run_end(r);
}

static const struct execd_kernel_ops kernel_ops = {
    .ready = on_kernel_ready,
    .failed = on_kernel_failed,
    .iopub = on_kernel_iopub,
    .shell = on_kernel_shell,
};

/* ---- request parsing ---- */

/* A string member: absent or null gives NULL; not a string, or one with a NUL, is -1. */
static int
opt_str(json_t *o, const char *key, const char **out)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

/* ---- handlers ---- */

static void
on_create_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct execd_ctx *c = arg;
    struct evhttp_request *req = c->create_req;
    c->create_req = NULL;
    ctx_free(c); /* nobody will ever learn its id */
    execd_http_abandon(req);
}

void
execd_code_context_create(struct execd *ex, struct evhttp_request *req)
{
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    const char *lang = NULL;
    const char *cwd = NULL;
    if (!json_is_object(j) || opt_str(j, "language", &lang) < 0 || opt_str(j, "cwd", &cwd) < 0) {
        json_decref(j);
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "body must be an object with string `language` and `cwd`");
        return;
    }
    sbx_autoerror sbx_error *err = NULL;
    if (reject_language(req, lang)) {
        json_decref(j);
        return;
    }
    if (cwd && cwd[0] && sbx_mkdir_p(cwd, 0755, &err) < 0) {
        execd_reply_error(req, 500, "RUNTIME_ERROR", "cwd: %s", sbx_error_msg(err));
        json_decref(j);
        return;
    }
    struct execd_ctx *c = ctx_new(ex, lang, cwd);
    json_decref(j);
    if (!c->kernel) {
        execd_reply_json(req, 200, ctx_json(c, true));
        return;
    }
    /* answered once the kernel is ready (or failed) */
    c->create_req = req;
    c->create_evcon = evhttp_request_get_connection(req);
    execd_http_park(req);
    evhttp_connection_set_closecb(c->create_evcon, on_create_close, c);
}

static void
run_kernel(struct execd_ctx *c, struct evhttp_request *req, const char *code)
{
    if (!c->kernel)
        c->kernel = execd_kernel_start(c->ex, c->id, c->cwd, &kernel_ops, c); /* it died */
    struct code_run *r = sbx_xcalloc(1, sizeof(*r));
    r->ctx = c;
    r->req = req;
    r->evcon = evhttp_request_get_connection(req);
    r->chunk = evbuffer_new();
    r->code = sbx_xstrdup(code);
    c->run = r;
    evhttp_connection_set_closecb(r->evcon, on_run_close, r);
    if (execd_kernel_is_ready(c->kernel))
        run_begin(r);
    else
        execd_http_park(req); /* streams once the kernel is ready, or answers its failure */
}

static void
run_in(struct execd_ctx *c, struct evhttp_request *req, const char *code)
{
    bool busy = c->session ? execd_session_busy(c->session) : c->run != NULL;
    if (busy) {
        execd_reply_error(req, 500, "RUNTIME_ERROR", "session is busy: context %s is running",
                          c->id);
        return;
    }
    if (c->session) {
        struct execd_cmd_req cr = {.command = code};
        execd_session_start_run(c->ex, req, c->session, &cr, c->id);
        return;
    }
    run_kernel(c, req, code);
}

static bool
same_language(const char *a, const char *b)
{
    return lang_of(a) == LANG_COMMAND ? lang_of(b) == LANG_COMMAND : strcmp(a, b) == 0;
}

void
execd_code_run(struct execd *ex, struct evhttp_request *req)
{
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    const char *code = NULL;
    const char *id = NULL;
    const char *lang = NULL;
    json_t *cj = json_object_get(j, "context");
    if (!json_is_object(j) || opt_str(j, "code", &code) < 0 || !code || !code[0]) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "`code` is required and must be a non-empty string without NUL");
    } else if (cj && !json_is_null(cj) &&
               (!json_is_object(cj) || opt_str(cj, "id", &id) < 0 ||
                opt_str(cj, "language", &lang) < 0)) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "`context` must be an object with string `id` and `language`");
    } else if (id && id[0]) {
        struct execd_ctx *c = ctx_find(ex, id);
        if (!c)
            execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no such context `%.64s`", id);
        else if (lang && lang[0] && !same_language(lang, c->language))
            execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                              "context %s is a %s context, not %.32s", c->id, c->language, lang);
        else
            run_in(c, req, code);
    } else if (!reject_language(req, lang)) {
        if (lang_of(lang) == LANG_COMMAND) {
            struct execd_cmd_req cr = {.command = code};
            execd_cmd_run_shell(ex, req, &cr); /* stateless, as POST /command */
        } else {
            struct execd_ctx *c = ctx_default(ex, lang);
            if (!c) {
                c = ctx_new(ex, lang, NULL);
                c->is_default = true;
            }
            run_in(c, req, code);
        }
    }
    json_decref(j);
}

bool
execd_code_interrupt(struct execd *ex, const char *id)
{
    struct execd_ctx *c = ctx_find(ex, id);
    if (!c)
        return false;
    if (c->run && c->run->streaming)
        run_interrupt(c->run);
    else if (c->run)
        run_abort(c->run, "interrupted before the kernel was ready");
    if (c->session)
        (void)execd_session_stop_run(ex, c->session);
    return true;
}

void
execd_code_interrupt_req(struct execd *ex, struct evhttp_request *req)
{
    sbx_autofree char *id = execd_query(req, "id");
    if (!id || !id[0]) {
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `id`");
        return;
    }
    if (execd_interrupt(ex, id)) {
        execd_reply_empty(req);
        return;
    }
    execd_reply_error(req, 500, "RUNTIME_ERROR", "no context, command or session `%.64s`", id);
}

void
execd_code_contexts_list(struct execd *ex, struct evhttp_request *req)
{
    sbx_autofree char *lang = execd_query(req, "language");
    json_t *a = json_array();
    for (struct execd_ctx *c = ex->ctxs; c; c = c->next) {
        if (!lang || !lang[0] || same_language(lang, c->language))
            (void)json_array_append_new(a, ctx_json(c, false));
    }
    execd_reply_json(req, 200, a);
}

void
execd_code_contexts_delete(struct execd *ex, struct evhttp_request *req)
{
    sbx_autofree char *lang = execd_query(req, "language");
    if (!lang || !lang[0]) {
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `language`");
        return;
    }
    for (struct execd_ctx *c = ex->ctxs, *next = NULL; c; c = next) {
        next = c->next;
        if (same_language(lang, c->language))
            ctx_free(c);
    }
    execd_reply_empty(req);
}

void
execd_code_context_get(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_ctx *c = ctx_find(ex, id);
    if (!c) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no such context `%.64s`", id);
        return;
    }
    execd_reply_json(req, 200, ctx_json(c, false));
}

void
execd_code_context_delete(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_ctx *c = ctx_find(ex, id);
    if (!c) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no such context `%.64s`", id);
        return;
    }
    ctx_free(c);
    execd_reply_empty(req);
}

void
execd_code_free_all(struct execd *ex)
{
    for (struct execd_ctx *c = ex->ctxs, *next = NULL; c; c = next) {
        next = c->next;
        ctx_free(c);
    }
}
