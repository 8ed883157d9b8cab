/*
 * daytona.c - the `daytona` provider: sandboxes in Daytona's cloud (REST via libcurl).
 *
 * Control plane (api_url, default https://app.daytona.io/api): POST /sandbox (from an image
 * through buildInfo, or from a snapshot), GET /sandbox?labels= (find-or-create), GET
 * /sandbox/{id} (state), POST /sandbox/{id}/start|stop, PUT /sandbox/{id}/labels, DELETE
 * /sandbox/{id}, GET /sandbox/{id}/ports/{port}/preview-url. Toolbox (the sandbox's
 * toolboxProxyUrl, else toolbox_url): the static sbx-execd is uploaded (files/upload),
 * made executable (process/execute) and started in a session (process/session/.../exec,
 * runAsync). The router then reaches any port - execd's 44772 first - through Daytona's
 * preview proxy: connect(port) opens a stream to the preview URL (TLS pumped by rest.c), and
 * proxy_headers adds the preview token, the preview host and execd's own token.
 *
 * Lazy: the factory runs on first use and reads the API key (and the optional organization id
 * and target) from the secret store by the names in the settings; nothing is read at startup
 * and nothing from the environment. A missing key fails the request that needed it, naming
 * the secret; the next request after `sbx secret set` builds the provider.
 *
 * Security: the API key lives in sodium_malloc'd memory and travels only in the Authorization
 * header to api_url/toolbox (https, or http to a loopback address for tests); it is never put
 * into a sandbox's environment or a command, and every message built from Daytona's answers
 * is redacted. execd in the sandbox listens on 0.0.0.0:44772 (Daytona's proxy reaches the
 * sandbox's address, not its loopback) and requires its per-sandbox access token.
 */
#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "secrets/secrets.h"
#include "providers/daytona.h"
#include "providers/launch.h"
#include "providers/providers.h"
#include "providers/rest.h"
#include "server/secretsrv.h"
#include "server/srvutil.h"

#define EXECD_PORT 44772
#define SESSION_ID "sbx-execd"

const char *const sbx_provider_daytona_keys[] = {"api_url",
                                                 "toolbox_url",
                                                 "api_key_secret",
                                                 "organization_id_secret",
                                                 "target_secret",
                                                 "execd",
                                                 "remote_dir",
                                                 "auto_stop_minutes",
                                                 "wait_timeout_ms",
                                                 "poll_ms",
                                                 "request_timeout_ms",
                                                 "ca_file",
                                                 NULL};

/* ---- states ---- */

static const struct {
    const char *name;
    enum sbx_state_class cls;
} states[] = {
    {"started", SBX_CLASS_USABLE},
    {"stopped", SBX_CLASS_STARTABLE},
    {"archived", SBX_CLASS_STARTABLE},
    {"paused", SBX_CLASS_STARTABLE},
    {"creating", SBX_CLASS_TRANSIENT},
    {"starting", SBX_CLASS_TRANSIENT},
    {"stopping", SBX_CLASS_TRANSIENT},
    {"restoring", SBX_CLASS_TRANSIENT},
    {"archiving", SBX_CLASS_TRANSIENT},
    {"pending_build", SBX_CLASS_TRANSIENT},
    {"building_snapshot", SBX_CLASS_TRANSIENT},
    {"pulling_snapshot", SBX_CLASS_TRANSIENT},
    {"snapshotting", SBX_CLASS_TRANSIENT},
    {"forking", SBX_CLASS_TRANSIENT},
    {"resizing", SBX_CLASS_TRANSIENT},
    {"pausing", SBX_CLASS_TRANSIENT},
    {"resuming", SBX_CLASS_TRANSIENT},
    {"unknown", SBX_CLASS_TRANSIENT},
    {"error", SBX_CLASS_TERMINAL},
    {"build_failed", SBX_CLASS_TERMINAL},
    {"destroying", SBX_CLASS_TERMINAL},
    {"destroyed", SBX_CLASS_TERMINAL},
};

enum sbx_state_class
sbx_daytona_classify(const char *state)
{
    for (size_t i = 0; state && i < SBX_ARRAY_SIZE(states); i++) {
        if (strcasecmp(states[i].name, state) == 0)
            return states[i].cls;
    }
    return SBX_CLASS_TRANSIENT;
}

/* ---- settings ---- */

struct settings {
    const char *api_url, *toolbox_url, *key_secret, *org_secret, *target_secret, *execd,
        *remote_dir, *ca_file;
    long auto_stop, wait_ms, poll_ms, req_ms;
};

/* The API key travels to this URL: https, or plain http only to this host's loopback. */
static int
check_url(const char *key, const char *url, sbx_error **err)
{
    int tls = 0;
    int port = 0;
    sbx_autofree char *host = NULL;
    if (sbx_url_split(url, &tls, &host, &port, err) < 0)
        return sbx_error_wrap(err, "providers.daytona.%s", key);
    bool loop = strcmp(host, "127.0.0.1") == 0 || strcmp(host, "localhost") == 0 ||
                strcmp(host, "::1") == 0;
    if (!tls && !loop)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.daytona.%s must be https:// (plain http only to a "
                             "loopback address): the API key would travel in clear text",
                             key);
    return 0;
}

static int
check_types(const json_t *s, sbx_error **err)
{
    static const char *const ints[] = {"auto_stop_minutes", "wait_timeout_ms", "poll_ms",
                                       "request_timeout_ms"};
    static const long mins[] = {0, 1000, 10, 1000};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ints); i++) {
        json_t *v = json_object_get(s, ints[i]);
        if (v && (!json_is_integer(v) || json_integer_value(v) < mins[i]))
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "providers.daytona.%s must be an integer >= %ld", ints[i],
                                 mins[i]);
    }
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach ((json_t *)s, k, v) {
        bool is_int = false;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(ints); i++)
            is_int = is_int || strcmp(k, ints[i]) == 0;
        if (!is_int && (!json_is_string(v) || json_string_length(v) == 0))
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "providers.daytona.%s must be a non-empty string", k);
    }
    return 0;
}

static int
read_settings(const json_t *s, struct settings *out, sbx_error **err)
{
    if (check_types(s, err) < 0)
        return -SBX_EINVAL;
    *out = (struct settings){
        .api_url = sbx_srv_setting_str(s, "api_url", "https://app.daytona.io/api"),
        .toolbox_url =
            sbx_srv_setting_str(s, "toolbox_url", "https://proxy.app.daytona.io/toolbox"),
        .key_secret = sbx_srv_setting_str(s, "api_key_secret", "DAYTONA_API_KEY"),
        .org_secret = sbx_srv_setting_str(s, "organization_id_secret", "DAYTONA_ORGANIZATION_ID"),
        .target_secret = sbx_srv_setting_str(s, "target_secret", "DAYTONA_TARGET"),
        .execd = sbx_srv_setting_str(s, "execd", NULL),
        .remote_dir = sbx_srv_setting_str(s, "remote_dir", "/tmp/.sbx"),
        .ca_file = sbx_srv_setting_str(s, "ca_file", NULL),
        .auto_stop = sbx_srv_setting_int(s, "auto_stop_minutes", 15),
        .wait_ms = sbx_srv_setting_int(s, "wait_timeout_ms", 300000),
        .poll_ms = sbx_srv_setting_int(s, "poll_ms", 1000),
        .req_ms = sbx_srv_setting_int(s, "request_timeout_ms", 30000),
    };
    const char *names[] = {out->key_secret, out->org_secret, out->target_secret};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++) {
        if (!sbx_secret_name_valid(names[i]))
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "providers.daytona: `%.64s` is not a valid secret name", names[i]);
    }
    if (out->remote_dir[0] != '/' || strpbrk(out->remote_dir, "'\"\\$`\n "))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.daytona.remote_dir must be an absolute path without "
                             "quotes, spaces or $");
    if (check_url("api_url", out->api_url, err) < 0 ||
        check_url("toolbox_url", out->toolbox_url, err) < 0)
        return -SBX_EINVAL;
    return 0;
}

int
sbx_provider_daytona_check(const json_t *settings, sbx_error **err)
{
    struct settings st;
    return read_settings(settings, &st, err);
}

/* ---- the provider ---- */

struct preview {
    char rid[64];
    int port;
    char *url;
    char *token;
};

struct daytona {
    char *api_url, *toolbox_url, *execd, *remote_dir, *ca_file;
    long auto_stop, wait_ms, poll_ms;
    char *key, *org, *target;   /* sodium_malloc'd (key) / secret store values; org, target NULL */
    char *auth_line, *org_line; /* "Authorization: Bearer ...", "X-Daytona-Organization-ID: ..." */
    const char *headers[3];
    const char *redact[4];
    struct sbx_rest rest;
    pthread_mutex_t mu; /* guards pv */
    struct preview *pv;
    size_t npv, cap;
};

static struct daytona *
dt(struct sbx_provider *p)
{
    return p->data;
}

static const char *
priv_str(const struct sbx_record *sb, const char *key)
{
    const char *s = json_string_value(json_object_get(sb->priv, key));
    return s ? s : "";
}

/* A line in sodium memory: it holds a credential. */
static char *
secure_line(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 1;
    char *line = sodium_malloc(n);
    if (line)
        (void)snprintf(line, n, "%s%s", name, value);
    return line;
}

/* ---- control-plane calls ---- */

/* method api_url+path [body]; a non-2xx answer is an error. *out (may be NULL) gets the JSON
 * body. */
static int
api(struct daytona *d, const char *method, const char *path, const json_t *body, json_t **out,
    sbx_error **err)
{
    sbx_autofree char *url = sbx_xasprintf("%s%s", d->api_url, path);
    sbx_autofree char *what = sbx_xasprintf("%s %s", method, path);
    struct sbx_rest_req req = {.method = method, .url = url, .body = body};
    struct sbx_rest_resp resp;
    int r = sbx_rest_call(&d->rest, &req, &resp, err);
    if (r >= 0 && (resp.status < 200 || resp.status >= 300))
        r = sbx_rest_fail(&d->rest, &resp, what, err);
    if (r >= 0 && out)
        *out = json_incref(resp.json);
    sbx_rest_resp_dispose(&resp);
    return r < 0 ? sbx_error_wrap(err, "daytona") : 0;
}

/* GET /sandbox/{rid}: its DTO; SBX_ENOTFOUND when Daytona does not know it. */
static int
get_remote(struct daytona *d, const char *rid, json_t **out, sbx_error **err)
{
    sbx_autofree char *esc = sbx_rest_escape(rid);
    sbx_autofree char *path = sbx_xasprintf("/sandbox/%s", esc);
    return api(d, "GET", path, NULL, out, err);
}

static const char *
remote_state(const json_t *dto)
{
    const char *s = json_string_value(json_object_get(dto, "state"));
    return s ? s : "unknown";
}

/* GET /sandbox?labels={...}: the list (an array, or {items:[...]}). */
static int
list_by_labels(struct daytona *d, json_t *labels, json_t **out, sbx_error **err)
{
    char *text = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
    sbx_autofree char *esc = sbx_rest_escape(text ? text : "{}");
    free(text);
    sbx_autofree char *path = sbx_xasprintf("/sandbox?labels=%s", esc);
    json_t *j = NULL;
    if (api(d, "GET", path, NULL, &j, err) < 0)
        return -SBX_EIO;
    json_t *items = json_is_array(j) ? j : json_object_get(j, "items");
    *out = json_is_array(items) ? json_incref(items) : json_array();
    json_decref(j);
    return 0;
}

/* The newest listed sandbox that is not terminal, or NULL (borrowed from list). */
static json_t *
newest_live(json_t *list)
{
    json_t *best = NULL;
    size_t i = 0;
    json_t *it = NULL;
    json_array_foreach (list, i, it) {
        if (sbx_daytona_classify(remote_state(it)) == SBX_CLASS_TERMINAL)
            continue;
        const char *c = json_string_value(json_object_get(it, "createdAt"));
        const char *bc = best ? json_string_value(json_object_get(best, "createdAt")) : NULL;
        if (!best || (c && bc && strcmp(c, bc) > 0))
            best = it;
    }
    return best;
}

static void
remember(struct daytona *d, struct sbx_record *sb, const json_t *dto)
{
    const char *rid = json_string_value(json_object_get(dto, "id"));
    const char *tb = json_string_value(json_object_get(dto, "toolboxProxyUrl"));
    sbx_autoerror sbx_error *uerr = NULL;
    /* The API key goes to this URL too: the same rule as for the configured ones. */
    if (tb && *tb && check_url("toolboxProxyUrl", tb, &uerr) < 0) {
        sbx_warn("sandbox %s: ignoring daytona's toolboxProxyUrl: %s", sb->id, sbx_error_msg(uerr));
        tb = NULL;
    }
    if (rid)
        (void)json_object_set_new(sb->priv, "remote_id", json_string(rid));
    (void)json_object_set_new(sb->priv, "toolbox", json_string(tb && *tb ? tb : d->toolbox_url));
}

static json_t *
labels_of(const struct sbx_record *sb)
{
    char hash[SBX_SPEC_HASH_LEN + 1];
    sbx_record_spec_hash(sb, hash);
    json_t *l = json_pack("{s:s, s:s}", SBX_DAYTONA_LABEL_ID, sb->id, SBX_DAYTONA_LABEL_SPEC, hash);
    const char *key = sbx_record_reuse_key(sb);
    if (key)
        (void)json_object_set_new(l, SBX_DAYTONA_LABEL_KEY, json_string(key));
    return l;
}

/* PUT /sandbox/{rid}/labels with this record's labels: the record owns it from now on. */
static int
relabel(struct daytona *d, const struct sbx_record *sb, sbx_error **err)
{
    sbx_autofree char *esc = sbx_rest_escape(priv_str(sb, "remote_id"));
    sbx_autofree char *path = sbx_xasprintf("/sandbox/%s/labels", esc);
    json_t *body = json_pack("{s:o}", "labels", labels_of(sb));
    int r = api(d, "PUT", path, body, NULL, err);
    json_decref(body);
    return r;
}

/* Find-or-create on Daytona's side: a live sandbox labelled with this reuse key and spec hash
 * (made by an earlier server, or one whose record was lost) is adopted. It is relabelled with
 * this record's id only once it started (dt_start): until then the old owner's label stays, so
 * a failed start (whose cleanup deletes) leaves it alone. 1 = adopted. */
static int
adopt_existing(struct daytona *d, struct sbx_record *sb, sbx_error **err)
{
    json_t *query = labels_of(sb);
    (void)json_object_del(query, SBX_DAYTONA_LABEL_ID);
    json_t *list = NULL;
    int r = list_by_labels(d, query, &list, err);
    json_decref(query);
    json_t *found = r >= 0 ? newest_live(list) : NULL;
    if (found) {
        remember(d, sb, found);
        (void)json_object_set_new(sb->priv, "relabel", json_true());
        sbx_info("sandbox %s: adopting the daytona sandbox %s (reuse key)", sb->id,
                 priv_str(sb, "remote_id"));
        r = 1;
    }
    json_decref(list);
    return r;
}

/* "2Gi" -> 2 (GiB, rounded up); "500m"/"1.5" CPUs -> 1/2 (rounded up). 0 = not given. */
static long
mem_gib(const struct sbx_record *sb)
{
    const char *m = json_string_value(json_object_get(sb->limits, "memory"));
    uint64_t bytes = 0;
    if (!m || sbx_parse_size(m, &bytes, NULL) < 0 || bytes == 0)
        return 0;
    return (long)((bytes + (1ULL << 30) - 1) >> 30);
}

static long
cpus(const struct sbx_record *sb)
{
    const char *c = json_string_value(json_object_get(sb->limits, "cpu"));
    char *end = NULL;
    double v = c ? strtod(c, &end) : 0;
    if (!c || end == c || v <= 0)
        return 0;
    if (strcmp(end, "m") == 0)
        v /= 1000.0;
    long n = (long)v;
    return (double)n < v ? n + 1 : n;
}

/* The source: extensions["daytona.snapshot"] names a snapshot; else the image (the built-in
 * `host` = Daytona's default snapshot). */
static void
set_source(json_t *body, const struct sbx_record *sb)
{
    const char *snap = json_string_value(json_object_get(sb->extensions, "daytona.snapshot"));
    const char *uri = json_string_value(json_object_get(sb->image, "uri"));
    if (snap && *snap)
        (void)json_object_set_new(body, "snapshot", json_string(snap));
    else if (uri && *uri && strcmp(uri, "host") != 0) {
        sbx_autofree char *df = sbx_xasprintf("FROM %s\n", uri);
        (void)json_object_set_new(body, "buildInfo", json_pack("{s:s}", "dockerfileContent", df));
    }
}

static int
post_create(struct daytona *d, struct sbx_record *sb, sbx_error **err)
{
    json_t *body = json_pack("{s:o, s:O, s:I}", "labels", labels_of(sb), "env", sb->env,
                             "autoStopInterval", (json_int_t)d->auto_stop);
    if (d->target)
        (void)json_object_set_new(body, "target", json_string(d->target));
    if (cpus(sb))
        (void)json_object_set_new(body, "cpu", json_integer(cpus(sb)));
    if (mem_gib(sb))
        (void)json_object_set_new(body, "memory", json_integer(mem_gib(sb)));
    set_source(body, sb);
    json_t *dto = NULL;
    int r = api(d, "POST", "/sandbox", body, &dto, err);
    json_decref(body);
    if (r >= 0 && !json_string_value(json_object_get(dto, "id")))
        r = sbx_error_set(err, SBX_EIO, 0, "daytona: create sandbox: no `id` in the answer");
    if (r >= 0) {
        remember(d, sb, dto);
        sbx_info("sandbox %s: daytona sandbox %s (%s)", sb->id,
                 json_string_value(json_object_get(dto, "id")), remote_state(dto));
    }
    json_decref(dto);
    return r;
}

static int
dt_create(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct daytona *d = dt(p);
    char token[65];
    sbx_srv_random_hex(token, 32);
    (void)json_object_set_new(sb->priv, "token", json_string(token));
    int r = sbx_record_reuse_key(sb) ? adopt_existing(d, sb, err) : 0;
    if (r == 0)
        r = post_create(d, sb, err);
    return r < 0 ? sbx_error_wrap(err, "sandbox `%s`", sb->id) : 0;
}

/* ---- previews (the router's way in) ---- */

static void
forget_previews(struct daytona *d, const char *rid)
{
    pthread_mutex_lock(&d->mu);
    size_t kept = 0;
    for (size_t i = 0; i < d->npv; i++) {
        if (strcmp(d->pv[i].rid, rid) == 0) {
            free(d->pv[i].url);
            free(d->pv[i].token);
        } else {
            d->pv[kept++] = d->pv[i];
        }
    }
    d->npv = kept;
    pthread_mutex_unlock(&d->mu);
}

/* Copy the cached preview of (rid, port) into url/token (caller frees); 0 when cached. */
static int
cached_preview(struct daytona *d, const char *rid, int port, char **url, char **token)
{
    int r = -1;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->npv; i++) {
        if (d->pv[i].port == port && strcmp(d->pv[i].rid, rid) == 0) {
            *url = sbx_xstrdup(d->pv[i].url);
            *token = sbx_xstrdup(d->pv[i].token);
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return r;
}

static void
cache_preview(struct daytona *d, const char *rid, int port, const char *url, const char *token)
{
    pthread_mutex_lock(&d->mu);
    if (d->npv == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->pv = sbx_xrealloc(d->pv, d->cap * sizeof *d->pv);
    }
    struct preview *pv = &d->pv[d->npv++];
    (void)snprintf(pv->rid, sizeof pv->rid, "%s", rid);
    pv->port = port;
    pv->url = sbx_xstrdup(url);
    pv->token = sbx_xstrdup(token);
    pthread_mutex_unlock(&d->mu);
}

static int
preview(struct daytona *d, const char *rid, int port, char **url, char **token, sbx_error **err)
{
    if (cached_preview(d, rid, port, url, token) == 0)
        return 0;
    sbx_autofree char *esc = sbx_rest_escape(rid);
    sbx_autofree char *path = sbx_xasprintf("/sandbox/%s/ports/%d/preview-url", esc, port);
    json_t *j = NULL;
    if (api(d, "GET", path, NULL, &j, err) < 0)
        return -SBX_EIO;
    const char *u = json_string_value(json_object_get(j, "url"));
    const char *t = json_string_value(json_object_get(j, "token"));
    int r = 0;
    if (!u)
        r = sbx_error_set(err, SBX_EIO, 0, "daytona: preview url: no `url` in the answer");
    else {
        /* a trailing '/' would double the router's path separator */
        sbx_autofree char *clean = sbx_xstrndup(u, strlen(u) - (u[strlen(u) - 1] == '/'));
        cache_preview(d, rid, port, clean, t ? t : "");
        *url = sbx_xstrdup(clean);
        *token = sbx_xstrdup(t ? t : "");
    }
    json_decref(j);
    return r;
}

/* "Name: value" header lines for a call to a preview URL (NULL-terminated; free each). */
static void
preview_lines(char *lines[4], const char *token, const char *execd_token)
{
    lines[0] = sbx_xasprintf("X-Daytona-Preview-Token: %s", token);
    lines[1] = sbx_xstrdup("X-Daytona-Skip-Preview-Warning: true");
    lines[2] = execd_token ? sbx_xasprintf("X-EXECD-ACCESS-TOKEN: %s", execd_token) : NULL;
    lines[3] = NULL;
}

static void
free_lines(char **lines)
{
    for (size_t i = 0; lines[i]; i++)
        free(lines[i]);
}

/* Is *our* execd answering? GET <preview of 44772>/metrics with its token (/ping needs no
 * token, so it would also answer for an execd another server started with another token). */
static int
ping_execd(struct daytona *d, const struct sbx_record *sb)
{
    sbx_autofree char *url = NULL;
    sbx_autofree char *token = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (preview(d, priv_str(sb, "remote_id"), EXECD_PORT, &url, &token, &err) < 0)
        return -1;
    sbx_autofree char *ping = sbx_xasprintf("%s/metrics", url);
    char *lines[4];
    preview_lines(lines, token, priv_str(sb, "token"));
    struct sbx_rest_resp resp;
    struct sbx_rest quick = {.timeout_ms = 5000, .ca_file = d->ca_file};
    struct sbx_rest_req req = {.method = "GET", .url = ping, .extra = (const char *const *)lines};
    int r = sbx_rest_call(&quick, &req, &resp, &err);
    free_lines(lines);
    r = r >= 0 && resp.status == 200 ? 0 : -1;
    sbx_rest_resp_dispose(&resp);
    return r;
}

/* ---- toolbox: install and start execd ---- */

static char *
toolbox_url(const struct daytona *d, const struct sbx_record *sb, const char *what)
{
    const char *tb = *priv_str(sb, "toolbox") ? priv_str(sb, "toolbox") : d->toolbox_url;
    size_t n = strlen(tb);
    return sbx_xasprintf("%.*s/%s%s", (int)(n && tb[n - 1] == '/' ? n - 1 : n), tb,
                         priv_str(sb, "remote_id"), what);
}

static int
toolbox_post(struct daytona *d, const struct sbx_record *sb, const char *what, json_t *body,
             json_t **out, sbx_error **err)
{
    sbx_autofree char *url = toolbox_url(d, sb, what);
    struct sbx_rest_resp resp;
    struct sbx_rest_req req = {.method = "POST", .url = url, .body = body};
    int r = sbx_rest_call(&d->rest, &req, &resp, err);
    if (r >= 0 && (resp.status < 200 || resp.status >= 300))
        r = sbx_rest_fail(&d->rest, &resp, what, err);
    if (r >= 0 && out)
        *out = json_incref(resp.json);
    sbx_rest_resp_dispose(&resp);
    json_decref(body);
    return r < 0 ? sbx_error_wrap(err, "daytona toolbox") : 0;
}

/* Run a shell command to completion (process/execute); a non-zero exit is an error. */
static int
toolbox_run(struct daytona *d, const struct sbx_record *sb, const char *cmd, sbx_error **err)
{
    json_t *res = NULL;
    int r = toolbox_post(d, sb, "/process/execute",
                         json_pack("{s:s, s:i}", "command", cmd, "timeout", 120), &res, err);
    json_int_t code = json_integer_value(json_object_get(res, "exitCode"));
    if (r >= 0 && code != 0)
        r = sbx_error_set(err, SBX_EIO, 0, "daytona toolbox: `%.60s...` exited with %lld: %.200s",
                          cmd, (long long)code,
                          json_string_value(json_object_get(res, "result"))
                              ? json_string_value(json_object_get(res, "result"))
                              : "");
    json_decref(res);
    return r;
}

/* The command that (re)starts execd in the sandbox, in the background: the launcher of the
 * other providers with execd listening on the sandbox's address. */
static char *
launch_command(const struct daytona *d, const struct sbx_record *sb)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    const char *dir = d->remote_dir;
    (void)sbx_buf_printf(&b, NULL,
                         "D=%s; [ -f \"$D/execd.pid\" ] && kill \"$(cat \"$D/execd.pid\")\" "
                         "2>/dev/null; cd ~ 2>/dev/null; ",
                         dir);
    /* The token is not in this command (Daytona keeps commands in its session logs and the
     * remote process list shows them): upload_token put it in a 0600 file in the 0700 dir,
     * read here into the environment (which execd wipes) and removed. No file, no start:
     * execd must never run without its token. */
    (void)sbx_buf_printf(&b, NULL,
                         "[ -s \"$D/execd.token\" ] || { echo 'sbx: no token file' "
                         ">\"$D/execd.log\"; exit 1; }; "
                         "SBX_EXECD_TOKEN=$(cat \"$D/execd.token\"); rm -f \"$D/execd.token\"; "
                         "export SBX_EXECD_TOKEN; "
                         "SBX_EXECD=\"$D/sbx-execd\" SBX_EXECD_LISTEN=0.0.0.0:%d "
                         "SBX_EXECD_STATE=\"$D/state\" ",
                         EXECD_PORT);
    const char *desk = sbx_launch_desktop(sb); /* checked at create: no shell characters */
    if (desk)
        (void)sbx_buf_printf(&b, NULL, "SBX_EXECD_DESKTOP=%s ", desk);
    (void)sbx_buf_append_str(&b, "nohup /bin/sh -c ", NULL);
    (void)sbx_buf_append_shell_quoted(&b, sbx_launch_script(), NULL);
    (void)sbx_buf_append_str(&b, " sbx-launch", NULL);
    size_t i = 0;
    json_t *arg = NULL;
    json_array_foreach (sb->entrypoint, i, arg) {
        (void)sbx_buf_append_str(&b, " ", NULL);
        (void)sbx_buf_append_shell_quoted(&b, json_string_value(arg) ? json_string_value(arg) : "",
                                          NULL);
    }
    (void)sbx_buf_append_str(&b, " >\"$D/execd.log\" 2>&1 </dev/null & echo $! >\"$D/execd.pid\"",
                             NULL);
    return sbx_buf_steal(&b);
}

static int
install_execd(struct daytona *d, const struct sbx_record *sb, sbx_error **err)
{
    sbx_autofree char *mk =
        sbx_xasprintf("mkdir -p %s && chmod 700 %s", d->remote_dir, d->remote_dir);
    if (toolbox_run(d, sb, mk, err) < 0)
        return -SBX_EIO;
    /* Uploaded next to it and renamed into place: a running sbx-execd (ETXTBSY) cannot be
     * overwritten, but it can be replaced. */
    sbx_autofree char *dst = sbx_xasprintf("%s/sbx-execd.new", d->remote_dir);
    sbx_autofree char *esc = sbx_rest_escape(dst);
    sbx_autofree char *what = sbx_xasprintf("/files/upload?path=%s", esc);
    sbx_autofree char *url = toolbox_url(d, sb, what);
    struct sbx_rest_resp resp;
    int r = sbx_rest_upload(&d->rest, url, "file", d->execd, &resp, err);
    if (r >= 0 && (resp.status < 200 || resp.status >= 300))
        r = sbx_rest_fail(&d->rest, &resp, "upload sbx-execd", err);
    sbx_rest_resp_dispose(&resp);
    if (r < 0)
        return sbx_error_wrap(err, "daytona toolbox");
    sbx_autofree char *ch =
        sbx_xasprintf("chmod 755 %s && mv -f %s %s/sbx-execd", dst, dst, d->remote_dir);
    return toolbox_run(d, sb, ch, err);
}

/* execd's token into <remote dir>/execd.token, through the toolbox's file upload: a body,
 * which no command line, process list or session log shows (the dir is 0700; launch_command
 * reads and removes the file). */
static int
upload_token(struct daytona *d, const struct sbx_record *sb, sbx_error **err)
{
    const char *token = priv_str(sb, "token");
    sbx_autofree char *dst = sbx_xasprintf("%s/execd.token", d->remote_dir);
    sbx_autofree char *esc = sbx_rest_escape(dst);
    sbx_autofree char *what = sbx_xasprintf("/files/upload?path=%s", esc);
    sbx_autofree char *url = toolbox_url(d, sb, what);
    struct sbx_rest_resp resp;
    struct sbx_rest_part part = {.name = "execd.token", .data = token, .len = strlen(token)};
    int r = sbx_rest_upload_data(&d->rest, url, "file", &part, &resp, err);
    if (r >= 0 && (resp.status < 200 || resp.status >= 300))
        r = sbx_rest_fail(&d->rest, &resp, "upload execd's token", err);
    sbx_rest_resp_dispose(&resp);
    if (r < 0)
        return sbx_error_wrap(err, "daytona toolbox");
    sbx_autofree char *ch = sbx_xasprintf("chmod 600 %s", dst);
    return toolbox_run(d, sb, ch, err);
}

static int
launch_execd(struct daytona *d, const struct sbx_record *sb, sbx_error **err)
{
    if (upload_token(d, sb, err) < 0)
        return -SBX_EIO;
    json_t *s = json_pack("{s:s}", "sessionId", SESSION_ID);
    /* A session left from before (the sandbox was not restarted) is fine: ignore its error. */
    sbx_autoerror sbx_error *ignored = NULL;
    (void)toolbox_post(d, sb, "/process/session", s, NULL, &ignored);
    sbx_autofree char *cmd = launch_command(d, sb);
    /* `runAsync` is the older name of `async`: send both */
    return toolbox_post(d, sb, "/process/session/" SESSION_ID "/exec",
                        json_pack("{s:s, s:b, s:b}", "command", cmd, "runAsync", 1, "async", 1),
                        NULL, err);
}

static int
wait_execd(struct daytona *d, const struct sbx_record *sb, sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)d->wait_ms;
    while (sbx_now_ms() < deadline) {
        if (ping_execd(d, sb) == 0)
            return 0;
        (void)usleep((useconds_t)d->poll_ms * 1000);
    }
    return sbx_error_set(err, SBX_ETIMEDOUT, 0,
                         "daytona: sbx-execd did not answer through the preview proxy within "
                         "%ld ms (its log: %s/execd.log in the sandbox)",
                         d->wait_ms, d->remote_dir);
}

static int
ensure_execd(struct daytona *d, const struct sbx_record *sb, sbx_error **err)
{
    if (ping_execd(d, sb) == 0)
        return 0;
    if (install_execd(d, sb, err) < 0 || launch_execd(d, sb, err) < 0)
        return -SBX_EIO;
    return wait_execd(d, sb, err);
}

/* ---- lifecycle ---- */

/* Poll the remote sandbox until its class is `want` (USABLE or STARTABLE). A startable one
 * is started once when want is USABLE; terminal states fail at once; transient ones wait
 * until the deadline. */
static int
wait_class(struct daytona *d, struct sbx_record *sb, enum sbx_state_class want, sbx_error **err)
{
    const char *rid = priv_str(sb, "remote_id");
    uint64_t deadline = sbx_now_ms() + (uint64_t)d->wait_ms;
    bool asked = false;
    sbx_autofree char *esc = sbx_rest_escape(rid);
    for (;;) {
        json_t *dto = NULL;
        if (get_remote(d, rid, &dto, err) < 0)
            return -SBX_EIO;
        char state[64];
        (void)snprintf(state, sizeof state, "%s", remote_state(dto));
        enum sbx_state_class c = sbx_daytona_classify(state);
        if (c == want)
            remember(d, sb, dto);
        json_decref(dto);
        if (c == want)
            return 0;
        if (c == SBX_CLASS_TERMINAL)
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "daytona sandbox %s is `%s`", rid, state);
        if (c != SBX_CLASS_TRANSIENT && !asked) {
            sbx_autofree char *path =
                sbx_xasprintf("/sandbox/%s/%s", esc, want == SBX_CLASS_USABLE ? "start" : "stop");
            sbx_autoerror sbx_error *aerr = NULL;
            /* a sandbox that moved on meanwhile answers 4xx: the next poll tells */
            (void)api(d, "POST", path, NULL, NULL, &aerr);
            asked = true;
        }
        if (sbx_now_ms() >= deadline)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0,
                                 "daytona sandbox %s is still `%s` after %ld ms", rid, state,
                                 d->wait_ms);
        (void)usleep((useconds_t)d->poll_ms * 1000);
    }
}

static int
dt_start(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct daytona *d = dt(p);
    if (!*priv_str(sb, "remote_id"))
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "sandbox `%s` has no daytona sandbox", sb->id);
    forget_previews(d, priv_str(sb, "remote_id"));
    if (wait_class(d, sb, SBX_CLASS_USABLE, err) < 0 || ensure_execd(d, sb, err) < 0)
        return sbx_error_wrap(err, "start sandbox `%s`", sb->id);
    if (json_is_true(json_object_get(sb->priv, "relabel"))) {
        if (relabel(d, sb, err) < 0)
            return sbx_error_wrap(err, "adopt sandbox `%s`", sb->id);
        (void)json_object_del(sb->priv, "relabel");
    }
    return 0;
}

/* Stop is not delete: Daytona keeps the sandbox's filesystem for the next start. */
static int
dt_stop(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct daytona *d = dt(p);
    if (!*priv_str(sb, "remote_id"))
        return 0;
    forget_previews(d, priv_str(sb, "remote_id"));
    if (wait_class(d, sb, SBX_CLASS_STARTABLE, err) < 0)
        return sbx_error_wrap(err, "stop sandbox `%s`", sb->id);
    return 0;
}

/* The remote id of a record whose create was cut short before it was stored: the label. */
static int
find_by_id_label(struct daytona *d, const struct sbx_record *sb, char **rid, sbx_error **err)
{
    json_t *q = json_pack("{s:s}", SBX_DAYTONA_LABEL_ID, sb->id);
    json_t *list = NULL;
    int r = list_by_labels(d, q, &list, err);
    json_decref(q);
    const char *id = json_string_value(json_object_get(json_array_get(list, 0), "id"));
    *rid = r >= 0 && id ? sbx_xstrdup(id) : NULL;
    json_decref(list);
    return r;
}

static int
dt_delete(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct daytona *d = dt(p);
    sbx_autofree char *rid =
        *priv_str(sb, "remote_id") ? sbx_xstrdup(priv_str(sb, "remote_id")) : NULL;
    if (!rid && find_by_id_label(d, sb, &rid, err) < 0)
        return sbx_error_wrap(err, "delete sandbox `%s`", sb->id);
    if (!rid)
        return 0;
    forget_previews(d, rid);
    json_t *dto = NULL;
    sbx_error *gerr = NULL;
    int r = get_remote(d, rid, &dto, &gerr);
    if (r < 0 && sbx_error_code(gerr) == SBX_ENOTFOUND) {
        sbx_error_clear(&gerr);
        return 0; /* gone already */
    }
    if (r < 0) {
        sbx_error_move(err, &gerr);
        return sbx_error_wrap(err, "delete sandbox `%s`", sb->id);
    }
    /* Adopted by a newer record (find-or-create relabels): that record owns it now. */
    const char *owner =
        json_string_value(json_object_get(json_object_get(dto, "labels"), SBX_DAYTONA_LABEL_ID));
    bool ours = !owner || strcmp(owner, sb->id) == 0;
    json_decref(dto);
    if (!ours)
        return 0;
    sbx_autofree char *esc = sbx_rest_escape(rid);
    sbx_autofree char *path = sbx_xasprintf("/sandbox/%s", esc);
    r = api(d, "DELETE", path, NULL, NULL, &gerr);
    if (r < 0 && sbx_error_code(gerr) != SBX_ENOTFOUND) {
        sbx_error_move(err, &gerr);
        return sbx_error_wrap(err, "delete sandbox `%s`", sb->id);
    }
    sbx_error_clear(&gerr);
    return 0;
}

static int
dt_status(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_status *out,
          sbx_error **err)
{
    struct daytona *d = dt(p);
    const char *rid = priv_str(sb, "remote_id");
    if (!*rid) {
        sbx_provider_status_set(out, "none", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    json_t *dto = NULL;
    sbx_error *gerr = NULL;
    if (get_remote(d, rid, &dto, &gerr) < 0) {
        if (sbx_error_code(gerr) == SBX_ENOTFOUND) {
            sbx_error_clear(&gerr);
            sbx_provider_status_set(out, "destroyed", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
            return 0;
        }
        sbx_error_move(err, &gerr);
        return -SBX_EIO;
    }
    const char *state = remote_state(dto);
    enum sbx_state_class c = sbx_daytona_classify(state);
    char reason[64];
    (void)snprintf(reason, sizeof reason, "DAYTONA_%s", state);
    for (char *q = reason; *q; q++)
        *q = (char)(*q >= 'a' && *q <= 'z' ? *q - 'a' + 'A' : *q);
    sbx_provider_status_set(out, state, c, reason);
    json_decref(dto);
    return 0;
}

static int
dt_reconcile(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
             sbx_error **err)
{
    return dt_status(p, sb, out, err);
}

static int
dt_connect(struct sbx_provider *p, const struct sbx_record *sb, int port, int *fd, sbx_error **err)
{
    struct daytona *d = dt(p);
    sbx_autofree char *url = NULL;
    sbx_autofree char *token = NULL;
    if (preview(d, priv_str(sb, "remote_id"), port, &url, &token, err) < 0 ||
        sbx_url_connect(url, 10000, d->ca_file, fd, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s` port %d", sb->id, port);
    return 0;
}

/* Host (the preview URL's authority), Daytona's preview token, and execd's own token. */
static json_t *
dt_proxy_headers(struct sbx_provider *p, const struct sbx_record *sb, int port)
{
    struct daytona *d = dt(p);
    sbx_autofree char *url = NULL;
    sbx_autofree char *token = NULL;
    if (cached_preview(d, priv_str(sb, "remote_id"), port, &url, &token) < 0)
        return NULL;
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    sbx_autofree char *host = sbx_xstrndup(auth, strcspn(auth, "/?#"));
    json_t *h = json_pack("{s:s, s:s, s:s}", "Host", host, "X-Daytona-Preview-Token", token,
                          "X-Daytona-Skip-Preview-Warning", "true");
    if (port == EXECD_PORT)
        (void)json_object_set_new(h, "X-EXECD-ACCESS-TOKEN", json_string(priv_str(sb, "token")));
    return h;
}

static void
free_data(struct daytona *d)
{
    for (size_t i = 0; i < d->npv; i++) {
        free(d->pv[i].url);
        free(d->pv[i].token);
    }
    free(d->pv);
    pthread_mutex_destroy(&d->mu);
    sbx_secret_value_free(d->key);
    sbx_secret_value_free(d->org);
    sbx_secret_value_free(d->target);
    sodium_free(d->auth_line);
    sodium_free(d->org_line);
    free(d->api_url);
    free(d->toolbox_url);
    free(d->execd);
    free(d->remote_dir);
    free(d->ca_file);
    free(d);
}

static void
dt_free(struct sbx_provider *p)
{
    free_data(dt(p));
    free(p);
}

static const struct sbx_provider_ops daytona_ops = {
    .create = dt_create,
    .start = dt_start,
    .stop = dt_stop,
    .pause = NULL, /* not every Daytona has pause; stop keeps the filesystem */
    .resume = NULL,
    .delete = dt_delete,
    .status = dt_status,
    .connect = dt_connect,
    .reconcile = dt_reconcile,
    .proxy_headers = dt_proxy_headers,
    .free = dt_free,
};

/* Read the credentials by name from the secret store (the only place they come from). */
static int
load_secrets(struct daytona *d, const struct settings *st, const struct sbx_provider_env *env,
             sbx_error **err)
{
    if (!env->secrets)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "provider `daytona`: no secret store");
    int r = sbx_srv_secret_lookup(env->secrets, st->key_secret, true, &d->key, NULL, err);
    if (r >= 0)
        r = sbx_srv_secret_lookup(env->secrets, st->org_secret, false, &d->org, NULL, err);
    if (r >= 0)
        r = sbx_srv_secret_lookup(env->secrets, st->target_secret, false, &d->target, NULL, err);
    if (r < 0)
        return r;
    d->auth_line = secure_line("Authorization: Bearer ", d->key);
    d->org_line = d->org ? secure_line("X-Daytona-Organization-ID: ", d->org) : NULL;
    if (!d->auth_line || (d->org && !d->org_line))
        return sbx_error_set(err, SBX_EGENERIC, 0, "provider `daytona`: out of secure memory");
    size_t h = 0;
    d->headers[h++] = d->auth_line;
    if (d->org_line)
        d->headers[h++] = d->org_line;
    d->headers[h] = NULL;
    size_t k = 0;
    d->redact[k++] = d->key;
    if (d->org)
        d->redact[k++] = d->org;
    d->redact[k] = NULL;
    return 0;
}

int
sbx_provider_daytona_new(const json_t *settings, const struct sbx_provider_env *env,
                         struct sbx_provider **out, sbx_error **err)
{
    struct settings st;
    if (read_settings(settings, &st, err) < 0)
        return -SBX_EINVAL;
    struct daytona *d = sbx_xcalloc(1, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    d->api_url =
        sbx_xstrndup(st.api_url, strlen(st.api_url) - (st.api_url[strlen(st.api_url) - 1] == '/'));
    d->toolbox_url = sbx_xstrdup(st.toolbox_url);
    d->execd = st.execd ? sbx_xstrdup(st.execd) : sbx_launch_default_execd(env->exe_dir);
    d->remote_dir = sbx_xstrdup(st.remote_dir);
    d->ca_file = st.ca_file ? sbx_xstrdup(st.ca_file) : NULL;
    d->auto_stop = st.auto_stop;
    d->wait_ms = st.wait_ms;
    d->poll_ms = st.poll_ms;
    int r = load_secrets(d, &st, env, err);
    if (r < 0) {
        free_data(d);
        return r;
    }
    d->rest = (struct sbx_rest){
        .headers = d->headers, .redact = d->redact, .timeout_ms = st.req_ms, .ca_file = d->ca_file};
    if (access(d->execd, R_OK) < 0)
        sbx_warn("provider `daytona`: `%s` is not readable; creates will fail until it is "
                 "(set providers.daytona.execd)",
                 d->execd);
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &daytona_ops;
    p->data = d;
    sbx_info("provider `daytona` ready (%s)", d->api_url);
    *out = p;
    return 0;
}
