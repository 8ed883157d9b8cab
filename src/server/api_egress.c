/*
 * api_egress.c - the egress API of egress-api.yaml (`GET/PATCH/DELETE /policy`), served by the
 * server itself at /sandboxes/{id}/proxy/18080/policy for a sandbox with an egress policy
 * (what an OpenSandbox egress sidecar serves on port 18080; GET .../endpoints/18080 gives this
 * URL and the OPENSANDBOX-EGRESS-AUTH header).
 *
 * Why here and not in the sandbox: the sandbox runs an attacker, which must neither see nor
 * change its own policy. Nothing of the sandbox is reached on these requests (its port 18080
 * is never connected to), and the only credential is the sandbox's egress token, compared in
 * constant time with the one of the sandbox the path names: one sandbox's token opens no
 * other's policy, and no other route (it is not the API key).
 */
#include <string.h>

#include "common/cleanup.h"
#include "egress/policy.h"
#include "server/api_egress.h"
#include "server/httpd.h"
#include "server/manager.h"
#include "server/server.h"
#include "server/srvutil.h"

void
sbx_api_egress_reroute(struct sbx_req *r)
{
    const char *rest = r->route.rest;
    if (r->route.id != SBX_ROUTE_PROXY || sbx_route_port(r->route.port) != SBX_EGRESS_PORT ||
        !sbx_srv_is_uuid(r->route.sandbox_id) || !rest || strcmp(rest, "/policy") != 0 ||
        sbx_mgr_egress_auth(r->srv->mgr, r->route.sandbox_id, NULL) < 0)
        return;
    /* A browser's CORS preflight carries no credential: answered like the API's own, never
     * forwarded and never refused with 401 (which would fail the real request). */
    r->route.id = strcmp(r->method, "OPTIONS") == 0 ? SBX_ROUTE_PREFLIGHT : SBX_ROUTE_EGRESS_POLICY;
}

static bool
egress_auth_ok(struct sbx_req *r)
{
    return sbx_mgr_egress_auth(r->srv->mgr, r->route.sandbox_id,
                               sbx_req_header(r, SBX_EGRESS_HEADER)) == 1;
}

/* The policy in its JSON form, checked and normalized (the store keeps what is enforced). */
static int
store_form(json_t *policy, const struct sbx_egress_policy *p)
{
    json_t *j = sbx_egress_policy_json(p);
    (void)json_object_update(policy, j);
    json_decref(j);
    return 0;
}

static int
do_patch(json_t *policy, void *arg, sbx_error **err)
{
    const json_t *body = arg;
    struct sbx_egress_policy *cur = NULL;
    struct sbx_egress_policy *in = NULL;
    int r = sbx_egress_rules_parse(body, &in, err);
    if (r >= 0)
        r = sbx_egress_policy_parse(policy, &cur, err);
    if (r >= 0)
        r = sbx_egress_policy_patch(cur, in, err);
    if (r >= 0)
        r = store_form(policy, cur);
    sbx_egress_policy_free(cur);
    sbx_egress_policy_free(in);
    return r;
}

static int
do_delete(json_t *policy, void *arg, sbx_error **err)
{
    const json_t *body = arg;
    struct sbx_egress_policy *cur = NULL;
    int r = sbx_egress_policy_parse(policy, &cur, err);
    if (r >= 0)
        r = sbx_egress_policy_remove(cur, body, err);
    if (r >= 0)
        r = store_form(policy, cur);
    sbx_egress_policy_free(cur);
    return r;
}

/* PolicyStatusResponse */
static json_t *
status_of(const json_t *policy)
{
    struct sbx_egress_policy *p = NULL;
    if (sbx_egress_policy_parse(policy, &p, NULL) < 0)
        return NULL;
    json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "status", "ok", "mode", sbx_egress_policy_mode(p),
                          "enforcementMode", "dns+nft", "policy", sbx_egress_policy_json(p));
    sbx_egress_policy_free(p);
    return o;
}

static void
api_egress(struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = r->route.sandbox_id;
    sbx_mgr_egress_fn fn = NULL;
    if (strcmp(r->method, "PATCH") == 0)
        fn = do_patch;
    else if (strcmp(r->method, "DELETE") == 0)
        fn = do_delete;
    else if (strcmp(r->method, "GET") != 0) {
        sbx_reply_error(out, 405, "GENERAL::METHOD_NOT_ALLOWED",
                        "%s: /policy takes GET, PATCH or DELETE", r->method);
        return;
    }
    json_error_t jerr;
    json_t *body = NULL;
    if (fn) {
        body = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &jerr);
        if (!body) {
            sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "invalid JSON body: %s",
                            jerr.text);
            return;
        }
    }
    json_t *policy = NULL;
    sbx_autoerror sbx_error *err = NULL;
    int rc = sbx_mgr_egress(r->srv->mgr, id, fn, body, &policy, &err);
    json_decref(body);
    if (rc < 0) {
        sbx_reply_from(
            out, err, rc == -SBX_EINVAL || rc == -SBX_ELIMIT ? "SANDBOX::INVALID_PARAMETER" : NULL);
        return;
    }
    out->status = 200;
    out->body = status_of(policy);
    json_decref(policy);
    if (!out->body)
        sbx_reply_error(out, 500, "SANDBOX::INTERNAL_ERROR", "the stored policy is unreadable");
}

static enum MHD_Result
egress_end(struct sbx_req *r)
{
    struct sbx_reply rep = {0};
    api_egress(r, &rep);
    return sbx_http_send_reply(r, &rep);
}

/* The egress API takes the sandbox's egress token only, never the API key: it is the
 * sandbox's own API (as OpenSandbox's egress sidecar), and its token is in the endpoint of
 * port 18080 that the API key's holder can fetch anyway. */
const struct sbx_http_handler sbx_egress_handler = {
    .alt_auth = egress_auth_ok,
    .own_auth_code = "EGRESS::UNAUTHORIZED",
    .own_auth_message = "send this sandbox's " SBX_EGRESS_HEADER " header (its endpoint for "
                        "port 18080 has it)",
    .end = egress_end,
};
