/*
 * procutil.c - /proc reading, session signalling and loopback sockets.
 */
#include "providers/procutil.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/netns.h"
#include "common/util.h"

int
sbx_proc_info(pid_t pid, struct sbx_proc_info *out, sbx_error **err)
{
    char path[64];
    char buf[1024];
    (void)snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    sbx_autofclose FILE *f = fopen(path, "re");
    if (!f)
        return sbx_error_set(err, SBX_ENOTFOUND, errno, "process %d", (int)pid);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    /* comm may hold spaces and parens: fields start after the last ')'. */
    const char *p = strrchr(buf, ')');
    if (!p)
        return sbx_error_set(err, SBX_EIO, 0, "malformed %s", path);
    char state = 0;
    int ppid = 0;
    int pgrp = 0;
    int sid = 0;
    unsigned long long start = 0;
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
     * cstime priority nice threads itrealvalue starttime */
    if (sscanf(p + 2,
               "%c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
               &state, &ppid, &pgrp, &sid, &start) != 5)
        return sbx_error_set(err, SBX_EIO, 0, "malformed %s", path);
    out->state = state;
    out->sid = sid;
    out->start_time = start;
    return 0;
}

int
sbx_proc_same(pid_t pid, uint64_t start_time)
{
    struct sbx_proc_info pi = {0};
    if (pid <= 0 || sbx_proc_info(pid, &pi, NULL) < 0)
        return 0;
    return pi.start_time == start_time && pi.state != 'Z' && pi.state != 'X';
}

int
sbx_proc_watch(pid_t pid, uint64_t start_time)
{
    if (pid <= 0)
        return -1;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return -1;
    /* The pid may have been reused before the pidfd was made: the start time says whose it
     * is now, and a pidfd never changes process. */
    if (!sbx_proc_same(pid, start_time)) {
        (void)close(fd);
        return -1;
    }
    return sbx_fd_park(fd); /* the server's reaper holds it while the sandbox lives */
}

int
sbx_proc_signal_session(pid_t sid, int sig)
{
    if (sid <= 1)
        return 0;
    sbx_autoclosedir DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int count = 0;
    const struct dirent *de = NULL;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
        struct sbx_proc_info pi = {0};
        if (sbx_proc_info(pid, &pi, NULL) == 0 && pi.sid == sid && pi.state != 'Z' &&
            kill(pid, sig) == 0)
            count++;
    }
    return count;
}

int
sbx_proc_signal_cwd(const char *dir, int sig)
{
    sbx_autoclosedir DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int count = 0;
    const struct dirent *de = NULL;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        char link[300];
        char cwd[PATH_MAX];
        (void)snprintf(link, sizeof link, "/proc/%s/cwd", de->d_name);
        ssize_t n = readlink(link, cwd, sizeof cwd - 1);
        if (n <= 0)
            continue;
        cwd[n] = '\0';
        if (strcmp(cwd, dir) != 0)
            continue;
        struct sbx_proc_info pi = {0};
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
        if (sbx_proc_info(pid, &pi, NULL) == 0 && pi.sid > 1 && pi.sid == pid)
            count += sbx_proc_signal_session(pi.sid, sig);
        else if (kill(pid, sig) == 0)
            count++;
    }
    return count;
}

int
sbx_execd_ping_fd(int fd, const char *token)
{
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-EXECD-ACCESS-TOKEN: %s\r\n"
                     "Connection: close\r\n\r\n",
                     token);
    struct timeval tv = {.tv_sec = 1};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (n < 0 || (size_t)n >= sizeof req || sbx_write_all(fd, req, (size_t)n) < 0)
        return -1;
    char resp[16] = {0};
    if (sbx_read_full(fd, resp, 12) < 12)
        return -1;
    return strncmp(resp + 8, " 200", 4) == 0 ? 0 : -1;
}

int
sbx_net_free_port(int *port, sbx_error **err)
{
    sbx_autoclose int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sbx_error_set(err, SBX_EIO, errno, "socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return sbx_error_set(err, SBX_EIO, errno, "pick a free loopback port");
    *port = ntohs(sa.sin_port);
    return 0;
}

static int
wait_connected(int fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int r = poll(&pfd, 1, timeout_ms);
    if (r <= 0)
        return r == 0 ? ETIMEDOUT : errno;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        return errno;
    return soerr;
}

int
sbx_net_connect_ip4(const char *ip, int port, int timeout_ms, int *fd_out, sbx_error **err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an IPv4 address", ip);
    sbx_autoclose int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return sbx_error_set(err, SBX_EIO, errno, "socket");
    int e = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        e = errno == EINPROGRESS ? wait_connected(fd, timeout_ms) : errno;
    if (e)
        return sbx_error_set(err, e == ETIMEDOUT ? SBX_ETIMEDOUT : SBX_EIO, e, "connect to %s:%d",
                             ip, port);
    /* Back to blocking: callers use poll with their own deadlines. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = sbx_steal_fd(&fd);
    return 0;
}

int
sbx_net_connect_local(int port, int timeout_ms, int *fd_out, sbx_error **err)
{
    return sbx_net_connect_ip4("127.0.0.1", port, timeout_ms, fd_out, err);
}

int
sbx_netns_connect(pid_t pid, uint64_t start_time, int port, int *fd, sbx_error **err)
{
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    sbx_autoclose int ns = open(path, O_RDONLY | O_CLOEXEC);
    /* Checked after the open: if the pid was recycled before it, the start time differs; after
     * it, the fd pins the namespace we checked. */
    if (ns < 0 || !sbx_proc_same(pid, start_time))
        return sbx_error_set(err, SBX_ECONFLICT, ns < 0 ? errno : ESRCH, "process %d is gone",
                             (int)pid);
    const char *what = NULL;
    int r = sbx_netns_connect_fd(ns, (uint16_t)port, fd, &what);
    if (r < 0)
        return sbx_error_set(err, r == -ECONNREFUSED ? SBX_EUNAVAIL : SBX_EIO, -r,
                             "connect to 127.0.0.1:%d in the network namespace of %d: %s", port,
                             (int)pid, what);
    return 0;
}
