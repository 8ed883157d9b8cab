/*
 * pull.c - `sbx image pull`: the OCI distribution API v2 over libcurl.
 *
 *   GET /v2/<repo>/manifests/<tag|digest>   (Accept: OCI + Docker manifests and indexes)
 *   GET /v2/<repo>/blobs/<digest>           (streamed into the verifying blob writer)
 *
 * Auth: anonymous first; on 401 the WWW-Authenticate challenge says what to do: `Bearer
 * realm=..,service=..,scope=..` -> fetch a token from the realm (with basic credentials when we
 * have them) and retry; `Basic` -> retry with the credentials. Every manifest and blob is
 * checked against its digest: the registry is not trusted.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define MANIFEST_MAX (4u << 20)
#define ERRBODY_MAX  4096u
#define ACCEPT_MANIFESTS                                                         \
    "Accept: " SBX_MT_OCI_INDEX ", " SBX_MT_OCI_MANIFEST ", " SBX_MT_DOCKER_LIST \
    ", " SBX_MT_DOCKER_MANIFST

struct reg {
    struct sbx_image_store *s;
    const struct sbx_image_pull_opts *opts;
    struct sbx_image_ref ref;
    const char *given; /* the reference as the user wrote it, for messages */
    char *base;        /* scheme://host[:port] */
    char *auth;        /* "Authorization: ..." or NULL */
    bool authed;       /* a challenge was answered already */
    CURL *curl;
};

struct resp {
    long status;
    char *www_auth;
    char *content_type;
    char *body; /* small bodies: manifests, tokens, error text */
    size_t len;
    size_t max;                /* body limit (a blob: its size from the manifest) */
    struct sbx_blob_writer *w; /* set: a 200 body goes here */
    sbx_error *werr;
    struct sbx_image_progress *prog; /* a blob's progress, told as its bytes arrive */
    const struct sbx_image_pull_opts *opts;
};

static void
tell(const struct sbx_image_pull_opts *o, struct sbx_image_progress *p,
     enum sbx_image_blob_phase phase, uint64_t done)
{
    if (!o->progress || !p)
        return;
    p->phase = phase;
    p->done = done;
    o->progress(p, o->progress_arg);
}

static void
resp_clear(struct resp *r)
{
    free(r->www_auth);
    free(r->content_type);
    free(r->body);
    sbx_error_clear(&r->werr);
    *r = (struct resp){.w = r->w, .max = r->max};
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        sbx_warn("curl_global_init failed");
}

/* ---- libcurl callbacks ---- */

static char *
header_value(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return NULL;
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    return sbx_xstrndup(v, (size_t)(end - v));
}

static size_t
on_header(char *line, size_t size, size_t nitems, void *userdata)
{
    struct resp *r = userdata;
    size_t n = size * nitems;
    char *v;
    if (n > 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after a redirect): forget the previous one's headers and body. */
        free(r->www_auth);
        free(r->content_type);
        free(r->body);
        r->www_auth = r->content_type = r->body = NULL;
        r->len = 0;
        r->status = 0;
    } else if ((v = header_value(line, n, "WWW-Authenticate")) != NULL) {
        free(r->www_auth);
        r->www_auth = v;
    } else if ((v = header_value(line, n, "Content-Type")) != NULL) {
        free(r->content_type);
        r->content_type = v;
    }
    return n;
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct resp *r = userdata;
    size_t n = size * nmemb;
    if (r->w && r->status == 200) {
        /* A registry that sends more than the manifest's size is cut off, not waited for. */
        if (r->w->size + n > r->max) {
            (void)sbx_error_set(&r->werr, SBX_EIO, 0, "blob is larger than its %zu bytes", r->max);
            return 0;
        }
        if (sbx_blob_writer_write(r->w, data, n, &r->werr) < 0)
            return 0;
        tell(r->opts, r->prog, SBX_IMAGE_BLOB_DOWNLOADING, r->w->size);
        return n;
    }
    size_t max = r->status == 200 ? r->max : ERRBODY_MAX;
    if (r->len + n > max)
        return r->status == 200 ? 0 : n; /* too large: abort; error text: just truncate */
    r->body = sbx_xrealloc(r->body, r->len + n + 1);
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

/* ---- requests ---- */

struct status_probe {
    struct resp *r;
    CURL *c;
};

/* on_body needs the status before the first byte: a header callback wrapper records it. */
static size_t
on_header_status(char *line, size_t size, size_t nitems, void *userdata)
{
    struct status_probe *p = userdata;
    size_t n = size * nitems;
    if (n == 2 && line[0] == '\r') /* end of a header block */
        (void)curl_easy_getinfo(p->c, CURLINFO_RESPONSE_CODE, &p->r->status);
    return on_header(line, size, nitems, p->r);
}

static void
setup_curl(CURL *c, const char *url, struct curl_slist *hdrs, struct status_probe *probe,
           struct resp *r)
{
    curl_easy_reset(c);
    (void)curl_easy_setopt(c, CURLOPT_URL, url);
    (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    (void)curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header_status);
    (void)curl_easy_setopt(c, CURLOPT_HEADERDATA, probe);
    (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    (void)curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    (void)curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    (void)curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    (void)curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    (void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    (void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    (void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(c, CURLOPT_USERAGENT, "sbx/" SBX_VERSION);
}

static int
perform(struct reg *g, const char *url, const char *accept, const char *auth, struct resp *r,
        sbx_error **err)
{
    struct curl_slist *hdrs = NULL;
    if (accept)
        hdrs = curl_slist_append(hdrs, accept);
    if (auth)
        hdrs = curl_slist_append(hdrs, auth);
    struct status_probe probe = {.r = r, .c = g->curl};
    setup_curl(g->curl, url, hdrs, &probe, r);
    sbx_debug("GET %s", url);
    CURLcode rc = curl_easy_perform(g->curl);
    curl_slist_free_all(hdrs);
    (void)curl_easy_getinfo(g->curl, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->werr) {
        sbx_error_move(err, &r->werr);
        return -sbx_error_code(*err);
    }
    if (rc != CURLE_OK)
        return sbx_error_set(err, rc == CURLE_WRITE_ERROR ? SBX_ELIMIT : SBX_EUNAVAIL, 0,
                             "GET %s: %s", url, curl_easy_strerror(rc));
    return 0;
}

/* ---- auth ---- */

/* Value of key in a challenge's `k="v",k2=v2` parameter list. */
static char *
challenge_param(const char *params, const char *key)
{
    size_t k = strlen(key);
    const char *p = params;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        bool match = strncasecmp(p, key, k) == 0 && p[k] == '=';
        const char *eq = strchr(p, '=');
        if (!eq)
            return NULL;
        const char *v = eq + 1;
        const char *end;
        if (*v == '"') {
            v++;
            end = strchr(v, '"');
            if (!end)
                return NULL;
        } else {
            end = v + strcspn(v, ",");
        }
        if (match)
            return sbx_xstrndup(v, (size_t)(end - v));
        p = *end == '"' ? end + 1 : end;
    }
    return NULL;
}

static char *
basic_header(const struct sbx_image_pull_opts *o)
{
    sbx_autofree char *plain = sbx_xasprintf("%s:%s", o->username, o->password ? o->password : "");
    size_t n = sodium_base64_encoded_len(strlen(plain), sodium_base64_VARIANT_ORIGINAL);
    sbx_autofree char *b64 = sbx_xmalloc(n);
    sodium_bin2base64(b64, n, (const unsigned char *)plain, strlen(plain),
                      sodium_base64_VARIANT_ORIGINAL);
    sodium_memzero(plain, strlen(plain));
    return sbx_xasprintf("Authorization: Basic %s", b64);
}

static bool
have_creds(const struct reg *g)
{
    return g->opts && g->opts->username && *g->opts->username;
}

static char *
token_url(struct reg *g, const char *params)
{
    sbx_autofree char *realm = challenge_param(params, "realm");
    sbx_autofree char *service = challenge_param(params, "service");
    sbx_autofree char *scope = challenge_param(params, "scope");
    if (!realm || !(sbx_str_starts(realm, "https://") || sbx_str_starts(realm, "http://")))
        return NULL;
    if (!scope)
        scope = sbx_xasprintf("repository:%s:pull", g->ref.repo);
    char *esc_scope = curl_easy_escape(g->curl, scope, 0);
    char *esc_service = service ? curl_easy_escape(g->curl, service, 0) : NULL;
    char *url = sbx_xasprintf("%s%cscope=%s%s%s", realm, strchr(realm, '?') ? '&' : '?',
                              esc_scope ? esc_scope : "", esc_service ? "&service=" : "",
                              esc_service ? esc_service : "");
    curl_free(esc_scope);
    curl_free(esc_service);
    return url;
}

static int
fetch_token(struct reg *g, const char *params, sbx_error **err)
{
    sbx_autofree char *url = token_url(g, params);
    if (!url)
        return sbx_error_set(err, SBX_EIO, 0, "registry %s: bad Bearer challenge `%s`",
                             g->ref.registry, params);
    sbx_autofree char *basic = have_creds(g) ? basic_header(g->opts) : NULL;
    struct resp r = {.max = MANIFEST_MAX};
    int ret = perform(g, url, "Accept: application/json", basic, &r, err);
    if (ret == 0 && (r.status == 401 || r.status == 403))
        ret = sbx_error_set(err, SBX_EPERM, 0, "token service %s refused %s (HTTP %ld)", url,
                            have_creds(g) ? "the credentials" : "anonymous access", r.status);
    else if (ret == 0 && r.status != 200)
        ret = sbx_error_set(err, SBX_EIO, 0, "token service %s: HTTP %ld", url, r.status);
    json_t *doc = ret == 0 ? json_loadb(r.body ? r.body : "", r.len, 0, NULL) : NULL;
    const char *tok = json_string_value(json_object_get(doc, "token"));
    if (!tok)
        tok = json_string_value(json_object_get(doc, "access_token"));
    if (ret == 0 && !tok)
        ret = sbx_error_set(err, SBX_EIO, 0, "token service %s: no token in the answer", url);
    if (ret == 0)
        g->auth = sbx_xasprintf("Authorization: Bearer %s", tok);
    json_decref(doc);
    resp_clear(&r);
    return ret;
}

/* Answer a 401 challenge. */
static int
authenticate(struct reg *g, const char *challenge, sbx_error **err)
{
    g->authed = true;
    free(g->auth);
    g->auth = NULL;
    if (challenge && strncasecmp(challenge, "Bearer ", 7) == 0)
        return fetch_token(g, challenge + 7, err);
    if (challenge && strncasecmp(challenge, "Basic", 5) == 0 && have_creds(g)) {
        g->auth = basic_header(g->opts);
        return 0;
    }
    return sbx_error_set(err, SBX_EPERM, 0,
                         "registry %s requires authentication (give a username and password)",
                         g->ref.registry);
}

/* GET with the auth dance: one retry after answering a 401 challenge. */
static int
get(struct reg *g, const char *url, const char *accept, struct resp *r, sbx_error **err)
{
    int ret = perform(g, url, accept, g->auth, r, err);
    if (ret < 0 || r->status != 401 || g->authed)
        return ret;
    sbx_autofree char *challenge = r->www_auth ? sbx_xstrdup(r->www_auth) : NULL;
    resp_clear(r);
    ret = authenticate(g, challenge, err);
    if (ret < 0)
        return ret;
    return perform(g, url, accept, g->auth, r, err);
}

static int
status_error(struct reg *g, const struct resp *r, const char *what, sbx_error **err)
{
    if (r->status == 401 || r->status == 403)
        return sbx_error_set(err, SBX_EPERM, 0, "registry %s denied access (HTTP %ld)",
                             g->ref.registry, r->status);
    if (r->status == 404)
        return sbx_error_set(err, SBX_ENOTFOUND, 0,
                             "%s not found in registry %s (unknown repository, tag or digest)",
                             what, g->ref.registry);
    return sbx_error_set(err, SBX_EIO, 0, "registry %s: %s: HTTP %ld %.200s", g->ref.registry, what,
                         r->status, r->body ? r->body : "");
}

/* ---- manifests and blobs ---- */

/* Fetch a manifest or index by tag or digest; *out_digest is its (verified) digest. */
static int
fetch_manifest(struct reg *g, const char *reference, struct resp *r, char **out_digest,
               sbx_error **err)
{
    sbx_autofree char *url =
        sbx_xasprintf("%s/v2/%s/manifests/%s", g->base, g->ref.repo, reference);
    *r = (struct resp){.max = MANIFEST_MAX};
    int ret = get(g, url, ACCEPT_MANIFESTS, r, err);
    if (ret < 0)
        return ret;
    if (r->status != 200)
        return status_error(g, r, "manifest", err);
    char *digest = sbx_image_sha256(r->body ? r->body : "", r->len);
    if (sbx_image_digest_valid(reference) && strcmp(digest, reference) != 0) {
        ret = sbx_error_set(err, SBX_EIO, 0, "manifest digest mismatch: expected %s, got %s",
                            reference, digest);
        free(digest);
        return ret;
    }
    *out_digest = digest;
    return 0;
}

static int
fetch_blob(struct reg *g, const struct sbx_image_desc *d, struct sbx_image_progress *p,
           sbx_error **err)
{
    p->digest = d->digest;
    p->total = d->size;
    if (sbx_image_blob_exists(g->s, d->digest)) {
        sbx_debug("blob %s: already in the store", d->digest);
        tell(g->opts, p, SBX_IMAGE_BLOB_CACHED, d->size);
        return 0;
    }
    tell(g->opts, p, SBX_IMAGE_BLOB_DOWNLOADING, 0);
    struct sbx_blob_writer w;
    int ret = sbx_blob_writer_open(&w, g->s, d->digest, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *url = sbx_xasprintf("%s/v2/%s/blobs/%s", g->base, g->ref.repo, d->digest);
    struct resp r = {.w = &w, .max = (size_t)d->size, .prog = p, .opts = g->opts};
    uint64_t t0 = sbx_now_ms();
    ret = get(g, url, NULL, &r, err);
    if (ret == 0 && r.status != 200)
        ret = status_error(g, &r, "blob", err);
    if (ret == 0 && w.size != d->size)
        ret = sbx_error_set(err, SBX_EIO, 0, "blob %s: got %llu bytes, manifest says %llu",
                            d->digest, (unsigned long long)w.size, (unsigned long long)d->size);
    if (ret == 0)
        ret = sbx_blob_writer_commit(&w, g->s, NULL, err);
    if (ret == 0) {
        sbx_debug("blob %s: %llu bytes in %llu ms", d->digest, (unsigned long long)w.size,
                  (unsigned long long)(sbx_now_ms() - t0));
        tell(g->opts, p, SBX_IMAGE_BLOB_DONE, w.size);
    }
    sbx_blob_writer_abort(&w);
    resp_clear(&r);
    return ret;
}

/* The platform manifest: the index (if any) resolved, stored as a verified blob. */
static int
pull_manifest(struct reg *g, char **out_digest, sbx_error **err)
{
    struct resp r;
    sbx_autofree char *digest = NULL;
    int ret = fetch_manifest(g, g->ref.digest ? g->ref.digest : g->ref.tag, &r, &digest, err);
    json_t *doc = ret == 0 ? json_loadb(r.body ? r.body : "", r.len, 0, NULL) : NULL;
    if (ret == 0 && !doc)
        ret = sbx_error_set(err, SBX_EIO, 0, "manifest of `%s` is not JSON", g->given);
    if (ret == 0 && sbx_image_is_index(doc, r.content_type)) {
        sbx_autofree char *chosen = NULL;
        ret = sbx_image_index_select(doc, g->opts ? g->opts->platform : NULL, &chosen, err);
        resp_clear(&r);
        free(sbx_steal_ptr(&digest));
        if (ret == 0)
            ret = fetch_manifest(g, chosen, &r, &digest, err);
    }
    json_decref(doc);
    if (ret == 0)
        ret = sbx_image_blob_put(g->s, r.body ? r.body : "", r.len, digest, NULL, err);
    resp_clear(&r);
    if (ret == 0)
        *out_digest = sbx_steal_ptr(&digest);
    return ret;
}

static int
pull_blobs(struct reg *g, const char *digest, sbx_error **err)
{
    sbx_autofree char *data = NULL;
    size_t n = 0;
    struct sbx_image_manifest m;
    int ret = sbx_image_blob_read(g->s, digest, &data, &n, err);
    if (ret == 0)
        ret = sbx_image_manifest_parse(&m, data, n, err);
    if (ret < 0)
        return ret;
    struct sbx_image_progress p = {.is_config = true, .index = -1, .n_layers = (int)m.n_layers};
    ret = fetch_blob(g, &m.config, &p, err);
    for (size_t i = 0; ret == 0 && i < m.n_layers; i++) {
        p = (struct sbx_image_progress){.index = (int)i, .n_layers = (int)m.n_layers};
        ret = fetch_blob(g, &m.layers[i], &p, err);
    }
    sbx_image_manifest_clear(&m);
    return ret;
}

/* Docker talks plain HTTP to loopback registries only: localhost, 127.0.0.0/8 and ::1 (an exact
 * host match, so "localhost.example.com" or "127.evil.com" stay on HTTPS). */
bool
sbx_image_registry_is_loopback(const char *registry)
{
    if (sbx_str_starts(registry, "[::1]"))
        return registry[5] == '\0' || registry[5] == ':';
    size_t n = strcspn(registry, ":");
    if (n == 9 && strncmp(registry, "localhost", 9) == 0)
        return true;
    struct in_addr a;
    sbx_autofree char *host = sbx_xstrndup(registry, n);
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static char *
registry_base(const struct sbx_image_ref *ref, const struct sbx_image_pull_opts *opts)
{
    if (strcmp(ref->registry, SBX_IMAGE_DEFAULT_REGISTRY) == 0)
        return sbx_xstrdup("https://registry-1.docker.io");
    bool plain = (opts && opts->insecure) || sbx_image_registry_is_loopback(ref->registry);
    return sbx_xasprintf("%s://%s", plain ? "http" : "https", ref->registry);
}

static int
pull_run(struct reg *g, char **out_digest, sbx_error **err)
{
    sbx_autoclose int lock = sbx_image_store_lock(g->s, false, err);
    if (lock < 0)
        return lock;
    sbx_autofree char *digest = NULL;
    int ret = pull_manifest(g, &digest, err);
    if (ret == 0)
        ret = pull_blobs(g, digest, err);
    sbx_autofree char *name = sbx_image_ref_string(&g->ref);
    if (ret == 0)
        ret = sbx_image_store_commit(g->s, name, digest, err);
    if (ret == 0 && out_digest)
        *out_digest = sbx_steal_ptr(&digest);
    return ret;
}

int
sbx_image_pull(struct sbx_image_store *s, const char *ref, const struct sbx_image_pull_opts *opts,
               char **out_digest, sbx_error **err)
{
    struct reg g = {.s = s, .opts = opts, .given = ref};
    int ret = sbx_image_ref_parse(&g.ref, ref, err);
    if (ret < 0)
        return ret;
    (void)pthread_once(&curl_once, curl_init_once);
    g.curl = curl_easy_init();
    g.base = registry_base(&g.ref, opts);
    if (!g.curl)
        ret = sbx_error_set(err, SBX_ENOMEM, 0, "curl_easy_init failed");
    if (ret == 0)
        ret = pull_run(&g, out_digest, err);
    if (g.curl)
        curl_easy_cleanup(g.curl);
    free(g.base);
    free(g.auth);
    sbx_image_ref_clear(&g.ref);
    return ret < 0 ? sbx_error_wrap(err, "pull `%s`", ref) : 0;
}
