/*
 * run_stdio.c - `sbx run`'s stdio when the caller's is a file: a pipe in between.
 *
 * The runtime hands a sandbox no fd that leads to a host file open for writing (through it the
 * sandbox could chmod or chown the file, or make it setuid and fill it: src/runtime/stdio.c).
 * So when our stdout, stderr (or a read-write stdin) is such a file, the sandbox gets a pipe
 * and a thread here copies between the two: the file is only ever written by us, with the
 * caller's own description (its offset, O_APPEND). stdout and stderr that are the same file
 * share one pipe, so their order is kept. Terminals, /dev/null, pipes and sockets need none of
 * this (the runtime passes or reopens them).
 */
#include "cli/run_stdio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"

static bool
write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void *
relay_main(void *arg)
{
    struct sbx_run_relay *r = arg;
    /* A reader that went away (the sandbox died) is an EPIPE here, not a SIGPIPE for us. */
    sigset_t all;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_BLOCK, &all, NULL);
    char buf[65536];
    for (;;) {
        ssize_t n = read(r->from, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || !write_all(r->to, buf, (size_t)n))
            break;
    }
    /* Our end of the pipe: for an input, the sandbox reads EOF. */
    (void)close(r->input ? r->to : r->from);
    return NULL;
}

static bool
same_file(int a, int b)
{
    struct stat sa;
    struct stat sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int
start(struct sbx_run_stdio *s, int i, int from, int to)
{
    struct sbx_run_relay *r = &s->relays[i];
    r->from = from;
    r->to = to;
    r->input = i == 0;
    int e = pthread_create(&r->tid, NULL, relay_main, r);
    if (e != 0)
        return -e;
    r->running = true;
    return 0;
}

int
sbx_run_stdio_setup(struct sbx_run_stdio *s, int io[3])
{
    memset(s, 0, sizeof *s);
    const int orig[3] = {io[0], io[1], io[2]};
    for (int i = 0; i < 3; i++) {
        s->child_end[i] = -1;
        if (io[i] < 0 || !sbx_rt_stdio_needs_pipe(io[i]))
            continue;
        if (i == 2 && s->child_end[1] >= 0 && same_file(orig[1], orig[2])) {
            io[2] = io[1]; /* one pipe for both: their order is kept */
            continue;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return -errno;
        /* stdin: we write into the pipe; stdout/stderr: we read from it. */
        int ours = i == 0 ? p[1] : p[0];
        int theirs = i == 0 ? p[0] : p[1];
        s->child_end[i] = theirs;
        int r = i == 0 ? start(s, i, io[0], ours) : start(s, i, ours, io[i]);
        if (r < 0) {
            (void)close(ours);
            return r;
        }
        io[i] = theirs;
    }
    return 0;
}

void
sbx_run_stdio_started(struct sbx_run_stdio *s)
{
    /* The sandbox holds its own copies: once it is gone, the relays see EOF (or EPIPE). */
    for (int i = 0; i < 3; i++) {
        if (s->child_end[i] >= 0)
            (void)close(s->child_end[i]);
        s->child_end[i] = -1;
    }
}

void
sbx_run_stdio_finish(struct sbx_run_stdio *s)
{
    sbx_run_stdio_started(s);
    struct sbx_run_relay *relays = s->relays;
    for (int i = 0; i < 3; i++) {
        if (!relays[i].running)
            continue;
        /* stdin's relay may be blocked reading a caller's input that never ends: the
         * sandbox is gone, nothing will read what it copies. */
        if (i == 0)
            (void)pthread_cancel(relays[i].tid);
        (void)pthread_join(relays[i].tid, NULL);
        relays[i].running = false;
    }
}
