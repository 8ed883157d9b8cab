/*
 * netns.c - connect() into, or run a function inside, another network namespace from a
 * short-lived thread.
 */
#include "common/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"

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
    /* setns(CLONE_NEWNET) affects only this thread, which exits right after; a socket keeps
     * the namespace it was created in, so the fd works from any thread afterwards. */
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
sbx_netns_connect_fd(int netns_fd, uint16_t port, int *fd, const char **what)
{
    struct connect_job j = {.netns_fd = netns_fd, .port = port, .fd = -1};
    *what = "create connect thread";
    pthread_t t;
    int r = pthread_create(&t, NULL, connect_thread, &j);
    if (r != 0)
        return -r;
    (void)pthread_join(t, NULL);
    if (j.fd < 0) {
        *what = j.what;
        return -j.err;
    }
    *fd = j.fd;
    return 0;
}

struct run_job {
    int netns_fd;
    void (*fn)(void *arg);
    void *arg;
    int err;
};

static void *
run_thread(void *arg)
{
    struct run_job *j = arg;
    /* as connect_thread: only this thread changes namespace, and it exits right after */
    if (setns(j->netns_fd, CLONE_NEWNET) < 0) {
        j->err = errno;
        return NULL;
    }
    j->fn(j->arg);
    return NULL;
}

int
sbx_netns_run(int netns_fd, void (*fn)(void *arg), void *arg)
{
    struct run_job j = {.netns_fd = netns_fd, .fn = fn, .arg = arg};
    pthread_t t;
    int r = pthread_create(&t, NULL, run_thread, &j);
    if (r != 0)
        return -r;
    (void)pthread_join(t, NULL);
    return -j.err;
}
