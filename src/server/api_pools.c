/*
 * api_pools.c - the pools API (/pools, /pools/{name}; also under /warmpools, the reference's
 * newer path) and creates with `extensions.poolRef` (pool.h has the model).
 *
 * A pool's template is a create body as POST /sandboxes takes it; a Kubernetes pod template
 * ({metadata, spec: {containers: [one]}}) is mapped onto it where it maps simply (image,
 * command + args, env values, resources, labels) and refused with a 400 naming the first field
 * that does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/api.h"
#include "server/api_fields.h"
#include "server/httpd.h"
#include "server/manager.h"
#include "server/pool.h"
#include "server/provider.h"
#include "server/publish.h"

#define BAD "SANDBOX::INVALID_PARAMETER"

static json_t *
parse_object(struct sbx_req *r, struct sbx_reply *out)
{
    json_error_t jerr;
    json_t *body = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &jerr);
    if (!body)
        sbx_reply_error(out, 400, BAD, "invalid JSON body: %s", jerr.text);
    else if (!json_is_object(body)) {
        sbx_reply_error(out, 400, BAD, "body must be a JSON object");
        json_decref(body);
        body = NULL;
    }
    return body;
}

static void
pool_error(struct sbx_reply *out, const sbx_error *err)
{
    int code = sbx_error_code(err);
    sbx_reply_from(out, err,
                   code == SBX_ENOTFOUND ? "POOL::NOT_FOUND"
                   : code == SBX_EEXISTS ? "POOL::ALREADY_EXISTS"
                   : code == SBX_ELIMIT  ? "POOL::EXHAUSTED"
                                         : NULL);
}

/* ---- a Kubernetes pod template, where it maps simply ---- */

static bool
only_keys(const json_t *o, const char *const *keys, size_t n, const char **extra)
{
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach ((json_t *)o, k, v) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(k, keys[i]) == 0;
        if (!known) {
            *extra = k;
            return false;
        }
    }
    return true;
}

static int
pod_env(const json_t *list, json_t *env, struct sbx_reply *out)
{
    size_t i = 0;
    json_t *e = NULL;
    if (!json_is_array(list)) {
        sbx_reply_error(out, 400, BAD, "template.spec.containers[0].env must be an array");
        return -1;
    }
    json_array_foreach (list, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *val = json_object_get(e, "value");
        if (!name || (val && !json_is_string(val)) || json_object_get(e, "valueFrom")) {
            sbx_reply_error(out, 400, BAD,
                            "template.spec.containers[0].env[%zu]: only {name, value} maps onto "
                            "a sandbox's env",
                            i);
            return -1;
        }
        (void)json_object_set_new(env, name, json_string(val ? json_string_value(val) : ""));
    }
    return 0;
}

static int
pod_container(const json_t *c, json_t *body, struct sbx_reply *out)
{
    static const char *const keys[] = {"name", "image", "command", "args", "env", "resources"};
    const char *extra = NULL;
    if (!json_is_object(c) || !only_keys(c, keys, SBX_ARRAY_SIZE(keys), &extra)) {
        sbx_reply_error(out, 400, BAD,
                        "template.spec.containers[0]%s%s: not supported in a pool template (it "
                        "maps name, image, command, args, env and resources only)",
                        extra ? "." : "", extra ? extra : "");
        return -1;
    }
    json_t *image = json_object_get(c, "image");
    if (!json_is_string(image)) {
        sbx_reply_error(out, 400, BAD, "template.spec.containers[0].image must be a string");
        return -1;
    }
    (void)json_object_set_new(body, "image", json_pack("{s:O}", "uri", image));
    json_t *ep = json_array();
    for (int i = 0; i < 2; i++) {
        json_t *part = json_object_get(c, i ? "args" : "command");
        if (part && !json_is_array(part)) {
            json_decref(ep);
            sbx_reply_error(out, 400, BAD, "template.spec.containers[0].%s must be an array",
                            i ? "args" : "command");
            return -1;
        }
        if (part)
            (void)json_array_extend(ep, part);
    }
    if (json_array_size(ep) == 0) {
        (void)json_array_append_new(ep, json_string("tail"));
        (void)json_array_append_new(ep, json_string("-f"));
        (void)json_array_append_new(ep, json_string("/dev/null"));
    }
    (void)json_object_set_new(body, "entrypoint", ep);
    json_t *env = json_object();
    (void)json_object_set_new(body, "env", env);
    if (json_object_get(c, "env") && pod_env(json_object_get(c, "env"), env, out) < 0)
        return -1;
    json_t *res = json_object_get(c, "resources");
    if (json_object_get(res, "limits"))
        (void)json_object_set(body, "resourceLimits", json_object_get(res, "limits"));
    if (json_object_get(res, "requests"))
        (void)json_object_set(body, "resourceRequests", json_object_get(res, "requests"));
    return 0;
}

/* {metadata: {labels}, spec: {containers: [one]}} -> a create body, or NULL with the 400. */
static json_t *
from_pod_template(const json_t *t, struct sbx_reply *out)
{
    static const char *const top[] = {"metadata", "spec"};
    static const char *const spec_keys[] = {"containers", "restartPolicy"};
    const char *extra = NULL;
    json_t *spec = json_object_get(t, "spec");
    json_t *cs = json_object_get(spec, "containers");
    if (!only_keys(t, top, SBX_ARRAY_SIZE(top), &extra) ||
        !only_keys(spec, spec_keys, SBX_ARRAY_SIZE(spec_keys), &extra)) {
        sbx_reply_error(out, 400, BAD,
                        "template: a pod template's `%s` does not map onto an sbx sandbox (give "
                        "a create body: image, entrypoint, env, resourceLimits, metadata)",
                        extra);
        return NULL;
    }
    if (json_array_size(cs) != 1) {
        sbx_reply_error(out, 400, BAD, "template.spec.containers must hold exactly one container");
        return NULL;
    }
    json_t *body = json_object();
    json_t *labels = json_object_get(json_object_get(t, "metadata"), "labels");
    if (labels)
        (void)json_object_set(body, "metadata", labels);
    if (pod_container(json_array_get(cs, 0), body, out) < 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* ---- POST /pools: the template ---- */

/* What a template may not hold, or NULL. */
static const char *
template_refused(const json_t *t)
{
    json_t *ext = json_object_get(t, "extensions");
    json_t *snap = json_object_get(t, "snapshotId");
    if (snap && !json_is_null(snap))
        return "snapshotId";
    if (json_object_get(ext, SBX_POOL_REF_EXT))
        return "extensions.poolRef";
    if (json_object_get(ext, SBX_REUSE_KEY_EXT))
        return "extensions.reuseKey";
    if (json_object_get(ext, SBX_PUBLISH_EXT))
        return "extensions." SBX_PUBLISH_EXT;
    if (json_object_get(json_object_get(t, "metadata"), SBX_NAME_LABEL))
        return "metadata." SBX_NAME_LABEL;
    return NULL;
}

/* The template as stored: a create body, checked as a create, its provider named. NULL with
 * the 400 in out. */
static json_t *
check_template(struct sbx_req *r, const json_t *t, struct sbx_reply *out)
{
    if (!json_is_object(t)) {
        sbx_reply_error(out, 400, BAD, "`template` must be an object (a create body)");
        return NULL;
    }
    json_t *body =
        json_is_object(json_object_get(t, "spec")) ? from_pod_template(t, out) : json_deep_copy(t);
    if (!body)
        return NULL;
    const char *refused = template_refused(body);
    if (refused) {
        sbx_reply_error(out, 400, BAD, "template: `%s` cannot be part of a pool's template",
                        refused);
        json_decref(body);
        return NULL;
    }
    struct sbx_record *sb = NULL;
    if (sbx_api_build_create(r->srv, body, &sb, out) < 0) {
        json_decref(body);
        return NULL;
    }
    const struct sbx_provider_factory *f = sbx_registry_factory(r->srv->reg, sb->provider);
    if (!f || !(f->caps & SBX_CAP_POOLS)) {
        sbx_reply_error(out, 400, "SANDBOX::API_NOT_SUPPORTED",
                        "provider `%s` cannot keep pools of warm sandboxes", sb->provider);
        sbx_record_free(sb);
        json_decref(body);
        return NULL;
    }
    (void)json_object_del(body, "timeout"); /* warm sandboxes do not expire */
    json_t *ext = json_object_get(body, "extensions");
    if (ext)
        (void)json_object_del(ext, "provider");
    (void)json_object_set_new(body, "provider", json_string(sb->provider));
    sbx_record_free(sb);
    return body;
}

static void
h_create(struct sbx_req *r, struct sbx_reply *out)
{
    json_t *body = parse_object(r, out);
    if (!body)
        return;
    const char *name = json_string_value(json_object_get(body, "name"));
    struct sbx_pool_capacity c;
    char why[200];
    json_t *tmpl = NULL;
    json_t *doc = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (!sbx_pool_name_valid(name))
        sbx_reply_error(out, 400, BAD,
                        "`name` must be 1-%d characters of [a-z0-9-], starting and ending with a "
                        "letter or digit",
                        SBX_POOL_NAME_MAX);
    else if (sbx_pool_capacity_parse(json_object_get(body, "capacitySpec"),
                                     r->srv->cfg->max_sandboxes, &c, why, sizeof why) < 0)
        sbx_reply_error(out, 400, BAD, "%s", why);
    else if ((tmpl = check_template(r, json_object_get(body, "template"), out)) == NULL)
        ; /* answered */
    else if (sbx_pools_add(r->srv->pools, name, tmpl, &c, &doc, &err) < 0)
        pool_error(out, err);
    else {
        out->status = 201;
        out->body = doc;
    }
    json_decref(tmpl);
    json_decref(body);
}

static const char *
pool_name(struct sbx_req *r, struct sbx_reply *out)
{
    if (!sbx_pool_name_valid(r->route.pool)) {
        sbx_reply_error(out, 404, "POOL::NOT_FOUND", "pool `%.64s` not found", r->route.pool);
        return NULL;
    }
    return r->route.pool;
}

static void
h_update(struct sbx_req *r, struct sbx_reply *out)
{
    const char *name = pool_name(r, out);
    json_t *body = name ? parse_object(r, out) : NULL;
    if (!body)
        return;
    struct sbx_pool_capacity c;
    char why[200];
    json_t *doc = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_pool_capacity_parse(json_object_get(body, "capacitySpec"), r->srv->cfg->max_sandboxes,
                                &c, why, sizeof why) < 0)
        sbx_reply_error(out, 400, BAD, "%s", why);
    else if (sbx_pools_update(r->srv->pools, name, &c, &doc, &err) < 0)
        pool_error(out, err);
    else {
        out->status = 200;
        out->body = doc;
    }
    json_decref(body);
}

void
sbx_api_pools(struct sbx_req *r, struct sbx_reply *out)
{
    sbx_autoerror sbx_error *err = NULL;
    enum sbx_route_id id = r->route.id;
    const char *name = NULL;
    json_t *doc = NULL;
    if (id == SBX_ROUTE_POOL_LIST) {
        out->status = 200;
        out->body = sbx_pools_list(r->srv->pools);
    } else if (id == SBX_ROUTE_POOL_CREATE) {
        h_create(r, out);
    } else if (id == SBX_ROUTE_POOL_UPDATE) {
        h_update(r, out);
    } else if ((name = pool_name(r, out)) == NULL) {
        ; /* answered: 404 */
    } else if (id == SBX_ROUTE_POOL_GET) {
        if (sbx_pools_get(r->srv->pools, name, &doc, &err) < 0)
            pool_error(out, err);
        else {
            out->status = 200;
            out->body = doc;
        }
    } else if (sbx_pools_remove(r->srv->pools, name, &err) < 0) { /* SBX_ROUTE_POOL_DELETE */
        pool_error(out, err);
    } else {
        out->status = 204;
    }
}

/* ---- POST /sandboxes with extensions.poolRef ---- */

static bool
given(const json_t *v)
{
    return v && !json_is_null(v);
}

static bool
same(const json_t *a, const json_t *b)
{
    if (!given(a))
        a = NULL;
    if (!given(b))
        b = NULL;
    return (!a && !b) || (a && b && json_equal((json_t *)a, (json_t *)b));
}

/* A request's env other than the template's (null values are skipped, as in any create; an
 * empty env asks for nothing). */
static bool
env_differs(const json_t *env, const json_t *tenv)
{
    if (!given(env))
        return false;
    if (!json_is_object(env))
        return true;
    json_t *e = json_object();
    const char *k = NULL;
    json_t *v = NULL;
    bool bad = false;
    json_object_foreach ((json_t *)env, k, v) {
        if (json_is_string(v))
            (void)json_object_set(e, k, v);
        else if (!json_is_null(v))
            bad = true;
    }
    bool differs = bad || (json_object_size(e) > 0 &&
                           !(json_is_object(tenv) && json_equal(e, (json_t *)tenv)));
    json_decref(e);
    return differs;
}

/* The first field of the request that a warm sandbox cannot take on (it is fixed when the
 * sandbox starts) and that differs from the template; NULL when none. */
static const char *
fixed_field(struct sbx_req *r, const json_t *req, const json_t *tmpl)
{
    json_t *img = json_object_get(req, "image");
    if (given(json_object_get(req, "snapshotId")))
        return "snapshotId";
    if (given(img) &&
        !same(json_object_get(img, "uri"), json_object_get(json_object_get(tmpl, "image"), "uri")))
        return "image";
    json_t *ep = json_object_get(req, "entrypoint");
    if (given(ep) && !same(ep, json_object_get(tmpl, "entrypoint")))
        return "entrypoint";
    if (env_differs(json_object_get(req, "env"), json_object_get(tmpl, "env")))
        return "env";
    json_t *vols = json_object_get(req, "volumes");
    if (json_array_size(vols) > 0 && !same(vols, json_object_get(tmpl, "volumes")))
        return "volumes";
    static const char *const whole[] = {"networkPolicy", "credentialProxy"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(whole); i++) {
        json_t *v = json_object_get(req, whole[i]);
        if (given(v) && !same(v, json_object_get(tmpl, whole[i])))
            return whole[i];
    }
    json_t *prov = json_object_get(req, "provider");
    if (!given(prov))
        prov = json_object_get(json_object_get(req, "extensions"), "provider");
    const char *pname = json_string_value(prov);
    const char *resolved = given(prov) ? sbx_registry_resolve(r->srv->reg, pname) : NULL;
    const char *want = json_string_value(json_object_get(tmpl, "provider"));
    if (given(prov) && (!pname || !resolved || !want || strcmp(resolved, want) != 0))
        return "provider";
    json_t *ext = json_object_get(req, "extensions");
    if (json_object_get(ext, SBX_REUSE_KEY_EXT))
        return "extensions.reuseKey";
    static const char *const exts[] = {SBX_DESKTOP_EXT, SBX_PUBLISH_EXT};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(exts); i++) {
        json_t *v = json_object_get(ext, exts[i]);
        if (v && !same(v, json_object_get(json_object_get(tmpl, "extensions"), exts[i])))
            return exts[i];
    }
    return NULL;
}

/* The template with what a take may change: metadata and extensions merged over the
 * template's, the request's timeout, secureAccess and platform. NULL with the 400. */
static json_t *
merged_body(const json_t *req, const json_t *tmpl, struct sbx_reply *out)
{
    static const char *const maps[] = {"metadata", "extensions"};
    json_t *b = json_deep_copy(tmpl);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(maps); i++) {
        json_t *v = json_object_get(req, maps[i]);
        if (given(v) && !json_is_object(v)) {
            sbx_reply_error(out, 400, i == 0 ? "SANDBOX::INVALID_METADATA_LABEL" : BAD,
                            "`%s` must be an object of strings", maps[i]);
            json_decref(b);
            return NULL;
        }
        json_t *m = json_object_get(b, maps[i]);
        if (!json_is_object(m)) {
            m = json_object();
            (void)json_object_set_new(b, maps[i], m);
        }
        if (given(v))
            (void)json_object_update(m, v);
    }
    (void)json_object_del(json_object_get(b, "extensions"), "provider");
    static const char *const taken[] = {"timeout", "secureAccess", "platform"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(taken); i++) {
        json_t *v = json_object_get(req, taken[i]);
        if (v)
            (void)json_object_set(b, taken[i], v);
        else
            (void)json_object_del(b, taken[i]);
    }
    return b;
}

void
sbx_api_pool_sandbox(struct sbx_req *r, const json_t *body, struct sbx_reply *out)
{
    const char *name =
        json_string_value(json_object_get(json_object_get(body, "extensions"), SBX_POOL_REF_EXT));
    if (!json_is_object(json_object_get(body, "extensions")) || !name || !*name) {
        sbx_reply_error(out, 400, BAD, "`extensions.poolRef` must be a pool's name");
        return;
    }
    json_t *tmpl = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (!sbx_pool_name_valid(name) || sbx_pools_template(r->srv->pools, name, &tmpl, &err) < 0) {
        sbx_reply_error(out, 404, "POOL::NOT_FOUND", "pool `%.64s` not found", name);
        return;
    }
    const char *field = fixed_field(r, body, tmpl);
    json_t *merged = field ? NULL : merged_body(body, tmpl, out);
    struct sbx_record *want = NULL;
    struct sbx_record *done = NULL;
    if (field)
        sbx_reply_error(out, 400, BAD,
                        "`%s` differs from pool `%s`'s template: a pooled sandbox is already "
                        "running, so only metadata, extensions, timeout and secureAccess apply",
                        field, name);
    else if (merged && sbx_api_build_create(r->srv, merged, &want, out) == 0) {
        if (sbx_pools_take(r->srv->pools, name, want, &done, &err) < 0) {
            int code = sbx_error_code(err);
            if (code == SBX_ENOTFOUND || code == SBX_ELIMIT)
                pool_error(out, err);
            else
                sbx_api_create_failed(out, err, done);
        } else {
            out->status = 202;
            out->body = sbx_api_sandbox_json(done, false);
        }
    }
    sbx_record_free(done);
    json_decref(merged);
    json_decref(tmpl);
}
