/*
 * pty.c - sbx_pty_open(): a PTY session in a sandbox (execd's POST /pty through the router,
 * docs/execd.md "PTY sessions") and where its WebSocket is: the URL and the headers the
 * server's endpoint asks for. The WebSocket itself is the caller's (the CLI's `sbx shell`).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"

static char *
ws_url(sbx_client *c, const char *base, const char *session_id)
{
    /* http://... -> ws://..., https://... -> wss://... */
    const char *rest = strncmp(base, "https://", 8) == 0 ? base + 8 : base + 7;
    const char *scheme = strncmp(base, "https://", 8) == 0 ? "wss://" : "ws://";
    char *url = NULL;
    if (strncmp(base, "http", 4) != 0 ||
        asprintf(&url, "%s%s/pty/%s/ws", scheme, rest, session_id) < 0) {
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
        return NULL;
    }
    return url;
}

static int
endpoint_lines(sbx_client *c, struct curl_slist *h, char ***out)
{
    size_t n = 0;
    for (struct curl_slist *e = h; e; e = e->next)
        n++;
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    size_t i = 0;
    for (struct curl_slist *e = h; e; e = e->next) {
        if (!(v[i++] = strdup(e->data))) {
            sbx_pty_headers_free(v);
            return client_fail(c, SBX_ENOMEM, "out of memory");
        }
    }
    *out = v;
    return 0;
}

static char *
create_body(sbx_client *c, const sbx_pty_options *o)
{
    json_t *j = json_object();
    if (j && o->command)
        (void)json_object_set_new(j, "command", json_string(o->command));
    if (j && o->cwd)
        (void)json_object_set_new(j, "cwd", json_string(o->cwd));
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
    return s;
}

void
sbx_pty_options_init(sbx_pty_options *o)
{
    if (o)
        *o = (sbx_pty_options){.version = SBX_PTY_OPTIONS_VERSION};
}

int
sbx_pty_open(char **ws, char ***headers, sbx_client *c, const char *id, const char *command)
{
    sbx_pty_options o;
    sbx_pty_options_init(&o);
    o.command = command;
    return sbx_pty_open_opts(ws, headers, c, id, &o);
}

int
sbx_pty_open_opts(char **ws, char ***headers, sbx_client *c, const char *id,
                  const sbx_pty_options *opts)
{
    if (!ws || !headers || !c || !id || !opts || opts->version != SBX_PTY_OPTIONS_VERSION)
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    *ws = NULL;
    *headers = NULL;
    char *body = create_body(c, opts);
    if (!body)
        return -SBX_ENOMEM;
    sbx_desktop_request req = {.method = "POST", .path = "/pty", .json_body = body};
    char *answer = NULL;
    int ret = client_execd_call(c, id, &req, &answer, NULL);
    free(body);
    json_t *j = ret == 0 ? json_loads(answer, 0, NULL) : NULL;
    free(answer);
    const char *sid = json_string_value(json_object_get(j, "session_id"));
    if (ret == 0 && (!sid || strpbrk(sid, "/?#%") || !*sid))
        ret = client_fail(c, SBX_EIO, "execd answered POST /pty without a session_id");
    char *base = NULL;
    struct curl_slist *h = NULL;
    if (ret == 0)
        ret = client_execd_endpoint(c, id, &base, &h);
    if (ret == 0 && !(*ws = ws_url(c, base, sid)))
        ret = -SBX_ENOMEM;
    if (ret == 0)
        ret = endpoint_lines(c, h, headers);
    if (ret < 0) {
        free(*ws);
        *ws = NULL;
    }
    json_decref(j);
    free(base);
    for (struct curl_slist *e = h; e; e = e->next) /* they may hold the API key */
        memset(e->data, 0, strlen(e->data));
    curl_slist_free_all(h);
    return ret;
}

void
sbx_pty_headers_free(char **headers)
{
    for (size_t i = 0; headers && headers[i]; i++) {
        memset(headers[i], 0, strlen(headers[i]));
        free(headers[i]);
    }
    free(headers);
}

int
sbx_pty_delete(sbx_client *c, const char *id, const char *session_id)
{
    if (!c || !id || !session_id || !*session_id || strpbrk(session_id, "/?#%"))
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    char *path = NULL;
    if (asprintf(&path, "/pty/%s", session_id) < 0)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    sbx_desktop_request req = {.method = "DELETE", .path = path};
    char *answer = NULL;
    int ret = client_execd_call(c, id, &req, &answer, NULL);
    free(answer);
    free(path);
    return ret;
}
