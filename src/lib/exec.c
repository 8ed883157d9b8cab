/*
 * exec.c - sbx_exec(): run a command through execd's POST /command and stream its events.
 *
 * execd answers with a stream of bare JSON objects, one per event, each followed by a blank
 * line (COMPAT 2.3); `data:`-prefixed lines are accepted too. Exactly one `init` comes first,
 * then stdout/stderr lines, then one terminal event: `execution_complete` (exit 0) or `error`
 * (evalue = exit code; -1 and the text "signal: NAME" for a signalled command).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/gosig.h"
#include "lib/client_internal.h"

/* One event line longer than this is a protocol violation (execd splits output by line,
 * but a line may be long; 64 MiB bounds memory). */
#define MAX_EVENT_LINE (64u << 20)

#include "lib/stream.h"

static int
deliver(struct exec_stream *s, sbx_output_cb cb, const char *text)
{
    if (!cb || !text)
        return 0;
    /* An empty output line travels as "\n" (COMPAT 2.3); code output is text as it is. */
    size_t len = !s->raw && strcmp(text, "\n") == 0 ? 0 : strlen(text);
    return cb(text, len, s->payload);
}

/* The exit code of an `error` event: evalue, or for a signalled command (evalue "-1",
 * traceback "signal: killed", Go's text) 128 + the signal, as a shell's $? says. */
static int
parse_exit(json_t *err)
{
    const char *evalue = json_string_value(json_object_get(err, "evalue"));
    if (!evalue)
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(evalue, &end, 10);
    if (errno || end == evalue || *end || v < -1 || v > 255)
        return -1;
    if (v == -1) {
        int sig = sbx_go_signal_parse(
            json_string_value(json_array_get(json_object_get(err, "traceback"), 0)));
        return sig ? 128 + sig : -1;
    }
    return (int)v;
}

static void
on_event(struct exec_stream *s, json_t *ev)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *text = json_string_value(json_object_get(ev, "text"));
    if (!type || s->terminal)
        return;
    int stop = 0;
    if (strcmp(type, "init") == 0 && text && !s->command_id) {
        s->command_id = strdup(text);
    } else if (strcmp(type, "stdout") == 0) {
        stop = deliver(s, s->on_stdout, text);
    } else if (strcmp(type, "stderr") == 0) {
        stop = deliver(s, s->on_stderr, text);
    } else if (strcmp(type, "result") == 0) {
        json_decref(s->result);
        s->result = json_incref(json_object_get(ev, "results"));
    } else if (strcmp(type, "execution_count") == 0) {
        s->execution_count = (int)json_integer_value(json_object_get(ev, "execution_count"));
    } else if (strcmp(type, "execution_complete") == 0) {
        s->terminal = 1;
        s->exit_code = 0;
    } else if (strcmp(type, "error") == 0) {
        s->terminal = 1;
        json_decref(s->error);
        s->error = json_incref(json_object_get(ev, "error"));
        s->exit_code = parse_exit(s->error);
    }
    if (stop)
        s->stopped = 1;
}

static void
on_line(struct exec_stream *s, char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
        line[--len] = '\0';
    if (len >= 5 && strncmp(line, "data:", 5) == 0) {
        line += 5;
        len -= 5;
        while (len > 0 && *line == ' ') {
            line++;
            len--;
        }
    }
    if (len == 0 || line[0] != '{')
        return;
    json_t *ev = json_loadb(line, len, 0, NULL);
    if (!ev) {
        s->bad = 1;
        (void)client_fail(s->c, SBX_EIO, "execd sent an event that is not JSON");
        return;
    }
    on_event(s, ev);
    json_decref(ev);
}

static size_t
on_data(char *p, size_t size, size_t nmemb, void *userdata)
{
    struct exec_stream *s = userdata;
    size_t n = size * nmemb;
    for (size_t i = 0; i < n && !s->stopped && !s->bad; i++) {
        if (p[i] != '\n') {
            if (client_buf_append(&s->line, p + i, 1) < 0) {
                s->bad = 1;
                (void)client_fail(s->c, SBX_ELIMIT, "execd sent an event over %u bytes",
                                  MAX_EVENT_LINE);
            }
            continue;
        }
        if (s->line.len)
            on_line(s, s->line.data, s->line.len);
        s->line.len = 0;
    }
    return s->stopped || s->bad ? 0 : n;
}

static json_t *
command_body(const char *command, const sbx_exec_options *o)
{
    json_t *b = json_pack("{s:s}", "command", command);
    if (b && o->cwd)
        (void)json_object_set_new(b, "cwd", json_string(o->cwd));
    if (b && o->timeout_ms > 0)
        (void)json_object_set_new(b, "timeout", json_integer(o->timeout_ms));
    if (b && o->n_env) {
        json_t *envs = json_object();
        for (size_t i = 0; envs && i < o->n_env; i++) {
            if (o->env[i].key && o->env[i].value)
                (void)json_object_set_new(envs, o->env[i].key, json_string(o->env[i].value));
        }
        (void)json_object_set_new(b, "envs", envs);
    }
    return b;
}

/* Ask execd to stop the command (the caller's callback asked for it). Best effort. */
static void
interrupt(sbx_client *c, const char *base, struct curl_slist *ep_headers, const char *id)
{
    char *eid = id ? client_escape(c, id) : NULL;
    char *url = NULL;
    if (eid && asprintf(&url, "%s/command?id=%s", base, eid) >= 0) {
        struct curl_slist *h = NULL;
        if (client_prepare(c, url, &h) == 0) {
            for (struct curl_slist *e = ep_headers; e; e = e->next)
                h = curl_slist_append(h, e->data);
            (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
            (void)curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, "DELETE");
            (void)curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 10000L);
            (void)curl_easy_perform(c->curl);
        }
        curl_slist_free_all(h);
        free(url);
    }
    curl_free(eid);
}

static int
stream_command(struct exec_stream *s, const char *base, struct curl_slist *ep_headers,
               const char *payload)
{
    sbx_client *c = s->c;
    char *url = NULL;
    if (asprintf(&url, "%s%s", base, s->path) < 0)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    struct curl_slist *h = NULL;
    int ret = client_prepare(c, url, &h);
    for (struct curl_slist *e = ep_headers; ret == 0 && e; e = e->next)
        h = curl_slist_append(h, e->data);
    h = curl_slist_append(h, "Content-Type: application/json");
    if (ret == 0) {
        (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
        (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, payload);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, s);
        CURLcode rc = curl_easy_perform(c->curl);
        long status = 0;
        (void)curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK && !s->stopped && !s->bad)
            ret = client_fail(c, SBX_EIO, "%s: %s", url, client_curl_error(c, rc));
        else if (status >= 300)
            ret = client_http_error(c, status, s->line.data, s->line.len);
    }
    curl_slist_free_all(h);
    free(url);
    return ret;
}

void
sbx_exec_options_init(sbx_exec_options *o)
{
    if (o)
        *o = (sbx_exec_options)SBX_EXEC_OPTIONS_INIT;
}

int
client_stream_run(struct exec_stream *s, const char *id, json_t *body)
{
    sbx_client *c = s->c;
    client_buf_init(&s->line, MAX_EVENT_LINE);
    char *base = NULL;
    struct curl_slist *ep_headers = NULL;
    int ret = body ? client_execd_endpoint(c, id, &base, &ep_headers)
                   : client_fail(c, SBX_ENOMEM, "out of memory");
    char *payload = ret == 0 ? json_dumps(body, JSON_COMPACT) : NULL;
    if (ret == 0 && !payload)
        ret = client_fail(c, SBX_ENOMEM, "out of memory");
    if (ret == 0)
        ret = stream_command(s, base, ep_headers, payload);
    if (ret == 0 && s->stopped) {
        interrupt(c, base, ep_headers, s->command_id);
        ret = client_fail(c, SBX_ECONFLICT, "stopped by the output callback");
    } else if (ret == 0 && s->bad) {
        ret = -SBX_EIO;
    } else if (ret == 0 && !s->terminal) {
        ret = client_fail(c, SBX_EIO, "the event stream ended without a result");
    }
    free(payload);
    free(base);
    curl_slist_free_all(ep_headers);
    client_buf_free(&s->line);
    return ret;
}

void
client_stream_dispose(struct exec_stream *s)
{
    free(s->command_id);
    json_decref(s->result);
    json_decref(s->error);
}

int
sbx_exec(int *exit_code, sbx_client *c, const char *id, const char *command,
         const sbx_exec_options *opts)
{
    static const sbx_exec_options defaults = SBX_EXEC_OPTIONS_INIT;
    if (!c || !exit_code || !command || (opts && opts->version != SBX_EXEC_OPTIONS_VERSION))
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    const sbx_exec_options *o = opts ? opts : &defaults;
    struct exec_stream s = {.c = c,
                            .path = "/command",
                            .on_stdout = o->on_stdout,
                            .on_stderr = o->on_stderr,
                            .payload = o->payload,
                            .exit_code = -1};
    json_t *body = command_body(command, o);
    int ret = client_stream_run(&s, id, body);
    if (ret == 0)
        *exit_code = s.exit_code;
    json_decref(body);
    client_stream_dispose(&s);
    return ret;
}

int
sbx_exec_background(char **command_id, sbx_client *c, const char *id, const char *command,
                    const sbx_exec_options *opts)
{
    static const sbx_exec_options defaults = SBX_EXEC_OPTIONS_INIT;
    if (!c || !command_id || !command || (opts && opts->version != SBX_EXEC_OPTIONS_VERSION))
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    *command_id = NULL;
    struct exec_stream s = {.c = c, .path = "/command", .exit_code = -1};
    json_t *body = command_body(command, opts ? opts : &defaults);
    if (body)
        (void)json_object_set_new(body, "background", json_true());
    int ret = client_stream_run(&s, id, body);
    if (ret == 0 && !s.command_id)
        ret = client_fail(c, SBX_EIO, "execd started the command without giving its id");
    if (ret == 0) {
        *command_id = s.command_id;
        s.command_id = NULL;
    }
    json_decref(body);
    client_stream_dispose(&s);
    return ret;
}

int
sbx_session_run(int *exit_code, sbx_client *c, const char *id, const char *session_id,
                const char *command, const sbx_exec_options *opts)
{
    static const sbx_exec_options defaults = SBX_EXEC_OPTIONS_INIT;
    if (!c || !exit_code || !command || !client_id_ok(session_id) ||
        (opts && opts->version != SBX_EXEC_OPTIONS_VERSION))
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    const sbx_exec_options *o = opts ? opts : &defaults;
    char *path = NULL;
    if (asprintf(&path, "/session/%s/run", session_id) < 0)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    struct exec_stream s = {.c = c,
                            .path = path,
                            .on_stdout = o->on_stdout,
                            .on_stderr = o->on_stderr,
                            .payload = o->payload,
                            .exit_code = -1};
    json_t *body = command_body(command, o);
    int ret = client_stream_run(&s, id, body);
    if (ret == 0)
        *exit_code = s.exit_code;
    json_decref(body);
    client_stream_dispose(&s);
    free(path);
    return ret;
}
