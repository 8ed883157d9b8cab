/*
 * api.c - the OpenSandbox lifecycle API on top of the manager (JSON in, JSON out).
 *
 * Field names, statuses and error codes follow COMPAT.md (the reference server's observed
 * behaviour); unknown request fields are ignored.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/desktop.h"
#include "egress/policy.h"
#include "server/api.h"
#include "server/api_diag.h"
#include "server/api_fields.h"
#include "server/console.h"
#include "server/desktop_view.h"
#include "server/httpd.h"
#include "server/meta.h"
#include "server/pool.h"
#include "server/publish.h"
#include "server/snapshot.h"
#include "server/srvutil.h"

#define PAGE_SIZE_MAX 200

/* ---- Sandbox -> JSON ---- */

static void
set_time(json_t *o, const char *key, int64_t ms)
{
    char ts[32];
    sbx_srv_format_time(ms, ts);
    (void)json_object_set_new(o, key, json_string(ts));
}

static json_t *
status_json(const struct sbx_record *sb)
{
    json_t *st = json_pack("{s:s}", "state", sb->state);
    if (sb->reason[0])
        (void)json_object_set_new(st, "reason", json_string(sb->reason));
    if (sb->message)
        (void)json_object_set_new(st, "message", json_string(sb->message));
    set_time(st, "lastTransitionAt", sb->last_transition_ms);
    return st;
}

/* Sandbox (full = GET/list/PATCH, else CreateSandboxResponse without image). */
json_t *
sbx_api_sandbox_json(const struct sbx_record *sb, bool full)
{
    json_t *o =
        json_pack("{s:s, s:o, s:O, s:O, s:s}", "id", sb->id, "status", status_json(sb),
                  "entrypoint", sb->entrypoint, "metadata", sb->metadata, "provider", sb->provider);
    set_time(o, "createdAt", sb->created_ms);
    if (sb->expires_ms)
        set_time(o, "expiresAt", sb->expires_ms);
    const char *snap = json_string_value(json_object_get(sb->priv, SBX_SNAPSHOT_PRIV));
    if (full && snap)
        (void)json_object_set_new(o, "snapshotId", json_string(snap));
    else if (full && sb->image) {
        /* image.auth holds registry credentials: used by the provider's pull, never shown. */
        json_t *image = json_copy(sb->image);
        (void)json_object_del(image, "auth");
        (void)json_object_set_new(o, "image", image);
    }
    if (json_object_size(sb->extensions))
        (void)json_object_set(o, "extensions", sb->extensions);
    return o;
}

/* ---- helpers ---- */

static int
parse_body(struct sbx_req *r, struct sbx_reply *out, json_t **body)
{
    json_error_t jerr;
    *body = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &jerr);
    if (!*body) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "invalid JSON body: %s", jerr.text);
        return -1;
    }
    return 0;
}

/* The sandbox id path segment: anything but a uuid cannot name a sandbox. */
static const char *
sandbox_id(struct sbx_req *r, struct sbx_reply *out)
{
    if (!sbx_srv_is_uuid(r->route.sandbox_id)) {
        sbx_reply_error(out, 404, "SANDBOX::SANDBOX_NOT_FOUND", "sandbox `%.64s` not found",
                        r->route.sandbox_id);
        return NULL;
    }
    return r->route.sandbox_id;
}

static bool
string_map(const json_t *v, bool allow_null_values)
{
    if (!json_is_object(v))
        return false;
    const char *k = NULL;
    json_t *x = NULL;
    json_object_foreach ((json_t *)v, k, x) {
        if (!json_is_string(x) && !(allow_null_values && json_is_null(x)))
            return false;
    }
    return true;
}

/* ---- create ---- */

static int
check_entrypoint(const json_t *ep, struct sbx_reply *out)
{
    bool ok = json_is_array(ep) && json_array_size(ep) >= 1;
    for (size_t i = 0; ok && i < json_array_size(ep); i++)
        ok = json_is_string(json_array_get(ep, i));
    if (!ok) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_ENTRYPOINT",
                        "`entrypoint` must be a non-empty array of strings");
        return -1;
    }
    return 0;
}

static int
check_image(const json_t *body, struct sbx_reply *out)
{
    json_t *image = json_object_get(body, "image");
    json_t *uri = json_object_get(image, "uri");
    if (!json_is_object(image) || !json_is_string(uri) || json_string_length(uri) == 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`image` must be an object with a non-empty string `uri`");
        return -1;
    }
    return 0;
}

static int
check_timeout(struct sbx_srv *srv, const json_t *t, int64_t *secs, struct sbx_reply *out)
{
    *secs = 0;
    if (!t || json_is_null(t))
        return 0;
    int64_t max = srv->cfg->max_timeout_s;
    if (!json_is_integer(t) || json_integer_value(t) < 60 || json_integer_value(t) > max) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`timeout` must be null or an integer of seconds in [60, %lld]",
                        (long long)max);
        return -1;
    }
    *secs = json_integer_value(t);
    return 0;
}

static bool
dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* A JSON string without embedded NULs (C would see a shorter string than the client sent). */
static const char *
clean_string(const json_t *v)
{
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

/* True when path (absolute or relative) has a `..` component. */
static bool
has_dotdot(const char *path)
{
    for (const char *p = path; (p = strstr(p, "..")); p += 2) {
        if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    }
    return false;
}

/* Mount points the runtime itself fills: a volume there would hide or redirect them. */
static bool
reserved_mount_path(const char *mp)
{
    static const char *const reserved[] = {"/proc", "/sys", "/dev", "/.sbx"};
    if (strcmp(mp, "/") == 0)
        return true; /* the root itself */
    for (size_t i = 0; i < SBX_ARRAY_SIZE(reserved); i++) {
        size_t n = strlen(reserved[i]);
        if (strncmp(mp, reserved[i], n) == 0 && (mp[n] == '\0' || mp[n] == '/'))
            return true;
    }
    return false;
}

struct vol_check {
    const char *code;
    const char *why;
};

static bool
vol_bad(struct vol_check *c, const char *code, const char *why)
{
    c->code = code;
    c->why = why;
    return false;
}

/* An absolute path in one spelling only: no `.` or `..` components, no `//`, no trailing `/`
 * (so prefix checks on it mean what they say). */
static bool
normalized_abs(const char *path)
{
    size_t n = strlen(path);
    return path[0] == '/' && !has_dotdot(path) && !strstr(path, "//") && !strstr(path, "/./") &&
           !(n > 1 && (path[n - 1] == '/' || strcmp(path + n - 2, "/.") == 0));
}

/* host: {"path": absolute, normalized}. Whether it may be mounted is the provider's call. */
static bool
check_host_backend(const json_t *h, struct vol_check *c)
{
    const char *path = clean_string(json_object_get(h, "path"));
    if (!json_is_object(h) || !path || !normalized_abs(path))
        return vol_bad(c, "VOLUME::INVALID_HOST_PATH",
                       "`host.path` must be an absolute, normalized path (no `.`, `..`, `//` "
                       "or trailing `/`)");
    return true;
}

static bool
check_pvc_backend(const json_t *pvc, struct vol_check *c)
{
    const char *claim = clean_string(json_object_get(pvc, "claimName"));
    if (!json_is_object(pvc) || !claim || !dns_label(claim))
        return vol_bad(c, "VOLUME::INVALID_PVC_NAME",
                       "`pvc.claimName` must be a DNS label ([a-z0-9-], at most 63)");
    static const char *const flags[] = {"createIfNotExists", "deleteOnSandboxTermination"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(flags); i++) {
        json_t *f = json_object_get(pvc, flags[i]);
        if (f && !json_is_null(f) && !json_is_boolean(f))
            return vol_bad(c, "SANDBOX::INVALID_PARAMETER", "a `pvc` flag is not a boolean");
    }
    return true;
}

/* COMPAT §1.4 Volume, checked the same way for every provider (codes as the reference
 * server's VOLUME::*); what a provider can and may mount is its own check (check_create). */
static bool
check_volume(const json_t *v, json_t *names, json_t *paths, struct vol_check *c)
{
    const char *name = clean_string(json_object_get(v, "name"));
    const char *mp = clean_string(json_object_get(v, "mountPath"));
    json_t *ro = json_object_get(v, "readOnly");
    json_t *sub = json_object_get(v, "subPath");
    const char *subs = clean_string(sub);
    json_t *host = json_object_get(v, "host");
    json_t *pvc = json_object_get(v, "pvc");
    int kinds = !!host + !!pvc + !!json_object_get(v, "ossfs");
    if (!json_is_object(v))
        return vol_bad(c, "SANDBOX::INVALID_PARAMETER", "must be an object");
    if (!name || !dns_label(name))
        return vol_bad(c, "VOLUME::INVALID_NAME", "`name` must be a DNS label ([a-z0-9-])");
    if (json_object_get(names, name))
        return vol_bad(c, "VOLUME::DUPLICATE_NAME", "`name` is used by another volume");
    if (!mp || !normalized_abs(mp))
        return vol_bad(c, "VOLUME::INVALID_MOUNT_PATH",
                       "`mountPath` must be an absolute, normalized path (no `.`, `..`, `//` "
                       "or trailing `/`)");
    if (reserved_mount_path(mp))
        return vol_bad(c, "VOLUME::INVALID_MOUNT_PATH",
                       "`mountPath` may not be `/`, /proc, /sys, /dev or /.sbx");
    if (json_object_get(paths, mp))
        return vol_bad(c, "VOLUME::INVALID_MOUNT_PATH", "`mountPath` is used by another volume");
    if (ro && !json_is_null(ro) && !json_is_boolean(ro))
        return vol_bad(c, "SANDBOX::INVALID_PARAMETER", "`readOnly` must be a boolean");
    if (sub && !json_is_null(sub) && (!subs || subs[0] == '/' || has_dotdot(subs)))
        return vol_bad(c, "VOLUME::INVALID_SUB_PATH",
                       "`subPath` must be a relative path without `..`");
    if (kinds != 1)
        return vol_bad(c, "VOLUME::INVALID_BACKEND",
                       "exactly one of `host`, `pvc`, `ossfs` is required");
    if ((host && !check_host_backend(host, c)) || (pvc && !check_pvc_backend(pvc, c)))
        return false;
    (void)json_object_set_new(names, name, json_true());
    (void)json_object_set_new(paths, mp, json_true());
    return true;
}

#define MAX_VOLUMES 48

static int
check_volumes(const json_t *vols, struct sbx_reply *out)
{
    if (!vols || json_is_null(vols))
        return 0;
    if (!json_is_array(vols) || json_array_size(vols) > MAX_VOLUMES) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`volumes` must be an array of at most %d volumes", MAX_VOLUMES);
        return -1;
    }
    json_t *names = json_object();
    json_t *paths = json_object();
    struct vol_check c = {0};
    size_t i = 0;
    while (i < json_array_size(vols) && check_volume(json_array_get(vols, i), names, paths, &c))
        i++;
    json_decref(names);
    json_decref(paths);
    if (c.code) {
        sbx_reply_error(out, 400, c.code, "volumes[%zu]: %s", i, c.why);
        return -1;
    }
    return 0;
}

static int
check_maps(const json_t *body, struct sbx_reply *out)
{
    static const char *const keys[] = {"env", "resourceLimits", "extensions"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(keys); i++) {
        json_t *v = json_object_get(body, keys[i]);
        if (v && !json_is_null(v) && !string_map(v, i == 0)) {
            sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                            "`%s` must be an object of strings", keys[i]);
            return -1;
        }
    }
    json_t *meta = json_object_get(body, "metadata");
    sbx_autoerror sbx_error *err = NULL;
    if (meta && !json_is_null(meta) && sbx_meta_validate(meta, &err) < 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_METADATA_LABEL", "%s", sbx_error_msg(err));
        return -1;
    }
    return 0;
}

/* The provider extension: top-level `provider` or `extensions.provider`; unnamed = default.
 * Returns the canonical name (never builds a provider: a lazy one is built by the create). */
static const char *
pick_provider(struct sbx_srv *srv, const json_t *body, struct sbx_reply *out)
{
    json_t *p = json_object_get(body, "provider");
    if (!p || json_is_null(p))
        p = json_object_get(json_object_get(body, "extensions"), "provider");
    if (p && !json_is_string(p)) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "`provider` must be a string");
        return NULL;
    }
    const char *name = json_string_value(p);
    const char *prov = sbx_registry_resolve(srv->reg, name);
    if (!prov)
        sbx_reply_error(out, 400, "SANDBOX::UNSUPPORTED_PROVIDER",
                        "provider `%.64s` is not supported by this server (supported: %s)",
                        name ? name : "", sbx_registry_names(srv->reg));
    return prov;
}

/* networkPolicy, checked for every provider (a bad policy is a 400 naming what is wrong,
 * whether or not the provider could enforce a good one). */
static int
check_network_policy(const json_t *body, struct sbx_reply *out)
{
    json_t *np = json_object_get(body, "networkPolicy");
    struct sbx_egress_policy *p = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (!np || json_is_null(np))
        return 0;
    if (sbx_egress_policy_parse(np, &p, &err) < 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "networkPolicy: %s",
                        sbx_error_msg(err));
        return -1;
    }
    sbx_egress_policy_free(p);
    return 0;
}

/* extensions.reuseKey (find-or-create): 1-128 characters of [A-Za-z0-9._:/@=+-]. */
static int
check_reuse_key(const json_t *body, struct sbx_reply *out)
{
    json_t *k = json_object_get(json_object_get(body, "extensions"), SBX_REUSE_KEY_EXT);
    if (k && !sbx_reuse_key_valid(json_string_value(k))) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`extensions.%s` must be 1-%d characters of [A-Za-z0-9._:/@=+-]",
                        SBX_REUSE_KEY_EXT, SBX_REUSE_KEY_MAX);
        return -1;
    }
    return 0;
}

/* extensions["sbx.desktop"]: "true" or WxH[xD][,wm=openbox|none] (what sbx-execd --desktop
 * takes; the parser admits digits, x, and those words only, so it is safe in a command). */
static int
check_desktop(const json_t *body, struct sbx_reply *out)
{
    json_t *v = json_object_get(json_object_get(body, "extensions"), SBX_DESKTOP_EXT);
    struct sbx_desktop_opts o = {0};
    sbx_autoerror sbx_error *err = NULL;
    if (v && sbx_desktop_parse_spec(json_string_value(v), &o, &err) < 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "`extensions.%s`: %s",
                        SBX_DESKTOP_EXT, sbx_error_msg(err));
        return -1;
    }
    return 0;
}

/* extensions["sbx.publish"]: "PORT[:HOSTPORT][,...]" (publish.c binds them). */
static int
check_publish(const json_t *body, struct sbx_reply *out)
{
    json_t *v = json_object_get(json_object_get(body, "extensions"), SBX_PUBLISH_EXT);
    struct sbx_publish_spec spec;
    sbx_autoerror sbx_error *err = NULL;
    if (v && sbx_publish_parse(json_string_value(v), &spec, &err) < 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "`extensions.%s`: %s",
                        SBX_PUBLISH_EXT, sbx_error_msg(err));
        return -1;
    }
    return 0;
}

/* The provider's own check of the request (e.g. native: may these host paths be mounted).
 * A lazy provider not built yet is built here (the create builds it on this thread right
 * after anyway, sbx_mgr_create), so its first create is checked like every other; a build
 * that fails is left to the create, which answers its error. */
static int
check_create(struct sbx_srv *srv, const char *name, const json_t *body, struct sbx_reply *out)
{
    struct sbx_provider *prov = sbx_registry_peek(srv->reg, name);
    const char *code = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (!prov && sbx_registry_acquire(srv->reg, name, &prov, &err) < 0) {
        sbx_error_clear(&err);
        prov = NULL;
    }
    if (prov && prov->ops->check_create && prov->ops->check_create(prov, body, &code, &err) < 0) {
        sbx_reply_error(out, 400, code ? code : "SANDBOX::INVALID_PARAMETER", "%s",
                        sbx_error_msg(err));
        return -1;
    }
    return 0;
}

static json_t *
copy_or(const json_t *body, const char *key, json_t *fallback)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return fallback;
    json_decref(fallback);
    return json_deep_copy(v);
}

/* resourceLimits.memory when the create gives none (limits.sandbox_memory): no sandbox is
 * without a memory limit unless the operator says so ("0"). */
static void
default_limits(struct sbx_record *sb, const struct sbx_server_config *cfg)
{
    uint64_t bytes = 0;
    if (!cfg->sandbox_memory || sbx_parse_size(cfg->sandbox_memory, &bytes, NULL) < 0 ||
        bytes == 0 || json_object_get(sb->limits, "memory"))
        return;
    if (!json_is_object(sb->limits)) {
        json_decref(sb->limits);
        sb->limits = json_object();
    }
    (void)json_object_set_new(sb->limits, "memory", json_string(cfg->sandbox_memory));
}

static struct sbx_record *
build_record(const json_t *body, const char *prov, int64_t timeout_s)
{
    struct sbx_record *sb = sbx_record_new();
    sbx_srv_uuid4(sb->id);
    (void)snprintf(sb->provider, sizeof sb->provider, "%s", prov);
    sb->created_ms = sbx_wall_ms();
    sb->expires_ms = timeout_s ? sb->created_ms + timeout_s * 1000 : 0;
    sb->image = json_deep_copy(json_object_get(body, "image"));
    sb->entrypoint = copy_or(body, "entrypoint", sb->entrypoint);
    sb->env = copy_or(body, "env", sb->env);
    sb->metadata = copy_or(body, "metadata", sb->metadata);
    sb->limits = copy_or(body, "resourceLimits", sb->limits);
    sb->extensions = copy_or(body, "extensions", sb->extensions);
    if (json_is_true(json_object_get(body, "secureAccess"))) {
        char token[65];
        sbx_srv_random_hex(token, 32);
        (void)json_object_set_new(sb->priv, SBX_ACCESS_TOKEN_PRIV, json_string(token));
    }
    json_t *snap = json_object_get(body, "snapshotId");
    if (json_is_string(snap))
        (void)json_object_set(sb->priv, SBX_SNAPSHOT_PRIV, snap);
    /* the policy in its normalized form (checked above), and the egress API's token */
    json_t *np = json_object_get(body, "networkPolicy");
    struct sbx_egress_policy *pol = NULL;
    if (np && !json_is_null(np) && sbx_egress_policy_parse(np, &pol, NULL) == 0) {
        char token[65];
        sbx_srv_random_hex(token, 32);
        (void)json_object_set_new(
            sb->priv, SBX_EGRESS_PRIV,
            json_pack("{s:o, s:s}", "policy", sbx_egress_policy_json(pol), "token", token));
        sbx_egress_policy_free(pol);
        /* checked by api_fields.c: only with a provider that has the capability */
        if (json_is_true(json_object_get(json_object_get(body, "credentialProxy"), "enabled")))
            (void)json_object_set_new(json_object_get(sb->priv, SBX_EGRESS_PRIV), "credentialProxy",
                                      json_true());
    }
    /* for a provider with a scheduler (SBX_CAP_RESOURCE_REQUESTS, checked above) */
    json_t *rr = json_object_get(body, "resourceRequests");
    if (json_object_size(rr) > 0)
        (void)json_object_set_new(sb->priv, SBX_REQUESTS_PRIV, json_deep_copy(rr));
    json_t *vols = json_object_get(body, "volumes");
    if (json_array_size(vols) > 0) /* the provider mounts them (checked above) */
        (void)json_object_set_new(sb->priv, "volumes", json_deep_copy(vols));
    /* null env values are tolerated and skipped (like the reference server) */
    const char *k = NULL;
    json_t *v = NULL;
    void *tmp = NULL;
    json_object_foreach_safe(sb->env, tmp, k, v)
    {
        if (json_is_null(v))
            (void)json_object_del(sb->env, k);
    }
    return sb;
}

/* The answer to a failed create. `done` is the record when one was made (its start failed),
 * NULL when nothing was recorded (the provider could not be built, limits). */
void
sbx_api_create_failed(struct sbx_reply *out, const sbx_error *err, const struct sbx_record *done)
{
    int code = sbx_error_code(err);
    if (code == SBX_ENOTFOUND) {
        /* Something the request named does not exist (an image not in the store). */
        sbx_reply_from(out, err, "SANDBOX::INVALID_PARAMETER");
        out->status = 400;
    } else if (!done && code == SBX_EUNAVAIL) {
        /* The provider could not be built (its secret is not set): the message says which
         * secret and how to set it; retrying after that works without a restart. */
        sbx_reply_from(out, err, "SANDBOX::PROVIDER_UNAVAILABLE");
    } else if ((!done && code == SBX_ETIMEDOUT) || code == SBX_ELIMIT || code == SBX_EINVAL ||
               (!done && code == SBX_EEXISTS)) {
        /* limits, bad values, find-or-create waiting for a sandbox that stayed transient, a
         * name in use (409 SANDBOX::ALREADY_EXISTS) */
        sbx_reply_from(out, err, NULL);
    } else {
        sbx_reply_from(out, err, "SANDBOX::SANDBOX_START_FAILED");
        out->status = 500;
    }
}

/* A create from a snapshot runs the snapshot's image (snapshot.c); the entrypoint defaults to
 * `tail -f /dev/null` as in the reference server (COMPAT.md 1.4). Returns the body to create
 * with (a new reference), or NULL with the error reply. */
static json_t *
restore_body(struct sbx_req *r, json_t *body, struct sbx_reply *out)
{
    json_t *snap = json_object_get(body, "snapshotId");
    json_t *image = json_object_get(body, "image");
    if (!snap || json_is_null(snap))
        return json_incref(body);
    if (image && !json_is_null(image)) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "Exactly one of image or snapshotId must be provided.");
        return NULL;
    }
    if (!json_is_string(snap) || !sbx_srv_is_uuid(json_string_value(snap))) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`snapshotId` must be the id of a snapshot");
        return NULL;
    }
    sbx_autoerror sbx_error *err = NULL;
    sbx_autofree char *name = NULL;
    if (sbx_snaps_image(r->srv->snaps, json_string_value(snap), &name, &err) < 0) {
        sbx_reply_from(out, err, NULL);
        if (sbx_error_code(err) == SBX_ENOTFOUND)
            out->status = 400;
        return NULL;
    }
    json_t *b = json_deep_copy(body);
    (void)json_object_set_new(b, "image", json_pack("{s:s}", "uri", name));
    json_t *ep = json_object_get(b, "entrypoint");
    if (!ep || json_is_null(ep))
        (void)json_object_set_new(b, "entrypoint", json_pack("[s,s,s]", "tail", "-f", "/dev/null"));
    return b;
}

int
sbx_api_build_create(struct sbx_srv *srv, const json_t *body, struct sbx_record **out,
                     struct sbx_reply *rep)
{
    int64_t timeout_s = 0;
    if (!json_is_object(body)) {
        sbx_reply_error(rep, 400, "SANDBOX::INVALID_PARAMETER", "body must be a JSON object");
        return -1;
    }
    const char *prov = pick_provider(srv, body, rep);
    if (!prov || check_image(body, rep) < 0 ||
        check_entrypoint(json_object_get(body, "entrypoint"), rep) < 0 ||
        check_timeout(srv, json_object_get(body, "timeout"), &timeout_s, rep) < 0 ||
        check_maps(body, rep) < 0 || check_volumes(json_object_get(body, "volumes"), rep) < 0 ||
        check_reuse_key(body, rep) < 0 || check_desktop(body, rep) < 0 ||
        check_publish(body, rep) < 0 || check_network_policy(body, rep) < 0 ||
        sbx_api_check_fields(sbx_registry_factory(srv->reg, prov), body, rep) < 0 ||
        check_create(srv, prov, body, rep) < 0)
        return -1;
    *out = build_record(body, prov, timeout_s);
    default_limits(*out, srv->cfg);
    return 0;
}

static void
do_create(struct sbx_req *r, const json_t *body, struct sbx_reply *out)
{
    struct sbx_record *sb = NULL;
    if (sbx_api_build_create(r->srv, body, &sb, out) < 0)
        return;
    struct sbx_record *done = NULL;
    sbx_autoerror sbx_error *err = NULL;
    /* Published ports are bound before the record is made, so it keeps their host ports. */
    struct sbx_publish_bound pub;
    char id[SBX_UUID_LEN + 1];
    (void)snprintf(id, sizeof id, "%s", sb->id);
    if (sbx_publish_bind(r->srv, sb, &pub, &err) < 0) {
        sbx_record_free(sb);
        sbx_reply_from(out, err,
                       sbx_error_code(err) == SBX_ECONFLICT ? "SANDBOX::PORT_IN_USE" : NULL);
        return;
    }
    if (sbx_mgr_create(r->srv->mgr, sb, &done, &err) < 0) {
        sbx_api_create_failed(out, err, done);
    } else {
        out->status = 202;
        out->body = sbx_api_sandbox_json(done, false);
    }
    /* Served while the sandbox exists (a failed one too, until its delete); not for a
     * find-or-create that found another sandbox. */
    if (done && strcmp(done->id, id) == 0)
        sbx_publish_commit(r->srv, id, &pub);
    else
        sbx_publish_abort(&pub);
    sbx_record_free(done);
}

static void
h_create(struct sbx_req *r, struct sbx_reply *out)
{
    json_t *body = NULL;
    if (parse_body(r, out, &body) < 0)
        return;
    json_t *pool = json_object_get(json_object_get(body, "extensions"), SBX_POOL_REF_EXT);
    if (pool && !json_is_null(pool)) { /* a sandbox of a pool (api_pools.c) */
        sbx_api_pool_sandbox(r, body, out);
        json_decref(body);
        return;
    }
    json_t *b = json_is_object(body) ? restore_body(r, body, out) : json_incref(body);
    if (b)
        do_create(r, b, out);
    json_decref(b);
    json_decref(body);
}

/* ---- list ---- */

struct list_q {
    json_t *states; /* array of lowercase names */
    json_t *meta;   /* filter object */
    int64_t page;
    int64_t page_size;
    const char *bad; /* first bad parameter */
    sbx_error *err;
};

static void
q_state(const char *v, void *ud)
{
    struct list_q *q = ud;
    if (!v) {
        q->bad = "state";
        return;
    }
    (void)json_array_append_new(q->states, json_string(v));
}

static void
q_meta(const char *v, void *ud)
{
    struct list_q *q = ud;
    json_t *f = NULL;
    if (!v || sbx_meta_filter_parse(v, &f, &q->err) < 0) {
        q->bad = "metadata";
        return;
    }
    sbx_merge_patch(q->meta, f);
    json_decref(f);
}

static void
q_int(const char *v, int64_t *dst, const char *name, struct list_q *q)
{
    if (!v || sbx_parse_i64(v, dst, NULL) < 0 || *dst < 1 ||
        (strcmp(name, "pageSize") == 0 && *dst > PAGE_SIZE_MAX))
        q->bad = name;
}

static void
q_page(const char *v, void *ud)
{
    struct list_q *q = ud;
    q_int(v, &q->page, "page", q);
}

static void
q_page_size(const char *v, void *ud)
{
    struct list_q *q = ud;
    q_int(v, &q->page_size, "pageSize", q);
}

static bool
state_matches(const json_t *states, const char *state)
{
    if (json_array_size(states) == 0)
        return true;
    for (size_t i = 0; i < json_array_size(states); i++) {
        if (strcasecmp(json_string_value(json_array_get(states, i)), state) == 0)
            return true;
    }
    return false;
}

/* The filters (warm sandboxes of pools are no one's yet: the manager never lists them, its
 * opts.unlisted, api.md "Pools"). */
static bool
list_match(const struct sbx_record *sb, void *ud)
{
    const struct list_q *q = ud;
    return state_matches(q->states, sb->state) && sbx_meta_matches(sb->metadata, q->meta);
}

static json_t *
list_json(struct sbx_req *r, const struct list_q *q)
{
    size_t start = ((size_t)q->page - 1) * (size_t)q->page_size;
    if (q->page > 1 && start / (size_t)q->page_size != (size_t)q->page - 1)
        start = SIZE_MAX; /* overflow: a page past any end */
    struct sbx_record **page = NULL;
    size_t n = 0;
    /* No filter: no walk beyond the page, whatever the count (docs/server.md "Many
     * sandboxes"). */
    bool filtered = json_array_size(q->states) || json_object_size(q->meta);
    struct sbx_mgr_page want = {.match = filtered ? list_match : NULL,
                                .ud = (void *)q,
                                .start = start,
                                .count = (size_t)q->page_size};
    size_t kept = sbx_mgr_list_page(r->srv->mgr, &want, &page, &n);
    struct sbx_page pg;
    sbx_page_calc(kept, (size_t)q->page, (size_t)q->page_size, &pg);
    json_t *items = json_array();
    for (size_t i = 0; i < n && i < pg.count; i++)
        (void)json_array_append_new(items, sbx_api_sandbox_json(page[i], true));
    sbx_mgr_list_free(page, n);
    return json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:b}}", "items", items, "pagination", "page",
                     (json_int_t)q->page, "pageSize", (json_int_t)q->page_size, "totalItems",
                     (json_int_t)kept, "totalPages", (json_int_t)pg.total_pages, "hasNextPage",
                     pg.has_next);
}

static void
h_list(struct sbx_req *r, struct sbx_reply *out)
{
    struct list_q q = {.states = json_array(), .meta = json_object(), .page = 1, .page_size = 20};
    sbx_req_query_each(r, "state", q_state, &q);
    sbx_req_query_each(r, "metadata", q_meta, &q);
    sbx_req_query_each(r, "page", q_page, &q);
    sbx_req_query_each(r, "pageSize", q_page_size, &q);
    if (q.bad && strcmp(q.bad, "metadata") == 0)
        sbx_reply_error(out, 400, "INVALID_METADATA_FORMAT", "bad `metadata` filter: %s",
                        sbx_error_msg(q.err));
    else if (q.bad)
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "bad `%s` (page >= 1, 1 <= pageSize <= %d)", q.bad, PAGE_SIZE_MAX);
    else
        out->body = list_json(r, &q);
    out->status = out->status ? out->status : 200;
    json_decref(q.states);
    json_decref(q.meta);
    sbx_error_clear(&q.err);
}

/* ---- one sandbox ---- */

static void
h_get(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = sandbox_id(r, out);
    struct sbx_record *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (!id)
        return;
    if (sbx_mgr_get(r->srv->mgr, id, &sb, &err) < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    out->status = 200;
    out->body = sbx_api_sandbox_json(sb, true);
    sbx_record_free(sb);
}

static void
h_delete(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = sandbox_id(r, out);
    sbx_autoerror sbx_error *err = NULL;
    if (!id)
        return;
    if (sbx_mgr_delete(r->srv->mgr, id, "user_delete", &err) < 0)
        sbx_reply_from(out, err,
                       sbx_error_code(err) == SBX_EGENERIC ? "SANDBOX::SANDBOX_DELETE_FAILED"
                                                           : NULL);
    else
        out->status = 204;
}

enum verb {
    VERB_PAUSE,
    VERB_RESUME,
    VERB_STOP,
    VERB_START
};

static void
h_verb(struct sbx_req *r, struct sbx_reply *out, enum verb v)
{
    const char *id = sandbox_id(r, out);
    sbx_autoerror sbx_error *err = NULL;
    if (!id)
        return;
    struct sbx_mgr *m = r->srv->mgr;
    int rc = v == VERB_PAUSE    ? sbx_mgr_pause(m, id, &err)
             : v == VERB_RESUME ? sbx_mgr_resume(m, id, &err)
             : v == VERB_STOP   ? sbx_mgr_stop(m, id, &err)
                                : sbx_mgr_start(m, id, &err);
    if (rc >= 0) {
        out->status = 202;
        return;
    }
    static const char *const conflict[] = {
        "SANDBOX::SANDBOX_NOT_RUNNING", "SANDBOX::SANDBOX_NOT_PAUSED",
        "SANDBOX::SANDBOX_NOT_RUNNING", "SANDBOX::SANDBOX_NOT_STOPPED"};
    const char *code = NULL;
    if (sbx_error_code(err) == SBX_ECONFLICT)
        code = conflict[v];
    else if (sbx_error_code(err) == SBX_EINVAL)
        code = "SANDBOX::API_NOT_SUPPORTED"; /* the provider cannot do it (daytona: pause) */
    else if (v == VERB_START && sbx_error_code(err) != SBX_EUNAVAIL)
        code = "SANDBOX::SANDBOX_START_FAILED";
    sbx_reply_from(out, err, code);
}

static void
do_renew(struct sbx_req *r, const char *id, const json_t *body, struct sbx_reply *out)
{
    const char *s = json_string_value(json_object_get(body, "expiresAt"));
    int64_t ms = 0;
    int64_t now = sbx_wall_ms();
    sbx_autoerror sbx_error *err = NULL;
    if (!s || sbx_srv_parse_time(s, &ms, &err) < 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_EXPIRATION",
                        "`expiresAt` must be an RFC 3339 time");
        return;
    }
    if (ms <= now || ms - now > r->srv->cfg->max_timeout_s * 1000) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_EXPIRATION",
                        "`expiresAt` must be in the future and at most %lld s from now",
                        (long long)r->srv->cfg->max_timeout_s);
        return;
    }
    if (sbx_mgr_renew(r->srv->mgr, id, ms, &err) < 0) {
        sbx_reply_from(out, err,
                       sbx_error_code(err) == SBX_ECONFLICT ? "SANDBOX::INVALID_EXPIRATION" : NULL);
        return;
    }
    char ts[32];
    sbx_srv_format_time(ms, ts);
    out->status = 200;
    out->body = json_pack("{s:s}", "expiresAt", ts);
}

static void
h_renew(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = sandbox_id(r, out);
    json_t *body = NULL;
    if (!id || parse_body(r, out, &body) < 0)
        return;
    do_renew(r, id, body, out);
    json_decref(body);
}

static void
h_patch_metadata(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = sandbox_id(r, out);
    json_t *body = NULL;
    if (!id || parse_body(r, out, &body) < 0)
        return;
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_record *sb = NULL;
    if (!string_map(body, true))
        sbx_reply_error(out, 400, "SANDBOX::INVALID_METADATA_LABEL",
                        "the body must be an object of string or null values");
    else if (sbx_mgr_patch_metadata(r->srv->mgr, id, body, &sb, &err) < 0)
        sbx_reply_from(
            out, err, sbx_error_code(err) == SBX_EINVAL ? "SANDBOX::INVALID_METADATA_LABEL" : NULL);
    else {
        out->status = 200;
        out->body = sbx_api_sandbox_json(sb, true);
    }
    sbx_record_free(sb);
    json_decref(body);
}

static void
q_flag(const char *v, void *ud)
{
    (void)v;
    *(bool *)ud = true;
}

/* "ADDR:PORT" of a published port: the bind address, or for a wildcard one the host clients
 * reach this server at. */
static void
published_at(struct sbx_req *r, int host_port, char *buf, size_t size)
{
    const char *a = r->srv->cfg->publish_addr ? r->srv->cfg->publish_addr : "127.0.0.1";
    char host[300];
    if (strcmp(a, "0.0.0.0") == 0 || strcmp(a, "::") == 0) {
        const char *pub = sbx_http_public_addr(r);
        size_t n = pub[0] == '[' ? strcspn(pub, "]") + 1 : strcspn(pub, ":");
        (void)snprintf(host, sizeof host, "%.*s", (int)n, pub);
        a = host;
    }
    bool v6 = strchr(a, ':') && a[0] != '[';
    (void)snprintf(buf, size, "%s%s%s:%d", v6 ? "[" : "", a, v6 ? "]" : "", host_port);
}

static void
h_endpoint(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = sandbox_id(r, out);
    if (!id)
        return;
    int port = sbx_route_port(r->route.port);
    struct sbx_record *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (port < 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PORT", "port must be 1-65535");
        return;
    }
    bool signed_route = false;
    sbx_req_query_each(r, "expires", q_flag, &signed_route);
    if (signed_route) {
        sbx_reply_error(out, 400, "SANDBOX::API_NOT_SUPPORTED",
                        "signed endpoints (`expires`) need a gateway; not supported");
        return;
    }
    if (sbx_mgr_get(r->srv->mgr, id, &sb, &err) < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    int host_port = sbx_publish_host_port(sb, port);
    const char *tok = json_string_value(json_object_get(sb->priv, SBX_ACCESS_TOKEN_PRIV));
    sbx_autofree char *token = tok ? sbx_xstrdup(tok) : NULL;
    /* The egress API (api_egress.c): served by the server, opened by this token only. */
    const char *etok =
        json_string_value(json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "token"));
    sbx_autofree char *egress_token = port == SBX_EGRESS_PORT && etok ? sbx_xstrdup(etok) : NULL;
    sbx_record_free(sb);
    sbx_autofree char *ep =
        sbx_xasprintf("%s/sandboxes/%s/proxy/%d", sbx_http_public_addr(r), id, port);
    out->status = 200;
    /* The router needs a credential; the SDKs send an endpoint's headers with every call to
     * it. A secureAccess sandbox's is its own token, good for its routes only (an endpoint
     * handed on gives no more than that sandbox); otherwise the API key the caller already
     * holds (it just used it), so nothing new is disclosed. */
    if (egress_token)
        out->body =
            json_pack("{s:s, s:{s:s}}", "endpoint", ep, "headers", SBX_EGRESS_HEADER, egress_token);
    else if (token)
        out->body =
            json_pack("{s:s, s:{s:s}}", "endpoint", ep, "headers", SBX_ACCESS_HEADER, token);
    else
        out->body = json_pack("{s:s, s:{s:s}}", "endpoint", ep, "headers", "OPEN-SANDBOX-API-KEY",
                              r->srv->api_key);
    if (host_port > 0) { /* sbx extension: the port published on the host (no key needed) */
        char at[320];
        published_at(r, host_port, at, sizeof at);
        (void)json_object_set_new(out->body, "published", json_string(at));
    }
}

/* GET /health: 200 {"status": "healthy"} (COMPAT), or 503 "unhealthy" when the store cannot
 * be written (no sandbox could be created, deleted or renewed). Without the API key that is
 * all; with it, the store's and each provider's state and why (a reason may name a secret,
 * so not for anyone who can reach the port). */
static void
h_health(struct sbx_req *r, struct sbx_reply *out)
{
    sbx_autoerror sbx_error *err = NULL;
    bool store_ok = sbx_mgr_store_check(r->srv->mgr, &err) == 0;
    out->status = store_ok ? 200 : 503;
    out->body = json_pack("{s:s}", "status", store_ok ? "healthy" : "unhealthy");
    if (!store_ok) { /* the error envelope, with the status beside it */
        (void)json_object_set_new(out->body, "code", json_string("SERVER::UNHEALTHY"));
        (void)json_object_set_new(out->body, "message",
                                  json_string("the store cannot be written: no sandbox can be "
                                              "created, changed or deleted"));
    }
    if (!sbx_http_key_ok(r))
        return;
    json_t *store = json_pack("{s:b}", "writable", store_ok);
    if (!store_ok)
        (void)json_object_set_new(store, "reason", json_string(sbx_error_msg(err)));
    (void)json_object_set_new(out->body, "store", store);
    (void)json_object_set_new(out->body, "providers", sbx_registry_status(r->srv->reg));
}

/* The first value of a query parameter, copied (the value lives only during the callback). */
static void
q_string(const char *v, void *ud)
{
    char **dst = ud;
    if (!*dst)
        *dst = sbx_xstrdup(v);
}

static void
h_diagnostics(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = sandbox_id(r, out);
    if (!id)
        return;
    sbx_autofree char *scope = NULL;
    sbx_req_query_each(r, "scope", q_string, &scope);
    sbx_api_diagnostics(r->srv->mgr, id, r->route.id == SBX_ROUTE_DIAG_LOGS, scope, out);
}

void
sbx_api_dispatch(struct sbx_req *r, struct sbx_reply *out)
{
    switch (r->route.id) {
    case SBX_ROUTE_HEALTH:
        h_health(r, out);
        return;
    case SBX_ROUTE_DIAG_LOGS:
    case SBX_ROUTE_DIAG_EVENTS:
        h_diagnostics(r, out);
        return;
    case SBX_ROUTE_METRICS_EVENTS:
        out->status = 204;
        return;
    case SBX_ROUTE_CREATE:
        h_create(r, out);
        return;
    case SBX_ROUTE_LIST:
        h_list(r, out);
        return;
    case SBX_ROUTE_GET:
        h_get(r, out);
        return;
    case SBX_ROUTE_DELETE:
        h_delete(r, out);
        return;
    case SBX_ROUTE_PAUSE:
        h_verb(r, out, VERB_PAUSE);
        return;
    case SBX_ROUTE_RESUME:
        h_verb(r, out, VERB_RESUME);
        return;
    case SBX_ROUTE_STOP:
        h_verb(r, out, VERB_STOP);
        return;
    case SBX_ROUTE_START:
        h_verb(r, out, VERB_START);
        return;
    case SBX_ROUTE_SECRET_LIST:
    case SBX_ROUTE_SECRET_GET:
    case SBX_ROUTE_SECRET_SET:
    case SBX_ROUTE_SECRET_DELETE:
        sbx_api_secrets(r, out);
        return;
    case SBX_ROUTE_RENEW:
        h_renew(r, out);
        return;
    case SBX_ROUTE_PATCH_METADATA:
        h_patch_metadata(r, out);
        return;
    case SBX_ROUTE_ENDPOINT:
        h_endpoint(r, out);
        return;
    case SBX_ROUTE_DESKTOP_VIEW:
        sbx_view_mint(r, out);
        return;
    case SBX_ROUTE_SNAPSHOT_CREATE:
    case SBX_ROUTE_SNAPSHOT_LIST:
    case SBX_ROUTE_SNAPSHOT_GET:
    case SBX_ROUTE_SNAPSHOT_DELETE:
    case SBX_ROUTE_SNAPSHOT_EXPORT:
    case SBX_ROUTE_SNAPSHOT_IMPORT:
        sbx_api_snapshots(r, out);
        return;
    case SBX_ROUTE_SERVER_INFO:
        sbx_api_server_info(r, out);
        return;
    case SBX_ROUTE_POOL_LIST:
    case SBX_ROUTE_POOL_CREATE:
    case SBX_ROUTE_POOL_GET:
    case SBX_ROUTE_POOL_UPDATE:
    case SBX_ROUTE_POOL_DELETE:
        sbx_api_pools(r, out);
        return;
    case SBX_ROUTE_UNSUPPORTED:
        sbx_reply_error(out, 501, "SANDBOX::API_NOT_SUPPORTED", "%s %s is not supported", r->method,
                        r->path);
        return;
    case SBX_ROUTE_BAD_METHOD:
        sbx_reply_error(out, 405, "GENERAL::METHOD_NOT_ALLOWED", "method %s not allowed here",
                        r->method);
        return;
    case SBX_ROUTE_NOT_FOUND:
    case SBX_ROUTE_PROXY:       /* handled by the router before the body */
    case SBX_ROUTE_PREFLIGHT:   /* handled before the body */
    case SBX_ROUTE_DESKTOP_VNC: /* desktop_view.c, answered on the connection */
    case SBX_ROUTE_DESKTOP_PAGE:
    case SBX_ROUTE_DESKTOP_STATIC:
    case SBX_ROUTE_NOVNC:
    case SBX_ROUTE_CONSOLE_PAGE: /* console.c */
    case SBX_ROUTE_CONSOLE_STATIC:
    case SBX_ROUTE_METRICS:       /* metrics.c: text, not JSON */
    case SBX_ROUTE_EGRESS_POLICY: /* api_egress.c: its own credential */
    case SBX_ROUTE__COUNT:
    default:
        sbx_reply_error(out, 404, "GENERAL::NOT_FOUND", "no route for %s", r->method);
        return;
    }
}

static enum MHD_Result
api_end(struct sbx_req *r)
{
    struct sbx_reply rep = {0};
    sbx_api_dispatch(r, &rep);
    return sbx_http_send_reply(r, &rep);
}

const struct sbx_http_handler sbx_api_handler = {.end = api_end};

/* The body of a snapshot import, streamed to an unlinked temp file (r->upload_fd). */
static enum MHD_Result
import_data(struct sbx_req *r, const char *data, size_t n)
{
    if (r->too_big)
        return MHD_YES;
    if (r->upload_fd <= 0)
        r->upload_fd = sbx_snaps_tmpfile(r->srv->snaps);
    r->upload_len += n;
    if (r->upload_fd < 0 ||
        (r->upload_len <= SBX_SNAPSHOT_IMPORT_MAX && sbx_write_all(r->upload_fd, data, n) < 0))
        r->upload_errno = errno ? errno : EIO; /* answered at the end, with why */
    if (r->upload_len > SBX_SNAPSHOT_IMPORT_MAX || r->upload_errno)
        r->too_big = true; /* the rest of the body is dropped */
    return MHD_YES;
}

static enum MHD_Result
import_end(struct sbx_req *r)
{
    if (r->upload_errno) {
        char msg[160];
        (void)snprintf(msg, sizeof msg, "could not store the upload on the server: %s",
                       r->upload_errno == ENOSPC ? "no space left on the image store's disk"
                                                 : "a write failed");
        return sbx_http_send_error(r, r->upload_errno == ENOSPC ? 507 : 500,
                                   "GENERAL::UPLOAD_FAILED", msg);
    }
    if (r->too_big)
        return sbx_http_send_error(r, 413, "GENERAL::PAYLOAD_TOO_LARGE",
                                   "request body is larger than the limit");
    return api_end(r);
}

static void
import_done(struct sbx_req *r)
{
    if (r->upload_fd > 0)
        (void)close(r->upload_fd);
    r->upload_fd = 0;
}

const struct sbx_http_handler sbx_api_import_handler = {
    .data = import_data,
    .end = import_end,
    .done = import_done,
    .body_limit = SBX_SNAPSHOT_IMPORT_MAX,
};
