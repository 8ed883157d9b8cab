/*
 * api_secrets.c - the admin API of the secret store (sbx extension), behind the API key:
 *
 *   GET    /v1/admin/secrets          {"items": [{"name","createdAt","updatedAt"}]}
 *   GET    /v1/admin/secrets/{name}   {"name","createdAt","updatedAt"}
 *   PUT    /v1/admin/secrets/{name}   body {"value": "..."} -> 200 {"name","createdAt","updatedAt"}
 *   DELETE /v1/admin/secrets/{name}   204
 *
 * Security: a value only ever travels in a PUT body. It is never echoed, logged or put in an
 * error message (messages name the secret only); the request body and the parsed copy are
 * wiped once the value is stored (httpd.c wipes the body buffer when the request ends).
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "server/api.h"
#include "server/httpd.h"
#include "server/secretsrv.h"
#include "server/srvutil.h"

static json_t *
info_json(const struct sbx_secret_info *info)
{
    char c[32];
    char u[32];
    sbx_srv_format_time(info->created_ms, c);
    sbx_srv_format_time(info->updated_ms, u);
    return json_pack("{s:s, s:s, s:s}", "name", info->name, "createdAt", c, "updatedAt", u);
}

/* The name segment, or NULL with a 400 (a bad name is never echoed in full). */
static const char *
secret_name(struct sbx_req *r, struct sbx_reply *out)
{
    const char *name = r->route.secret;
    if (!sbx_secret_name_valid(name)) {
        sbx_reply_error(out, 400, "SECRET::INVALID_NAME",
                        "invalid secret name (letters, digits, _ . -; start with a letter or _; "
                        "at most %d characters)",
                        SBX_SECRET_NAME_MAX);
        return NULL;
    }
    return name;
}

/* Find name in the list: 0 and *info, or SBX_ENOTFOUND. */
static int
lookup_info(struct sbx_srv *srv, const char *name, struct sbx_secret_info *info, sbx_error **err)
{
    struct sbx_secret_info *items = NULL;
    size_t n = 0;
    int r = sbx_srv_secret_list(srv->secrets, &items, &n, err);
    if (r < 0)
        return r;
    r = sbx_error_set(err, SBX_ENOTFOUND, 0, "secret `%s` is not set", name);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(items[i].name, name) == 0) {
            *info = items[i];
            sbx_error_clear(err);
            r = 0;
            break;
        }
    }
    free(items);
    return r;
}

static void
h_list(struct sbx_req *r, struct sbx_reply *out)
{
    struct sbx_secret_info *items = NULL;
    size_t n = 0;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_srv_secret_list(r->srv->secrets, &items, &n, &err) < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        (void)json_array_append_new(arr, info_json(&items[i]));
    free(items);
    out->status = 200;
    out->body = json_pack("{s:o}", "items", arr);
}

static void
h_get(struct sbx_req *r, struct sbx_reply *out)
{
    const char *name = secret_name(r, out);
    struct sbx_secret_info info = {0};
    sbx_autoerror sbx_error *err = NULL;
    if (!name)
        return;
    if (lookup_info(r->srv, name, &info, &err) < 0) {
        sbx_reply_from(out, err, sbx_error_code(err) == SBX_ENOTFOUND ? "SECRET::NOT_FOUND" : NULL);
        return;
    }
    out->status = 200;
    out->body = info_json(&info);
}

/* Wipe a parsed JSON string in place (jansson owns the buffer; it is freed right after). */
static void
wipe_string(json_t *v)
{
    if (json_is_string(v))
        sodium_memzero((char *)json_string_value(v), json_string_length(v));
}

static void
store_value(struct sbx_req *r, const char *name, json_t *value, struct sbx_reply *out)
{
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_secret_info info = {0};
    if (!json_is_string(value) || json_string_length(value) == 0 ||
        json_string_length(value) > SBX_SECRET_VALUE_MAX) {
        sbx_reply_error(out, 400, "SECRET::INVALID_VALUE",
                        "the body must be {\"value\": a non-empty string of at most %u bytes}",
                        SBX_SECRET_VALUE_MAX);
        return;
    }
    int rc = sbx_srv_secret_set(r->srv->secrets, name, json_string_value(value),
                                json_string_length(value), &err);
    if (rc >= 0)
        rc = lookup_info(r->srv, name, &info, &err);
    if (rc < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    out->status = 200;
    out->body = info_json(&info);
}

static void
h_set(struct sbx_req *r, struct sbx_reply *out)
{
    const char *name = secret_name(r, out);
    if (!name)
        return;
    json_error_t jerr;
    json_t *body = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &jerr);
    if (!json_is_object(body)) {
        /* jansson's message may quote the input: not repeated here */
        sbx_reply_error(out, 400, "SECRET::INVALID_VALUE",
                        "the body must be a JSON object {\"value\": \"...\"}");
        json_decref(body);
        return;
    }
    json_t *value = json_object_get(body, "value");
    store_value(r, name, value, out);
    wipe_string(value);
    json_decref(body);
}

static void
h_delete(struct sbx_req *r, struct sbx_reply *out)
{
    const char *name = secret_name(r, out);
    sbx_autoerror sbx_error *err = NULL;
    if (!name)
        return;
    if (sbx_srv_secret_remove(r->srv->secrets, name, &err) < 0) {
        sbx_reply_from(out, err, sbx_error_code(err) == SBX_ENOTFOUND ? "SECRET::NOT_FOUND" : NULL);
        return;
    }
    out->status = 204;
}

void
sbx_api_secrets(struct sbx_req *r, struct sbx_reply *out)
{
    enum sbx_route_id id = r->route.id;
    if (id == SBX_ROUTE_SECRET_LIST)
        h_list(r, out);
    else if (id == SBX_ROUTE_SECRET_GET)
        h_get(r, out);
    else if (id == SBX_ROUTE_SECRET_SET)
        h_set(r, out);
    else
        h_delete(r, out);
}
