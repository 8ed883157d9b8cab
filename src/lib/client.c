/*
 * client.c - the libsbx handle and the HTTP plumbing of the lifecycle API (libcurl + jansson).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/client_internal.h"

#define DEFAULT_HOST       "http://127.0.0.1:8080"
#define DEFAULT_STATE_DIR  "/var/lib/sbx"
#define DEFAULT_TIMEOUT_MS 60000L
#define MAX_KEY_FILE       4096

void
client_buf_init(struct client_buf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

void
client_buf_free(struct client_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

int
client_buf_append(struct client_buf *b, const void *p, size_t n)
{
    if (b->overflow || n > b->max || b->len > b->max - n) {
        b->overflow = 1;
        return -SBX_ELIMIT;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->overflow = 1;
            return -SBX_ENOMEM;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int
client_fail(sbx_client *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* clang-analyzer 14 wrongly reports `ap` as uninitialised here (it is, by va_start). */
    (void)vsnprintf(c->err, sizeof c->err, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized)
    va_end(ap);
    return -code;
}

int
client_id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    return n >= 1 && n <= 64 && strspn(id, "0123456789abcdefABCDEF-") == n; /* uuids, 32-hex ids */
}

char *
client_strdup(sbx_client *c, const char *s)
{
    char *d = strdup(s);
    if (!d)
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
    return d;
}

static char *
trim_dup(const char *s, size_t n)
{
    while (n > 0 && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    return strndup(s, n);
}

/* The key a server on this host wrote into its state dir (mode 0600: only its owner reads it). */
static char *
read_key_file(const char *state_dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/api-key", state_dir) >= (int)sizeof path)
        return NULL;
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[MAX_KEY_FILE];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    (void)fclose(f);
    buf[n] = '\0';
    char *key = trim_dup(buf, n);
    if (key && !*key) {
        free(key);
        return NULL;
    }
    return key;
}

/* Environment lookups happen once, when the handle is made; the library documents that
 * sbx_client_new reads SBX_HOST, SBX_API_KEY, SBX_STATE_DIR and SBX_CA_CERT. */
static const char *
env(const char *name)
{
    return getenv(name); // NOLINT(concurrency-mt-unsafe): read-only use, documented
}

static char *
normalise_host(const char *host)
{
    size_t n = strlen(host);
    while (n > 0 && host[n - 1] == '/')
        n--;
    char *out = NULL;
    if (strstr(host, "://"))
        out = strndup(host, n);
    else if (asprintf(&out, "http://%.*s", (int)n, host) < 0)
        out = NULL;
    return out;
}

static int
resolve_settings(sbx_client *c, const sbx_client_options *opts)
{
    const char *host = opts && opts->host ? opts->host : env("SBX_HOST");
    c->host = normalise_host(host && *host ? host : DEFAULT_HOST);
    if (!c->host)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    const char *key = opts && opts->api_key ? opts->api_key : env("SBX_API_KEY");
    if (key && *key) {
        c->api_key = strdup(key);
        if (!c->api_key)
            return client_fail(c, SBX_ENOMEM, "out of memory");
    } else {
        const char *dir = opts && opts->state_dir ? opts->state_dir : env("SBX_STATE_DIR");
        c->api_key = read_key_file(dir && *dir ? dir : DEFAULT_STATE_DIR);
    }
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    /* A PEM file of CAs to trust for an https:// server instead of the system's (a server
     * behind a TLS proxy with a private CA); verification itself is never turned off. */
    const char *ca = env("SBX_CA_CERT");
    if (ca && *ca && !(c->ca_cert = strdup(ca)))
        return client_fail(c, SBX_ENOMEM, "out of memory");
    return 0;
}

static int global_refs; /* sbx_global_init calls not yet cleaned up */

int
sbx_global_init(void)
{
    if (global_refs++ > 0)
        return 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        global_refs = 0;
        return -SBX_EGENERIC;
    }
    return 0;
}

void
sbx_global_cleanup(void)
{
    if (global_refs > 0 && --global_refs == 0)
        curl_global_cleanup();
}

struct sbx_err {
    int code;
    char msg[1024]; /* as the handle's message */
};

int
sbx_err_code(const sbx_err *e)
{
    return e ? e->code : 0;
}

const char *
sbx_err_message(const sbx_err *e)
{
    return e ? e->msg : "";
}

void
sbx_err_free(sbx_err *e)
{
    free(e);
}

/* Fill *err (when asked for) and return code (negative). */
static int
new_failed(sbx_err **err, int code, const char *msg)
{
    if (err && (*err = calloc(1, sizeof **err))) {
        (*err)->code = code;
        (void)snprintf((*err)->msg, sizeof(*err)->msg, "%s", msg);
    }
    return code;
}

void
sbx_client_options_init(sbx_client_options *o)
{
    if (o)
        *o = (sbx_client_options)SBX_CLIENT_OPTIONS_INIT;
}

int
sbx_client_new(sbx_client **out, const sbx_client_options *opts, sbx_err **err)
{
    if (err)
        *err = NULL;
    if (!out)
        return new_failed(err, -SBX_EINVAL, "sbx_client_new: out is NULL");
    *out = NULL;
    if (opts && opts->version != SBX_CLIENT_OPTIONS_VERSION)
        return new_failed(err, -SBX_EINVAL,
                          "sbx_client_new: options of an unknown version (use "
                          "sbx_client_options_init)");
    /* Without sbx_global_init libcurl initialises itself here (not thread-safe). */
    if (!global_refs && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return new_failed(err, -SBX_EGENERIC, "libcurl's global initialisation failed");
    sbx_client *c = calloc(1, sizeof *c);
    if (!c)
        return new_failed(err, -SBX_ENOMEM, "out of memory");
    int ret = resolve_settings(c, opts);
    if (ret == 0 && !(c->curl = curl_easy_init()))
        ret = client_fail(c, SBX_ENOMEM, "libcurl: cannot make a handle");
    if (ret < 0) {
        (void)new_failed(err, ret, c->err);
        sbx_client_free(c);
        return ret;
    }
    *out = c;
    return 0;
}

void
sbx_client_free(sbx_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->host);
    free(c->ca_cert);
    if (c->api_key) {
        /* Do not leave the key lying around in freed memory. */
        memset(c->api_key, 0, strlen(c->api_key));
        free(c->api_key);
    }
    free(c);
}

const char *
sbx_client_last_error(const sbx_client *c)
{
    return c ? c->err : "";
}

const char *
sbx_client_host(const sbx_client *c)
{
    return c ? c->host : "";
}

char *
client_escape(sbx_client *c, const char *s)
{
    char *e = curl_easy_escape(c->curl, s, 0);
    if (!e)
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
    return e;
}

static struct curl_slist *
add_header(struct curl_slist *list, const char *h, int *failed)
{
    struct curl_slist *n = curl_slist_append(list, h);
    if (!n)
        *failed = 1;
    return n ? n : list;
}

int
client_prepare(sbx_client *c, const char *url, struct curl_slist **headers)
{
    curl_easy_reset(c->curl);
    int failed = 0;
    struct curl_slist *h = add_header(NULL, "Accept: application/json", &failed);
    if (c->api_key) {
        char kh[MAX_KEY_FILE + 64];
        (void)snprintf(kh, sizeof kh, "OPEN-SANDBOX-API-KEY: %s", c->api_key);
        h = add_header(h, kh, &failed);
    }
    h = add_header(h, "User-Agent: libsbx/" SBX_VERSION, &failed);
    *headers = h;
    if (failed)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    (void)curl_easy_setopt(c->curl, CURLOPT_URL, url);
    (void)curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    (void)curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->ca_cert)
        (void)curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->ca_cert);
    c->curl_err[0] = '\0';
    (void)curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_err);
    return 0;
}

static size_t
collect(char *p, size_t size, size_t nmemb, void *userdata)
{
    struct client_buf *b = userdata;
    size_t n = size * nmemb;
    return client_buf_append(b, p, n) == 0 ? n : 0;
}

static int
errc_for_status(long status)
{
    switch (status) {
    case 400:
    case 422:
        return SBX_EINVAL;
    case 401:
    case 403:
        return SBX_EPERM;
    case 404:
        return SBX_ENOTFOUND;
    case 409:
        return SBX_ECONFLICT;
    case 413:
        return SBX_ELIMIT;
    case 502:
    case 503:
        return SBX_EUNAVAIL;
    case 504:
        return SBX_ETIMEDOUT;
    default:
        return SBX_EGENERIC;
    }
}

int
client_http_error(sbx_client *c, long status, const char *body, size_t len)
{
    int code = errc_for_status(status);
    json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *ecode = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    if (!msg)
        msg = json_string_value(json_object_get(j, "error"));
    if (msg)
        (void)client_fail(c, code, "%s (HTTP %ld%s%s)", msg, status, ecode ? ", " : "",
                          ecode ? ecode : "");
    else
        (void)client_fail(c, code, "server answered HTTP %ld", status);
    json_decref(j);
    return -code;
}

const char *
client_curl_error(const sbx_client *c, CURLcode rc)
{
    return c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc);
}

static int
transport_error(sbx_client *c, CURLcode rc, const char *url)
{
    int code = SBX_EIO;
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
        code = SBX_EUNAVAIL;
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        code = SBX_ETIMEDOUT;
    else if (rc == CURLE_WRITE_ERROR)
        code = SBX_ELIMIT;
    return client_fail(c, code, "%s: %s", url, client_curl_error(c, rc));
}

static int
perform(sbx_client *c, const char *url, struct client_buf *resp, long *status)
{
    (void)curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect);
    (void)curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, resp);
    (void)curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    CURLcode rc = curl_easy_perform(c->curl);
    if (rc != CURLE_OK)
        return transport_error(c, rc, url);
    (void)curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

static int
parse_answer(sbx_client *c, const struct client_buf *resp, json_t **out)
{
    if (!out)
        return 0;
    *out = NULL;
    if (resp->len == 0)
        return 0;
    json_error_t jerr;
    *out = json_loadb(resp->data, resp->len, 0, &jerr);
    if (!*out)
        return client_fail(c, SBX_EIO, "server sent invalid JSON: %s", jerr.text);
    return 0;
}

int
client_call(sbx_client *c, const char *method, const char *path, json_t *body, json_t **out)
{
    char *url = NULL;
    char *payload = NULL;
    struct curl_slist *headers = NULL;
    struct client_buf resp;
    client_buf_init(&resp, SBX_CLIENT_MAX_BODY);
    long status = 0;
    int ret = asprintf(&url, "%s%s", c->host, path) < 0 ? -SBX_ENOMEM : 0;
    if (ret == 0)
        ret = client_prepare(c, url, &headers);
    if (ret == 0 && body) {
        payload = json_dumps(body, JSON_COMPACT);
        struct curl_slist *h =
            payload ? curl_slist_append(headers, "Content-Type: application/json") : NULL;
        if (!h)
            ret = client_fail(c, SBX_ENOMEM, "out of memory");
        else
            headers = h;
    }
    if (ret == 0) {
        (void)curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
        (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
        if (payload)
            (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, payload);
        ret = perform(c, url, &resp, &status);
    }
    if (ret == 0 && (status < 200 || status > 299))
        ret = client_http_error(c, status, resp.data, resp.len);
    else if (ret == 0)
        ret = parse_answer(c, &resp, out);
    curl_slist_free_all(headers);
    client_buf_free(&resp);
    free(payload);
    free(url);
    return ret;
}

static int
endpoint_headers(sbx_client *c, json_t *hdrs, struct curl_slist **headers)
{
    const char *k;
    json_t *v;
    json_object_foreach (hdrs, k, v) {
        if (!json_is_string(v))
            continue;
        char *line = NULL;
        if (asprintf(&line, "%s: %s", k, json_string_value(v)) < 0)
            return client_fail(c, SBX_ENOMEM, "out of memory");
        struct curl_slist *n = curl_slist_append(*headers, line);
        free(line);
        if (!n)
            return client_fail(c, SBX_ENOMEM, "out of memory");
        *headers = n;
    }
    return 0;
}

int
client_execd_endpoint(sbx_client *c, const char *id, char **base, struct curl_slist **headers)
{
    *base = NULL;
    *headers = NULL;
    char *eid = client_escape(c, id);
    if (!eid)
        return -SBX_ENOMEM;
    char *path = NULL;
    int ret = asprintf(&path, "/v1/sandboxes/%s/endpoints/44772", eid) < 0 ? -SBX_ENOMEM : 0;
    curl_free(eid);
    json_t *ep = NULL;
    if (ret == 0)
        ret = client_call(c, "GET", path, NULL, &ep);
    free(path);
    const char *where = ret == 0 ? json_string_value(json_object_get(ep, "endpoint")) : NULL;
    if (ret == 0 && !where)
        ret = client_fail(c, SBX_EIO, "server sent an endpoint without `endpoint`");
    if (ret == 0) {
        /* The endpoint has no scheme: use the server's (http or https). */
        const char *sep = strstr(c->host, "://");
        int scheme_len = sep ? (int)(sep - c->host) : 4;
        if (asprintf(base, "%.*s://%s", scheme_len, sep ? c->host : "http", where) < 0) {
            *base = NULL;
            ret = client_fail(c, SBX_ENOMEM, "out of memory");
        }
    }
    if (ret == 0)
        ret = endpoint_headers(c, json_object_get(ep, "headers"), headers);
    json_decref(ep);
    if (ret < 0) {
        free(*base);
        *base = NULL;
        curl_slist_free_all(*headers);
        *headers = NULL;
    }
    return ret;
}
