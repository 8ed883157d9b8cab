/*
 * netns.c - loopback bring-up in a fresh network namespace, and connect() into a sandbox's
 * network namespace from a short-lived thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
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

struct connect_job {
    int netns_fd;
    uint16_t port;
    int fd;
    int err;
    const char *what;
};

static void *
connect_thread(void *arg)
{
    struct connect_job *j = arg;
    /* setns(CLONE_NEWNET) affects only this thread; sockets keep the namespace they were
     * created in, so the fd works after the thread is gone. */
    j->what = "setns";
    if (setns(j->netns_fd, CLONE_NEWNET) < 0) {
        j->err = errno;
        return NULL;
    }
    j->what = "socket";
    sbx_autoclose int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        j->err = errno;
        return NULL;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(j->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    j->what = "connect";
    while (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno != EINTR) {
            j->err = errno;
            return NULL;
        }
    }
    j->fd = sbx_steal_fd(&s);
    return NULL;
}

int
sbx_rt_connect(int *fd, struct sbx_rt_sandbox *sb, uint16_t port, sbx_error **err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
    sbx_autoclose int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || sbx_proc_start_time(sb->pid) != sb->start_time)
        return sbx_error_set(err, SBX_ECONFLICT, ns < 0 ? errno : ESRCH,
                             "sandbox `%s` is not running", sb->id);
    struct connect_job j = {.netns_fd = ns, .port = port, .fd = -1};
    pthread_t t;
    int r = pthread_create(&t, NULL, connect_thread, &j);
    if (r != 0)
        return sbx_error_set(err, SBX_EGENERIC, r, "create connect thread");
    (void)pthread_join(t, NULL);
    if (j.fd < 0)
        return sbx_error_set(err, j.err == ECONNREFUSED ? SBX_EUNAVAIL : SBX_EGENERIC, j.err,
                             "connect to 127.0.0.1:%u in sandbox `%s`: %s", port, sb->id, j.what);
    *fd = j.fd;
    return 0;
}
