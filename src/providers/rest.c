/*
 * rest.c - JSON over HTTP(S) with libcurl, and streams to remote ports (see rest.h).
 *
 * Security: no redirects are followed (a redirect must not carry the Authorization header
 * elsewhere), only http and https are allowed, header lines (which hold credentials) are wiped
 * before they are freed, and every message built from a peer's answer is redacted.
 */
#include "providers/rest.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"

#define BODY_MAX    ((size_t)1 << 20)
#define DEF_TIMEOUT 30000L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        sbx_warn("curl_global_init failed");
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

/* Wipe and free a header list (its lines may hold an API key). */
static void
free_headers(struct curl_slist *h)
{
    for (struct curl_slist *i = h; i; i = i->next)
        sodium_memzero(i->data, strlen(i->data));
    curl_slist_free_all(h);
}

static struct curl_slist *
add_lines(struct curl_slist *h, const char *const *lines)
{
    for (size_t i = 0; lines && lines[i]; i++)
        h = curl_slist_append(h, lines[i]);
    return h;
}

/* Replace every redact string in s (in place, growing into a new string). */
static char *
redacted(const struct sbx_rest *c, const char *s)
{
    char *out = sbx_xstrdup(s);
    for (size_t i = 0; c->redact && c->redact[i]; i++) {
        const char *secret = c->redact[i];
        size_t n = strlen(secret);
        char *hit = NULL;
        while (n > 0 && (hit = strstr(out, secret)) != NULL) {
            *hit = '\0';
            char *next = sbx_xasprintf("%s***%s", out, hit + n);
            sodium_memzero(out, strlen(out) + n);
            free(out);
            out = next;
        }
    }
    return out;
}

static void
finish_resp(CURL *h, struct sbx_buf *body, struct sbx_rest_resp *out)
{
    (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    out->text = sbx_buf_steal(body);
    out->json = json_loads(out->text, JSON_DECODE_ANY, NULL);
}

static CURL *
new_handle(const struct sbx_rest *c, const char *url, struct sbx_buf *body)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    (void)curl_easy_setopt(h, CURLOPT_URL, url);
    (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    (void)curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    (void)curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms > 0 ? c->timeout_ms : DEF_TIMEOUT);
    (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    (void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    (void)curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    (void)curl_easy_setopt(h, CURLOPT_USERAGENT, "sbx");
    if (c->ca_file)
        (void)curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    return h;
}

/* Run h; `what` ("METHOD url") names the request in errors. */
static int
perform(const struct sbx_rest *c, CURL *h, const char *what, struct sbx_buf *body,
        struct sbx_rest_resp *out, sbx_error **err)
{
    char ebuf[CURL_ERROR_SIZE] = "";
    (void)curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        sbx_autofree char *msg = redacted(c, ebuf[0] ? ebuf : curl_easy_strerror(rc));
        return sbx_error_set(err, rc == CURLE_OPERATION_TIMEDOUT ? SBX_ETIMEDOUT : SBX_EIO, 0,
                             "%s: %s", what, msg);
    }
    finish_resp(h, body, out);
    return 0;
}

int
sbx_rest_call(const struct sbx_rest *c, const struct sbx_rest_req *req, struct sbx_rest_resp *out,
              sbx_error **err)
{
    const char *method = req->method;
    memset(out, 0, sizeof *out);
    struct sbx_buf resp;
    sbx_buf_init(&resp, BODY_MAX + 1);
    CURL *h = new_handle(c, req->url, &resp);
    if (!h)
        return sbx_error_set(err, SBX_EGENERIC, 0, "curl_easy_init failed");
    struct curl_slist *hdr = add_lines(add_lines(NULL, c->headers), req->extra);
    hdr = curl_slist_append(hdr, "Accept: application/json");
    sbx_autofree char *text = req->body ? json_dumps(req->body, JSON_COMPACT) : NULL;
    if (text) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
    } else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    if (strcmp(method, "GET") != 0)
        (void)curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    (void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    sbx_autofree char *what = sbx_xasprintf("%s %s", method, req->url);
    int r = perform(c, h, what, &resp, out, err);
    curl_easy_cleanup(h);
    free_headers(hdr);
    sbx_buf_dispose(&resp);
    return r;
}

/* The file part: `path`'s contents, or data[0..len) named `name` when path is NULL. */
struct upload_src {
    const char *path;
    const char *name;
    const void *data;
    size_t len;
};

static int
upload(const struct sbx_rest *c, const char *url, const char *field, const struct upload_src *src,
       struct sbx_rest_resp *out, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    struct sbx_buf resp;
    sbx_buf_init(&resp, BODY_MAX + 1);
    CURL *h = new_handle(c, url, &resp);
    if (!h)
        return sbx_error_set(err, SBX_EGENERIC, 0, "curl_easy_init failed");
    curl_mime *mime = curl_mime_init(h);
    curl_mimepart *part = curl_mime_addpart(mime);
    (void)curl_mime_name(part, field);
    int r = 0;
    if (src->path && curl_mime_filedata(part, src->path) != CURLE_OK)
        r = sbx_error_set(err, SBX_EIO, errno, "read `%s`", src->path);
    if (!src->path && (curl_mime_data(part, src->data, src->len) != CURLE_OK ||
                       curl_mime_filename(part, src->name) != CURLE_OK))
        r = sbx_error_set(err, SBX_ENOMEM, 0, "upload part");
    struct curl_slist *hdr = add_lines(NULL, c->headers);
    (void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    (void)curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
    /* a static binary of a few MB: allow more than a JSON call */
    (void)curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 300000L);
    sbx_autofree char *what = sbx_xasprintf("POST %s", url);
    if (r == 0)
        r = perform(c, h, what, &resp, out, err);
    curl_easy_cleanup(h);
    curl_mime_free(mime);
    free_headers(hdr);
    sbx_buf_dispose(&resp);
    return r;
}

int
sbx_rest_upload(const struct sbx_rest *c, const char *url, const char *field, const char *path,
                struct sbx_rest_resp *out, sbx_error **err)
{
    struct upload_src src = {.path = path};
    return upload(c, url, field, &src, out, err);
}

int
sbx_rest_upload_data(const struct sbx_rest *c, const char *url, const char *field,
                     const struct sbx_rest_part *part, struct sbx_rest_resp *out, sbx_error **err)
{
    struct upload_src src = {.name = part->name, .data = part->data, .len = part->len};
    return upload(c, url, field, &src, out, err);
}

void
sbx_rest_resp_dispose(struct sbx_rest_resp *r)
{
    json_decref(r->json);
    free(r->text);
    memset(r, 0, sizeof *r);
}

static int
status_code(long status)
{
    if (status == 401 || status == 403)
        return SBX_EPERM;
    if (status == 404)
        return SBX_ENOTFOUND;
    if (status == 409)
        return SBX_ECONFLICT;
    if (status == 429)
        return SBX_ELIMIT;
    if (status >= 400 && status < 500)
        return SBX_EINVAL;
    return SBX_EIO;
}

int
sbx_rest_fail(const struct sbx_rest *c, const struct sbx_rest_resp *r, const char *what,
              sbx_error **err)
{
    const char *msg = json_string_value(json_object_get(r->json, "message"));
    if (!msg)
        msg = json_string_value(json_object_get(r->json, "error"));
    char tail[256];
    (void)snprintf(tail, sizeof tail, "%s", msg ? msg : (r->text ? r->text : ""));
    for (char *p = tail; *p; p++) {
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    }
    sbx_autofree char *clean = redacted(c, tail);
    return sbx_error_set(err, status_code(r->status), 0, "%s: HTTP %ld%s%s", what, r->status,
                         *clean ? ": " : "", clean);
}

char *
sbx_rest_escape(const char *s)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    static const char keep[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (strchr(keep, *p))
            (void)sbx_buf_append(&b, p, 1, NULL);
        else
            (void)sbx_buf_printf(&b, NULL, "%%%02X", *p);
    }
    return sbx_buf_steal(&b);
}

/* ---- streams to remote ports ---- */

int
sbx_url_split(const char *url, int *tls, char **host, int *port, sbx_error **err)
{
    const char *p = NULL;
    if (strncasecmp(url, "https://", 8) == 0) {
        *tls = 1;
        p = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        *tls = 0;
        p = url + 7;
    } else {
        return sbx_error_set(err, SBX_EINVAL, 0, "`%.200s` is not an http(s) URL", url);
    }
    size_t n = strcspn(p, "/?#");
    sbx_autofree char *auth = sbx_xstrndup(p, n);
    char *at = strrchr(auth, '@');
    char *hp = at ? at + 1 : auth;
    char *colon = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
    *port = *tls ? 443 : 80;
    if (colon) {
        if (hp[0] == '[')
            colon++;
        uint64_t v = 0;
        if (sbx_parse_u64(colon + 1, &v, NULL) < 0 || v < 1 || v > 65535)
            return sbx_error_set(err, SBX_EINVAL, 0, "bad port in `%.200s`", url);
        *port = (int)v;
        *colon = '\0';
    }
    if (hp[0] == '[') {
        hp++;
        hp[strcspn(hp, "]")] = '\0';
    }
    if (!*hp)
        return sbx_error_set(err, SBX_EINVAL, 0, "no host in `%.200s`", url);
    *host = sbx_xstrdup(hp);
    return 0;
}

static int
wait_connected(int fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    if (poll(&pfd, 1, timeout_ms) != 1)
        return -ETIMEDOUT;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        return -errno;
    return soerr ? -soerr : 0;
}

static int
tcp_connect(const char *host, int port, int timeout_ms, int *out, sbx_error **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char svc[16];
    (void)snprintf(svc, sizeof svc, "%d", port);
    int rc = getaddrinfo(host, svc, &hints, &res);
    if (rc != 0)
        return sbx_error_set(err, SBX_EIO, 0, "resolve `%s`: %s", host, gai_strerror(rc));
    int e = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        int c = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : -errno;
        if (c == -EINPROGRESS)
            c = wait_connected(fd, timeout_ms);
        if (c == 0) {
            int fl = fcntl(fd, F_GETFL);
            (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            freeaddrinfo(res);
            *out = fd;
            return 0;
        }
        e = -c;
        (void)close(fd);
    }
    freeaddrinfo(res);
    return sbx_error_set(err, SBX_EIO, e, "connect to %s:%d", host, port);
}

/* ---- TLS pump: socketpair end <-> curl CONNECT_ONLY connection ---- */

struct pump {
    CURL *h;
    int local; /* our end of the socketpair */
};

/* Move everything curl has (including TLS records already buffered) to the local end. 0 = go
 * on, -1 = the remote side closed or failed. */
static int
drain_remote(struct pump *p)
{
    char buf[16384];
    for (;;) {
        size_t got = 0;
        CURLcode rc = curl_easy_recv(p->h, buf, sizeof buf, &got);
        if (rc == CURLE_AGAIN)
            return 0;
        if (rc != CURLE_OK || got == 0)
            return -1;
        if (sbx_write_all(p->local, buf, got) < 0)
            return -1;
    }
}

static int
send_all(struct pump *p, const char *buf, size_t n, curl_socket_t sock)
{
    size_t off = 0;
    while (off < n) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(p->h, buf + off, n - off, &sent);
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

static void *
pump_main(void *arg)
{
    struct pump *p = arg;
    curl_socket_t sock = CURL_SOCKET_BAD;
    (void)curl_easy_getinfo(p->h, CURLINFO_ACTIVESOCKET, &sock);
    char buf[16384];
    while (sock != CURL_SOCKET_BAD && drain_remote(p) == 0) {
        struct pollfd fds[2] = {{.fd = p->local, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(p->local, buf, sizeof buf);
            if (n <= 0 || send_all(p, buf, (size_t)n, sock) < 0)
                break;
        }
    }
    curl_easy_cleanup(p->h);
    (void)close(p->local);
    free(p);
    return NULL;
}

static int
tls_connect(const char *host, int port, int timeout_ms, const char *ca_file, int *out,
            sbx_error **err)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *h = curl_easy_init();
    if (!h)
        return sbx_error_set(err, SBX_EGENERIC, 0, "curl_easy_init failed");
    sbx_autofree char *url = sbx_xasprintf("https://%s:%d/", host, port);
    (void)curl_easy_setopt(h, CURLOPT_URL, url);
    (void)curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
    (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    if (ca_file)
        (void)curl_easy_setopt(h, CURLOPT_CAINFO, ca_file);
    char ebuf[CURL_ERROR_SIZE] = "";
    (void)curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        curl_easy_cleanup(h);
        return sbx_error_set(err, SBX_EIO, 0, "TLS connect to %s:%d: %s", host, port,
                             ebuf[0] ? ebuf : curl_easy_strerror(rc));
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        curl_easy_cleanup(h);
        return sbx_error_set(err, SBX_EGENERIC, errno, "socketpair");
    }
    struct pump *p = sbx_xcalloc(1, sizeof *p);
    p->h = h;
    p->local = sv[1];
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int prc = pthread_create(&t, &attr, pump_main, p);
    pthread_attr_destroy(&attr);
    if (prc != 0) {
        curl_easy_cleanup(h);
        (void)close(sv[0]);
        (void)close(sv[1]);
        free(p);
        return sbx_error_set(err, SBX_EGENERIC, prc, "start the TLS pump");
    }
    *out = sv[0];
    return 0;
}

int
sbx_url_connect(const char *url, int timeout_ms, const char *ca_file, int *fd, sbx_error **err)
{
    int tls = 0;
    int port = 0;
    sbx_autofree char *host = NULL;
    if (sbx_url_split(url, &tls, &host, &port, err) < 0)
        return -SBX_EINVAL;
    return tls ? tls_connect(host, port, timeout_ms, ca_file, fd, err)
               : tcp_connect(host, port, timeout_ms, fd, err);
}
