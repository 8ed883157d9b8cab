/*
 * netns.c - loopback bring-up in a fresh network namespace, and connect() into a sandbox's
 * network namespace (its socket made by a long-lived thread that enters the namespace).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

int
sbx_netns_lo_up(void)
{
    /* One ioctl: cheaper than a netlink round trip and enough for `lo` (its addresses are
     * configured by the kernel when it goes up). */
    sbx_autoclose int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return -errno;
    return 0;
}

/* Sockets inside a sandbox's network namespace come from one long-lived thread per runtime
 * (started on first use): it setns()es into the namespace and makes the socket there (a socket
 * keeps the namespace it was made in), and the caller connects it. That thread makes no other
 * socket, so it does not matter which namespace it is left in. Cheaper than a thread per
 * connection (the router connects for every proxied request), and no server thread ever
 * changes namespace. */
struct sbx_rt_sock_req {
    int netns_fd;
    int fd;  /* the socket, or -1 */
    int err; /* errno of the failed step */
    const char *what;
    bool done;
    struct sbx_rt_sock_req *next;
};

/* home: the thread's own namespace, returned to after each socket, so that it does not pin a
 * sandbox's namespace (and with it the veth) after the sandbox is gone. */
static void
make_socket(struct sbx_rt_sock_req *q, int home)
{
    q->what = "setns";
    if (setns(q->netns_fd, CLONE_NEWNET) < 0) {
        q->err = errno;
        return;
    }
    q->what = "socket";
    q->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (q->fd < 0)
        q->err = errno;
    (void)setns(home, CLONE_NEWNET);
}

static void *
sock_thread(void *arg)
{
    struct sbx_rt *rt = arg;
    sbx_autoclose int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    pthread_mutex_lock(&rt->sock_mu);
    for (;;) {
        while (!rt->sock_head && !rt->sock_stop)
            pthread_cond_wait(&rt->sock_cv, &rt->sock_mu);
        struct sbx_rt_sock_req *q = rt->sock_head;
        if (!q)
            break;
        rt->sock_head = q->next;
        pthread_mutex_unlock(&rt->sock_mu);
        make_socket(q, home);
        pthread_mutex_lock(&rt->sock_mu);
        q->done = true;
        pthread_cond_broadcast(&rt->sock_done);
    }
    pthread_mutex_unlock(&rt->sock_mu);
    return NULL;
}

/* A TCP socket in the network namespace netns_fd (the caller closes it), or -1 with errno. */
static int
socket_in(struct sbx_rt *rt, int netns_fd, const char **what)
{
    struct sbx_rt_sock_req q = {.netns_fd = netns_fd, .fd = -1};
    pthread_mutex_lock(&rt->sock_mu);
    if (!rt->sock_running && !rt->sock_stop) {
        rt->sock_running = pthread_create(&rt->sock_tid, NULL, sock_thread, rt) == 0;
        if (!rt->sock_running) {
            pthread_mutex_unlock(&rt->sock_mu);
            *what = "start the socket thread";
            errno = EAGAIN;
            return -1;
        }
    }
    struct sbx_rt_sock_req **tail = &rt->sock_head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &q;
    pthread_cond_signal(&rt->sock_cv);
    while (!q.done)
        pthread_cond_wait(&rt->sock_done, &rt->sock_mu);
    pthread_mutex_unlock(&rt->sock_mu);
    *what = q.what;
    errno = q.err;
    return q.fd;
}

void
sbx_rt_sock_init(struct sbx_rt *rt)
{
    (void)pthread_mutex_init(&rt->spare_mu, NULL);
    rt->spare_ring = sbx_xcalloc(SBX_RT_SPARE_WINDOW, sizeof(struct sbx_rt_sandbox *));
    (void)pthread_mutex_init(&rt->sock_mu, NULL);
    (void)pthread_cond_init(&rt->sock_cv, NULL);
    (void)pthread_cond_init(&rt->sock_done, NULL);
}

void
sbx_rt_sock_stop(struct sbx_rt *rt)
{
    pthread_mutex_lock(&rt->sock_mu);
    rt->sock_stop = true;
    pthread_cond_broadcast(&rt->sock_cv);
    bool running = rt->sock_running;
    pthread_mutex_unlock(&rt->sock_mu);
    if (running)
        (void)pthread_join(rt->sock_tid, NULL);
    (void)pthread_cond_destroy(&rt->sock_cv);
    (void)pthread_cond_destroy(&rt->sock_done);
    (void)pthread_mutex_destroy(&rt->sock_mu);
    free(rt->spare_ring);
    rt->spare_ring = NULL;
    (void)pthread_mutex_destroy(&rt->spare_mu);
}

static void
close_spares(struct sbx_rt_sandbox *sb)
{
    for (int i = 0; i < SBX_RT_SPARE_SOCKS; i++) {
        int fd = __atomic_exchange_n(&sb->spare_socks[i], -1, __ATOMIC_ACQ_REL);
        if (fd >= 0)
            (void)close(fd);
    }
}

/* Spare sockets serve a new sandbox's first requests (an SDK's ping and first command right
 * after the create). Only the newest SBX_RT_SPARE_WINDOW sandboxes keep theirs: an idle
 * sandbox held three descriptors in the server for nothing (with the netns fd), and 10,000 of
 * them hit RLIMIT_NOFILE. The netns fd is closed too: a connect without spares opens
 * /proc/PID/ns/net for itself (sbx_rt_connect), as for an adopted sandbox. */
void
sbx_rt_make_spare_socks(struct sbx_rt_sandbox *sb)
{
    if (sb->netns_fd < 0 || setns(sb->netns_fd, CLONE_NEWNET) < 0)
        return;
    for (int i = 0; i < SBX_RT_SPARE_SOCKS; i++)
        sb->spare_socks[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)close(sb->netns_fd);
    sb->netns_fd = -1;
    struct sbx_rt *rt = sb->rt;
    if (!rt->spare_ring)
        return;
    pthread_mutex_lock(&rt->spare_mu);
    struct sbx_rt_sandbox *old = rt->spare_ring[rt->spare_next];
    if (old) {
        close_spares(old);
        old->spare_slot = 0;
    }
    rt->spare_ring[rt->spare_next] = sb;
    sb->spare_slot = rt->spare_next + 1;
    rt->spare_next = (rt->spare_next + 1) % SBX_RT_SPARE_WINDOW;
    pthread_mutex_unlock(&rt->spare_mu);
}

void
sbx_rt_close_spare_socks(struct sbx_rt_sandbox *sb)
{
    struct sbx_rt *rt = sb->rt;
    if (rt && rt->spare_ring) {
        pthread_mutex_lock(&rt->spare_mu);
        if (sb->spare_slot && rt->spare_ring[sb->spare_slot - 1] == sb)
            rt->spare_ring[sb->spare_slot - 1] = NULL;
        sb->spare_slot = 0;
        pthread_mutex_unlock(&rt->spare_mu);
    }
    close_spares(sb);
}

static int
take_spare(struct sbx_rt_sandbox *sb)
{
    for (int i = 0; i < SBX_RT_SPARE_SOCKS; i++) {
        int fd = __atomic_exchange_n(&sb->spare_socks[i], -1, __ATOMIC_ACQ_REL);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

/* Running, by its pidfd when we have one (no /proc read), else by pid and start time. */
static bool
still_running(const struct sbx_rt_sandbox *sb)
{
    if (sb->reaped)
        return false;
    if (sb->pidfd >= 0) {
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        return poll(&p, 1, 0) == 0; /* readable once it has exited */
    }
    return sbx_proc_start_time(sb->pid) == sb->start_time;
}

/* Its init still holds its network namespace (and is the same process). */
static bool
namespace_alive(const struct sbx_rt_sandbox *sb)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
    sbx_autoclose int ns = open(path, O_RDONLY | O_CLOEXEC);
    return ns >= 0 && sbx_proc_start_time(sb->pid) == sb->start_time;
}

/* A socket in sb's network namespace, -1 with errno and *what, or -2 when sb no longer runs.
 * A spare made at create needs neither the namespace nor the socket thread (a warm sandbox's
 * first request after its take, a new sandbox's first ones): it was made in the sandbox's own
 * namespace, whatever became of its pid since. Otherwise the namespace fd the create kept, or
 * one opened for this call (an adopted sandbox), checked *after* the open: the pid could have
 * been reused by then, and only a start time that still matches says the namespace opened is
 * this sandbox's. */
static int
sandbox_socket(struct sbx_rt_sandbox *sb, const char **what)
{
    if (!still_running(sb)) {
        errno = ESRCH;
        return -2;
    }
    int s = take_spare(sb);
    if (s >= 0)
        return s;
    sbx_autoclose int own = -1;
    int ns = sb->netns_fd;
    if (ns < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
        own = open(path, O_RDONLY | O_CLOEXEC);
        ns = own;
    }
    if (ns < 0 || !still_running(sb)) {
        errno = ns < 0 ? errno : ESRCH;
        return -2;
    }
    return socket_in(sb->rt, ns, what);
}

int
sbx_rt_connect(int *fd, struct sbx_rt_sandbox *sb, uint16_t port, sbx_error **err)
{
    const char *what = "socket";
    sbx_autoclose int s = sandbox_socket(sb, &what);
    if (s == -2)
        return sbx_error_set(err, SBX_ECONFLICT, errno, "sandbox `%s` is not running", sb->id);
    if (s < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno,
                             "connect to 127.0.0.1:%u in sandbox `%s`: %s", port, sb->id, what);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        /* Refused by a sandbox whose init is exiting (its namespaces already released, the
         * pidfd not yet readable): that is a sandbox that no longer runs. */
        if (e == ECONNREFUSED && !namespace_alive(sb))
            return sbx_error_set(err, SBX_ECONFLICT, ESRCH, "sandbox `%s` is not running", sb->id);
        return sbx_error_set(err, e == ECONNREFUSED ? SBX_EUNAVAIL : SBX_EGENERIC, e,
                             "connect to 127.0.0.1:%u in sandbox `%s`: connect", port, sb->id);
    }
    *fd = sbx_steal_fd(&s);
    return 0;
}
