/*
 * policy.h - the egress network policy of a sandbox (OpenSandbox's `networkPolicy`, the egress
 * API's `/policy`): pure data, no I/O.
 *
 *   {"defaultAction": "allow"|"deny" (default deny),
 *    "egress": [{"action": "allow"|"deny", "target": "example.com" | "*.example.com"}, ...]}
 *
 * Targets are domain names, kept lowercase without a final dot; `*.example.com` matches every
 * name below example.com, not example.com itself. IP addresses and CIDRs are refused ("not yet
 * supported", as egress-api.yaml says). Rules are evaluated in order, the first match wins,
 * else defaultAction. See docs/network.md "Egress policy".
 */
#ifndef SBX_EGRESS_POLICY_H
#define SBX_EGRESS_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* At most this many rules in one policy (after a merge): each query walks them. */
#define SBX_EGRESS_RULES_MAX 10000
#define SBX_EGRESS_NAME_MAX  253

enum sbx_egress_action {
    SBX_EGRESS_DENY = 0,
    SBX_EGRESS_ALLOW = 1
};

struct sbx_egress_rule {
    enum sbx_egress_action action;
    char *target; /* normalized: lowercase, no final dot */
};

struct sbx_egress_policy {
    enum sbx_egress_action dflt;
    struct sbx_egress_rule *rules;
    size_t n;
};

/* A NetworkPolicy object. SBX_EINVAL with a message naming the bad part. */
int sbx_egress_policy_parse(const json_t *j, struct sbx_egress_policy **out, sbx_error **err);
/* A list of NetworkRule objects (the PATCH body: at least one). */
int sbx_egress_rules_parse(const json_t *j, struct sbx_egress_policy **out, sbx_error **err);
/* Normalize a target into out (lowercase, no final dot) or SBX_EINVAL saying why. */
int sbx_egress_target_norm(const char *t, char out[SBX_EGRESS_NAME_MAX + 3], sbx_error **err);
void sbx_egress_policy_free(struct sbx_egress_policy *p);
struct sbx_egress_policy *sbx_egress_policy_dup(const struct sbx_egress_policy *p);

/* The action for a query name (any case, a final dot allowed). */
enum sbx_egress_action sbx_egress_policy_eval(const struct sbx_egress_policy *p, const char *name);

/* PATCH: the incoming rules first (the first of a target wins), then the existing rules of
 * other targets. SBX_ELIMIT when the result would hold more than SBX_EGRESS_RULES_MAX. */
int sbx_egress_policy_patch(struct sbx_egress_policy *p, const struct sbx_egress_policy *in,
                            sbx_error **err);
/* DELETE: remove the rules of these targets (a JSON array of strings, at least one; unknown
 * ones are ignored). SBX_EINVAL when the list is malformed (nothing is changed then). */
int sbx_egress_policy_remove(struct sbx_egress_policy *p, const json_t *targets, sbx_error **err);

/* {"defaultAction", "egress": [...]} */
json_t *sbx_egress_policy_json(const struct sbx_egress_policy *p);
/* "deny_all" / "allow_all" (no rules) or "enforcing" (the egress sidecar's words). */
const char *sbx_egress_policy_mode(const struct sbx_egress_policy *p);

#endif
