/*
 * kube_api.c - the Kubernetes API client of the kubernetes provider (see kube_api.h).
 *
 * Security: credentials (a token, a client key) live in sodium memory and reach libcurl as
 * blobs or header lines that are wiped after use; nothing is written to a file. Redirects are
 * not followed (a redirect must not carry the token elsewhere), only https is spoken, the
 * server is verified against the kubeconfig's CA (or the system's) unless the operator
 * allowed insecure-skip-tls-verify in sbx's own config, and no exec/auth-provider plugin of a
 * kubeconfig is run.
 */
#include "providers/kube_api.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/websocket.h"
#include "common/xalloc.h"

#define BODY_MAX     ((size_t)4 << 20)
#define FILE_MAX     ((size_t)1 << 20)
#define YAML_DEPTH   64
#define DEF_TIMEOUT  30000L
#define SA_DIR       "/var/run/secrets/kubernetes.io/serviceaccount"
#define WS_FRAME_MAX ((size_t)1 << 20)
#define PF_SUBPROTO  "v4.channel.k8s.io"

/* ---- YAML → JSON ---- */

static int
yaml_fail(const yaml_parser_t *p, sbx_error **err)
{
    return sbx_error_set(err, SBX_EINVAL, 0, "YAML line %zu column %zu: %s%s%s",
                         p->problem_mark.line + 1, p->problem_mark.column + 1,
                         p->problem ? p->problem : "syntax error", p->context ? " " : "",
                         p->context ? p->context : "");
}

static int
next_event(yaml_parser_t *p, yaml_event_t *ev, sbx_error **err)
{
    if (!yaml_parser_parse(p, ev))
        return yaml_fail(p, err);
    return 0;
}

static int
at(const yaml_event_t *ev, const char *what, sbx_error **err)
{
    return sbx_error_set(err, SBX_EINVAL, 0, "YAML line %zu column %zu: %s",
                         ev->start_mark.line + 1, ev->start_mark.column + 1, what);
}

static int yaml_node(yaml_parser_t *p, yaml_event_t *ev, int depth, json_t **out, sbx_error **err);

static int
yaml_scalar(const yaml_event_t *ev, json_t **out, sbx_error **err)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (plain && (n == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0)) {
        *out = json_null();
        return 0;
    }
    *out = json_stringn(v, n);
    return *out ? 0 : at(ev, "a value is not valid UTF-8", err);
}

static int
yaml_seq(yaml_parser_t *p, int depth, json_t *arr, sbx_error **err)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(p, &ev, err) < 0)
            return -SBX_EINVAL;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        json_t *v = NULL;
        if (yaml_node(p, &ev, depth + 1, &v, err) < 0)
            return -SBX_EINVAL;
        (void)json_array_append_new(arr, v);
    }
}

static int
yaml_map(yaml_parser_t *p, int depth, json_t *obj, sbx_error **err)
{
    for (;;) {
        yaml_event_t k;
        if (next_event(p, &k, err) < 0)
            return -SBX_EINVAL;
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return 0;
        }
        if (k.type != YAML_SCALAR_EVENT) {
            int r = at(&k, "a mapping key is not a plain value", err);
            yaml_event_delete(&k);
            return r;
        }
        sbx_autofree char *key =
            sbx_xstrndup((const char *)k.data.scalar.value, k.data.scalar.length);
        yaml_event_delete(&k);
        yaml_event_t ev;
        if (next_event(p, &ev, err) < 0)
            return -SBX_EINVAL;
        json_t *v = NULL;
        if (yaml_node(p, &ev, depth + 1, &v, err) < 0)
            return -SBX_EINVAL;
        (void)json_object_set_new(obj, key, v);
    }
}

/* One node starting at ev (consumed). */
static int
yaml_node(yaml_parser_t *p, yaml_event_t *ev, int depth, json_t **out, sbx_error **err)
{
    int r = 0;
    if (depth > YAML_DEPTH) {
        r = at(ev, "nested too deeply", err);
    } else if (ev->type == YAML_ALIAS_EVENT ||
               (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.anchor) ||
               (ev->type == YAML_SEQUENCE_START_EVENT && ev->data.sequence_start.anchor) ||
               (ev->type == YAML_MAPPING_START_EVENT && ev->data.mapping_start.anchor)) {
        r = at(ev, "anchors and aliases are not supported in a kubeconfig", err);
    } else if (ev->type == YAML_SCALAR_EVENT) {
        r = yaml_scalar(ev, out, err);
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        *out = json_array();
        r = yaml_seq(p, depth, *out, err);
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        *out = json_object();
        r = yaml_map(p, depth, *out, err);
    } else {
        r = at(ev, "unexpected YAML event", err);
    }
    yaml_event_delete(ev);
    if (r < 0) {
        json_decref(*out);
        *out = NULL;
    }
    return r;
}

/* Expect an event of type t (deleted). */
static int
expect(yaml_parser_t *p, yaml_event_type_t t, const char *what, sbx_error **err)
{
    yaml_event_t ev;
    if (next_event(p, &ev, err) < 0)
        return -SBX_EINVAL;
    int r = ev.type == t ? 0 : at(&ev, what, err);
    yaml_event_delete(&ev);
    return r;
}

int
kube_yaml_to_json(const char *text, size_t len, json_t **out, sbx_error **err)
{
    *out = NULL;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return sbx_error_set(err, SBX_ENOMEM, 0, "yaml_parser_initialize");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int r = expect(&p, YAML_STREAM_START_EVENT, "not a YAML stream", err);
    yaml_event_t ev;
    if (r == 0)
        r = next_event(&p, &ev, err);
    if (r == 0 && ev.type != YAML_DOCUMENT_START_EVENT) {
        r = sbx_error_set(err, SBX_EINVAL, 0, "empty YAML");
        yaml_event_delete(&ev);
    } else if (r == 0) {
        yaml_event_delete(&ev);
        r = next_event(&p, &ev, err);
        if (r == 0)
            r = yaml_node(&p, &ev, 0, out, err);
    }
    if (r == 0)
        r = expect(&p, YAML_DOCUMENT_END_EVENT, "more than one node in the document", err);
    if (r == 0)
        r = expect(&p, YAML_STREAM_END_EVENT, "more than one YAML document", err);
    yaml_parser_delete(&p);
    if (r < 0) {
        json_decref(*out);
        *out = NULL;
    }
    return r;
}

/* ---- kubeconfig ---- */

/* Like the sbx_x* allocators: the server aborts on out-of-memory. */
__attribute__((noreturn)) static void
oom(void)
{
    static const char msg[] = "sbx: out of memory\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}

/* n bytes of sodium memory (guarded, wiped when freed). */
static void *
secure_alloc(size_t n)
{
    /* idempotent and thread-safe; the server calls it at startup, tests may not */
    if (sodium_init() < 0)
        oom();
    void *p = sodium_malloc(n);
    if (!p)
        oom();
    return p;
}

/* A NUL-terminated copy in sodium memory (for a key or a token). */
static char *
secure_dup(const char *s, size_t n)
{
    char *d = secure_alloc(n + 1);
    if (!d)
        oom();
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void
secure_free(char *s)
{
    sodium_free(s); /* wipes */
}

static int
b64_decode(const char *what, const char *s, bool secure, char **out, sbx_error **err)
{
    size_t max = strlen(s) / 4 * 3 + 3;
    unsigned char *buf = secure_alloc(max + 1);
    size_t n = 0;
    if (sodium_base642bin(buf, max, s, strlen(s), " \t\r\n", &n, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0) {
        sodium_free(buf);
        return sbx_error_set(err, SBX_EINVAL, 0, "%s is not valid base64", what);
    }
    *out = secure ? secure_dup((const char *)buf, n) : sbx_xstrndup((const char *)buf, n);
    sodium_free(buf);
    return 0;
}

static int
read_path(const char *what, const char *base, const char *path, bool secure, char **out,
          sbx_error **err)
{
    sbx_autofree char *full =
        path[0] == '/' || !base ? sbx_xstrdup(path) : sbx_xasprintf("%s/%s", base, path);
    char *text = NULL;
    size_t len = 0;
    if (sbx_read_file(full, FILE_MAX, &text, &len, err) < 0)
        return sbx_error_wrap(err, "%s", what);
    if (secure) {
        *out = secure_dup(text, len);
        sodium_memzero(text, len);
        free(text);
    } else {
        *out = text;
    }
    return 0;
}

static const char *
str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && *s ? s : NULL;
}

/* The entry called name of the list root[list] ([{name, <inner>: {...}}]): its inner object. */
static json_t *
find_named(const json_t *root, const char *list, const char *inner, const char *name)
{
    size_t i = 0;
    json_t *it = NULL;
    json_array_foreach (json_object_get(root, list), i, it) {
        const char *n = json_string_value(json_object_get(it, "name"));
        if (n && strcmp(n, name) == 0) {
            json_t *in = json_object_get(it, inner);
            return json_is_object(in) ? in : NULL;
        }
    }
    return NULL;
}

/* data (base64) or a file path: the bytes, or NULL when neither is there. */
static int
data_or_file(const json_t *o, const char *key, const char *base, bool secure, char **out,
             sbx_error **err)
{
    sbx_autofree char *dkey = sbx_xasprintf("%s-data", key);
    const char *d = str_of(o, dkey);
    const char *f = str_of(o, key);
    *out = NULL;
    if (d)
        return b64_decode(dkey, d, secure, out, err);
    if (f)
        return read_path(key, base, f, secure, out, err);
    return 0;
}

static int
read_cluster(const json_t *cl, const char *base, const struct kube_cfg_opts *o,
             struct kube_cfg *out, sbx_error **err)
{
    const char *server = str_of(cl, "server");
    if (!server)
        return sbx_error_set(err, SBX_EINVAL, 0, "its cluster has no `server`");
    if (strncasecmp(server, "https://", 8) != 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "its server `%.200s` is not https:// (credentials would travel in "
                             "clear text)",
                             server);
    size_t n = strlen(server);
    while (n > 8 && server[n - 1] == '/')
        n--;
    out->server = sbx_xstrndup(server, n);
    const char *ins = str_of(cl, "insecure-skip-tls-verify");
    if (ins && strcmp(ins, "true") == 0) {
        if (!o->allow_insecure)
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "its cluster sets insecure-skip-tls-verify: refused (anyone "
                                 "on the path could read the credentials; set "
                                 "providers.kubernetes.allow_insecure = true to accept it)");
        out->insecure = true;
    }
    return data_or_file(cl, "certificate-authority", base, false, &out->ca, err);
}

static int
read_user(const json_t *u, const char *base, struct kube_cfg *out, sbx_error **err)
{
    static const char *const refused[] = {"exec", "auth-provider", "username", "password"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(refused); i++) {
        if (json_object_get(u, refused[i]))
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "its user uses `%s`, which sbx does not support (no plugin "
                                 "runs): give it a token, a tokenFile or a client certificate",
                                 refused[i]);
    }
    const char *tok = str_of(u, "token");
    const char *tf = str_of(u, "tokenFile");
    if (tok)
        out->token = secure_dup(tok, strlen(tok));
    else if (tf)
        out->token_file =
            tf[0] == '/' || !base ? sbx_xstrdup(tf) : sbx_xasprintf("%s/%s", base, tf);
    if (data_or_file(u, "client-certificate", base, false, &out->cert, err) < 0 ||
        data_or_file(u, "client-key", base, true, &out->key, err) < 0)
        return -SBX_EINVAL;
    if (!out->cert != !out->key)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "its user has a client certificate without a key or a key "
                             "without a certificate");
    return 0;
}

static char *
names_of(const json_t *root, const char *list)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 4096);
    size_t i = 0;
    json_t *it = NULL;
    json_array_foreach (json_object_get(root, list), i, it) {
        const char *n = json_string_value(json_object_get(it, "name"));
        (void)sbx_buf_printf(&b, NULL, "%s%s", i ? ", " : "", n ? n : "?");
    }
    if (b.len == 0)
        (void)sbx_buf_append_str(&b, "none", NULL);
    return sbx_buf_steal(&b);
}

static int
parse_tree(const json_t *root, const struct kube_cfg_opts *o, struct kube_cfg *out, sbx_error **err)
{
    if (!json_is_object(root))
        return sbx_error_set(err, SBX_EINVAL, 0, "not a kubeconfig (no mapping at the top)");
    const char *name = o->context && *o->context ? o->context : str_of(root, "current-context");
    if (!name)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "no current-context (set providers.kubernetes.context)");
    const json_t *ctx = find_named(root, "contexts", "context", name);
    if (!ctx) {
        sbx_autofree char *names = names_of(root, "contexts");
        return sbx_error_set(err, SBX_EINVAL, 0, "no context `%.100s` (it has: %.300s)", name,
                             names);
    }
    out->context = sbx_xstrdup(name);
    const char *cname = str_of(ctx, "cluster");
    const json_t *cl = cname ? find_named(root, "clusters", "cluster", cname) : NULL;
    if (!cl)
        return sbx_error_set(err, SBX_EINVAL, 0, "context `%.100s`: no cluster `%.100s`", name,
                             cname ? cname : "(none named)");
    if (read_cluster(cl, o->base_dir, o, out, err) < 0)
        return sbx_error_wrap(err, "context `%.100s`", name);
    const char *uname = str_of(ctx, "user");
    const json_t *u = uname ? find_named(root, "users", "user", uname) : NULL;
    if (uname && !u)
        return sbx_error_set(err, SBX_EINVAL, 0, "context `%.100s`: no user `%.100s`", name, uname);
    if (u && read_user(u, o->base_dir, out, err) < 0)
        return sbx_error_wrap(err, "context `%.100s`", name);
    const char *ns = str_of(ctx, "namespace");
    out->namespace = ns ? sbx_xstrdup(ns) : NULL;
    return 0;
}

int
kube_cfg_parse(const char *text, size_t len, const char *what, const struct kube_cfg_opts *o,
               struct kube_cfg *out, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    json_t *root = NULL;
    int r = kube_yaml_to_json(text, len, &root, err);
    if (r == 0)
        r = parse_tree(root, o, out, err);
    json_decref(root);
    if (r < 0) {
        kube_cfg_dispose(out);
        return sbx_error_wrap(err, "kubeconfig %s", what);
    }
    return 0;
}

int
kube_cfg_load(const char *path, const struct kube_cfg_opts *o, struct kube_cfg *out,
              sbx_error **err)
{
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    if (sbx_read_file(path, FILE_MAX, &text, &len, err) < 0)
        return sbx_error_wrap(err, "kubeconfig");
    struct kube_cfg_opts oo = *o;
    sbx_autofree char *dir = NULL;
    if (!oo.base_dir) {
        const char *slash = strrchr(path, '/');
        dir = slash ? sbx_xstrndup(path, (size_t)(slash - path) + (slash == path)) : NULL;
        oo.base_dir = dir;
    }
    sbx_autofree char *what = sbx_xasprintf("`%s`", path);
    int r = kube_cfg_parse(text, len, what, &oo, out, err);
    sodium_memzero(text, len);
    free(text);
    return r;
}

/* The service account's directory: the caller's, else $SBX_KUBERNETES_SA_DIR, else the
 * standard one. The variable exists for tests (a fake API server outside a cluster) and for
 * token projections mounted elsewhere; it names a directory, not a credential, and whoever
 * sets the server's environment controls the server anyway. */
static const char *
sa_dir_of(const char *sa_dir)
{
    if (sa_dir)
        return sa_dir;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use of the environment */
    const char *env = getenv("SBX_KUBERNETES_SA_DIR");
    return env && *env ? env : SA_DIR;
}

bool
kube_in_cluster_available(const char *sa_dir)
{
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use of the environment */
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    sbx_autofree char *tok = sbx_xasprintf("%s/token", sa_dir_of(sa_dir));
    return host && *host && access(tok, R_OK) == 0;
}

int
kube_cfg_in_cluster(const char *sa_dir, struct kube_cfg *out, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    const char *dir = sa_dir_of(sa_dir);
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use of the environment */
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use of the environment */
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host)
        return sbx_error_set(err, SBX_EUNAVAIL, 0,
                             "not in a cluster (KUBERNETES_SERVICE_HOST is not set) and no "
                             "kubeconfig configured (providers.kubernetes.kubeconfig)");
    bool v6 = strchr(host, ':') != NULL;
    out->server = sbx_xasprintf("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                                port && *port ? port : "443");
    out->context = sbx_xstrdup("in-cluster");
    out->token_file = sbx_xasprintf("%s/token", dir);
    sbx_autofree char *ca = sbx_xasprintf("%s/ca.crt", dir);
    sbx_autofree char *ns = sbx_xasprintf("%s/namespace", dir);
    if (access(out->token_file, R_OK) < 0) {
        int e = errno;
        kube_cfg_dispose(out);
        return sbx_error_set(err, SBX_EUNAVAIL, e, "in-cluster: the service account token");
    }
    if (read_path("in-cluster CA", NULL, ca, false, &out->ca, err) < 0) {
        kube_cfg_dispose(out);
        return -SBX_EUNAVAIL;
    }
    char *nstext = NULL;
    size_t nslen = 0;
    sbx_autoerror sbx_error *ignored = NULL;
    if (sbx_read_file(ns, 256, &nstext, &nslen, &ignored) == 0) {
        nstext[strcspn(nstext, " \r\n")] = '\0';
        out->namespace = *nstext ? nstext : NULL;
        if (!out->namespace)
            free(nstext);
    }
    return 0;
}

void
kube_cfg_dispose(struct kube_cfg *c)
{
    free(c->server);
    free(c->context);
    free(c->namespace);
    free(c->ca);
    free(c->cert);
    if (c->key)
        secure_free(c->key);
    if (c->token)
        secure_free(c->token);
    free(c->token_file);
    memset(c, 0, sizeof *c);
}

/* ---- the client ---- */

struct kube_client {
    struct kube_cfg cfg;
    struct kube_client_opts o;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        sbx_warn("curl_global_init failed");
}

int
kube_client_new(struct kube_cfg *cfg, const struct kube_client_opts *o, struct kube_client **out,
                sbx_error **err)
{
    (void)err;
    pthread_once(&curl_once, curl_init_once);
    struct kube_client *c = sbx_xcalloc(1, sizeof *c);
    c->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    c->o = *o;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = DEF_TIMEOUT;
    if (c->o.retries < 0)
        c->o.retries = 0;
    if (c->o.backoff_ms <= 0)
        c->o.backoff_ms = 200;
    *out = c;
    return 0;
}

void
kube_client_free(struct kube_client *c)
{
    if (!c)
        return;
    kube_cfg_dispose(&c->cfg);
    free(c);
}

const char *
kube_client_server(const struct kube_client *c)
{
    return c->cfg.server;
}

const char *
kube_client_namespace(const struct kube_client *c)
{
    return c->cfg.namespace;
}

static size_t
on_body(char *p, size_t size, size_t n, void *ud)
{
    struct sbx_buf *b = ud;
    size_t len = size * n;
    if (b->len + len <= BODY_MAX)
        (void)sbx_buf_append(b, p, len, NULL);
    return len;
}

/* *line = the "Authorization: Bearer ..." line (sodium memory), or NULL without a token. */
static int
auth_line(const struct kube_client *c, char **line, sbx_error **err)
{
    *line = NULL;
    char *tok = c->cfg.token;
    char *fresh = NULL;
    if (!tok && c->cfg.token_file) {
        if (read_path("token file", NULL, c->cfg.token_file, true, &fresh, err) < 0 || !fresh)
            return -SBX_EUNAVAIL;
        fresh[strcspn(fresh, "\r\n")] = '\0';
        tok = fresh;
    }
    if (!tok)
        return 0;
    static const char pre[] = "Authorization: Bearer ";
    size_t n = sizeof pre + strlen(tok);
    *line = secure_alloc(n);
    (void)snprintf(*line, n, "%s%s", pre, tok);
    if (fresh)
        secure_free(fresh);
    return 0;
}

/* TLS settings of a handle: CA, client certificate and key, all from memory. */
static void
set_tls(const struct kube_client *c, CURL *h)
{
    if (c->cfg.ca) {
        struct curl_blob ca = {
            .data = c->cfg.ca, .len = strlen(c->cfg.ca), .flags = CURL_BLOB_COPY};
        (void)curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
    }
    if (c->cfg.cert && c->cfg.key) {
        struct curl_blob cert = {
            .data = c->cfg.cert, .len = strlen(c->cfg.cert), .flags = CURL_BLOB_COPY};
        /* NOCOPY: curl reads the key from our sodium memory, which outlives the handle */
        struct curl_blob key = {
            .data = c->cfg.key, .len = strlen(c->cfg.key), .flags = CURL_BLOB_NOCOPY};
        (void)curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
        (void)curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        (void)curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
        (void)curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (c->cfg.insecure) {
        (void)curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        (void)curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

static CURL *
new_handle(const struct kube_client *c, const char *url)
{
    CURL *h = curl_easy_init();
    if (!h)
        oom();
    (void)curl_easy_setopt(h, CURLOPT_URL, url);
    (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    (void)curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    (void)curl_easy_setopt(h, CURLOPT_USERAGENT, "sbx");
    set_tls(c, h);
    return h;
}

static void
free_headers(struct curl_slist *h)
{
    for (struct curl_slist *i = h; i; i = i->next)
        sodium_memzero(i->data, strlen(i->data));
    curl_slist_free_all(h);
}

/* One try. */
static int
call_once(struct kube_client *c, const char *method, const char *url, const char *body,
          struct kube_resp *out, sbx_error **err)
{
    struct sbx_buf resp;
    sbx_buf_init(&resp, BODY_MAX + 1);
    CURL *h = new_handle(c, url);
    (void)curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->o.timeout_ms);
    (void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    (void)curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    struct curl_slist *hdr = curl_slist_append(NULL, "Accept: application/json");
    char *auth = NULL;
    if (auth_line(c, &auth, err) < 0) {
        curl_easy_cleanup(h);
        free_headers(hdr);
        sbx_buf_dispose(&resp);
        return -SBX_EUNAVAIL;
    }
    if (auth) {
        hdr = curl_slist_append(hdr, auth);
        secure_free(auth);
    }
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (strcmp(method, "GET") != 0)
        (void)curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    (void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    char ebuf[CURL_ERROR_SIZE] = "";
    (void)curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(h);
    int r = 0;
    if (rc != CURLE_OK) {
        r = sbx_error_set(err, SBX_EUNAVAIL, 0, "%s %s: %s", method, url,
                          ebuf[0] ? ebuf : curl_easy_strerror(rc));
    } else {
        (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
        sbx_autofree char *text = sbx_buf_steal(&resp);
        out->json = json_loads(text, 0, NULL);
    }
    curl_easy_cleanup(h);
    free_headers(hdr);
    sbx_buf_dispose(&resp);
    return r;
}

int
kube_call(struct kube_client *c, const char *method, const char *path, const json_t *body,
          struct kube_resp *out, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    sbx_autofree char *url = sbx_xasprintf("%s%s", c->cfg.server, path);
    sbx_autofree char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    long wait = c->o.backoff_ms;
    for (int attempt = 0;; attempt++) {
        sbx_error *e = NULL;
        kube_resp_dispose(out);
        int r = call_once(c, method, url, text, out, &e);
        bool retry = r < 0 || out->status == 429 || out->status >= 500;
        /* a POST that failed in transport may have been applied: the caller's next step (a
         * GET, or the 409 of the next POST) finds out; retrying it here is safe too */
        if (!retry || attempt >= c->o.retries) {
            if (r < 0)
                sbx_error_move(err, &e);
            sbx_error_clear(&e);
            return r;
        }
        sbx_error_clear(&e);
        (void)usleep((useconds_t)wait * 1000);
        wait *= 2;
    }
}

void
kube_resp_dispose(struct kube_resp *r)
{
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

static int
status_code(long status)
{
    if (status == 401 || status == 403 || status == 429 || status >= 500)
        return SBX_EUNAVAIL;
    if (status == 404)
        return SBX_ENOTFOUND;
    if (status == 409 || status == 410)
        return SBX_ECONFLICT;
    return SBX_EINVAL;
}

int
kube_fail(const struct kube_resp *r, const char *what, sbx_error **err)
{
    const char *msg = json_string_value(json_object_get(r->json, "message"));
    const char *reason = json_string_value(json_object_get(r->json, "reason"));
    char tail[512];
    (void)snprintf(tail, sizeof tail, "%s", msg ? msg : "");
    for (char *p = tail; *p; p++) {
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    }
    return sbx_error_set(err, status_code(r->status), 0, "%s: HTTP %ld%s%s%s%s", what, r->status,
                         reason ? " " : "", reason ? reason : "", *tail ? ": " : "", tail);
}

/* ---- streamed GETs (watches) ---- */

struct stream {
    const struct kube_stream_ops *o;
    CURL *h;
    long status;
    struct sbx_buf line; /* the partial line; the whole body of a non-200 answer */
    bool ended;          /* on_line asked to end */
};

/* One line complete in s->line: to on_line. 0, or -1 to end. */
static int
stream_line(struct stream *s)
{
    int r = s->line.len ? s->o->on_line(s->o->ud, sbx_buf_str(&s->line), s->line.len) : 0;
    sbx_buf_reset(&s->line);
    if (r < 0)
        s->ended = true;
    return r < 0 ? -1 : 0;
}

static size_t
stream_body(char *p, size_t size, size_t n, void *ud)
{
    struct stream *s = ud;
    size_t len = size * n;
    if (s->status == 0) {
        (void)curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
        if (s->o->on_status)
            s->o->on_status(s->o->ud, s->status);
    }
    size_t off = 0;
    while (off < len) {
        const char *nl = s->status == 200 ? memchr(p + off, '\n', len - off) : NULL;
        size_t take = nl ? (size_t)(nl - (p + off)) : len - off;
        /* an event of more than 4 MiB is no pod of ours: end the stream (append fails) */
        if (sbx_buf_append(&s->line, p + off, take, NULL) < 0)
            return 0;
        off += take;
        if (nl) {
            off++;
            if (stream_line(s) < 0)
                return 0;
        }
    }
    return len;
}

static int
stream_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    struct stream *s = ud;
    if (s->o->stopped && s->o->stopped(s->o->ud)) {
        s->ended = true;
        return 1;
    }
    return 0;
}

static int
stream_result(struct stream *s, CURLcode rc, const char *ebuf, const char *path, sbx_error **err)
{
    if (s->status != 0 && s->status != 200) {
        struct kube_resp r = {.status = s->status,
                              .json = json_loads(sbx_buf_str(&s->line), 0, NULL)};
        int e = kube_fail(&r, "watch", err);
        json_decref(r.json);
        return e;
    }
    if (rc == CURLE_OK || s->ended)
        return 0;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "GET %s: %s", path,
                         ebuf[0] ? ebuf : curl_easy_strerror(rc));
}

int
kube_stream(struct kube_client *c, const char *path, const struct kube_stream_ops *o, long max_ms,
            sbx_error **err)
{
    sbx_autofree char *url = sbx_xasprintf("%s%s", c->cfg.server, path);
    struct stream s = {.o = o};
    sbx_buf_init(&s.line, BODY_MAX + 1);
    s.h = new_handle(c, url);
    (void)curl_easy_setopt(s.h, CURLOPT_TIMEOUT_MS, max_ms);
    (void)curl_easy_setopt(s.h, CURLOPT_WRITEFUNCTION, stream_body);
    (void)curl_easy_setopt(s.h, CURLOPT_WRITEDATA, &s);
    (void)curl_easy_setopt(s.h, CURLOPT_NOPROGRESS, 0L);
    (void)curl_easy_setopt(s.h, CURLOPT_XFERINFOFUNCTION, stream_progress);
    (void)curl_easy_setopt(s.h, CURLOPT_XFERINFODATA, &s);
    struct curl_slist *hdr = curl_slist_append(NULL, "Accept: application/json");
    char *auth = NULL;
    if (auth_line(c, &auth, err) < 0) {
        curl_easy_cleanup(s.h);
        free_headers(hdr);
        sbx_buf_dispose(&s.line);
        return -SBX_EUNAVAIL;
    }
    if (auth) {
        hdr = curl_slist_append(hdr, auth);
        secure_free(auth);
    }
    (void)curl_easy_setopt(s.h, CURLOPT_HTTPHEADER, hdr);
    char ebuf[CURL_ERROR_SIZE] = "";
    (void)curl_easy_setopt(s.h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(s.h);
    int r = stream_result(&s, rc, ebuf, path, err);
    curl_easy_cleanup(s.h);
    free_headers(hdr);
    sbx_buf_dispose(&s.line);
    return r;
}

/* ---- pods/portforward over WebSocket ---- */

struct pf {
    CURL *h;
    int local; /* our end of the socketpair */
    curl_socket_t sock;
    int port;
    char what[160]; /* "pod ns/name port P" for the log */
    uint8_t *in;    /* bytes from the API server not yet parsed */
    size_t in_len, in_cap;
    bool seen_port[2]; /* the first frame of channels 0 and 1 is the port */
};

static int
pf_send(CURL *h, curl_socket_t sock, const void *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(h, (const char *)buf + off, n - off, &sent);
        if (rc == CURLE_AGAIN) {
            struct pollfd w = {.fd = sock, .events = POLLOUT};
            (void)poll(&w, 1, 1000);
            continue;
        }
        if (rc != CURLE_OK)
            return -1;
        off += sent;
    }
    return 0;
}

/* A client frame (masked) of op with payload [prefix byte if >= 0] + data. */
static int
pf_frame(struct pf *p, enum sbx_ws_op op, int prefix, const uint8_t *data, size_t n)
{
    uint8_t mask[4];
    randombytes_buf(mask, sizeof mask);
    size_t plen = n + (prefix >= 0);
    uint8_t head[14];
    size_t hl = sbx_ws_head_masked(head, op, plen, mask);
    uint8_t *buf = sbx_xmalloc(hl + plen);
    memcpy(buf, head, hl);
    if (prefix >= 0)
        buf[hl] = (uint8_t)prefix;
    if (n)
        memcpy(buf + hl + (prefix >= 0), data, n);
    sbx_ws_mask(buf + hl, plen, mask);
    int r = pf_send(p->h, p->sock, buf, hl + plen);
    free(buf);
    return r;
}

/* One data message from the API server. 0 = go on, -1 = end the stream. */
static int
pf_message(struct pf *p, const uint8_t *m, size_t n)
{
    if (n == 0)
        return 0;
    unsigned ch = m[0];
    m++;
    n--;
    if (ch > 1)
        return 0; /* one port asked for: no other channel */
    if (!p->seen_port[ch]) {
        /* the first frame of each channel is the port, 2 bytes little-endian */
        p->seen_port[ch] = true;
        if (n < 2)
            return 0;
        m += 2;
        n -= 2;
    }
    if (n == 0)
        return 0;
    if (ch == 1) {
        sbx_warn("portforward to %s: %.*s", p->what, (int)(n > 400 ? 400 : n), (const char *)m);
        return -1;
    }
    return sbx_write_all(p->local, m, n) < 0 ? -1 : 0;
}

/* Parse what is buffered. 0 = go on, -1 = end. */
static int
pf_parse(struct pf *p)
{
    size_t off = 0;
    int r = 0;
    while (r == 0 && off < p->in_len) {
        struct sbx_ws_frame f;
        const char *why = NULL;
        long used = sbx_ws_parse_server(p->in + off, p->in_len - off, WS_FRAME_MAX, &f, &why);
        if (used == 0)
            break;
        if (used < 0) {
            sbx_warn("portforward to %s: bad frame from the API server: %s", p->what,
                     why ? why : "?");
            r = -1;
            break;
        }
        off += (size_t)used;
        if (f.op == SBX_WS_CLOSE)
            r = -1;
        else if (f.op == SBX_WS_PING)
            r = pf_frame(p, SBX_WS_PONG, -1, f.payload, f.len);
        else if (f.op == SBX_WS_BINARY)
            r = pf_message(p, f.payload, f.len);
        /* text (base64 protocols) and fragments are not what v4.channel.k8s.io sends */
    }
    memmove(p->in, p->in + off, p->in_len - off);
    p->in_len -= off;
    return r;
}

/* Everything curl has for us. 0 = go on, -1 = the remote side closed or failed. */
static int
pf_drain(struct pf *p)
{
    for (;;) {
        if (p->in_cap - p->in_len < 16384) {
            if (p->in_cap >= WS_FRAME_MAX + (size_t)16384 * 2)
                return -1;
            p->in_cap = p->in_cap ? p->in_cap * 2 : 65536;
            p->in = sbx_xrealloc(p->in, p->in_cap);
        }
        size_t got = 0;
        CURLcode rc = curl_easy_recv(p->h, (char *)p->in + p->in_len, 16384, &got);
        if (rc == CURLE_AGAIN)
            return 0;
        if (rc != CURLE_OK || got == 0)
            return -1;
        p->in_len += got;
        if (pf_parse(p) < 0)
            return -1;
    }
}

static void *
pf_main(void *arg)
{
    struct pf *p = arg;
    uint8_t buf[16384];
    for (;;) {
        if (pf_drain(p) < 0)
            break;
        struct pollfd fds[2] = {{.fd = p->local, .events = POLLIN},
                                {.fd = p->sock, .events = POLLIN}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(p->local, buf, sizeof buf);
            if (n <= 0) {
                uint8_t code[2] = {SBX_WS_CLOSE_NORMAL >> 8, SBX_WS_CLOSE_NORMAL & 0xff};
                (void)pf_frame(p, SBX_WS_CLOSE, -1, code, sizeof code);
                break;
            }
            if (pf_frame(p, SBX_WS_BINARY, 0, buf, (size_t)n) < 0)
                break;
        }
    }
    curl_easy_cleanup(p->h);
    (void)close(p->local);
    free(p->in);
    free(p);
    return NULL;
}

/* Read the HTTP answer to the upgrade into p->in; leaves bytes past the head there. */
static int
pf_handshake(struct pf *p, const char *accept, sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + 15000;
    p->in_cap = 65536;
    p->in = sbx_xmalloc(p->in_cap);
    for (;;) {
        size_t got = 0;
        CURLcode rc =
            curl_easy_recv(p->h, (char *)p->in + p->in_len, p->in_cap - p->in_len - 1, &got);
        if (rc == CURLE_AGAIN) {
            if (sbx_now_ms() > deadline)
                return sbx_error_set(err, SBX_ETIMEDOUT, 0, "no answer to the upgrade");
            struct pollfd r = {.fd = p->sock, .events = POLLIN};
            (void)poll(&r, 1, 1000);
            continue;
        }
        if (rc != CURLE_OK || got == 0)
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "the API server closed the connection");
        p->in_len += got;
        p->in[p->in_len] = '\0';
        char *end = strstr((char *)p->in, "\r\n\r\n");
        if (!end && p->in_len + 1 >= p->in_cap)
            return sbx_error_set(err, SBX_EIO, 0, "answer head too long");
        if (!end)
            continue;
        size_t head = (size_t)(end - (char *)p->in) + 4;
        int status = 0;
        if (sscanf((char *)p->in, "HTTP/1.%*d %d", &status) != 1)
            return sbx_error_set(err, SBX_EIO, 0, "not an HTTP answer");
        if (status != 101) {
            /* the body (a Status) says why: take what came with the head */
            const char *body = end + 4;
            json_t *j = json_loads(body, 0, NULL);
            struct kube_resp resp = {.status = status, .json = j};
            int r = kube_fail(&resp, "upgrade", err);
            json_decref(j);
            return r;
        }
        sbx_autofree char *want = sbx_xasprintf("sec-websocket-accept: %s", accept);
        bool ok = false;
        for (char *line = (char *)p->in; line < end;) {
            char *eol = strstr(line, "\r\n");
            if (eol && (size_t)(eol - line) == strlen(want) &&
                strncasecmp(line, want, strlen("sec-websocket-accept: ")) == 0 &&
                strncmp(line + strlen("sec-websocket-accept: "), accept, strlen(accept)) == 0)
                ok = true;
            line = eol ? eol + 2 : end;
        }
        if (!ok)
            return sbx_error_set(err, SBX_EIO, 0, "bad Sec-WebSocket-Accept in the answer");
        memmove(p->in, p->in + head, p->in_len - head);
        p->in_len -= head;
        return 0;
    }
}

static int
pf_open(struct kube_client *c, struct pf *p, const char *path, sbx_error **err)
{
    sbx_autofree char *url = sbx_xasprintf("%s/", c->cfg.server);
    p->h = new_handle(c, url);
    (void)curl_easy_setopt(p->h, CURLOPT_CONNECT_ONLY, 1L);
    char ebuf[CURL_ERROR_SIZE] = "";
    (void)curl_easy_setopt(p->h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(p->h);
    if (rc != CURLE_OK)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "connect to %s: %s", c->cfg.server,
                             ebuf[0] ? ebuf : curl_easy_strerror(rc));
    (void)curl_easy_setopt(p->h, CURLOPT_ERRORBUFFER, NULL);
    (void)curl_easy_getinfo(p->h, CURLINFO_ACTIVESOCKET, &p->sock);
    uint8_t raw[16];
    randombytes_buf(raw, sizeof raw);
    char key[sodium_base64_ENCODED_LEN(16, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(key, sizeof key, raw, sizeof raw, sodium_base64_VARIANT_ORIGINAL);
    char accept[29];
    if (sbx_ws_accept_key(key, accept) < 0)
        return sbx_error_set(err, SBX_EGENERIC, 0, "WebSocket key");
    const char *auth_host = c->cfg.server + strlen("https://");
    char *auth = NULL;
    if (auth_line(c, &auth, err) < 0)
        return -SBX_EUNAVAIL;
    struct sbx_buf req;
    sbx_buf_init(&req, 1 << 16);
    (void)sbx_buf_printf(&req, NULL,
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sbx\r\n"
                         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                         "Sec-WebSocket-Protocol: " PF_SUBPROTO "\r\n%s%s\r\n",
                         path, auth_host, key, auth ? auth : "", auth ? "\r\n" : "");
    if (auth)
        secure_free(auth);
    int r = pf_send(p->h, p->sock, req.data, req.len);
    sodium_memzero(req.data, req.len);
    sbx_buf_dispose(&req);
    if (r < 0)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "send the upgrade request");
    return pf_handshake(p, accept, err);
}

int
kube_portforward(struct kube_client *c, const char *ns, const char *name, int port, int *fd,
                 sbx_error **err)
{
    struct pf *p = sbx_xcalloc(1, sizeof *p);
    p->port = port;
    p->local = -1;
    (void)snprintf(p->what, sizeof p->what, "pod %s/%s port %d", ns, name, port);
    sbx_autofree char *path =
        sbx_xasprintf("/api/v1/namespaces/%s/pods/%s/portforward?ports=%d", ns, name, port);
    int sv[2] = {-1, -1};
    int r = pf_open(c, p, path, err);
    if (r == 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        r = sbx_error_set(err, SBX_EGENERIC, errno, "socketpair");
    if (r == 0) {
        p->local = sv[1];
        /* frames that came with the handshake's answer */
        if (pf_parse(p) < 0)
            r = sbx_error_set(err, SBX_EIO, 0, "portforward to %s ended at once", p->what);
    }
    pthread_t t;
    pthread_attr_t attr;
    int prc = -1;
    if (r == 0) {
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        prc = pthread_create(&t, &attr, pf_main, p);
        pthread_attr_destroy(&attr);
        if (prc != 0)
            r = sbx_error_set(err, SBX_EGENERIC, prc, "start the portforward pump");
    }
    if (r < 0) {
        if (p->h)
            curl_easy_cleanup(p->h);
        if (sv[0] >= 0)
            (void)close(sv[0]);
        if (sv[1] >= 0)
            (void)close(sv[1]);
        free(p->in);
        free(p);
        return sbx_error_wrap(err, "portforward to pod %s/%s port %d", ns, name, port);
    }
    *fd = sv[0];
    return 0;
}
