/*
 * pty_msg.c - a PTY client's messages, parsed (see pty_msg.h).
 *
 * Every field is checked for type and range before anything acts on it: a stdin string is
 * taken with its length (JSON strings may hold NULs), sizes are integers in 1..10000 (a
 * TIOCSWINSZ with 0 or 65536+ columns confuses programs or wraps), signals come from a fixed
 * list of names (never a number: no signal 0 probing, no real-time signals).
 */
#include <signal.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "execd/pty.h"
#include "execd/pty_msg.h"

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"INT", SIGINT},   {"TERM", SIGTERM}, {"KILL", SIGKILL},   {"HUP", SIGHUP},
    {"QUIT", SIGQUIT}, {"TSTP", SIGTSTP}, {"CONT", SIGCONT},   {"STOP", SIGSTOP},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
};

int
pty_msg_signal(const char *name)
{
    if (strncasecmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(signals); i++) {
        if (strcasecmp(name, signals[i].name) == 0)
            return signals[i].sig;
    }
    return -1;
}

static bool
dim_ok(json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 1 &&
           json_integer_value(v) <= PTY_MSG_DIM_MAX;
}

static enum pty_msg_kind
kind_of(const char *type)
{
    static const struct {
        const char *type;
        enum pty_msg_kind kind;
    } kinds[] = {{"stdin", PTY_MSG_STDIN},
                 {"eof", PTY_MSG_EOF},
                 {"resize", PTY_MSG_RESIZE},
                 {"signal", PTY_MSG_SIGNAL},
                 {"ping", PTY_MSG_PING}};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(kinds); i++) {
        if (strcmp(type, kinds[i].type) == 0)
            return kinds[i].kind;
    }
    return PTY_MSG_NONE;
}

/* The fields of a JSON message whose kind is known. */
static int
json_fields(struct pty_msg *m, const char **why)
{
    if (m->kind == PTY_MSG_STDIN) {
        json_t *d = json_object_get(m->json, "data");
        if (!json_is_string(d))
            return *why = "stdin: data must be a string", -1;
        m->data = json_string_value(d);
        m->len = json_string_length(d);
    } else if (m->kind == PTY_MSG_RESIZE) {
        json_t *cols = json_object_get(m->json, "cols");
        json_t *rows = json_object_get(m->json, "rows");
        if (!dim_ok(cols) || !dim_ok(rows))
            return *why = "resize: cols and rows must be 1..10000", -1;
        m->cols = (unsigned)json_integer_value(cols);
        m->rows = (unsigned)json_integer_value(rows);
    } else if (m->kind == PTY_MSG_SIGNAL) {
        json_t *name = json_object_get(m->json, "signal");
        m->sig = json_is_string(name) ? pty_msg_signal(json_string_value(name)) : -1;
        if (m->sig < 0)
            return *why = "signal: unknown signal name", -1;
    }
    return 0;
}

int
pty_msg_parse(int op, const uint8_t *p, size_t n, struct pty_msg *m, const char **why)
{
    *m = (struct pty_msg){.kind = PTY_MSG_NONE, .sig = -1};
    if (op == SBX_WS_BINARY) {
        if (n == 0 || p[0] != PTY_CH_STDIN)
            return *why = "binary frames carry stdin: 0x00, then bytes", -1;
        m->kind = PTY_MSG_STDIN;
        m->data = (const char *)p + 1;
        m->len = n - 1;
        return 0;
    }
    json_error_t jerr;
    m->json = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &jerr);
    json_t *t = json_object_get(m->json, "type");
    if (!json_is_object(m->json) || !json_is_string(t))
        return *why = "want a JSON object with a string `type`", -1;
    m->kind = kind_of(json_string_value(t));
    if (m->kind == PTY_MSG_NONE)
        return *why = "unknown message type", -1;
    return json_fields(m, why);
}

void
pty_msg_dispose(struct pty_msg *m)
{
    json_decref(m->json);
    m->json = NULL;
    m->data = NULL;
}

int
pty_msg_frame(struct pty_msg_asm *a, const struct sbx_ws_frame *f, struct pty_msg_in *in)
{
    if (a->ready) {
        sbx_buf_reset(&a->buf);
        a->ready = false;
    }
    /* a continuation continues a message, and nothing else may come while one is open */
    if ((f->op == SBX_WS_CONT) != (a->op != 0))
        return PTY_FRAME_PROTOCOL;
    if (f->fin && f->op != SBX_WS_CONT) {
        *in = (struct pty_msg_in){.op = f->op, .p = f->payload, .n = f->len};
        return PTY_FRAME_MESSAGE;
    }
    if (sbx_buf_append(&a->buf, f->payload, f->len, NULL) < 0)
        return PTY_FRAME_TOO_BIG;
    if (f->op != SBX_WS_CONT)
        a->op = f->op;
    if (!f->fin)
        return PTY_FRAME_MORE;
    *in = (struct pty_msg_in){.op = a->op, .p = (const uint8_t *)a->buf.data, .n = a->buf.len};
    a->op = 0;
    a->ready = true;
    return PTY_FRAME_MESSAGE;
}
