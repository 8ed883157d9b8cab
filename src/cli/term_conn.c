/*
 * term_conn.c - TCP for ws://, TLS for wss:// (libcurl's CONNECT_ONLY mode: the TLS handshake,
 * certificate and host name checks are libcurl's, the same as for the CLI's API calls, so a
 * terminal is never less checked than a create). term_conn.h has the contract.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/term_conn.h"
#include "common/xalloc.h"

/* "ws[s]://host[:port]/path" split; the port defaults by scheme. */
static int
split_url(struct term_conn *c, const char *url, bool *tls)
{
    *tls = strncmp(url, "wss://", 6) == 0;
    if (!*tls && strncmp(url, "ws://", 5) != 0)
        return -1;
    const char *h = url + (*tls ? 6 : 5);
    c->path = strchr(h, '/');
    if (!c->path || c->path == h)
        return -1;
    const char *colon = memchr(h, ':', (size_t)(c->path - h));
    c->host = sbx_xstrndup(h, (size_t)((colon ? colon : c->path) - h));
    c->port = colon ? sbx_xstrndup(colon + 1, (size_t)(c->path - colon - 1))
                    : sbx_xstrdup(*tls ? "443" : "80");
    return 0;
}

static int
dial(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* The TLS connection: libcurl connects and handshakes, then hands us the socket to poll. */
static int
open_tls(struct term_conn *c, char *err, size_t errlen)
{
    CURL *h = curl_easy_init();
    if (!h) {
        (void)snprintf(err, errlen, "libcurl: cannot make a handle");
        return -1;
    }
    c->tls = h;
    char *url = sbx_xasprintf("https://%s:%s/", c->host, c->port);
    char curl_err[CURL_ERROR_SIZE] = "";
    (void)curl_easy_setopt(h, CURLOPT_URL, url);
    (void)curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
    (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    (void)curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    const char *ca = getenv("SBX_CA_CERT"); // NOLINT(concurrency-mt-unsafe): no threads
    if (ca && *ca)
        (void)curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    CURLcode rc = curl_easy_perform(h);
    free(url);
    curl_socket_t s = CURL_SOCKET_BAD;
    if (rc == CURLE_OK)
        rc = curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &s);
    if (rc != CURLE_OK || s == CURL_SOCKET_BAD) {
        (void)snprintf(err, errlen, "cannot connect to %s:%s over TLS: %s", c->host, c->port,
                       *curl_err ? curl_err : curl_easy_strerror(rc));
        return -1;
    }
    (void)curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL); /* curl_err goes out of scope */
    c->fd = (int)s;
    return 0;
}

int
term_conn_open(struct term_conn *c, const char *url, char *err, size_t errlen)
{
    bool tls = false;
    *c = (struct term_conn){.fd = -1};
    if (split_url(c, url, &tls) < 0) {
        (void)snprintf(err, errlen, "`%s`: not a ws:// or wss:// URL", url);
        return -1;
    }
    if (tls)
        return open_tls(c, err, errlen);
    c->fd = dial(c->host, c->port);
    if (c->fd < 0) {
        (void)snprintf(err, errlen, "cannot connect to %s:%s", c->host, c->port);
        return -1;
    }
    return 0;
}

ssize_t
term_conn_send(struct term_conn *c, const void *p, size_t n)
{
    if (!c->tls)
        return send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    size_t sent = 0;
    CURLcode rc = curl_easy_send(c->tls, p, n, &sent);
    if (rc == CURLE_OK)
        return (ssize_t)sent;
    errno = rc == CURLE_AGAIN ? EAGAIN : ECONNRESET;
    return -1;
}

ssize_t
term_conn_recv(struct term_conn *c, void *p, size_t n)
{
    if (!c->tls)
        return recv(c->fd, p, n, MSG_DONTWAIT);
    size_t got = 0;
    CURLcode rc = curl_easy_recv(c->tls, p, n, &got);
    if (rc == CURLE_OK)
        return (ssize_t)got; /* 0: the peer closed */
    errno = rc == CURLE_AGAIN ? EAGAIN : ECONNRESET;
    return -1;
}

static int
wait_fd(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    int r;
    do
        r = poll(&p, 1, 30000);
    while (r < 0 && errno == EINTR);
    return r > 0 ? 0 : -1;
}

int
term_conn_send_all(struct term_conn *c, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = term_conn_send(c, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && wait_fd(c->fd, POLLOUT) == 0)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

ssize_t
term_conn_recv_wait(struct term_conn *c, void *p, size_t n)
{
    for (;;) {
        ssize_t r = term_conn_recv(c, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN && wait_fd(c->fd, POLLIN) == 0)
            continue;
        return r;
    }
}

void
term_conn_close(struct term_conn *c)
{
    if (c->tls)
        curl_easy_cleanup(c->tls); /* closes the socket it gave us */
    else if (c->fd >= 0)
        close(c->fd);
    free(c->host);
    free(c->port);
    *c = (struct term_conn){.fd = -1};
}
