/*
 * api_vault.c - the Credential Vault of egress-api.yaml, served by the server for a sandbox
 * created with `credentialProxy: {enabled: true}` (see api_vault.h, docs/network.md
 * "Credential proxy").
 *
 *   POST   /credential-vault             CredentialVaultCreateRequest -> 201 CredentialVaultState
 *   GET    /credential-vault             -> CredentialVaultState
 *   PATCH  /credential-vault             CredentialVaultMutationRequest -> CredentialVaultState
 *   DELETE /credential-vault             -> 204
 *   GET    /credential-vault/credentials[/{name}], /credential-vault/bindings[/{name}]
 *
 * Status codes: 400 a body that does not match the schema (unknown fields included:
 * additionalProperties is false everywhere), a duplicate name in one request, a binding naming
 * a credential that does not exist; 404 no vault, or an unknown name (replace/delete/GET);
 * 409 conflicts with the current revision: a second create, `add` of an existing name,
 * `expectedRevision` other than the current revision, deleting a credential a binding uses;
 * 412 the sandbox's Credential Proxy is not enabled (the prerequisite the spec names).
 *
 * Security: credential values are write-only. They are checked (no CR, LF, NUL or other
 * control character: they become header values, so none can add a header or end the head),
 * written to the encrypted credvault store and never put into the record, an answer, a log
 * line or an error message (messages name credentials, never values). Who may call this:
 * api_egress.c (the sandbox's egress token only, never something inside the sandbox).
 */
#include "server/api_vault.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "egress/policy.h"
#include "secrets/secrets.h"
#include "server/credvault.h"
#include "server/manager.h"
#include "server/sandbox.h"

/* ---- schema checks ---- */

/* The reason into msg (n bytes), and -1. A macro, not a variadic function: clang-analyzer's
 * va_list model misfires on such helpers in some batches (clang-tidy in scripts/lint.sh). */
#define fail(msg, n, ...) ((void)snprintf((msg), (n), __VA_ARGS__), -1)

/* additionalProperties: false */
static int
only_keys(const json_t *o, const char *const *keys, const char *what, char *msg, size_t n)
{
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach ((json_t *)o, k, v) {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], k) != 0)
            i++;
        if (!keys[i])
            return fail(msg, n, "%s: unknown field `%.64s`", what, k);
    }
    return 0;
}

/* Names of credentials and bindings: they appear in URL paths, so a plain set. */
static bool
name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 0 && n <= SBX_VAULT_NAME_MAX &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n &&
           s[0] != '.' && s[0] != '-';
}

/* An HTTP token (the spec's pattern for header names), and not a header that frames the
 * request or names its destination: injecting those would let a binding smuggle a request or
 * redirect one. */
static bool
header_name_ok(const char *s)
{
    static const char *const framing[] = {
        "host", "content-length", "transfer-encoding", "connection",       "upgrade",
        "te",   "trailer",        "keep-alive",        "proxy-connection", NULL};
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > SBX_VAULT_NAME_MAX ||
        strspn(s,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") !=
            n)
        return false;
    for (size_t i = 0; framing[i]; i++)
        if (strcasecmp(s, framing[i]) == 0)
            return false;
    return true;
}

/* A value becomes (part of) a header value: visible ASCII, spaces and tabs, UTF-8 beyond
 * ASCII; never CR, LF, NUL or another control character. */
static bool
value_ok(const char *s, size_t n)
{
    if (n == 0 || n > SBX_VAULT_VALUE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

int
sbx_vault_credential_check(const json_t *c, const char **name, const char **value, char *msg,
                           size_t n)
{
    static const char *const ck[] = {"name", "source", NULL};
    static const char *const sk[] = {"type", "value", NULL};
    if (!json_is_object(c))
        return fail(msg, n, "a credential must be an object {name, source}");
    if (only_keys(c, ck, "credential", msg, n) < 0)
        return -1;
    const char *nm = json_string_value(json_object_get(c, "name"));
    if (!name_ok(nm))
        return fail(msg, n,
                    "credential `name` must be 1-%d characters of [A-Za-z0-9_.-], not starting "
                    "with . or -",
                    SBX_VAULT_NAME_MAX);
    json_t *src = json_object_get(c, "source");
    if (!json_is_object(src) || only_keys(src, sk, "credential source", msg, n) < 0)
        return json_is_object(src) ? -1
                                   : fail(msg, n,
                                          "credential `%s`: `source` must be an object "
                                          "{type: inline, value}",
                                          nm);
    const char *type = json_string_value(json_object_get(src, "type"));
    json_t *v = json_object_get(src, "value");
    if (!type || strcmp(type, "inline") != 0)
        return fail(msg, n, "credential `%s`: `source.type` must be `inline`", nm);
    if (!json_is_string(v) || !value_ok(json_string_value(v), json_string_length(v)))
        return fail(msg, n,
                    "credential `%s`: `source.value` must be a string of 1-%d bytes without "
                    "control characters (it goes into a header)",
                    nm, SBX_VAULT_VALUE_MAX);
    *name = nm;
    *value = json_string_value(v);
    return 0;
}

/* A list of strings/integers (1..SBX_VAULT_LIST_MAX) or the default when absent. */
static json_t *
list_or_default(const json_t *m, const char *key, const char *dflt, char *msg, size_t n)
{
    json_t *a = json_object_get(m, key);
    if (!a)
        return json_loads(dflt, 0, NULL);
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > SBX_VAULT_LIST_MAX) {
        (void)fail(msg, n, "`match.%s` must be an array of 1-%d items", key, SBX_VAULT_LIST_MAX);
        return NULL;
    }
    return json_deep_copy(a);
}

/* m: {schemes, ports, hosts, methods, paths}, all arrays; hosts normalized in place. */
static int
check_match_items(json_t *m, char *msg, size_t n)
{
    json_t *schemes = json_object_get(m, "schemes");
    json_t *ports = json_object_get(m, "ports");
    json_t *hosts = json_object_get(m, "hosts");
    json_t *methods = json_object_get(m, "methods");
    json_t *paths = json_object_get(m, "paths");
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (schemes, i, v) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "http") != 0 && strcmp(s, "https") != 0))
            return fail(msg, n, "`match.schemes` items are `http` or `https`");
    }
    json_array_foreach (ports, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535)
            return fail(msg, n, "`match.ports` items are integers 1-65535");
    }
    json_array_foreach (hosts, i, v) {
        char norm[SBX_EGRESS_NAME_MAX + 3];
        sbx_autoerror sbx_error *e = NULL;
        if (!json_is_string(v) || sbx_egress_target_norm(json_string_value(v), norm, &e) < 0)
            return fail(msg, n, "`match.hosts`: %s",
                        e ? sbx_error_msg(e) : "items are host names or *.wildcards");
        (void)json_array_set_new(hosts, i, json_string(norm));
    }
    json_array_foreach (methods, i, v) {
        const char *s = json_string_value(v);
        size_t l = s ? strlen(s) : 0;
        if (l == 0 || l > 16 || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != l)
            return fail(msg, n, "`match.methods` items are upper-case HTTP methods");
    }
    json_array_foreach (paths, i, v) {
        const char *s = json_string_value(v);
        size_t l = s ? strlen(s) : 0;
        if (l == 0 || l > 1024 || s[0] != '/' || strpbrk(s, " \t\r\n?#"))
            return fail(msg, n,
                        "`match.paths` items are paths starting with `/` (a final `*` "
                        "matches any rest)");
    }
    return 0;
}

static json_t *
check_match(const json_t *m, char *msg, size_t n)
{
    static const char *const mk[] = {"schemes", "ports", "hosts", "methods", "paths", NULL};
    if (!json_is_object(m)) {
        (void)fail(msg, n, "`match` must be an object with `hosts`");
        return NULL;
    }
    if (only_keys(m, mk, "match", msg, n) < 0)
        return NULL;
    if (!json_object_get(m, "hosts")) {
        (void)fail(msg, n, "`match.hosts` is required");
        return NULL;
    }
    json_t *schemes = list_or_default(m, "schemes", "[\"https\"]", msg, n);
    json_t *ports = schemes ? list_or_default(m, "ports", "[443]", msg, n) : NULL;
    json_t *hosts = ports ? list_or_default(m, "hosts", "[]", msg, n) : NULL;
    json_t *methods =
        hosts ? list_or_default(m, "methods", "[\"GET\",\"POST\",\"PUT\",\"PATCH\",\"DELETE\"]",
                                msg, n)
              : NULL;
    json_t *paths = methods ? list_or_default(m, "paths", "[\"/*\"]", msg, n) : NULL;
    json_t *out = NULL;
    if (paths)
        out = json_pack("{s:O, s:O, s:O, s:O, s:O}", "schemes", schemes, "ports", ports, "hosts",
                        hosts, "methods", methods, "paths", paths);
    if (out && check_match_items(out, msg, n) < 0) {
        json_decref(out);
        out = NULL;
    }
    json_decref(schemes);
    json_decref(ports);
    json_decref(hosts);
    json_decref(methods);
    json_decref(paths);
    return out;
}

static json_t *
check_header_entry(const json_t *h, const char *what, char *msg, size_t n)
{
    static const char *const hk[] = {"name", "credential", NULL};
    if (!json_is_object(h) || only_keys(h, hk, what, msg, n) < 0) {
        if (!json_is_object(h))
            (void)fail(msg, n, "%s must be an object {name, credential}", what);
        return NULL;
    }
    const char *nm = json_string_value(json_object_get(h, "name"));
    const char *cr = json_string_value(json_object_get(h, "credential"));
    if (!header_name_ok(nm)) {
        (void)fail(msg, n,
                   "%s: `name` must be an HTTP header name (a token) other than Host, "
                   "Content-Length, Transfer-Encoding, Connection and the like",
                   what);
        return NULL;
    }
    if (!name_ok(cr)) {
        (void)fail(msg, n, "%s: `credential` must name a credential", what);
        return NULL;
    }
    return json_pack("{s:s, s:s}", "name", nm, "credential", cr);
}

static json_t *
check_auth(const json_t *a, char *msg, size_t n)
{
    static const char *const bk[] = {"type", "credential", NULL};
    static const char *const ak[] = {"type", "name", "credential", NULL};
    static const char *const hk[] = {"type", "headers", NULL};
    const char *type = json_string_value(json_object_get(a, "type"));
    if (!json_is_object(a) || !type) {
        (void)fail(msg, n,
                   "`auth` must be an object with `type` (bearer, basic, apiKey, "
                   "customHeaders)");
        return NULL;
    }
    if (strcmp(type, "bearer") == 0 || strcmp(type, "basic") == 0) {
        const char *cr = json_string_value(json_object_get(a, "credential"));
        if (only_keys(a, bk, "auth", msg, n) < 0)
            return NULL;
        if (!name_ok(cr)) {
            (void)fail(msg, n, "`auth.credential` must name a credential");
            return NULL;
        }
        return json_pack("{s:s, s:s}", "type", type, "credential", cr);
    }
    if (strcmp(type, "apiKey") == 0) {
        if (only_keys(a, ak, "auth", msg, n) < 0)
            return NULL;
        json_t *h = json_pack("{s:O?, s:O?}", "name", json_object_get(a, "name"), "credential",
                              json_object_get(a, "credential"));
        json_t *e = check_header_entry(h, "`auth` (apiKey)", msg, n);
        json_decref(h);
        if (e)
            (void)json_object_set_new(e, "type", json_string("apiKey"));
        return e;
    }
    if (strcmp(type, "customHeaders") == 0) {
        if (only_keys(a, hk, "auth", msg, n) < 0)
            return NULL;
        json_t *hs = json_object_get(a, "headers");
        if (!json_is_array(hs) || json_array_size(hs) == 0 ||
            json_array_size(hs) > SBX_VAULT_LIST_MAX) {
            (void)fail(msg, n, "`auth.headers` must be an array of 1-%d {name, credential}",
                       SBX_VAULT_LIST_MAX);
            return NULL;
        }
        json_t *out = json_array();
        size_t i = 0;
        json_t *h = NULL;
        json_array_foreach (hs, i, h) {
            json_t *e = check_header_entry(h, "`auth.headers` item", msg, n);
            if (!e) {
                json_decref(out);
                return NULL;
            }
            (void)json_array_append_new(out, e);
        }
        return json_pack("{s:s, s:o}", "type", type, "headers", out);
    }
    (void)fail(msg, n, "`auth.type` must be bearer, basic, apiKey or customHeaders");
    return NULL;
}

json_t *
sbx_vault_binding_check(const json_t *b, char *msg, size_t n)
{
    static const char *const bk[] = {"name", "match", "auth", NULL};
    if (!json_is_object(b)) {
        (void)fail(msg, n, "a binding must be an object {name, match, auth}");
        return NULL;
    }
    if (only_keys(b, bk, "binding", msg, n) < 0)
        return NULL;
    const char *nm = json_string_value(json_object_get(b, "name"));
    if (!name_ok(nm)) {
        (void)fail(msg, n,
                   "binding `name` must be 1-%d characters of [A-Za-z0-9_.-], not "
                   "starting with . or -",
                   SBX_VAULT_NAME_MAX);
        return NULL;
    }
    char sub[400];
    json_t *m = check_match(json_object_get(b, "match"), sub, sizeof sub);
    json_t *a = m ? check_auth(json_object_get(b, "auth"), sub, sizeof sub) : NULL;
    if (!m || !a) {
        json_decref(m);
        (void)fail(msg, n, "binding `%s`: %s", nm, sub);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o}", "name", nm, "match", m, "auth", a);
}

/* The credential names an auth uses. */
static void
auth_refs(const json_t *auth, const char *out[SBX_VAULT_LIST_MAX + 1])
{
    size_t k = 0;
    const char *c = json_string_value(json_object_get(auth, "credential"));
    if (c)
        out[k++] = c;
    size_t i = 0;
    json_t *h = NULL;
    json_array_foreach (json_object_get(auth, "headers"), i, h) {
        if (k < SBX_VAULT_LIST_MAX)
            out[k++] = json_string_value(json_object_get(h, "credential"));
    }
    out[k] = NULL;
}

/* ---- answers ---- */

static json_t *
cred_meta(const json_t *c)
{
    return json_pack("{s:O, s:O, s:O}", "name", json_object_get(c, "name"), "sourceType",
                     json_object_get(c, "sourceType"), "revision", json_object_get(c, "revision"));
}

/* CredentialBindingMetadata: auth as {type, name?} (the header name of an apiKey). */
static json_t *
binding_meta(const json_t *b)
{
    json_t *a = json_object_get(b, "auth");
    json_t *am = json_pack("{s:O}", "type", json_object_get(a, "type"));
    if (json_object_get(a, "name"))
        (void)json_object_set(am, "name", json_object_get(a, "name"));
    return json_pack("{s:O, s:O, s:O, s:o}", "name", json_object_get(b, "name"), "revision",
                     json_object_get(b, "revision"), "match", json_object_get(b, "match"), "auth",
                     am);
}

static json_t *
metas(const json_t *arr, json_t *(*fn)(const json_t *))
{
    json_t *out = json_array();
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (arr, i, v)
        (void)json_array_append_new(out, fn(v));
    return out;
}

static json_t *
state_json(const json_t *vault)
{
    return json_pack("{s:O, s:o, s:o}", "revision", json_object_get(vault, "revision"),
                     "credentials", metas(json_object_get(vault, "credentials"), cred_meta),
                     "bindings", metas(json_object_get(vault, "bindings"), binding_meta));
}

static json_t *
find_named(const json_t *arr, const char *name, size_t *at)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (arr, i, v) {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0) {
            if (at)
                *at = i;
            return v;
        }
    }
    return NULL;
}

/* ---- changes (under the manager's lock, on a copy of priv.egress) ---- */

struct vault_op {
    struct sbx_credvault *store;
    const char *id;
    const char *method;
    const json_t *body;
    json_t *old_values; /* for undo: what the store held before */
    bool values_written;
    int status; /* of a refusal */
    char msg[512];
};

/* The answer's status and message into op, and -1 (a macro for the reason fail's is). */
#define refuse(op, st, ...) \
    ((void)snprintf((op)->msg, sizeof(op)->msg, __VA_ARGS__), (op)->status = (st), -1)

/* op->msg is written already */
static int
refused(struct vault_op *op, int status)
{
    op->status = status;
    return -1;
}

static void
undo_values(void *arg)
{
    struct vault_op *op = arg;
    if (op->values_written)
        (void)sbx_credvault_put(op->store, op->id, op->old_values, NULL);
}

static int
put_values(struct vault_op *op, const json_t *values)
{
    char *s = json_dumps(values, JSON_COMPACT);
    size_t len = s ? strlen(s) : 0;
    if (s)
        sodium_memzero(s, len); /* (the length only: it holds the values in clear) */
    free(s);
    if (len > SBX_SECRET_VALUE_MAX - 64)
        return refuse(op, 400, "the vault's credential values exceed %u bytes in all",
                      SBX_SECRET_VALUE_MAX - 64);
    sbx_autoerror sbx_error *e = NULL;
    if (sbx_credvault_put(op->store, op->id, values, &e) < 0)
        return refuse(op, 500, "storing the credential values: %s", sbx_error_msg(e));
    op->values_written = true;
    return 0;
}

/* Each binding's credentials exist. deleted: names removed by this request (409, not 400). */
static int
check_refs(struct vault_op *op, const json_t *vault, const json_t *deleted)
{
    json_t *creds = json_object_get(vault, "credentials");
    size_t i = 0;
    json_t *b = NULL;
    json_array_foreach (json_object_get(vault, "bindings"), i, b) {
        const char *refs[SBX_VAULT_LIST_MAX + 1];
        auth_refs(json_object_get(b, "auth"), refs);
        for (size_t k = 0; refs[k]; k++) {
            if (find_named(creds, refs[k], NULL))
                continue;
            bool gone = false;
            size_t j = 0;
            json_t *d = NULL;
            json_array_foreach (deleted, j, d)
                gone = gone || strcmp(json_string_value(d), refs[k]) == 0;
            return refuse(op, gone ? 409 : 400, "binding `%s` uses credential `%s`, which %s",
                          json_string_value(json_object_get(b, "name")), refs[k],
                          gone ? "this request deletes" : "does not exist");
        }
    }
    if (json_array_size(creds) > SBX_VAULT_CREDS_MAX)
        return refuse(op, 400, "at most %d credentials", SBX_VAULT_CREDS_MAX);
    if (json_array_size(json_object_get(vault, "bindings")) > SBX_VAULT_BINDINGS_MAX)
        return refuse(op, 400, "at most %d bindings", SBX_VAULT_BINDINGS_MAX);
    return 0;
}

/* Add credential c (checked) at revision rev to vault and values; exists: 409 (add) or 400
 * (twice in one create). */
static int
add_cred(struct vault_op *op, json_t *vault, json_t *values, const json_t *c, json_int_t rev)
{
    const char *name = NULL;
    const char *value = NULL;
    if (json_array_size(json_object_get(vault, "credentials")) >= SBX_VAULT_CREDS_MAX)
        return refuse(op, 400, "at most %d credentials", SBX_VAULT_CREDS_MAX);
    if (sbx_vault_credential_check(c, &name, &value, op->msg, sizeof op->msg) < 0)
        return refused(op, 400);
    if (find_named(json_object_get(vault, "credentials"), name, NULL))
        return refuse(op, 409, "credential `%s` exists", name);
    (void)json_array_append_new(
        json_object_get(vault, "credentials"),
        json_pack("{s:s, s:s, s:I}", "name", name, "sourceType", "inline", "revision", rev));
    (void)json_object_set_new(values, name, json_string(value));
    return 0;
}

/* A binding (checked) that the proxy could never apply: msg says why. The proxy sees a
 * sandbox's TCP to ports 80 (plain HTTP) and 443 (HTTPS) only. */
static bool
binding_unservable(const json_t *nb, char *msg, size_t n)
{
    const json_t *m = json_object_get(nb, "match");
    const char *name = json_string_value(json_object_get(nb, "name"));
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (json_object_get(m, "ports"), i, v) {
        if (json_integer_value(v) != 80 && json_integer_value(v) != 443)
            return fail(msg, n,
                        "binding `%s`: port %lld is not supported: sbx redirects a sandbox's "
                        "TCP to ports 80 (http) and 443 (https) only",
                        name, (long long)json_integer_value(v)) < 0;
    }
    return false;
}

static int
add_binding(struct vault_op *op, json_t *vault, const json_t *b, json_int_t rev)
{
    json_t *bs = json_object_get(vault, "bindings");
    if (json_array_size(bs) >= SBX_VAULT_BINDINGS_MAX)
        return refuse(op, 400, "at most %d bindings", SBX_VAULT_BINDINGS_MAX);
    json_t *nb = sbx_vault_binding_check(b, op->msg, sizeof op->msg);
    if (!nb)
        return refused(op, 400);
    /* The proxy injects into plain HTTP on port 80 only (docs/network.md "Credential
     * proxy"): a binding that would need HTTPS interception or another port is refused
     * here, after the schema checks, rather than stored and silently never applied. */
    if (binding_unservable(nb, op->msg, sizeof op->msg)) {
        json_decref(nb);
        return refused(op, 400);
    }
    const char *name = json_string_value(json_object_get(nb, "name"));
    if (find_named(bs, name, NULL)) {
        (void)refuse(op, 409, "binding `%s` exists", name);
        json_decref(nb); /* (name is nb's) */
        return -1;
    }
    (void)json_object_set_new(nb, "revision", json_integer(rev));
    (void)json_array_append_new(bs, nb);
    return 0;
}

static int
vault_create(struct vault_op *op, json_t *eg)
{
    static const char *const keys[] = {"credentials", "bindings", NULL};
    const json_t *body = op->body;
    if (!json_is_object(body))
        return refuse(op, 400, "the body must be an object {credentials, bindings}");
    if (only_keys(body, keys, "body", op->msg, sizeof op->msg) < 0)
        return refused(op, 400);
    json_t *cs = json_object_get(body, "credentials");
    json_t *bs = json_object_get(body, "bindings");
    if (!json_is_array(cs) || !json_is_array(bs))
        return refuse(op, 400, "`credentials` and `bindings` are required arrays");
    if (json_array_size(cs) > SBX_VAULT_CREDS_MAX || json_array_size(bs) > SBX_VAULT_BINDINGS_MAX)
        return refuse(op, 400, "at most %d credentials and %d bindings", SBX_VAULT_CREDS_MAX,
                      SBX_VAULT_BINDINGS_MAX);
    json_int_t rev = json_integer_value(json_object_get(eg, "vaultSeq")) + 1;
    json_t *vault = json_pack("{s:I, s:[], s:[]}", "revision", rev, "credentials", "bindings");
    json_t *values = json_object();
    int r = 0;
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (cs, i, v) {
        if (r == 0 && (r = add_cred(op, vault, values, v, rev)) < 0 && op->status == 409)
            op->status = 400; /* a name twice in one create */
    }
    json_array_foreach (bs, i, v) {
        if (r == 0 && (r = add_binding(op, vault, v, rev)) < 0 && op->status == 409)
            op->status = 400;
    }
    if (r == 0)
        r = check_refs(op, vault, NULL);
    /* (after the body's checks: a bad body is a 400 whether or not a vault exists) */
    if (r == 0 && json_object_get(eg, "vault"))
        r = refuse(op, 409,
                   "this sandbox's Credential Vault exists (PATCH it, or DELETE it "
                   "first)");
    if (r == 0)
        r = put_values(op, values);
    json_decref(values);
    if (r < 0) {
        json_decref(vault);
        return r;
    }
    (void)json_object_set_new(eg, "vault", vault);
    (void)json_object_set_new(eg, "vaultSeq", json_integer(rev));
    return 1;
}

/* A mutation set {add, replace, delete}: checked shape. */
static int
check_set(struct vault_op *op, const json_t *set, const char *what)
{
    static const char *const keys[] = {"add", "replace", "delete", NULL};
    if (!set)
        return 0;
    if (!json_is_object(set))
        return refuse(op, 400, "`%s` must be an object {add, replace, delete}", what);
    if (only_keys(set, keys, what, op->msg, sizeof op->msg) < 0)
        return refused(op, 400);
    for (size_t k = 0; keys[k]; k++) {
        json_t *a = json_object_get(set, keys[k]);
        if (a && !json_is_array(a))
            return refuse(op, 400, "`%s.%s` must be an array", what, keys[k]);
    }
    size_t max = strcmp(what, "credentials") == 0 ? SBX_VAULT_CREDS_MAX : SBX_VAULT_BINDINGS_MAX;
    for (size_t k = 0; keys[k]; k++) {
        if (json_array_size(json_object_get(set, keys[k])) > max)
            return refuse(op, 400, "at most %zu %s", max, what);
    }
    size_t i = 0;
    json_t *d = NULL;
    json_array_foreach (json_object_get(set, "delete"), i, d) {
        if (!json_is_string(d))
            return refuse(op, 400, "`%s.delete` items are names", what);
    }
    return 0;
}

/* delete, then replace, then add, on the array arr of vault (credentials or bindings). */
static int
apply_set(struct vault_op *op, json_t *vault, json_t *values, const json_t *set, bool creds)
{
    const char *what = creds ? "credential" : "binding";
    json_t *arr = json_object_get(vault, creds ? "credentials" : "bindings");
    json_int_t rev = json_integer_value(json_object_get(vault, "revision"));
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (json_object_get(set, "delete"), i, v) {
        size_t at = 0;
        if (!find_named(arr, json_string_value(v), &at))
            return refuse(op, 404, "%s `%.128s` does not exist", what, json_string_value(v));
        (void)json_array_remove(arr, at);
        if (creds)
            (void)json_object_del(values, json_string_value(v));
    }
    json_array_foreach (json_object_get(set, "replace"), i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        size_t at = 0;
        if (!name || !find_named(arr, name, &at))
            return refuse(op, name ? 404 : 400, "%s `%.128s` does not exist", what,
                          name ? name : "");
        (void)json_array_remove(arr, at);
        if (creds)
            (void)json_object_del(values, name);
        int r = creds ? add_cred(op, vault, values, v, rev) : add_binding(op, vault, v, rev);
        if (r < 0)
            return op->status == 409 ? refuse(op, 400, "%s `%s` is replaced twice", what, name) : r;
    }
    json_array_foreach (json_object_get(set, "add"), i, v) {
        int r = creds ? add_cred(op, vault, values, v, rev) : add_binding(op, vault, v, rev);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
vault_patch(struct vault_op *op, json_t *eg)
{
    static const char *const keys[] = {"expectedRevision", "credentials", "bindings", NULL};
    const json_t *body = op->body;
    json_t *vault = json_object_get(eg, "vault");
    if (!vault)
        return refuse(op, 404, "this sandbox has no Credential Vault (POST one)");
    if (!json_is_object(body))
        return refuse(op, 400,
                      "the body must be an object {expectedRevision, credentials, "
                      "bindings}");
    if (only_keys(body, keys, "body", op->msg, sizeof op->msg) < 0)
        return refused(op, 400);
    json_t *exp = json_object_get(body, "expectedRevision");
    json_t *cs = json_object_get(body, "credentials");
    json_t *bs = json_object_get(body, "bindings");
    if (exp && !json_is_integer(exp))
        return refuse(op, 400, "`expectedRevision` must be an integer");
    if (check_set(op, cs, "credentials") < 0 || check_set(op, bs, "bindings") < 0)
        return -1;
    json_int_t cur = json_integer_value(json_object_get(vault, "revision"));
    if (exp && json_integer_value(exp) != cur)
        return refuse(op, 409, "`expectedRevision` %lld: the vault is at revision %lld",
                      (long long)json_integer_value(exp), (long long)cur);
    sbx_autoerror sbx_error *e = NULL;
    if (sbx_credvault_get(op->store, op->id, &op->old_values, &e) < 0)
        return refuse(op, 500, "%s", sbx_error_msg(e));
    json_int_t rev = json_integer_value(json_object_get(eg, "vaultSeq")) + 1;
    json_t *nv = json_deep_copy(vault);
    json_t *values = json_deep_copy(op->old_values);
    (void)json_object_set_new(nv, "revision", json_integer(rev));
    int r = apply_set(op, nv, values, cs, true);
    if (r == 0)
        r = apply_set(op, nv, values, bs, false);
    if (r == 0)
        r = check_refs(op, nv, json_object_get(cs, "delete"));
    if (r == 0 && cs)
        r = put_values(op, values);
    json_decref(values);
    if (r < 0) {
        json_decref(nv);
        return r;
    }
    (void)json_object_set_new(eg, "vault", nv);
    (void)json_object_set_new(eg, "vaultSeq", json_integer(rev));
    return 1;
}

static int
vault_change(json_t *eg, void *arg, sbx_error **err)
{
    (void)err;
    struct vault_op *op = arg;
    bool post = strcmp(op->method, "POST") == 0;
    if (!json_is_true(json_object_get(eg, "credentialProxy")))
        return refuse(op, post || strcmp(op->method, "PATCH") == 0 ? 412 : 404,
                      "this sandbox was created without `credentialProxy: {enabled: true}`: "
                      "it has no Credential Proxy");
    if (post)
        return vault_create(op, eg);
    if (strcmp(op->method, "PATCH") == 0)
        return vault_patch(op, eg);
    /* DELETE */
    if (!json_object_get(eg, "vault"))
        return refuse(op, 404, "this sandbox has no Credential Vault");
    sbx_autoerror sbx_error *e = NULL;
    if (sbx_credvault_get(op->store, op->id, &op->old_values, &e) < 0)
        return refuse(op, 500, "%s", sbx_error_msg(e));
    json_t *none = json_object();
    int r = put_values(op, none);
    json_decref(none);
    if (r < 0)
        return r;
    (void)json_object_del(eg, "vault");
    return 1;
}

/* ---- the routes ---- */

bool
sbx_api_vault_path(const char *rest)
{
    size_t n = strlen(SBX_VAULT_PATH);
    return rest && strncmp(rest, SBX_VAULT_PATH, n) == 0 && (rest[n] == 0 || rest[n] == '/');
}

static void
reply_refusal(struct sbx_reply *out, const struct vault_op *op)
{
    const char *code = op->status == 400   ? "SANDBOX::INVALID_PARAMETER"
                       : op->status == 404 ? "CREDENTIAL_VAULT::NOT_FOUND"
                       : op->status == 409 ? "CREDENTIAL_VAULT::CONFLICT"
                       : op->status == 412 ? "CREDENTIAL_VAULT::NOT_ENABLED"
                                           : "SANDBOX::INTERNAL_ERROR";
    sbx_reply_error(out, op->status, code, "%s", op->msg);
}

/* GET of the vault or one of its parts. sub: the path after /credential-vault. */
static void
vault_get(const json_t *vault, const char *sub, struct sbx_reply *out)
{
    json_t *rev = json_object_get(vault, "revision");
    if (!*sub) {
        out->body = state_json(vault);
    } else if (strcmp(sub, "/credentials") == 0) {
        out->body = json_pack("{s:O, s:o}", "revision", rev, "credentials",
                              metas(json_object_get(vault, "credentials"), cred_meta));
    } else if (strcmp(sub, "/bindings") == 0) {
        out->body = json_pack("{s:O, s:o}", "revision", rev, "bindings",
                              metas(json_object_get(vault, "bindings"), binding_meta));
    } else {
        bool creds = strncmp(sub, "/credentials/", 13) == 0;
        bool binds = strncmp(sub, "/bindings/", 10) == 0;
        const char *name = creds ? sub + 13 : binds ? sub + 10 : NULL;
        json_t *item =
            name && name_ok(name)
                ? find_named(json_object_get(vault, creds ? "credentials" : "bindings"), name, NULL)
                : NULL;
        if (!item) {
            sbx_reply_error(out, 404, "CREDENTIAL_VAULT::NOT_FOUND", "no such %s",
                            creds   ? "credential"
                            : binds ? "binding"
                                    : "route");
            return;
        }
        out->body = creds ? cred_meta(item) : binding_meta(item);
    }
    out->status = 200;
}

void
sbx_api_vault(struct sbx_req *r, struct sbx_reply *out)
{
    const char *sub = r->route.rest + strlen(SBX_VAULT_PATH);
    const char *m = r->method;
    bool get = strcmp(m, "GET") == 0;
    bool change = strcmp(m, "POST") == 0 || strcmp(m, "PATCH") == 0 || strcmp(m, "DELETE") == 0;
    if (*sub && !get) {
        sbx_reply_error(out, 405, "GENERAL::METHOD_NOT_ALLOWED", "%s: %s takes GET", m,
                        r->route.rest);
        return;
    }
    if (!get && !change) {
        sbx_reply_error(out, 405, "GENERAL::METHOD_NOT_ALLOWED",
                        "%s: /credential-vault takes GET, POST, PATCH or DELETE", m);
        return;
    }
    /* the body is marked sensitive: it holds credential values (wiped when the request ends) */
    r->sensitive = true;
    json_t *body = NULL;
    if (strcmp(m, "POST") == 0 || strcmp(m, "PATCH") == 0) {
        json_error_t jerr;
        body = json_loadb(r->body.data ? r->body.data : "", r->body.len, JSON_REJECT_DUPLICATES,
                          &jerr);
        if (!body) {
            /* the position only: jansson's text quotes the input near the error ("near
             * '...'"), which may be a credential value */
            sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                            "invalid JSON body (line %d, column %d)", jerr.line, jerr.column);
            return;
        }
    }
    struct vault_op op = {
        .store = r->srv->vault, .id = r->route.sandbox_id, .method = get ? "GET" : m, .body = body};
    struct sbx_mgr_vault_op mop = {.change = vault_change, .undo = undo_values, .arg = &op};
    if (get)
        mop.change = NULL;
    json_t *eg = NULL;
    sbx_autoerror sbx_error *err = NULL;
    int rc = sbx_mgr_vault(r->srv->mgr, r->route.sandbox_id, &mop, &eg, &err);
    json_decref(body);
    json_decref(op.old_values);
    if (rc < 0 && op.status) {
        reply_refusal(out, &op);
    } else if (rc < 0) {
        sbx_reply_from(out, err, NULL);
    } else if (get) {
        json_t *vault = json_object_get(eg, "vault");
        if (!json_is_true(json_object_get(eg, "credentialProxy")) || !vault)
            sbx_reply_error(out, 404, "CREDENTIAL_VAULT::NOT_FOUND",
                            json_object_get(eg, "credentialProxy")
                                ? "this sandbox has no Credential Vault"
                                : "this sandbox was created without `credentialProxy: "
                                  "{enabled: true}`");
        else
            vault_get(vault, sub, out);
    } else if (strcmp(m, "DELETE") == 0) {
        out->status = 204;
    } else {
        out->status = strcmp(m, "POST") == 0 ? 201 : 200;
        out->body = state_json(json_object_get(eg, "vault"));
    }
    json_decref(eg);
}
