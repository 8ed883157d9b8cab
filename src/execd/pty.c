/*
 * pty.c - PTY sessions (COMPAT 2.2 `/pty`, 2.6): POST/GET/DELETE /pty, the process on a pty
 * (or three pipes with ?pty=0), its output ring, stdin, resize, signals, exit.
 *
 * The process starts at the first WebSocket attach (pty_ws.c), in a session of its own with the
 * pty's slave as its controlling terminal (setsid + TIOCSCTTY), so job control works and a
 * signal goes to the terminal's foreground process group, as Ctrl-C on a real terminal does.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/websocket.h"
#include "common/xalloc.h"
#include "execd/proc.h"
#include "execd/pty.h"
#include "execd/spawn.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

struct execd_pty *
pty_find(struct execd *ex, const char *id)
{
    for (struct execd_pty *s = ex->ptys; s; s = s->next) {
        if (strcmp(s->id, id) == 0)
            return s;
    }
    return NULL;
}

uint64_t
pty_ring_start(const struct execd_pty *s)
{
    return s->total > PTY_RING ? s->total - PTY_RING : 0;
}

/* ---- the ring ---- */

static void
mark_add(struct execd_pty *s, uint8_t ch)
{
    if (!s->pipe_mode)
        return;
    if (s->nmarks && s->marks[(s->mark0 + s->nmarks - 1) % PTY_MARKS].ch == ch)
        return;
    if (s->nmarks == PTY_MARKS) {
        s->mark0 = (s->mark0 + 1) % PTY_MARKS;
        s->nmarks--;
    }
    s->marks[(s->mark0 + s->nmarks) % PTY_MARKS] = (struct pty_mark){.off = s->total, .ch = ch};
    s->nmarks++;
}

/* The channel of the byte at off and where that channel's run ends. */
static uint8_t
mark_at(const struct execd_pty *s, uint64_t off, uint64_t *end)
{
    *end = s->total;
    for (unsigned i = s->nmarks; i > 0; i--) {
        const struct pty_mark *m = &s->marks[(s->mark0 + i - 1) % PTY_MARKS];
        if (m->off <= off)
            return m->ch;
        *end = m->off;
    }
    return PTY_CH_STDOUT;
}

static void
ring_add(struct execd_pty *s, uint8_t ch, const uint8_t *p, size_t n)
{
    mark_add(s, ch);
    while (n > 0) {
        size_t at = (size_t)(s->total % PTY_RING);
        size_t k = n < PTY_RING - at ? n : PTY_RING - at;
        memcpy(s->ring + at, p, k);
        s->total += k;
        p += k;
        n -= k;
    }
}

size_t
pty_ring_next(struct execd_pty *s, struct pty_client *c, uint8_t *ch, const uint8_t **p)
{
    uint64_t start = pty_ring_start(s);
    if (c->cursor < start) {
        c->cursor = start; /* a viewer that fell behind: what left the ring is gone */
        c->need_offset = true;
    }
    if (c->cursor >= s->total)
        return 0;
    uint64_t end = s->total;
    *ch = s->pipe_mode ? mark_at(s, c->cursor, &end) : PTY_CH_STDOUT;
    size_t at = (size_t)(c->cursor % PTY_RING);
    uint64_t n = end - c->cursor;
    if (n > PTY_CHUNK)
        n = PTY_CHUNK;
    if (n > PTY_RING - at)
        n = PTY_RING - at;
    *p = s->ring + at;
    return (size_t)n;
}

/* ---- output ---- */

static void pty_service(struct execd_pty *s);

static bool
holder_lags(const struct execd_pty *s)
{
    const struct pty_client *h = s->holder;
    return h && s->total - h->cursor >= PTY_LAG_MAX;
}

/* Read one fd until it has nothing (or the holder lags). Returns true when it is quiet: at
 * EOF, or nothing more to read right now. */
static bool
drain_fd(struct execd_pty *s, int fd, uint8_t ch, bool *eof)
{
    static uint8_t buf[PTY_CHUNK];
    while (!*eof) {
        if (holder_lags(s)) {
            s->paused = true;
            return false;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            ring_add(s, ch, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        *eof = true; /* 0, or EIO: the pty's last slave fd is closed */
    }
    return true;
}

static void
set_reading(struct execd_pty *s, bool on)
{
    if (s->ev_out && !s->out_eof)
        on ? event_add(s->ev_out, NULL) : event_del(s->ev_out);
    if (s->ev_err && !s->err_eof)
        on ? event_add(s->ev_err, NULL) : event_del(s->ev_err);
}

static void
pump_all(struct execd_pty *s)
{
    struct pty_client *next;
    if (s->holder)
        pty_client_pump(s->holder);
    for (struct pty_client *c = s->viewers; c; c = next) {
        next = c->next;
        pty_client_pump(c);
    }
}

static void keep_expired(evutil_socket_t fd, short what, void *arg);
static void stdin_unstall(struct execd_pty *s);

static void
finish(struct execd_pty *s)
{
    s->finished = true;
    set_reading(s, false);
    struct event **evs[] = {&s->ev_out, &s->ev_err, &s->ev_in};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(evs); i++) {
        if (*evs[i])
            event_free(*evs[i]);
        *evs[i] = NULL;
    }
    int *fds[] = {&s->fd_out, &s->fd_err, &s->fd_in};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(fds); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
    stdin_unstall(s);
    sbx_debug("pty %s: exited with %d after %llu bytes", s->id, s->exit_code,
              (unsigned long long)s->total);
    struct timeval tv = {.tv_sec = PTY_KEEP_SEC};
    s->keep = evtimer_new(s->ex->base, keep_expired, s);
    evtimer_add(s->keep, &tv);
}

/* Read what there is, send it on, and finish an exited process whose output is all read. */
static void
pty_service(struct execd_pty *s)
{
    if (s->finished || !s->started)
        return;
    s->paused = false;
    bool quiet = drain_fd(s, s->fd_out, PTY_CH_STDOUT, &s->out_eof);
    if (s->fd_err >= 0 && !s->paused)
        quiet = drain_fd(s, s->fd_err, PTY_CH_STDERR, &s->err_eof) && quiet;
    set_reading(s, !s->paused);
    if (s->reaped && quiet && !s->paused)
        finish(s);
    pump_all(s);
}

static void
on_output(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pty_service(arg);
}

void
pty_resume(struct execd_pty *s)
{
    if (s->paused && !holder_lags(s))
        pty_service(s);
}

/* ---- stdin ---- */

static void
stdin_unstall(struct execd_pty *s)
{
    if (!s->stdin_full)
        return;
    s->stdin_full = false;
    if (s->holder)
        pty_client_stdin_drained(s->holder);
}

static void
stdin_close(struct execd_pty *s)
{
    if (s->ev_in)
        event_free(s->ev_in);
    s->ev_in = NULL;
    if (s->fd_in >= 0)
        close(s->fd_in);
    s->fd_in = -1;
}

static void
on_stdin_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct execd_pty *s = arg;
    int n = evbuffer_write(s->stdin_q, fd);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
        sbx_debug("pty %s: stdin: %s", s->id, strerrordesc_np(errno));
        evbuffer_drain(s->stdin_q, evbuffer_get_length(s->stdin_q));
    }
    size_t left = evbuffer_get_length(s->stdin_q);
    if (left == 0 && s->ev_in)
        event_del(s->ev_in);
    if (left == 0 && s->stdin_eof)
        stdin_close(s);
    if (left < PTY_STDIN_HIGH)
        stdin_unstall(s);
}

bool
pty_stdin_stall(struct execd_pty *s)
{
    if (!s->stdin_q || evbuffer_get_length(s->stdin_q) < PTY_STDIN_HIGH || s->finished)
        return false;
    s->stdin_full = true;
    return true;
}

int
pty_close_stdin(struct execd_pty *s, const char **why)
{
    if (!s->pipe_mode) {
        *why = "eof: pipe mode only (on a terminal, send its EOF character, ^D)";
        return -1;
    }
    if (s->stdin_eof || s->finished || s->reaped || s->fd_in < 0)
        return 0;
    s->stdin_eof = true;
    if (evbuffer_get_length(s->stdin_q) == 0)
        stdin_close(s);
    return 0;
}

int
pty_write_stdin(struct execd_pty *s, const void *p, size_t n, const char **why)
{
    if (s->stdin_eof) {
        *why = "stdin is closed (eof was sent)";
        return -1;
    }
    if (s->finished || s->reaped || s->fd_in < 0) {
        *why = "the process has exited";
        return -1;
    }
    if (evbuffer_get_length(s->stdin_q) + n > PTY_STDIN_MAX) {
        *why = "the process is not reading its input (1 MiB waiting)";
        return -1;
    }
    evbuffer_add(s->stdin_q, p, n);
    on_stdin_writable(s->fd_in, EV_WRITE, s);
    if (evbuffer_get_length(s->stdin_q) > 0)
        event_add(s->ev_in, NULL);
    return 0;
}

void
pty_resize(struct execd_pty *s, unsigned cols, unsigned rows)
{
    s->cols = (unsigned short)cols;
    s->rows = (unsigned short)rows;
    if (s->started && !s->pipe_mode && s->fd_out >= 0) {
        struct winsize ws = {.ws_row = s->rows, .ws_col = s->cols};
        (void)ioctl(s->fd_out, TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH */
    }
}

int
pty_signal(struct execd_pty *s, int sig)
{
    if (!s->started || s->reaped)
        return -1;
    pid_t pg = s->pid;
    if (!s->pipe_mode && s->fd_out >= 0) {
        pid_t fg = tcgetpgrp(s->fd_out); /* on the master: the slave's foreground group */
        if (fg > 0)
            pg = fg;
    }
    return kill(-pg, sig);
}

/* ---- the process ---- */

struct pty_spawn {
    char **argv;
    char **envp;
    const char *cwd;
    int fds[3]; /* stdin, stdout, stderr of the child */
    bool tty;   /* fds[0] is the pty's slave: make it the controlling terminal */
};

enum child_step {
    STEP_SETUP,
    STEP_CWD,
    STEP_EXEC
};

/* Child side: only async-signal-safe calls from here to exec. What failed goes to errfd as
 * {step, errno}. */
static void __attribute__((noreturn)) pty_child(const struct pty_spawn *sp, int errfd)
{
    int fail[2] = {STEP_SETUP, 0};
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)signal(SIGPIPE, SIG_DFL);
    execd_oom_self(true);
    if (setsid() < 0 || (sp->tty && ioctl(sp->fds[0], TIOCSCTTY, 0) < 0))
        goto fail;
    for (int i = 0; i < 3; i++) {
        if (dup2(sp->fds[i], i) < 0)
            goto fail;
    }
    (void)syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
    fail[0] = STEP_CWD;
    if (sp->cwd && chdir(sp->cwd) < 0)
        goto fail;
    fail[0] = STEP_EXEC;
    execve(sp->argv[0], sp->argv, sp->envp);
fail:
    fail[1] = errno;
    (void)!write(errfd, fail, sizeof(fail));
    _exit(127);
}

static pid_t
fork_child(const struct pty_spawn *sp, sbx_error **err)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "pipe");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        return sbx_error_set(err, SBX_EGENERIC, e, "fork");
    }
    if (pid == 0)
        pty_child(sp, ep[1]);
    close(ep[1]);
    int failed[2] = {0, 0};
    ssize_t n;
    while ((n = read(ep[0], failed, sizeof(failed))) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (n != (ssize_t)sizeof(failed))
        return pid;
    /* the failed child is reaped by SIGCHLD like any other */
    if (failed[0] == STEP_CWD)
        return sbx_error_set(err, SBX_ENOTFOUND, failed[1], "working directory `%s`", sp->cwd);
    if (failed[0] == STEP_EXEC)
        return sbx_error_set(err, SBX_EGENERIC, failed[1], "start `%s`", sp->argv[0]);
    return sbx_error_set(err, SBX_EGENERIC, failed[1], "set up the terminal");
}

/* The pty pair: the master for us, the slave (opened through the master, no path lookup) for
 * the child. */
static int
open_pty(struct execd_pty *s, int *slave, sbx_error **err)
{
    sbx_autoclose int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open a pty (/dev/ptmx)");
    int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (sl < 0) {
        char name[64];
        if (ptsname_r(m, name, sizeof(name)) != 0 ||
            (sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "open the pty's slave");
    }
    struct winsize ws = {.ws_row = s->rows, .ws_col = s->cols};
    (void)ioctl(m, TIOCSWINSZ, &ws);
    *slave = sl;
    return sbx_steal_fd(&m);
}

static void
close_fds(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

/* Our ends in ours[] (stdin, stdout, stderr: -1 when unused), the child's in sp->fds. */
static int
make_stdio(struct execd_pty *s, struct pty_spawn *sp, int ours[3], sbx_error **err)
{
    if (!s->pipe_mode) {
        int slave = -1;
        int m = open_pty(s, &slave, err);
        if (m < 0)
            return m;
        ours[1] = m;
        ours[0] = fcntl(m, F_DUPFD_CLOEXEC, 3);
        sp->fds[0] = sp->fds[1] = sp->fds[2] = slave;
        sp->tty = true;
        return ours[0] < 0 ? sbx_error_set(err, SBX_EGENERIC, errno, "dup") : 0;
    }
    for (int i = 0; i < 3; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "pipe");
        ours[i] = i == 0 ? p[1] : p[0];
        sp->fds[i] = i == 0 ? p[0] : p[1];
    }
    return 0;
}

static char **
pty_argv(const struct execd_pty *s)
{
    char **v = sbx_xcalloc(4, sizeof(*v));
    v[0] = sbx_xstrdup(s->ex->shell);
    if (s->command) {
        v[1] = sbx_xstrdup("-c");
        v[2] = sbx_xstrdup(s->command);
    }
    return v;
}

static char **
pty_env(struct execd_pty *s)
{
    char **env = execd_child_env(s->ex, NULL);
    size_t n = 0;
    bool has_term = false;
    for (; env[n]; n++)
        has_term = has_term || strncmp(env[n], "TERM=", 5) == 0;
    if (!has_term && !s->pipe_mode) { /* a terminal needs a TERM for programs to drive it */
        env = sbx_xrealloc(env, (n + 2) * sizeof(*env));
        env[n] = sbx_xstrdup("TERM=xterm-256color");
        env[n + 1] = NULL;
    }
    return env;
}

static void
watch_fds(struct execd_pty *s)
{
    struct event_base *base = s->ex->base;
    int fds[] = {s->fd_out, s->fd_err, s->fd_in};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(fds); i++) {
        if (fds[i] >= 0)
            (void)fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
    }
    s->ev_out = event_new(base, s->fd_out, EV_READ | EV_PERSIST, on_output, s);
    if (s->fd_err >= 0)
        s->ev_err = event_new(base, s->fd_err, EV_READ | EV_PERSIST, on_output, s);
    s->ev_in = event_new(base, s->fd_in, EV_WRITE | EV_PERSIST, on_stdin_writable, s);
    set_reading(s, true);
}

int
pty_start(struct execd_pty *s, bool pipe_mode, sbx_error **err)
{
    s->pipe_mode = pipe_mode;
    struct pty_spawn sp = {.cwd = s->cwd, .fds = {-1, -1, -1}};
    int ours[3] = {-1, -1, -1};
    int r = make_stdio(s, &sp, ours, err);
    pid_t pid = -1;
    if (r == 0) {
        sp.argv = pty_argv(s);
        sp.envp = pty_env(s);
        pid = fork_child(&sp, err);
        execd_strv_free(sp.argv);
        execd_strv_free(sp.envp);
    }
    /* the child's ends: the slave is one fd three times in pty mode */
    close_fds(sp.fds, sp.tty ? 1 : 3);
    if (r < 0 || pid < 0) {
        close_fds(ours, 3);
        return r < 0 ? r : (int)pid;
    }
    s->started = true;
    s->pid = pid;
    s->fd_in = ours[0];
    s->fd_out = ours[1];
    s->fd_err = ours[2];
    s->ring = sbx_xmalloc(PTY_RING); /* pages are only touched as output fills them */
    s->stdin_q = evbuffer_new();
    watch_fds(s);
    sbx_debug("pty %s: pid %d (%s)", s->id, (int)pid, pipe_mode ? "pipe" : "pty");
    return 0;
}

/* ---- sessions ---- */

static void
pty_free(struct execd_pty *s)
{
    while (s->holder)
        pty_client_close(s->holder, SBX_WS_CLOSE_NORMAL, "session deleted");
    while (s->viewers)
        pty_client_close(s->viewers, SBX_WS_CLOSE_NORMAL, "session deleted");
    if (s->started && !s->reaped)
        (void)kill(-s->pid, SIGKILL); /* reaped later as an unknown child */
    if (!s->finished) {
        s->reaped = true;
        finish(s);
    }
    if (s->keep)
        event_free(s->keep);
    if (s->stdin_q)
        evbuffer_free(s->stdin_q);
    free(s->ring);
    free(s->cwd);
    free(s->command);
    free(s);
}

static void
pty_remove(struct execd_pty *s)
{
    for (struct execd_pty **pp = &s->ex->ptys; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    pty_free(s);
}

static void
keep_expired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_pty *s = arg;
    if (s->holder || s->viewers) { /* someone still reads it: later */
        struct timeval tv = {.tv_sec = PTY_KEEP_SEC};
        evtimer_add(s->keep, &tv);
        return;
    }
    sbx_debug("pty %s: exited %d s ago, removed", s->id, PTY_KEEP_SEC);
    pty_remove(s);
}

static size_t
pty_count(const struct execd *ex)
{
    size_t n = 0;
    for (const struct execd_pty *s = ex->ptys; s; s = s->next)
        n++;
    return n;
}

/* Optional {"cwd", "command"}: strings; cwd an existing directory. */
static bool
parse_create(struct evhttp_request *req, char **cwd, char **command)
{
    bool empty = false;
    json_t *j = execd_body_json(req, &empty);
    if (!j)
        return empty;
    json_t *c = json_object_get(j, "cwd");
    json_t *cmd = json_object_get(j, "command");
    struct stat st;
    const char *bad = !json_is_object(j)                              ? "want a JSON object"
                      : (c && !json_is_null(c) && !json_is_string(c)) ? "cwd must be a string"
                      : (cmd && !json_is_null(cmd) && !json_is_string(cmd))
                          ? "command must be a string"
                          : NULL;
    const char *cs = json_string_value(c);
    if (!bad && cs && cs[0] && (stat(cs, &st) < 0 || !S_ISDIR(st.st_mode)))
        bad = "cwd is not a directory";
    if (bad) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s", bad);
        json_decref(j);
        return false;
    }
    *cwd = cs && cs[0] ? sbx_xstrdup(cs) : NULL;
    const char *ms = json_string_value(cmd);
    *command = ms && ms[0] ? sbx_xstrdup(ms) : NULL;
    json_decref(j);
    return true;
}

void
execd_pty_create(struct execd *ex, struct evhttp_request *req)
{
    char *cwd = NULL;
    char *command = NULL;
    if (!parse_create(req, &cwd, &command))
        return;
    if (pty_count(ex) >= PTY_MAX_SESSIONS) {
        free(cwd);
        free(command);
        execd_reply_error(req, 503, "RUNTIME_ERROR", "too many PTY sessions (%d): delete one first",
                          PTY_MAX_SESSIONS);
        return;
    }
    struct execd_pty *s = sbx_xcalloc(1, sizeof(*s));
    s->ex = ex;
    execd_uuid4(s->id, true);
    s->cwd = cwd;
    s->command = command;
    s->cols = 80;
    s->rows = 24;
    s->fd_out = s->fd_err = s->fd_in = -1;
    s->next = ex->ptys;
    ex->ptys = s;
    execd_reply_json(req, 201, json_pack("{s:s}", "session_id", s->id));
}

void
execd_pty_get(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_pty *s = pty_find(ex, id);
    if (!s) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no PTY session %s", id);
        return;
    }
    json_t *j = json_pack("{s:s, s:b, s:I}", "session_id", s->id, "running",
                          s->started && !s->reaped, "output_offset", (json_int_t)s->total);
    if (s->reaped)
        (void)json_object_set_new(j, "exit_code", json_integer(s->exit_code));
    execd_reply_json(req, 200, j);
}

void
execd_pty_delete(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_pty *s = pty_find(ex, id);
    if (!s) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no PTY session %s", id);
        return;
    }
    for (struct pty_client *c = s->holder ? s->holder : s->viewers; c;
         c = s->holder ? s->holder : s->viewers) {
        pty_client_error(c, "SESSION_GONE", "the session was deleted");
        pty_client_close(c, SBX_WS_CLOSE_NORMAL, "SESSION_GONE");
    }
    pty_remove(s);
    execd_reply_empty(req);
}

bool
execd_pty_reaped(struct execd *ex, pid_t pid, int status)
{
    for (struct execd_pty *s = ex->ptys; s; s = s->next) {
        if (s->started && !s->reaped && s->pid == pid) {
            s->reaped = true;
            s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            pty_service(s);
            return true;
        }
    }
    return false;
}

void
execd_pty_signal_all(struct execd *ex, int sig)
{
    for (struct execd_pty *s = ex->ptys; s; s = s->next) {
        if (s->started && !s->reaped)
            (void)kill(-s->pid, sig);
    }
}

bool
execd_pty_any_running(const struct execd *ex)
{
    for (const struct execd_pty *s = ex->ptys; s; s = s->next) {
        if (s->started && !s->reaped)
            return true;
    }
    return false;
}

void
execd_pty_free_all(struct execd *ex)
{
    while (ex->ptys) {
        struct execd_pty *s = ex->ptys;
        ex->ptys = s->next;
        pty_free(s);
    }
}
