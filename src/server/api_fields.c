/*
 * api_fields.c - the create request's fields that are not about the sandbox's contents:
 * `platform`, `secureAccess`, `credentialProxy`, `resourceRequests`, the keys of
 * `resourceLimits`, and the extension `access.renew.extend.seconds`. Each is either honoured
 * or refused with a 400 naming the field and the provider: none is accepted and dropped (a
 * client asking for a GPU must learn it has none, not find out from its program).
 */
#include <string.h>
#include <sys/utsname.h>

#include "common/util.h"
#include "server/api_fields.h"

#define RENEW_MIN_S 300
#define RENEW_MAX_S 86400

/* The platform a provider's sandboxes run: its declaration, else this machine's kernel's. */
static const char *
host_arch(const struct sbx_provider_factory *f)
{
    if (f->arch)
        return f->arch;
    struct utsname u;
    if (uname(&u) < 0)
        return "amd64";
    if (strcmp(u.machine, "x86_64") == 0)
        return "amd64";
    if (strcmp(u.machine, "aarch64") == 0)
        return "arm64";
    return "unknown";
}

/* `platform`: {"os", "arch"}, both required; only what the provider runs. */
static int
check_platform(const struct sbx_provider_factory *f, const json_t *body, struct sbx_reply *out)
{
    const char *prov = f->name;
    json_t *p = json_object_get(body, "platform");
    if (!p || json_is_null(p))
        return 0;
    const char *os = json_string_value(json_object_get(p, "os"));
    const char *arch = json_string_value(json_object_get(p, "arch"));
    if (!json_is_object(p) || !os || !arch) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`platform` must be {\"os\": \"linux\", \"arch\": \"%s\"} (both strings)",
                        host_arch(f));
        return -1;
    }
    char want[48];
    (void)snprintf(want, sizeof want, "linux/%s", host_arch(f));
    char got[160];
    (void)snprintf(got, sizeof got, "%.64s/%.64s", os, arch);
    if (strcmp(got, want) != 0) {
        sbx_reply_error(out, 400, "SANDBOX::API_NOT_SUPPORTED",
                        "`platform` %s: provider `%s` runs %s sandboxes only", got, prov, want);
        return -1;
    }
    return 0;
}

static int
check_flags(const struct sbx_provider_factory *f, const json_t *body, struct sbx_reply *out)
{
    const char *prov = f->name;
    json_t *sa = json_object_get(body, "secureAccess");
    json_t *cp = json_object_get(body, "credentialProxy");
    json_t *en = json_object_get(cp, "enabled");
    json_t *rr = json_object_get(body, "resourceRequests");
    if (sa && !json_is_null(sa) && !json_is_boolean(sa))
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "`secureAccess` must be a boolean");
    else if (cp && !json_is_null(cp) && (!json_is_object(cp) || !json_is_boolean(en)))
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`credentialProxy` must be {\"enabled\": bool}");
    else if (json_is_true(en) && !json_is_object(json_object_get(body, "networkPolicy")))
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`credentialProxy` requires `networkPolicy` (the Credential Proxy is "
                        "part of the sandbox's egress enforcement)");
    else if (rr && !json_is_null(rr) && !json_is_object(rr))
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`resourceRequests` must be an object like `resourceLimits`");
    else if (json_object_size(rr) > 0 && !(f->caps & SBX_CAP_RESOURCE_REQUESTS))
        sbx_reply_error(out, 400, "SANDBOX::API_NOT_SUPPORTED",
                        "`resourceRequests` are for a cluster scheduler; provider `%s` has none "
                        "to give them to (use `resourceLimits`)",
                        prov);
    else
        return 0;
    return -1;
}

/* resourceLimits: cpu and memory are honoured everywhere; anything else (gpu, storage...)
 * would be silently missing inside the sandbox. */
static int
check_limit_keys(const char *prov, const json_t *body, struct sbx_reply *out)
{
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach (json_object_get(body, "resourceLimits"), k, v) {
        if (strcmp(k, "cpu") == 0 || strcmp(k, "memory") == 0)
            continue;
        sbx_reply_error(out, 400, "SANDBOX::API_NOT_SUPPORTED",
                        "`resourceLimits.%.64s` is not supported by provider `%s` (it honours "
                        "cpu and memory)",
                        k, prov);
        return -1;
    }
    return 0;
}

/* extensions["access.renew.extend.seconds"]: a decimal 300-86400 (OSEP-0009). */
static int
check_renew_ext(const json_t *body, struct sbx_reply *out)
{
    json_t *v = json_object_get(json_object_get(body, "extensions"), SBX_RENEW_EXT);
    if (!v)
        return 0;
    int64_t s = sbx_api_renew_seconds(json_object_get(body, "extensions"));
    if (s > 0)
        return 0;
    sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                    "`extensions.%s` must be a decimal number of seconds from %d to %d",
                    SBX_RENEW_EXT, RENEW_MIN_S, RENEW_MAX_S);
    return -1;
}

int64_t
sbx_api_renew_seconds(const json_t *extensions)
{
    const char *s = json_string_value(json_object_get(extensions, SBX_RENEW_EXT));
    uint64_t n = 0;
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 6 ||
        sbx_parse_u64(s, &n, NULL) < 0 || n < RENEW_MIN_S || n > RENEW_MAX_S)
        return 0;
    return (int64_t)n;
}

/* What needs a capability the provider does not declare is refused, not silently dropped
 * (provider.h: enum sbx_provider_cap; a provider declaring nothing gets everything refused). */
static int
check_caps(const struct sbx_provider_factory *f, const json_t *body, struct sbx_reply *out)
{
    json_t *np = json_object_get(body, "networkPolicy");
    const char *what = NULL;
    if (json_is_true(json_object_get(json_object_get(body, "credentialProxy"), "enabled")) &&
        !(f->caps & SBX_CAP_CREDENTIAL_PROXY))
        what = "credentialProxy";
    else if (np && !json_is_null(np) && !(f->caps & SBX_CAP_NETWORK_POLICY))
        what = "networkPolicy";
    else if (json_array_size(json_object_get(body, "volumes")) > 0 && !(f->caps & SBX_CAP_VOLUMES))
        what = "volumes";
    else if (json_object_get(json_object_get(body, "extensions"), "poolRef") &&
             !(f->caps & SBX_CAP_POOLS))
        what = "extensions.poolRef";
    if (!what)
        return 0;
    sbx_reply_error(out, 400, "SANDBOX::API_NOT_SUPPORTED", "provider `%s` cannot enforce `%s`",
                    f->name, what);
    return -1;
}

int
sbx_api_check_fields(const struct sbx_provider_factory *f, const json_t *body,
                     struct sbx_reply *out)
{
    if (check_caps(f, body, out) < 0 || check_platform(f, body, out) < 0 ||
        check_flags(f, body, out) < 0 || check_limit_keys(f->name, body, out) < 0 ||
        check_renew_ext(body, out) < 0)
        return -1;
    return 0;
}
