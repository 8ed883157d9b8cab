/*
 * netns.c - loopback bring-up in a fresh network namespace, and connect() into a sandbox's
 * network namespace (common/netns.c does the thread).
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
#include "common/netns.h"
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

int
sbx_rt_connect(int *fd, struct sbx_rt_sandbox *sb, uint16_t port, sbx_error **err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
    sbx_autoclose int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || sbx_proc_start_time(sb->pid) != sb->start_time)
        return sbx_error_set(err, SBX_ECONFLICT, ns < 0 ? errno : ESRCH,
                             "sandbox `%s` is not running", sb->id);
    const char *what = NULL;
    int r = sbx_netns_connect_fd(ns, port, fd, &what);
    if (r < 0)
        return sbx_error_set(err, r == -ECONNREFUSED ? SBX_EUNAVAIL : SBX_EGENERIC, -r,
                             "connect to 127.0.0.1:%u in sandbox `%s`: %s", port, sb->id, what);
    return 0;
}
