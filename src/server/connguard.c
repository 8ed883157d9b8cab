/*
 * connguard.c - keeps the API serving its clients while someone floods it with connections.
 *
 * The server runs a thread per connection (handlers block: a create waits for its worker, the
 * router streams), under a total limit (`limits.max_connections`). A client that opens
 * thousands of connections and trickles bytes into their heads (a slowloris) used to fill
 * that limit, after which nobody got an answer. Three things now bound what an unauthenticated
 * client can hold:
 *
 *  - per-client limit: libmicrohttpd refuses a source address's connections beyond
 *    `limits.max_connections_per_client` at accept, so one client cannot take the total;
 *  - a deadline for the first request head, counted from accept, that trickling cannot extend
 *    (libmicrohttpd's own timeout is an idle timeout, which every byte resets): a connection
 *    whose head is not complete after `limits.request_head_timeout_seconds` is shut down by
 *    the watchdog thread here;
 *  - a 401 closes its connection (httpd.c), so every connection that lives past its first
 *    request has shown the API key: later heads on it are an authenticated client's own.
 *
 * The watchdog only ever calls shutdown() on a socket libmicrohttpd owns, never close(): the
 * connection's own thread then sees the end of the stream and closes it the normal way. An
 * entry leaves the list (under the lock the watchdog holds while it shuts sockets down) in the
 * CLOSED notification, which comes before libmicrohttpd closes the fd, so the watchdog never
 * touches a reused descriptor.
 */
#include "server/connguard.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "server/httpd.h"

struct sbx_conn {
    struct sbx_conn *prev, *next;
    int fd;
    uint64_t accepted_ms;
    bool head_done; /* the first request's head arrived: the deadline no longer applies */
    bool cut;
};

struct sbx_connguard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sbx_conn *list;
    uint64_t deadline_ms;
    bool stop;
    pthread_t tid;
};

static void *
watchdog(void *arg)
{
    struct sbx_connguard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        uint64_t now = sbx_now_ms();
        for (struct sbx_conn *c = g->list; c; c = c->next) {
            if (!c->head_done && !c->cut && now - c->accepted_ms >= g->deadline_ms) {
                (void)shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
            }
        }
        /* A quarter of the deadline (at most 250 ms): a head is cut at most that late. */
        uint64_t tick = g->deadline_ms / 4 < 250 ? g->deadline_ms / 4 : 250;
        struct timespec ts = sbx_monotonic_in(tick ? tick : 1);
        (void)pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int
sbx_connguard_start(struct sbx_connguard **out, uint64_t deadline_ms, sbx_error **err)
{
    struct sbx_connguard *g = sbx_xcalloc(1, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    sbx_cond_init_monotonic(&g->cv);
    g->deadline_ms = deadline_ms;
    int e = pthread_create(&g->tid, NULL, watchdog, g);
    if (e != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return sbx_error_set(err, SBX_EGENERIC, e, "start the connection watchdog");
    }
    *out = g;
    return 0;
}

void
sbx_connguard_stop(struct sbx_connguard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    (void)pthread_join(g->tid, NULL);
    /* connections still listed are freed by their CLOSED notifications (MHD_stop_daemon) */
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void
sbx_connguard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
    struct sbx_connguard *g = cls;
    if (!g)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct sbx_conn *c = sbx_xcalloc(1, sizeof *c);
        c->fd = ci ? ci->connect_fd : -1;
        c->accepted_ms = sbx_now_ms();
        c->head_done = c->fd < 0;
        pthread_mutex_lock(&g->mu);
        c->next = g->list;
        if (g->list)
            g->list->prev = c;
        g->list = c;
        pthread_mutex_unlock(&g->mu);
        *socket_context = c;
        return;
    }
    struct sbx_conn *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
    *socket_context = NULL;
}

void
sbx_connguard_head_done(struct sbx_connguard *g, struct MHD_Connection *conn)
{
    if (!g)
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct sbx_conn *c = ci ? ci->socket_context : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    c->head_done = true;
    pthread_mutex_unlock(&g->mu);
}
