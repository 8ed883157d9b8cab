/*
 * policy.c - parse, check, evaluate and change egress policies (see policy.h).
 */
#include "egress/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

void
sbx_egress_policy_free(struct sbx_egress_policy *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->rules[i].target);
    free(p->rules);
    free(p);
}

static void
policy_freep(struct sbx_egress_policy **p)
{
    sbx_egress_policy_free(*p);
}
#define autopolicy __attribute__((cleanup(policy_freep)))

struct sbx_egress_policy *
sbx_egress_policy_dup(const struct sbx_egress_policy *p)
{
    struct sbx_egress_policy *d = sbx_xcalloc(1, sizeof *d);
    d->dflt = p->dflt;
    d->n = p->n;
    d->rules = sbx_xcalloc(p->n + 1, sizeof *d->rules);
    for (size_t i = 0; i < p->n; i++) {
        d->rules[i].action = p->rules[i].action;
        d->rules[i].target = sbx_xstrdup(p->rules[i].target);
    }
    return d;
}

/* One label of a domain name: 1-63 of [a-z0-9_-], no '-' at either end. */
static bool
label_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!islower(c) && !isdigit(c) && c != '-' && c != '_')
            return false;
    }
    return true;
}

static bool
name_ok(const char *s)
{
    for (const char *p = s;;) {
        size_t n = strcspn(p, ".");
        if (!label_ok(p, n))
            return false;
        if (!p[n])
            return true;
        p += n + 1;
    }
}

/* Something that reads as an address or a network: "1.2.3.4", "10.0.0.0/8", "::1", or a name
 * whose last label is all digits (which no top-level domain is). */
static bool
looks_like_ip(const char *s)
{
    unsigned char buf[16];
    if (strchr(s, '/') || strchr(s, ':') || inet_pton(AF_INET, s, buf) == 1)
        return true;
    const char *last = strrchr(s, '.');
    last = last ? last + 1 : s;
    return *last && strspn(last, "0123456789") == strlen(last);
}

int
sbx_egress_target_norm(const char *t, char out[SBX_EGRESS_NAME_MAX + 3], sbx_error **err)
{
    size_t n = t ? strlen(t) : 0;
    if (n > 0 && t[n - 1] == '.')
        n--;
    if (n == 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "an empty target");
    if (n > SBX_EGRESS_NAME_MAX + 2)
        return sbx_error_set(err, SBX_EINVAL, 0, "target `%.40s...` is longer than %d characters",
                             t, SBX_EGRESS_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)t[i]);
    out[n] = '\0';
    if (looks_like_ip(out))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "target `%s`: IP addresses and CIDRs are not yet supported (a domain "
                             "name or *.domain)",
                             out);
    bool wild = strncmp(out, "*.", 2) == 0;
    const char *name = wild ? out + 2 : out;
    if (strlen(name) > SBX_EGRESS_NAME_MAX || !name_ok(name))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "target `%.80s` is not a domain name or a wildcard such as "
                             "`*.example.com`",
                             out);
    return 0;
}

static int
parse_action(const json_t *v, const char *what, enum sbx_egress_action *out, sbx_error **err)
{
    const char *s = json_string_value(v);
    if (s && strcmp(s, "allow") == 0)
        *out = SBX_EGRESS_ALLOW;
    else if (s && strcmp(s, "deny") == 0)
        *out = SBX_EGRESS_DENY;
    else
        return sbx_error_set(err, SBX_EINVAL, 0, "%s must be \"allow\" or \"deny\"", what);
    return 0;
}

/* Only the listed keys: a misspelt key must not pass as a looser policy. */
static int
only_keys(const json_t *obj, const char *const *keys, size_t n, const char *what, sbx_error **err)
{
    const char *k;
    const json_t *v;
    json_object_foreach ((json_t *)obj, k, v) {
        bool known = false;
        for (size_t i = 0; i < n; i++)
            known = known || strcmp(k, keys[i]) == 0;
        if (!known)
            return sbx_error_set(err, SBX_EINVAL, 0, "%s: unknown key `%.64s`", what, k);
    }
    return 0;
}

static int
parse_rule(const json_t *j, size_t i, struct sbx_egress_rule *out, sbx_error **err)
{
    static const char *const keys[] = {"action", "target"};
    char what[48];
    char norm[SBX_EGRESS_NAME_MAX + 3];
    (void)snprintf(what, sizeof what, "egress[%zu]", i);
    if (!json_is_object(j))
        return sbx_error_set(err, SBX_EINVAL, 0, "%s must be {\"action\", \"target\"}", what);
    if (only_keys(j, keys, 2, what, err) < 0)
        return -SBX_EINVAL;
    (void)snprintf(what, sizeof what, "egress[%zu].action", i);
    if (parse_action(json_object_get(j, "action"), what, &out->action, err) < 0)
        return -SBX_EINVAL;
    const json_t *t = json_object_get(j, "target");
    if (!json_is_string(t) || strlen(json_string_value(t)) != json_string_length(t))
        return sbx_error_set(err, SBX_EINVAL, 0, "egress[%zu].target must be a string", i);
    if (sbx_egress_target_norm(json_string_value(t), norm, err) < 0)
        return sbx_error_wrap(err, "egress[%zu]", i);
    out->target = sbx_xstrdup(norm);
    return 0;
}

static int
parse_rules(const json_t *arr, struct sbx_egress_policy *p, sbx_error **err)
{
    size_t n = json_array_size(arr);
    if (n > SBX_EGRESS_RULES_MAX)
        return sbx_error_set(err, SBX_ELIMIT, 0, "%zu egress rules: at most %d", n,
                             SBX_EGRESS_RULES_MAX);
    p->rules = sbx_xcalloc(n + 1, sizeof *p->rules);
    for (size_t i = 0; i < n; i++) {
        if (parse_rule(json_array_get(arr, i), i, &p->rules[i], err) < 0)
            return -SBX_EINVAL;
        p->n++;
    }
    return 0;
}

int
sbx_egress_policy_parse(const json_t *j, struct sbx_egress_policy **out, sbx_error **err)
{
    static const char *const keys[] = {"defaultAction", "egress"};
    if (!json_is_object(j))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "networkPolicy must be {\"defaultAction\", \"egress\": [...]}");
    if (only_keys(j, keys, 2, "networkPolicy", err) < 0)
        return -SBX_EINVAL;
    autopolicy struct sbx_egress_policy *p = sbx_xcalloc(1, sizeof *p);
    const json_t *d = json_object_get(j, "defaultAction");
    p->dflt = SBX_EGRESS_DENY;
    if (d && !json_is_null(d) && parse_action(d, "defaultAction", &p->dflt, err) < 0)
        return -SBX_EINVAL;
    const json_t *eg = json_object_get(j, "egress");
    if (eg && !json_is_null(eg) && !json_is_array(eg))
        return sbx_error_set(err, SBX_EINVAL, 0, "egress must be a list of rules");
    int r = parse_rules(eg, p, err);
    if (r < 0)
        return r;
    *out = sbx_steal_ptr(&p);
    return 0;
}

int
sbx_egress_rules_parse(const json_t *j, struct sbx_egress_policy **out, sbx_error **err)
{
    if (!json_is_array(j) || json_array_size(j) == 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "the body must be a list of at least one {\"action\", \"target\"}");
    autopolicy struct sbx_egress_policy *p = sbx_xcalloc(1, sizeof *p);
    int r = parse_rules(j, p, err);
    if (r < 0)
        return r;
    *out = sbx_steal_ptr(&p);
    return 0;
}

/* name (normalized) matches target: equal, or below the wildcard's domain. */
static bool
matches(const char *target, const char *name, size_t name_len)
{
    if (strncmp(target, "*.", 2) != 0)
        return strlen(target) == name_len && memcmp(target, name, name_len) == 0;
    const char *dom = target + 1; /* ".example.com" */
    size_t dn = strlen(dom);
    return name_len > dn && memcmp(name + name_len - dn, dom, dn) == 0;
}

enum sbx_egress_action
sbx_egress_policy_eval(const struct sbx_egress_policy *p, const char *name)
{
    char norm[SBX_EGRESS_NAME_MAX + 2];
    size_t n = strlen(name);
    if (n > 0 && name[n - 1] == '.')
        n--;
    if (n > SBX_EGRESS_NAME_MAX)
        return SBX_EGRESS_DENY; /* no valid name is that long */
    for (size_t i = 0; i < n; i++)
        norm[i] = (char)tolower((unsigned char)name[i]);
    norm[n] = '\0';
    for (size_t i = 0; i < p->n; i++) {
        if (matches(p->rules[i].target, norm, n))
            return p->rules[i].action;
    }
    return p->dflt;
}

static bool
has_target(const struct sbx_egress_rule *rules, size_t n, const char *target)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rules[i].target, target) == 0)
            return true;
    }
    return false;
}

int
sbx_egress_policy_patch(struct sbx_egress_policy *p, const struct sbx_egress_policy *in,
                        sbx_error **err)
{
    struct sbx_egress_rule *rules = sbx_xcalloc(in->n + p->n + 1, sizeof *rules);
    size_t n = 0;
    for (size_t i = 0; i < in->n; i++) {
        if (!has_target(rules, n, in->rules[i].target))
            rules[n++] = (struct sbx_egress_rule){in->rules[i].action, in->rules[i].target};
    }
    size_t from_in = n;
    for (size_t i = 0; i < p->n; i++) {
        if (!has_target(rules, from_in, p->rules[i].target))
            rules[n++] = p->rules[i];
    }
    if (n > SBX_EGRESS_RULES_MAX) {
        free(rules);
        return sbx_error_set(err, SBX_ELIMIT, 0, "the policy would hold %zu rules: at most %d", n,
                             SBX_EGRESS_RULES_MAX);
    }
    /* Own the strings: copies of the incoming, the kept existing ones moved, the rest freed. */
    for (size_t i = 0; i < from_in; i++)
        rules[i].target = sbx_xstrdup(rules[i].target);
    for (size_t i = 0; i < p->n; i++) {
        if (has_target(rules, from_in, p->rules[i].target))
            free(p->rules[i].target);
    }
    free(p->rules);
    p->rules = rules;
    p->n = n;
    return 0;
}

int
sbx_egress_policy_remove(struct sbx_egress_policy *p, const json_t *targets, sbx_error **err)
{
    size_t nt = json_array_size(targets);
    if (!json_is_array(targets) || nt == 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "the body must be a list of at least one target");
    if (nt > SBX_EGRESS_RULES_MAX)
        return sbx_error_set(err, SBX_ELIMIT, 0, "%zu targets: at most %d", nt,
                             SBX_EGRESS_RULES_MAX);
    autopolicy struct sbx_egress_policy *gone = sbx_xcalloc(1, sizeof *gone);
    gone->rules = sbx_xcalloc(nt + 1, sizeof *gone->rules);
    for (size_t i = 0; i < nt; i++) {
        char norm[SBX_EGRESS_NAME_MAX + 3];
        const json_t *tj = json_array_get(targets, i);
        const char *t = json_string_value(tj);
        if (!t || strlen(t) != json_string_length(tj))
            return sbx_error_set(err, SBX_EINVAL, 0, "targets[%zu] must be a string", i);
        if (sbx_egress_target_norm(t, norm, err) < 0)
            return sbx_error_wrap(err, "targets[%zu]", i);
        gone->rules[gone->n++].target = sbx_xstrdup(norm);
    }
    size_t keep = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (has_target(gone->rules, gone->n, p->rules[i].target))
            free(p->rules[i].target);
        else
            p->rules[keep++] = p->rules[i];
    }
    p->n = keep;
    return 0;
}

static const char *
action_str(enum sbx_egress_action a)
{
    return a == SBX_EGRESS_ALLOW ? "allow" : "deny";
}

json_t *
sbx_egress_policy_json(const struct sbx_egress_policy *p)
{
    json_t *rules = json_array();
    for (size_t i = 0; i < p->n; i++)
        (void)json_array_append_new(rules, json_pack("{s:s, s:s}", "action",
                                                     action_str(p->rules[i].action), "target",
                                                     p->rules[i].target));
    return json_pack("{s:s, s:o}", "defaultAction", action_str(p->dflt), "egress", rules);
}

const char *
sbx_egress_policy_mode(const struct sbx_egress_policy *p)
{
    if (p->n > 0)
        return "enforcing";
    return p->dflt == SBX_EGRESS_ALLOW ? "allow_all" : "deny_all";
}
