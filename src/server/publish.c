/*
 * publish.c - sandbox ports on host ports: extensions["sbx.publish"] = "5000[:HOSTPORT],...".
 *
 * The server listens on the host port (server.publish_address, 127.0.0.1 by default) and
 * splices every connection to the sandbox's port through provider.connect, like the router
 * does for a URL: so it works on every provider, for a sandbox's loopback-only services too,
 * and the sandbox's network namespace stays closed to the host.
 *
 * What this opens, and why it is opt-in: a published port has no API key in front of it
 * (clients such as OSWorld's PythonController take an IP and a port and send no headers).
 * Whoever can reach the bind address reaches that one sandbox port - by default only local
 * processes of this host. Nothing else of the sandbox is reachable through it.
 *
 * One thread accepts on every listener (poll, with a pipe to wake it); once a second it drops
 * the listeners of sandboxes that are gone (a delete, the TTL reaper). Each connection gets a
 * thread that is tracked with the router's upgraded connections, so a stopping server closes
 * them. The host ports are written into the extension at create: a restarted server binds the
 * same ones again.
 */
#include "server/publish.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/httpd.h"
#include "server/srvutil.h"

#define SWEEP_MS 1000
#define IO_BUF   (64 * 1024)

struct listener {
    struct listener *next;
    char id[SBX_UUID_LEN + 1];
    int port;
    int fd;
};

struct sbx_publisher {
    struct sbx_srv *srv;
    pthread_mutex_t mu;
    struct listener *list; /* added by commit, removed only by the accept thread */
    int wake[2];
    pthread_t thread;
    atomic_bool stop;
};

/* ---- the spec ---- */

static int
parse_port(const char *s, size_t n, int *out)
{
    char buf[8];
    if (n == 0 || n > 5 || strspn(s, "0123456789") < n)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    uint64_t v = 0;
    if (sbx_parse_u64(buf, &v, NULL) < 0 || v < 1 || v > 65535)
        return -1;
    *out = (int)v;
    return 0;
}

int
sbx_publish_parse(const char *spec, struct sbx_publish_spec *out, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec)
        return sbx_error_set(err, SBX_EINVAL, 0, "want PORT[:HOSTPORT][,...]");
    for (const char *p = spec; *p;) {
        size_t n = strcspn(p, ",");
        size_t colon = strcspn(p, ":,");
        int port = 0;
        int host = 0;
        if (out->n == SBX_PUBLISH_MAX)
            return sbx_error_set(err, SBX_EINVAL, 0, "at most %d ports", SBX_PUBLISH_MAX);
        if (parse_port(p, colon, &port) < 0 ||
            (colon < n && parse_port(p + colon + 1, n - colon - 1, &host) < 0))
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "`%.*s`: want PORT or PORT:HOSTPORT, each 1-65535", (int)n, p);
        for (int i = 0; i < out->n; i++) {
            if (out->port[i] == port || (host && out->host_port[i] == host))
                return sbx_error_set(err, SBX_EINVAL, 0, "port %d given twice",
                                     out->port[i] == port ? port : host);
        }
        out->port[out->n] = port;
        out->host_port[out->n] = host;
        out->n++;
        p += n + (p[n] == ',');
        if (p[-1] == ',' && !*p)
            return sbx_error_set(err, SBX_EINVAL, 0, "a trailing `,`");
    }
    return 0;
}

static const char *
spec_of(const struct sbx_record *sb)
{
    return json_string_value(json_object_get(sb->extensions, SBX_PUBLISH_EXT));
}

int
sbx_publish_host_port(const struct sbx_record *sb, int port)
{
    struct sbx_publish_spec s;
    sbx_autoerror sbx_error *err = NULL;
    if (!spec_of(sb) || sbx_publish_parse(spec_of(sb), &s, &err) < 0)
        return 0;
    for (int i = 0; i < s.n; i++) {
        if (s.port[i] == port)
            return s.host_port[i];
    }
    return 0;
}

/* ---- listeners ---- */

/* A listening socket on addr:port (0: any free port; *bound gets the one it got). */
static int
listen_on(const char *addr, int port, int *bound, sbx_error **err)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = 0;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof *v6;
    } else {
        return sbx_error_set(err, SBX_EINVAL, 0, "publish address `%s` is not an IP address", addr);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "socket");
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
        int e = errno;
        (void)close(fd);
        return sbx_error_set(err, e == EADDRINUSE ? SBX_ECONFLICT : SBX_EGENERIC, e,
                             "listen on %s port %d", addr, port);
    }
    len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        *bound = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
    return fd;
}

static const char *
bind_addr(const struct sbx_srv *srv)
{
    return srv->cfg->publish_addr ? srv->cfg->publish_addr : "127.0.0.1";
}

int
sbx_publish_bind(struct sbx_srv *srv, struct sbx_record *sb, struct sbx_publish_bound *out,
                 sbx_error **err)
{
    memset(out, 0, sizeof *out);
    const char *spec = spec_of(sb);
    if (!spec)
        return 0;
    if (sbx_publish_parse(spec, &out->spec, err) < 0)
        return sbx_error_wrap(err, "`extensions.%s`", SBX_PUBLISH_EXT);
    char resolved[SBX_PUBLISH_MAX * 12 + 1] = "";
    for (int i = 0; i < out->spec.n; i++) {
        int got = 0;
        int fd = listen_on(bind_addr(srv), out->spec.host_port[i], &got, err);
        if (fd < 0) {
            out->spec.n = i;
            sbx_publish_abort(out);
            return sbx_error_wrap(err, "publish port %d", out->spec.port[i]);
        }
        out->fd[i] = fd;
        out->spec.host_port[i] = got;
        size_t n = strlen(resolved);
        (void)snprintf(resolved + n, sizeof resolved - n, "%s%d:%d", i ? "," : "",
                       out->spec.port[i], got);
    }
    (void)json_object_set_new(sb->extensions, SBX_PUBLISH_EXT, json_string(resolved));
    return 0;
}

void
sbx_publish_abort(struct sbx_publish_bound *b)
{
    for (int i = 0; i < b->spec.n; i++) {
        if (b->fd[i] > 0)
            (void)close(b->fd[i]);
        b->fd[i] = -1;
    }
    b->spec.n = 0;
}

static void
wake(struct sbx_publisher *p)
{
    char c = 1;
    (void)!write(p->wake[1], &c, 1);
}

void
sbx_publish_commit(struct sbx_srv *srv, const char *id, struct sbx_publish_bound *b)
{
    struct sbx_publisher *p = srv->pub;
    if (!p) {
        sbx_publish_abort(b);
        return;
    }
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < b->spec.n; i++) {
        struct listener *l = sbx_xcalloc(1, sizeof *l);
        (void)snprintf(l->id, sizeof l->id, "%s", id);
        l->port = b->spec.port[i];
        l->fd = b->fd[i];
        l->next = p->list;
        p->list = l;
        sbx_info("sandbox %s: port %d published on %s:%d", id, l->port, bind_addr(srv),
                 b->spec.host_port[i]);
    }
    pthread_mutex_unlock(&p->mu);
    b->spec.n = 0;
    wake(p);
}

/* ---- connections ---- */

struct conn {
    struct sbx_upgraded link; /* client: the accepted socket; up: the sandbox's port */
    struct sbx_srv *srv;
    char id[SBX_UUID_LEN + 1];
    int port;
};

/* Copy what one side sends to the other; at its end, half-close the other side. Returns false
 * once that side is done. */
static bool
pump(int from, int to)
{
    char buf[IO_BUF];
    ssize_t n = read(from, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
        return true;
    if (n <= 0 || sbx_write_all(to, buf, (size_t)n) < 0) {
        (void)shutdown(to, SHUT_WR);
        return false;
    }
    return true;
}

static void
splice_both(int client, int up)
{
    struct pollfd pfd[2] = {{.fd = client, .events = POLLIN}, {.fd = up, .events = POLLIN}};
    bool open[2] = {true, true};
    while (open[0] || open[1]) {
        if (poll(pfd, 2, -1) < 0 && errno != EINTR)
            break;
        if (open[0] && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
            open[0] = pump(client, up);
        if (open[1] && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open[1] = pump(up, client);
        pfd[0].fd = open[0] ? client : -1;
        pfd[1].fd = open[1] ? up : -1;
    }
}

static void *
conn_main(void *arg)
{
    struct conn *c = arg;
    struct sbx_srv *srv = c->srv;
    int up = -1;
    json_t *extra = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_mgr_connect(srv->mgr, c->id, c->port, &up, &extra, &err) < 0)
        sbx_info("sandbox %s: published port %d: %s", c->id, c->port, sbx_error_msg(err));
    json_decref(extra);
    pthread_mutex_lock(&srv->splice_mu);
    c->link.up = up;
    pthread_mutex_unlock(&srv->splice_mu);
    if (up >= 0 && !atomic_load(&srv->stopping))
        splice_both(c->link.client, up);
    sbx_upgraded_unlink(srv, &c->link);
    if (up >= 0)
        (void)close(up);
    (void)close(c->link.client);
    free(c);
    sbx_upgraded_done(srv);
    return NULL;
}

static void
accept_one(struct sbx_publisher *p, const struct listener *l)
{
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct conn *c = sbx_xcalloc(1, sizeof *c);
    c->srv = p->srv;
    c->link.client = fd;
    c->link.up = -1;
    (void)snprintf(c->id, sizeof c->id, "%s", l->id);
    c->port = l->port;
    sbx_upgraded_link(p->srv, &c->link);
    pthread_t t;
    if (pthread_create(&t, NULL, conn_main, c) != 0) {
        sbx_upgraded_unlink(p->srv, &c->link);
        (void)close(fd);
        free(c);
        sbx_upgraded_done(p->srv);
        return;
    }
    (void)pthread_detach(t);
}

/* Drop the listeners of sandboxes the manager no longer has. */
static void
sweep(struct sbx_publisher *p)
{
    pthread_mutex_lock(&p->mu);
    for (struct listener **pp = &p->list; *pp;) {
        struct listener *l = *pp;
        struct sbx_record *sb = NULL;
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_mgr_get(p->srv->mgr, l->id, &sb, &err) < 0 &&
            sbx_error_code(err) == SBX_ENOTFOUND) {
            *pp = l->next;
            (void)close(l->fd);
            free(l);
            continue;
        }
        sbx_record_free(sb);
        pp = &l->next;
    }
    pthread_mutex_unlock(&p->mu);
}

/* The pollfds of every listener (index 0: the wake pipe) and the listeners they belong to.
 * Listeners are freed only by this thread, so the pointers stay valid until the next sweep. */
static size_t
gather(struct sbx_publisher *p, struct pollfd **pfd, struct listener ***ls)
{
    pthread_mutex_lock(&p->mu);
    size_t n = 0;
    for (struct listener *l = p->list; l; l = l->next)
        n++;
    *pfd = sbx_xcalloc(n + 1, sizeof **pfd);
    *ls = sbx_xcalloc(n + 1, sizeof(struct listener *));
    (*pfd)[0] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
    size_t i = 1;
    for (struct listener *l = p->list; l; l = l->next, i++) {
        (*pfd)[i] = (struct pollfd){.fd = l->fd, .events = POLLIN};
        (*ls)[i] = l;
    }
    pthread_mutex_unlock(&p->mu);
    return n + 1;
}

static void *
accept_main(void *arg)
{
    struct sbx_publisher *p = arg;
    uint64_t last = sbx_now_ms();
    while (!atomic_load(&p->stop)) {
        struct pollfd *pfd = NULL;
        struct listener **ls = NULL;
        size_t n = gather(p, &pfd, &ls);
        int r = poll(pfd, n, SWEEP_MS);
        if (r > 0 && (pfd[0].revents & POLLIN)) {
            char buf[64];
            (void)!read(p->wake[0], buf, sizeof buf);
        }
        for (size_t i = 1; r > 0 && i < n; i++) {
            if (pfd[i].revents & POLLIN)
                accept_one(p, ls[i]);
        }
        free(pfd);
        free(ls);
        if (sbx_now_ms() - last >= SWEEP_MS) {
            sweep(p);
            last = sbx_now_ms();
        }
    }
    return NULL;
}

/* ---- start / stop ---- */

static void
free_publisher(struct sbx_publisher *p)
{
    for (struct listener *l = p->list; l;) {
        struct listener *next = l->next;
        (void)close(l->fd);
        free(l);
        l = next;
    }
    (void)close(p->wake[0]);
    (void)close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* After a restart: the host ports a sandbox had, bound again. */
static void
reopen(struct sbx_srv *srv, struct sbx_record *sb)
{
    struct sbx_publish_bound b;
    sbx_autoerror sbx_error *err = NULL;
    if (!spec_of(sb))
        return;
    if (sbx_publish_bind(srv, sb, &b, &err) < 0) {
        sbx_warn("sandbox %s: its published ports (%s) are not served: %s", sb->id, spec_of(sb),
                 sbx_error_msg(err));
        return;
    }
    sbx_publish_commit(srv, sb->id, &b);
}

int
sbx_publish_start(struct sbx_srv *srv, sbx_error **err)
{
    struct sbx_publisher *p = sbx_xcalloc(1, sizeof *p);
    p->srv = srv;
    pthread_mutex_init(&p->mu, NULL);
    if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(p);
        return sbx_error_set(err, SBX_EGENERIC, errno, "pipe");
    }
    srv->pub = p;
    struct sbx_record **all = NULL;
    size_t n = 0;
    sbx_mgr_list(srv->mgr, &all, &n);
    for (size_t i = 0; i < n; i++)
        reopen(srv, all[i]);
    sbx_mgr_list_free(all, n);
    if (pthread_create(&p->thread, NULL, accept_main, p) != 0) {
        srv->pub = NULL;
        free_publisher(p);
        return sbx_error_set(err, SBX_EGENERIC, 0, "cannot start the publisher thread");
    }
    return 0;
}

void
sbx_publish_stop(struct sbx_srv *srv)
{
    struct sbx_publisher *p = srv->pub;
    if (!p)
        return;
    atomic_store(&p->stop, true);
    wake(p);
    (void)pthread_join(p->thread, NULL);
    srv->pub = NULL;
    free_publisher(p);
}
