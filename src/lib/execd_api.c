/*
 * execd_api.c - the rest of execd's API (docs/execd.md) for libsbx: file operations,
 * background commands, bash sessions, code contexts and runs. Answers with structure come back
 * as JSON text (execd's own, fields documented in sbx/client.h); code runs as an opaque result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"
#include "lib/stream.h"

/* path with its query: "/prefix?name=<escaped value>[&name2=<escaped value2>]" */
static char *
query_path(sbx_client *c, const char *prefix, const char *name, const char *value)
{
    char *ev = value ? client_escape(c, value) : NULL;
    char *out = NULL;
    if (!ev || asprintf(&out, "%s?%s=%s", prefix, name, ev) < 0) {
        out = NULL;
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
    }
    curl_free(ev);
    return out;
}

/* One execd call; the body (NUL-terminated) in *out when out is not NULL, else dropped. */
static int
call(sbx_client *c, const char *id, const char *method, const char *path, json_t *body, char **out)
{
    char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !b)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    sbx_desktop_request req = {.method = method, .path = path, .json_body = b};
    char *answer = NULL;
    int ret = path ? client_execd_call(c, id, &req, &answer, NULL) : -SBX_ENOMEM;
    free(b);
    if (ret == 0 && out)
        *out = answer;
    else
        free(answer);
    return ret;
}

static int
check_args(sbx_client *c, const void *a, const void *b)
{
    if (!c)
        return -SBX_EINVAL;
    return a && b ? 0 : client_fail(c, SBX_EINVAL, "invalid arguments");
}

static int
octal_mode(int mode)
{
    char octal[16];
    (void)snprintf(octal, sizeof octal, "%o", (unsigned)(mode & 07777));
    return (int)strtol(octal, NULL, 10); /* execd's mode: the octal digits as a decimal int */
}

/* ---- files ---- */

int
sbx_file_read(char **data, size_t *len, sbx_client *c, const char *id, const char *path)
{
    int ret = check_args(c, data, path);
    if (ret < 0)
        return ret;
    *data = NULL;
    char *q = query_path(c, "/files/download", "path", path);
    sbx_desktop_request req = {.method = "GET", .path = q};
    ret = q ? client_execd_call(c, id, &req, data, len) : -SBX_ENOMEM;
    free(q);
    return ret;
}

int
sbx_file_info(char **json, sbx_client *c, const char *id, const char *path)
{
    int ret = check_args(c, json, path);
    if (ret < 0)
        return ret;
    char *q = query_path(c, "/files/info", "path", path);
    ret = call(c, id, "GET", q, NULL, json);
    free(q);
    return ret;
}

int
sbx_file_remove(sbx_client *c, const char *id, const char *path)
{
    int ret = check_args(c, path, path);
    if (ret < 0)
        return ret;
    char *q = query_path(c, "/files", "path", path);
    ret = call(c, id, "DELETE", q, NULL, NULL);
    free(q);
    return ret;
}

int
sbx_file_move(sbx_client *c, const char *id, const char *src, const char *dst)
{
    int ret = check_args(c, src, dst);
    if (ret < 0)
        return ret;
    json_t *body = json_pack("[{s:s, s:s}]", "src", src, "dest", dst);
    ret = call(c, id, "POST", "/files/mv", body, NULL);
    json_decref(body);
    return ret;
}

/* {path: {mode}} to POST /files/permissions or POST /directories. */
static int
path_mode_call(sbx_client *c, const char *id, const char *route, const char *path, int mode)
{
    int ret = check_args(c, path, path);
    if (ret < 0)
        return ret;
    json_t *body = json_pack("{s:{s:i}}", path, "mode", octal_mode(mode));
    ret = call(c, id, "POST", route, body, NULL);
    json_decref(body);
    return ret;
}

int
sbx_file_chmod(sbx_client *c, const char *id, const char *path, int mode)
{
    return path_mode_call(c, id, "/files/permissions", path, mode);
}

int
sbx_dir_create(sbx_client *c, const char *id, const char *path, int mode)
{
    return path_mode_call(c, id, "/directories", path, mode);
}

int
sbx_dir_remove(sbx_client *c, const char *id, const char *path)
{
    int ret = check_args(c, path, path);
    if (ret < 0)
        return ret;
    char *q = query_path(c, "/directories", "path", path);
    ret = call(c, id, "DELETE", q, NULL, NULL);
    free(q);
    return ret;
}

int
sbx_dir_list(char **json, sbx_client *c, const char *id, const char *path, int depth)
{
    int ret = check_args(c, json, path);
    if (ret < 0)
        return ret;
    char *q = query_path(c, "/directories/list", "path", path);
    char *full = NULL;
    if (q && asprintf(&full, "%s&depth=%d", q, depth > 0 ? depth : 1) < 0)
        full = NULL;
    ret = call(c, id, "GET", full, NULL, json);
    free(q);
    free(full);
    return ret;
}

int
sbx_file_search(char **json, sbx_client *c, const char *id, const char *path, const char *pattern)
{
    int ret = check_args(c, json, path);
    if (ret == 0 && !pattern)
        ret = client_fail(c, SBX_EINVAL, "invalid arguments");
    if (ret < 0)
        return ret;
    char *q = query_path(c, "/files/search", "path", path);
    char *ep = client_escape(c, pattern);
    char *full = NULL;
    if (q && ep && asprintf(&full, "%s&pattern=%s", q, ep) < 0)
        full = NULL;
    ret = call(c, id, "GET", full, NULL, json);
    curl_free(ep);
    free(q);
    free(full);
    return ret;
}

/* ---- background commands ---- */

int
sbx_command_status(char **json, sbx_client *c, const char *id, const char *command_id)
{
    int ret = check_args(c, json, command_id);
    if (ret < 0)
        return ret;
    if (!client_id_ok(command_id))
        return client_fail(c, SBX_EINVAL, "command id `%s`: not an execd id", command_id);
    char *path = NULL;
    if (asprintf(&path, "/command/status/%s", command_id) < 0)
        path = NULL;
    ret = call(c, id, "GET", path, NULL, json);
    free(path);
    return ret;
}

int
sbx_command_logs(char **data, size_t *len, unsigned long long *cursor, sbx_client *c,
                 const char *id, const char *command_id)
{
    int ret = check_args(c, data, cursor);
    if (ret == 0 && !client_id_ok(command_id))
        ret = client_fail(c, SBX_EINVAL, "command id: not an execd id");
    if (ret < 0)
        return ret;
    char *path = NULL;
    if (asprintf(&path, "/command/%s/logs?cursor=%llu", command_id, *cursor) < 0)
        path = NULL;
    size_t n = 0;
    sbx_desktop_request req = {.method = "GET", .path = path};
    ret = path ? client_execd_call(c, id, &req, data, &n) : client_fail(c, SBX_ENOMEM, "oom");
    free(path);
    if (ret == 0) {
        *cursor += n; /* execd's cursor is a byte offset (EXECD-COMMANDS-TAIL-CURSOR) */
        if (len)
            *len = n;
    }
    return ret;
}

int
sbx_command_interrupt(sbx_client *c, const char *id, const char *command_id)
{
    int ret = check_args(c, command_id, command_id);
    if (ret == 0 && !client_id_ok(command_id))
        ret = client_fail(c, SBX_EINVAL, "command id: not an execd id");
    if (ret < 0)
        return ret;
    char *q = query_path(c, "/command", "id", command_id);
    ret = call(c, id, "DELETE", q, NULL, NULL);
    free(q);
    return ret;
}

/* ---- sessions ---- */

/* The string `key` of a JSON answer, copied. */
static int
answer_string(sbx_client *c, const char *answer, const char *key, char **out)
{
    json_t *j = json_loads(answer, 0, NULL);
    const char *v = json_string_value(json_object_get(j, key));
    int ret = 0;
    if (!v || !client_id_ok(v))
        ret = client_fail(c, SBX_EIO, "execd's answer has no `%s`", key);
    else if (!(*out = client_strdup(c, v)))
        ret = -SBX_ENOMEM;
    json_decref(j);
    return ret;
}

int
sbx_session_create(char **session_id, sbx_client *c, const char *id, const char *cwd)
{
    int ret = check_args(c, session_id, session_id);
    if (ret < 0)
        return ret;
    *session_id = NULL;
    json_t *body = cwd ? json_pack("{s:s}", "cwd", cwd) : json_object();
    char *answer = NULL;
    ret = call(c, id, "POST", "/session", body, &answer);
    if (ret == 0)
        ret = answer_string(c, answer, "session_id", session_id);
    free(answer);
    json_decref(body);
    return ret;
}

int
sbx_session_delete(sbx_client *c, const char *id, const char *session_id)
{
    if (!c)
        return -SBX_EINVAL;
    if (!client_id_ok(session_id))
        return client_fail(c, SBX_EINVAL, "session id: not an execd id");
    char *path = NULL;
    if (asprintf(&path, "/session/%s", session_id) < 0)
        path = NULL;
    int ret = call(c, id, "DELETE", path, NULL, NULL);
    free(path);
    return ret;
}

/* ---- code contexts and runs ---- */

int
sbx_code_context_create(char **context_id, sbx_client *c, const char *id, const char *language,
                        const char *cwd)
{
    int ret = check_args(c, context_id, language);
    if (ret < 0)
        return ret;
    *context_id = NULL;
    json_t *body = json_pack("{s:s}", "language", language);
    if (body && cwd)
        (void)json_object_set_new(body, "cwd", json_string(cwd));
    char *answer = NULL;
    ret = call(c, id, "POST", "/code/context", body, &answer);
    if (ret == 0)
        ret = answer_string(c, answer, "id", context_id);
    free(answer);
    json_decref(body);
    return ret;
}

int
sbx_code_context_delete(sbx_client *c, const char *id, const char *context_id)
{
    if (!c)
        return -SBX_EINVAL;
    if (!client_id_ok(context_id))
        return client_fail(c, SBX_EINVAL, "context id: not an execd id");
    char *path = NULL;
    if (asprintf(&path, "/code/contexts/%s", context_id) < 0)
        path = NULL;
    int ret = call(c, id, "DELETE", path, NULL, NULL);
    free(path);
    return ret;
}

struct sbx_code_result {
    char *text;       /* results.text of the last result */
    char *results;    /* that MIME bundle as JSON */
    char *error_name; /* ename of the error event */
    char *error_value;
    char *error_json;
    int execution_count;
};

void
sbx_code_options_init(sbx_code_options *o)
{
    if (o)
        *o = (sbx_code_options){.version = SBX_CODE_OPTIONS_VERSION};
}

static char *
dump(json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

static char *
dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static sbx_code_result *
make_result(const struct exec_stream *s)
{
    sbx_code_result *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->execution_count = s->execution_count;
    r->text = dup_or_null(json_string_value(json_object_get(s->result, "text")));
    r->results = dump(s->result);
    r->error_name = dup_or_null(json_string_value(json_object_get(s->error, "ename")));
    r->error_value = dup_or_null(json_string_value(json_object_get(s->error, "evalue")));
    r->error_json = dump(s->error);
    return r;
}

int
sbx_code_run(sbx_code_result **out, sbx_client *c, const char *id, const char *code,
             const sbx_code_options *opts)
{
    int ret = check_args(c, out, code);
    if (ret == 0 && opts && opts->version != SBX_CODE_OPTIONS_VERSION)
        ret = client_fail(c, SBX_EINVAL, "code options of an unknown version");
    if (ret < 0)
        return ret;
    *out = NULL;
    sbx_code_options o;
    sbx_code_options_init(&o);
    if (opts)
        o = *opts;
    struct exec_stream s = {.c = c,
                            .path = "/code",
                            .on_stdout = o.on_stdout,
                            .on_stderr = o.on_stderr,
                            .payload = o.payload,
                            .raw = 1,
                            .exit_code = -1};
    json_t *ctx = json_object();
    if (ctx && o.context_id)
        (void)json_object_set_new(ctx, "id", json_string(o.context_id));
    if (ctx && o.language)
        (void)json_object_set_new(ctx, "language", json_string(o.language));
    json_t *body = ctx ? json_pack("{s:s, s:o}", "code", code, "context", ctx) : NULL;
    ret = client_stream_run(&s, id, body);
    if (ret == 0 && !(*out = make_result(&s)))
        ret = client_fail(c, SBX_ENOMEM, "out of memory");
    json_decref(body);
    client_stream_dispose(&s);
    return ret;
}

const char *
sbx_code_result_text(const sbx_code_result *r)
{
    return r ? r->text : NULL;
}

const char *
sbx_code_result_json(const sbx_code_result *r)
{
    return r ? r->results : NULL;
}

const char *
sbx_code_result_error_name(const sbx_code_result *r)
{
    return r ? r->error_name : NULL;
}

const char *
sbx_code_result_error_value(const sbx_code_result *r)
{
    return r ? r->error_value : NULL;
}

const char *
sbx_code_result_error_json(const sbx_code_result *r)
{
    return r ? r->error_json : NULL;
}

int
sbx_code_result_execution_count(const sbx_code_result *r)
{
    return r ? r->execution_count : 0;
}

void
sbx_code_result_free(sbx_code_result *r)
{
    if (!r)
        return;
    free(r->text);
    free(r->results);
    free(r->error_name);
    free(r->error_value);
    free(r->error_json);
    free(r);
}
