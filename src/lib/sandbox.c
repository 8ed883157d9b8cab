/*
 * sandbox.c - lifecycle calls of libsbx: create, get, list, delete, pause, resume, stop, start,
 * renew.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/client_internal.h"

#define LIST_PAGE_SIZE 200

void
sbx_sandbox_free(sbx_sandbox *s)
{
    if (!s)
        return;
    free(s->id);
    free(s->state);
    free(s->reason);
    free(s->message);
    free(s->image);
    free(s->created_at);
    free(s->expires_at);
    for (size_t i = 0; i < s->n_entrypoint; i++)
        free(s->entrypoint[i]);
    free(s->entrypoint);
    for (size_t i = 0; i < s->n_metadata; i++) {
        free((char *)s->metadata[i].key);
        free((char *)s->metadata[i].value);
    }
    free(s->metadata);
    free(s->json);
    free(s);
}

void
sbx_sandbox_list_free(sbx_sandbox **list, size_t n)
{
    if (!list)
        return;
    for (size_t i = 0; i < n; i++)
        sbx_sandbox_free(list[i]);
    free(list);
}

/* Copy an optional string member; 0 or -1 on allocation failure. */
const char *
sbx_sandbox_id(const sbx_sandbox *s)
{
    return s ? s->id : NULL;
}

const char *
sbx_sandbox_state(const sbx_sandbox *s)
{
    return s ? s->state : NULL;
}

const char *
sbx_sandbox_reason(const sbx_sandbox *s)
{
    return s ? s->reason : NULL;
}

const char *
sbx_sandbox_message(const sbx_sandbox *s)
{
    return s ? s->message : NULL;
}

const char *
sbx_sandbox_image(const sbx_sandbox *s)
{
    return s ? s->image : NULL;
}

const char *
sbx_sandbox_created_at(const sbx_sandbox *s)
{
    return s ? s->created_at : NULL;
}

const char *
sbx_sandbox_expires_at(const sbx_sandbox *s)
{
    return s ? s->expires_at : NULL;
}

size_t
sbx_sandbox_entrypoint_count(const sbx_sandbox *s)
{
    return s ? s->n_entrypoint : 0;
}

const char *
sbx_sandbox_entrypoint(const sbx_sandbox *s, size_t i)
{
    return s && i < s->n_entrypoint ? s->entrypoint[i] : NULL;
}

size_t
sbx_sandbox_metadata_count(const sbx_sandbox *s)
{
    return s ? s->n_metadata : 0;
}

const char *
sbx_sandbox_metadata_key(const sbx_sandbox *s, size_t i)
{
    return s && i < s->n_metadata ? s->metadata[i].key : NULL;
}

const char *
sbx_sandbox_metadata_value(const sbx_sandbox *s, size_t i)
{
    return s && i < s->n_metadata ? s->metadata[i].value : NULL;
}

const char *
sbx_sandbox_metadata_get(const sbx_sandbox *s, const char *key)
{
    for (size_t i = 0; s && key && i < s->n_metadata; i++) {
        if (strcmp(s->metadata[i].key, key) == 0)
            return s->metadata[i].value;
    }
    return NULL;
}

const char *
sbx_sandbox_name(const sbx_sandbox *s)
{
    return sbx_sandbox_metadata_get(s, "sbx/name");
}

const char *
sbx_sandbox_json(const sbx_sandbox *s)
{
    return s ? s->json : NULL;
}

static int
dup_member(char **dst, json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    if (!v)
        return 0;
    *dst = strdup(v);
    return *dst ? 0 : -1;
}

static int
parse_entrypoint(sbx_sandbox *s, json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n == 0)
        return 0;
    s->entrypoint = calloc(n, sizeof *s->entrypoint);
    if (!s->entrypoint)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *v = json_string_value(json_array_get(arr, i));
        s->entrypoint[i] = strdup(v ? v : "");
        if (!s->entrypoint[i])
            return -1;
        s->n_entrypoint++;
    }
    return 0;
}

static int
parse_metadata(sbx_sandbox *s, json_t *obj)
{
    size_t n = json_object_size(obj);
    if (n == 0)
        return 0;
    s->metadata = calloc(n, sizeof *s->metadata);
    if (!s->metadata)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        char *key = strdup(k);
        char *val = strdup(json_is_string(v) ? json_string_value(v) : "");
        if (!key || !val) {
            free(key);
            free(val);
            return -1;
        }
        s->metadata[s->n_metadata].key = key;
        s->metadata[s->n_metadata].value = val;
        s->n_metadata++;
    }
    return 0;
}

static int
parse_sandbox(sbx_sandbox **out, sbx_client *c, json_t *j)
{
    if (!json_is_object(j) || !json_is_string(json_object_get(j, "id")))
        return client_fail(c, SBX_EIO, "server sent a sandbox without an id");
    sbx_sandbox *s = calloc(1, sizeof *s);
    if (!s)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    json_t *status = json_object_get(j, "status");
    int bad =
        dup_member(&s->id, j, "id") | dup_member(&s->state, status, "state") |
        dup_member(&s->reason, status, "reason") | dup_member(&s->message, status, "message") |
        dup_member(&s->image, json_object_get(j, "image"), "uri") |
        dup_member(&s->created_at, j, "createdAt") | dup_member(&s->expires_at, j, "expiresAt") |
        parse_entrypoint(s, json_object_get(j, "entrypoint")) |
        parse_metadata(s, json_object_get(j, "metadata"));
    if (!bad && !s->state)
        s->state = strdup("Unknown");
    s->json = json_dumps(j, JSON_COMPACT);
    if (bad || !s->state || !s->json) {
        sbx_sandbox_free(s);
        return client_fail(c, SBX_ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

static json_t *
kv_object(const sbx_kv *kv, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++) {
        if (!kv[i].key || !kv[i].value ||
            json_object_set_new(o, kv[i].key, json_string(kv[i].value)) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *
string_array(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (!v[i] || json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *
create_body(const sbx_create_options *o)
{
    static const char *const default_entry[] = {"tail", "-f", "/dev/null"};
    static const sbx_kv default_limits[] = {{"cpu", "1"}, {"memory", "2Gi"}};
    json_t *b = json_object();
    const char *snap = o->version >= 5 ? o->snapshot : NULL;
    json_t *image = snap ? json_null() : json_pack("{s:s}", "uri", o->image ? o->image : "host");
    json_t *entry = o->entrypoint ? string_array(o->entrypoint, o->n_entrypoint)
                    : snap        ? json_null() /* the server's default for a restore */
                                  : string_array(default_entry, 3);
    json_t *limits = o->resource_limits ? kv_object(o->resource_limits, o->n_resource_limits)
                                        : kv_object(default_limits, 2);
    int bad = !b || json_object_set_new(b, "image", image) < 0 ||
              json_object_set_new(b, "entrypoint", entry) < 0 ||
              json_object_set_new(b, "resourceLimits", limits) < 0 ||
              json_object_set_new(b, "env", kv_object(o->env, o->n_env)) < 0 ||
              json_object_set_new(b, "metadata", kv_object(o->metadata, o->n_metadata)) < 0 ||
              json_object_set_new(
                  b, "timeout", o->timeout_s > 0 ? json_integer(o->timeout_s) : json_null()) < 0 ||
              (snap && json_object_set_new(b, "snapshotId", json_string(snap)) < 0);
    const char *reuse = o->version >= 2 ? o->reuse_key : NULL;
    const char *desk = o->version >= 3 ? o->desktop : NULL;
    json_t *ext = json_object();
    if (!ext || (o->provider && json_object_set_new(ext, "provider", json_string(o->provider))) ||
        (reuse && json_object_set_new(ext, "reuseKey", json_string(reuse))) ||
        (desk && json_object_set_new(ext, "sbx.desktop", json_string(desk))))
        bad = 1;
    for (size_t i = 0; !bad && o->version >= 4 && i < o->n_extensions; i++) {
        const sbx_kv *kv = &o->extensions[i];
        if (kv->key && kv->value && json_object_set_new(ext, kv->key, json_string(kv->value)))
            bad = 1;
    }
    if (!bad && json_object_size(ext))
        bad = json_object_set(b, "extensions", ext);
    json_decref(ext);
    if (bad) {
        json_decref(b);
        return NULL;
    }
    return b;
}

void
sbx_create_options_init(sbx_create_options *o)
{
    if (o)
        *o = (sbx_create_options)SBX_CREATE_OPTIONS_INIT;
}

void
sbx_list_options_init(sbx_list_options *o)
{
    if (o)
        *o = (sbx_list_options)SBX_LIST_OPTIONS_INIT;
}

int
sbx_sandbox_create(sbx_sandbox **out, sbx_client *c, const sbx_create_options *opts)
{
    if (!out || !c || !opts || opts->version < 1 || opts->version > SBX_CREATE_OPTIONS_VERSION)
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    *out = NULL;
    if (opts->version >= 5 && opts->snapshot && opts->image)
        return client_fail(c, SBX_EINVAL, "give an image or a snapshot, not both");
    json_t *body = create_body(opts);
    if (!body)
        return client_fail(c, SBX_EINVAL, "invalid create options (NULL key or value?)");
    json_t *created = NULL;
    int ret = client_call(c, "POST", "/v1/sandboxes", body, &created);
    json_decref(body);
    if (ret < 0)
        return ret;
    /* The create answer lacks some fields (image); read the full object back. */
    const char *id = json_string_value(json_object_get(created, "id"));
    ret = id ? sbx_sandbox_get(out, c, id) : client_fail(c, SBX_EIO, "create answer has no id");
    json_decref(created);
    return ret;
}

/* "/v1/sandboxes/<escaped id><suffix>" */
static char *
sandbox_path(sbx_client *c, const char *id, const char *suffix)
{
    if (!id || !*id) {
        (void)client_fail(c, SBX_EINVAL, "empty sandbox id");
        return NULL;
    }
    char *eid = client_escape(c, id);
    if (!eid)
        return NULL;
    char *path = NULL;
    if (asprintf(&path, "/v1/sandboxes/%s%s", eid, suffix) < 0) {
        path = NULL;
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
    }
    curl_free(eid);
    return path;
}

int
sbx_sandbox_get(sbx_sandbox **out, sbx_client *c, const char *id)
{
    if (!out || !c)
        return -SBX_EINVAL;
    *out = NULL;
    char *path = sandbox_path(c, id, "");
    if (!path)
        return -SBX_EINVAL;
    json_t *j = NULL;
    int ret = client_call(c, "GET", path, NULL, &j);
    free(path);
    if (ret == 0)
        ret = parse_sandbox(out, c, j);
    json_decref(j);
    return ret;
}

static int
simple_call(sbx_client *c, const char *method, const char *id, const char *suffix)
{
    if (!c)
        return -SBX_EINVAL;
    char *path = sandbox_path(c, id, suffix);
    if (!path)
        return -SBX_EINVAL;
    int ret = client_call(c, method, path, NULL, NULL);
    free(path);
    return ret;
}

int
sbx_sandbox_delete(sbx_client *c, const char *id)
{
    return simple_call(c, "DELETE", id, "");
}

int
sbx_sandbox_pause(sbx_client *c, const char *id)
{
    return simple_call(c, "POST", id, "/pause");
}

int
sbx_sandbox_resume(sbx_client *c, const char *id)
{
    return simple_call(c, "POST", id, "/resume");
}

int
sbx_sandbox_stop(sbx_client *c, const char *id)
{
    return simple_call(c, "POST", id, "/stop");
}

int
sbx_sandbox_start(sbx_client *c, const char *id)
{
    return simple_call(c, "POST", id, "/start");
}

int
sbx_sandbox_renew(char **expires_at, sbx_client *c, const char *id, long seconds)
{
    if (!c || seconds <= 0)
        return c ? client_fail(c, SBX_EINVAL, "renew needs a positive duration") : -SBX_EINVAL;
    char when[64];
    time_t t = time(NULL) + seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char *path = sandbox_path(c, id, "/renew-expiration");
    if (!path)
        return -SBX_EINVAL;
    json_t *body = json_pack("{s:s}", "expiresAt", when);
    json_t *ans = NULL;
    int ret = body ? client_call(c, "POST", path, body, &ans) : -SBX_ENOMEM;
    free(path);
    json_decref(body);
    const char *got = json_string_value(json_object_get(ans, "expiresAt"));
    if (ret == 0 && expires_at) {
        *expires_at = client_strdup(c, got ? got : when);
        if (!*expires_at)
            ret = -SBX_ENOMEM;
    }
    json_decref(ans);
    return ret;
}

int
sbx_desktop_view(char **url, sbx_client *c, const char *id, long ttl_seconds)
{
    if (!c || !url || ttl_seconds < 0)
        return c ? client_fail(c, SBX_EINVAL, "desktop view needs a URL pointer and a ttl >= 0")
                 : -SBX_EINVAL;
    char *path = sandbox_path(c, id, "/desktop/view");
    if (!path)
        return -SBX_EINVAL;
    json_t *body =
        ttl_seconds ? json_pack("{s:I}", "ttlSeconds", (json_int_t)ttl_seconds) : json_object();
    json_t *ans = NULL;
    int ret = body ? client_call(c, "POST", path, body, &ans) : -SBX_ENOMEM;
    free(path);
    json_decref(body);
    const char *got = json_string_value(json_object_get(ans, "url"));
    if (ret == 0 && !got)
        ret = client_fail(c, SBX_EIO, "the server's answer has no `url`");
    if (ret == 0 && !(*url = client_strdup(c, got)))
        ret = -SBX_ENOMEM;
    json_decref(ans);
    return ret;
}

/* Build "?page=N&pageSize=M&state=..&metadata=<k=v&k2=v2 escaped>". */
static char *
list_query(sbx_client *c, const sbx_list_options *o, long page)
{
    struct client_buf q;
    client_buf_init(&q, 1 << 20);
    char head[64];
    int n = snprintf(head, sizeof head, "?page=%ld&pageSize=%d", page, LIST_PAGE_SIZE);
    (void)client_buf_append(&q, head, (size_t)n);
    for (size_t i = 0; o && i < o->n_states; i++) {
        char *e = client_escape(c, o->states[i]);
        if (e) {
            (void)client_buf_append(&q, "&state=", 7);
            (void)client_buf_append(&q, e, strlen(e));
        }
        curl_free(e);
    }
    struct client_buf md;
    client_buf_init(&md, 1 << 20);
    for (size_t i = 0; o && i < o->n_metadata; i++) {
        /* The server parses the decoded value again as a query string (COMPAT 1.5), so each
         * key and value is escaped once here and the whole once more below. */
        char *k = client_escape(c, o->metadata[i].key);
        char *v = client_escape(c, o->metadata[i].value);
        if (k && v) {
            if (md.len)
                (void)client_buf_append(&md, "&", 1);
            (void)client_buf_append(&md, k, strlen(k));
            (void)client_buf_append(&md, "=", 1);
            (void)client_buf_append(&md, v, strlen(v));
        }
        curl_free(k);
        curl_free(v);
    }
    if (md.len) {
        char *e = client_escape(c, md.data);
        if (e) {
            (void)client_buf_append(&q, "&metadata=", 10);
            (void)client_buf_append(&q, e, strlen(e));
        }
        curl_free(e);
    }
    client_buf_free(&md);
    if (q.overflow) {
        client_buf_free(&q);
        (void)client_fail(c, SBX_ENOMEM, "list query too large");
        return NULL;
    }
    return q.data;
}

static int
append_items(sbx_sandbox ***out, size_t *n, sbx_client *c, json_t *items)
{
    size_t add = json_array_size(items);
    if (add == 0)
        return 0;
    sbx_sandbox **grown = realloc(*out, (*n + add) * sizeof(sbx_sandbox *));
    if (!grown)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    *out = grown;
    for (size_t i = 0; i < add; i++) {
        int ret = parse_sandbox(&(*out)[*n], c, json_array_get(items, i));
        if (ret < 0)
            return ret;
        (*n)++;
    }
    return 0;
}

static int
list_page(sbx_sandbox ***out, size_t *n, int *more, sbx_client *c, const sbx_list_options *o,
          long page)
{
    char *query = list_query(c, o, page);
    if (!query)
        return -SBX_ENOMEM;
    char *path = NULL;
    int ret = asprintf(&path, "/v1/sandboxes%s", query) < 0 ? -SBX_ENOMEM : 0;
    free(query);
    json_t *ans = NULL;
    if (ret == 0)
        ret = client_call(c, "GET", path, NULL, &ans);
    free(path);
    if (ret == 0)
        ret = append_items(out, n, c, json_object_get(ans, "items"));
    json_t *pg = json_object_get(json_object_get(ans, "pagination"), "hasNextPage");
    *more = ret == 0 && json_is_true(pg);
    json_decref(ans);
    return ret;
}

int
sbx_sandbox_list(sbx_sandbox ***out, size_t *n, sbx_client *c, const sbx_list_options *opts)
{
    if (!out || !n || !c || (opts && opts->version != SBX_LIST_OPTIONS_VERSION))
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    *out = NULL;
    *n = 0;
    int more = 1;
    int ret = 0;
    /* A page limit guards against a server that always claims there is a next page. */
    for (long page = 1; ret == 0 && more && page <= 100000; page++)
        ret = list_page(out, n, &more, c, opts, page);
    if (ret < 0) {
        sbx_sandbox_list_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return ret;
}
