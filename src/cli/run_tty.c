/*
 * run_tty.c - `sbx run -t`: the command gets a pseudo-terminal of its own as its controlling
 * terminal (the runtime makes it so: spec.tty), and `sbx run` copies between the master and the
 * caller's terminal, which it puts in raw mode with -i: keys reach the command's line
 * discipline as bytes, so Ctrl-C is a SIGINT to the sandbox's foreground process group, and job
 * control works. The window size follows the caller's (SIGWINCH -> TIOCSWINSZ on the master;
 * the kernel tells the foreground group).
 *
 * The pair is made here, not the caller's terminal passed in: the sandbox may do what it likes
 * with its terminal (TIOCSTI pushes bytes into its own input only), and nothing of it reaches the
 * caller's terminal but the bytes copied out.
 */
#include "cli/run_tty.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/util.h"

static void
copy_winsize(int master)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        (void)ioctl(master, TIOCSWINSZ, &ws);
}

static int
open_pair(struct sbx_run_tty *t)
{
    t->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[64];
    if (t->master < 0 || grantpt(t->master) < 0 || unlockpt(t->master) < 0 ||
        ptsname_r(t->master, name, sizeof name) != 0)
        return -errno;
    t->slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (t->slave < 0)
        return -errno;
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    (void)ioctl(t->master, TIOCSWINSZ, &ws);
    copy_winsize(t->master);
    return 0;
}

int
sbx_run_tty_open(struct sbx_run_tty *t, bool input)
{
    *t = (struct sbx_run_tty){
        .master = -1, .slave = -1, .input = input, .stop = {-1, -1}, .winch = -1};
    int r = open_pair(t);
    if (r < 0)
        return r;
    if (pipe2(t->stop, O_CLOEXEC) < 0)
        return -errno;
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGWINCH);
    t->winch = signalfd(-1, &w, SFD_CLOEXEC | SFD_NONBLOCK);
    if (input && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
        struct termios raw = t->saved;
        cfmakeraw(&raw);
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
            t->raw = true;
    }
    return 0;
}

/* Copy what is readable from `from` to `to`. 0 on EOF or error of `from`. */
static ssize_t
pump(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0)
        return 0; /* EOF, or EIO on the master: every slave is closed */
    return sbx_write_all(to, buf, (size_t)n) < 0 ? 0 : n;
}

static void *
copy_main(void *arg)
{
    struct sbx_run_tty *t = arg;
    bool in_open = t->input;
    for (;;) {
        struct pollfd p[4] = {{.fd = t->master, .events = POLLIN},
                              {.fd = t->stop[0], .events = POLLIN},
                              {.fd = t->winch, .events = POLLIN},
                              {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN}};
        if (poll(p, 4, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents && pump(t->master, STDOUT_FILENO) == 0)
            break;
        if (p[1].revents)
            break;
        if (p[2].revents) {
            struct signalfd_siginfo si;
            while (read(t->winch, &si, sizeof si) == (ssize_t)sizeof si)
                ;
            copy_winsize(t->master);
        }
        if (p[3].revents && pump(STDIN_FILENO, t->master) == 0)
            in_open = false; /* the caller's input ended; the command's output goes on */
    }
    return NULL;
}

int
sbx_run_tty_start(struct sbx_run_tty *t)
{
    (void)close(t->slave);
    t->slave = -1;
    int e = pthread_create(&t->tid, NULL, copy_main, t);
    if (e)
        return -e;
    t->running = true;
    return 0;
}

void
sbx_run_tty_finish(struct sbx_run_tty *t)
{
    if (t->running) {
        /* The command is gone; its output ends when the last holder of the slave (the
         * sandbox, torn down now) closes it. A process of it that still holds the terminal
         * must not keep the caller waiting: a second at most. */
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        for (int i = 0; i < 10 && pthread_tryjoin_np(t->tid, NULL) == EBUSY; i++)
            (void)poll(&p, 0, 100);
        (void)!write(t->stop[1], "x", 1);
        (void)pthread_join(t->tid, NULL);
    }
    if (t->raw)
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
    int fds[] = {t->master, t->slave, t->stop[0], t->stop[1], t->winch};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (fds[i] >= 0)
            (void)close(fds[i]);
    }
}
