/*
 * command.c - commands: records, the SSE stream (COMPAT 2.3), background logs, interrupts.
 *
 * Foreground output flows pipe -> line splitter -> JSON event -> evhttp chunk. When the
 * connection's output buffer passes STREAM_HWM the pipes are no longer read (the child blocks
 * on a full pipe), and reading resumes once evhttp reports the buffer drained: output of any
 * size streams in constant memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/cleanup.h"
#include "common/gosig.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/download.h"
#include "execd/fastpath.h"
#include "execd/kernel.h"
#include "execd/proc.h"
#include "execd/spawn.h"

#define STREAM_HWM      (256u << 10)
#define LINE_BUF        (16u << 10) /* longer lines are split into several events */
#define PING_SEC        3
#define INTERRUPT_GRACE 3

struct stream;

struct outpipe {
    struct stream *s;
    int fd;
    struct event *ev;
    const char *type; /* "stdout" / "stderr" */
    bool done;
    bool last_cr;
    size_t len;
    char buf[LINE_BUF];
};

struct stream {
    struct execd *ex;
    struct execd_cmd *cmd;
    struct evhttp_request *req; /* NULL once the client is gone */
    struct evhttp_connection *evcon;
    struct event *ping;
    struct evbuffer *chunk;
    struct outpipe out;
    struct outpipe err;
    bool paused;
};

struct execd_cmd {
    struct execd_cmd *next;
    struct execd *ex;
    char id[40];
    char init_id[40]; /* the `init` event's text: the command id, or a session/context id */
    char *content;
    pid_t pid; /* process group too; 0 once reaped */
    bool running;
    bool background;
    int exit_code;
    char *error;
    int64_t started_ms;
    int64_t finished_ms;
    uint64_t start_mono_ms;
    struct event *timeout_ev;
    struct event *kill_ev;
    char *log_path;
    struct stream *stream;
    struct execd_session *session;
};

/* ---- records ---- */

static struct execd_cmd *
cmd_find(struct execd *ex, const char *id)
{
    for (struct execd_cmd *c = ex->cmds; c; c = c->next) {
        if (strcmp(c->id, id) == 0)
            return c;
    }
    return NULL;
}

static void
cmd_free(struct execd_cmd *c)
{
    if (c->timeout_ev)
        event_free(c->timeout_ev);
    if (c->kill_ev)
        event_free(c->kill_ev);
    if (c->log_path)
        (void)unlink(c->log_path);
    free(c->log_path);
    free(c->content);
    free(c->error);
    free(c);
}

/* Keep at most EXECD_MAX_FINISHED finished records (the oldest go first). */
static void
cmd_prune(struct execd *ex)
{
    if (ex->n_finished <= EXECD_MAX_FINISHED)
        return;
    struct execd_cmd **victim = NULL;
    for (struct execd_cmd **pp = &ex->cmds; *pp; pp = &(*pp)->next) {
        if (!(*pp)->running && !(*pp)->stream)
            victim = pp;
    }
    if (!victim)
        return;
    struct execd_cmd *c = *victim;
    *victim = c->next;
    ex->n_finished--;
    cmd_free(c);
}

/* Exit codes as Go's ProcessState reports them: a signal gives -1 (COMPAT 2.3). */
static void
cmd_set_status(struct execd_cmd *c, int status)
{
    free(c->error);
    c->error = NULL;
    if (WIFEXITED(status)) {
        c->exit_code = WEXITSTATUS(status);
        if (c->exit_code != 0)
            c->error = sbx_xasprintf("exit status %d", c->exit_code);
        return;
    }
    int sig = WTERMSIG(status);
    c->exit_code = -1;
    const char *name = sbx_go_signal_name(sig);
    c->error = name ? sbx_xasprintf("signal: %s", name) : sbx_xasprintf("signal: signal %d", sig);
}

static void
cmd_kill(struct execd_cmd *c, int sig)
{
    if (c->running && c->pid > 0)
        (void)kill(-c->pid, sig);
}

static void
on_timeout(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    cmd_kill(arg, SIGKILL);
}

static void
arm_timer(struct execd_cmd *c, struct event **ev, int64_t ms)
{
    if (!*ev)
        *ev = evtimer_new(c->ex->base, on_timeout, c);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    evtimer_add(*ev, &tv);
}

/* ---- SSE events ---- */

static void
event_terminal(struct evbuffer *b, const struct execd_cmd *c)
{
    if (c->exit_code == 0) {
        execd_sse_begin(b, "execution_complete");
        evbuffer_add_printf(b, ",\"execution_time\":%llu",
                            (unsigned long long)(sbx_now_ms() - c->start_mono_ms));
        execd_sse_end(b);
        return;
    }
    execd_sse_begin(b, "error");
    evbuffer_add_printf(b,
                        ",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"%d\","
                        "\"traceback\":[",
                        c->exit_code);
    const char *e = c->error ? c->error : "error";
    execd_json_quote(b, e, strlen(e));
    evbuffer_add(b, "]}", 2);
    execd_sse_end(b);
}

/* ---- the stream ---- */

static void stream_pump(struct outpipe *p);
static void stream_maybe_finish(struct stream *s);

static bool
stream_congested(const struct stream *s)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(s->evcon);
    return evbuffer_get_length(bufferevent_get_output(bev)) > STREAM_HWM;
}

static void
on_drained(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct stream *s = arg;
    if (!s->paused || !s->req)
        return;
    s->paused = false;
    if (!s->out.done)
        event_add(s->out.ev, NULL);
    if (!s->err.done)
        event_add(s->err.ev, NULL);
    stream_pump(&s->out);
    stream_pump(&s->err);
    stream_maybe_finish(s);
}

static void
stream_flush(struct stream *s)
{
    if (!s->req || evbuffer_get_length(s->chunk) == 0) {
        evbuffer_drain(s->chunk, evbuffer_get_length(s->chunk));
        return;
    }
    evhttp_send_reply_chunk_with_cb(s->req, s->chunk, on_drained, s);
}

static void
pipe_close(struct outpipe *p)
{
    if (p->ev) {
        event_free(p->ev);
        p->ev = NULL;
    }
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->done = true;
}

static void
emit_line(struct outpipe *p, const char *line, size_t n)
{
    /* COMPAT 2.3: one line per event without its newline; an empty line is sent as "\n" */
    if (n == 0)
        execd_sse_text(p->s->chunk, p->type, "\n", 1);
    else
        execd_sse_text(p->s->chunk, p->type, line, n);
}

/* Split buffered bytes into lines on \n or \r (CRLF counts once); keep the partial tail. */
static void
split_lines(struct outpipe *p, bool flush_tail)
{
    size_t start = 0;
    for (size_t i = 0; i < p->len; i++) {
        char c = p->buf[i];
        if (c != '\n' && c != '\r')
            continue;
        bool crlf_tail = c == '\n' && p->last_cr && i == start;
        p->last_cr = c == '\r';
        if (!crlf_tail)
            emit_line(p, p->buf + start, i - start);
        start = i + 1;
    }
    if (start < p->len && (flush_tail || (start == 0 && p->len == sizeof(p->buf)))) {
        emit_line(p, p->buf + start, p->len - start);
        p->last_cr = false;
        start = p->len;
    }
    memmove(p->buf, p->buf + start, p->len - start);
    p->len -= start;
}

static void
stream_pump(struct outpipe *p)
{
    struct stream *s = p->s;
    while (!p->done && !s->paused) {
        if (s->req && stream_congested(s)) {
            s->paused = true;
            if (s->out.ev)
                event_del(s->out.ev);
            if (s->err.ev)
                event_del(s->err.ev);
            break;
        }
        ssize_t n = read(p->fd, p->buf + p->len, sizeof(p->buf) - p->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            p->len += (size_t)n;
            split_lines(p, false);
            stream_flush(s);
            continue;
        }
        /* EOF, an error, or nothing more after the command exited: grandchildren holding the
         * pipe open do not keep the stream alive (COMPAT: the run ends with the command). */
        if (n == 0 || errno != EAGAIN || !s->cmd->running) {
            split_lines(p, true);
            stream_flush(s);
            pipe_close(p);
        }
        break;
    }
}

static void
on_pipe(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct outpipe *p = arg;
    struct stream *s = p->s;
    stream_pump(p);
    stream_maybe_finish(s);
}

static void
on_ping(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct stream *s = arg;
    if (!s->req || stream_congested(s))
        return;
    execd_sse_text(s->chunk, "ping", "pong", 4);
    stream_flush(s);
}

static void
stream_free(struct stream *s)
{
    pipe_close(&s->out);
    pipe_close(&s->err);
    if (s->ping)
        event_free(s->ping);
    evbuffer_free(s->chunk);
    if (s->cmd)
        s->cmd->stream = NULL;
    free(s);
}

static void
stream_maybe_finish(struct stream *s)
{
    if (s->cmd->running || !s->out.done || !s->err.done)
        return;
    if (s->req) {
        evhttp_connection_set_closecb(s->evcon, NULL, NULL);
        event_terminal(s->chunk, s->cmd);
        stream_flush(s);
        evhttp_send_reply_end(s->req);
    }
    stream_free(s);
}

/* The client went away: nobody reads the output any more, so the command is killed (its
 * whole process group) and reaped; the stream is freed once the exit status arrived. */
static void
on_client_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct stream *s = arg;
    execd_http_abandon(s->req);
    s->req = NULL;
    pipe_close(&s->out);
    pipe_close(&s->err);
    if (s->cmd->running) {
        sbx_info("command %s: client disconnected, killing it", s->cmd->id);
        cmd_kill(s->cmd, SIGKILL);
        return;
    }
    stream_free(s);
}

static void
pipe_init(struct stream *s, struct outpipe *p, int fd, const char *type)
{
    p->s = s;
    p->fd = fd;
    p->type = type;
    p->done = fd < 0;
    if (fd >= 0) {
        p->ev = event_new(s->ex->base, fd, EV_READ | EV_PERSIST, on_pipe, p);
        event_add(p->ev, NULL);
    }
}

static void
stream_start(struct execd *ex, struct evhttp_request *req, struct execd_cmd *c, int fds[2])
{
    struct stream *s = sbx_xcalloc(1, sizeof(*s));
    s->ex = ex;
    s->cmd = c;
    s->req = req;
    s->evcon = evhttp_request_get_connection(req);
    s->chunk = evbuffer_new();
    c->stream = s;
    execd_sse_headers(req);
    evhttp_send_reply_start(req, 200, "OK");
    evhttp_connection_set_closecb(s->evcon, on_client_close, s);
    execd_sse_text(s->chunk, "init", c->init_id, strlen(c->init_id));
    stream_flush(s);
    pipe_init(s, &s->out, fds[0], "stdout");
    pipe_init(s, &s->err, fds[1], "stderr");
    s->ping = event_new(ex->base, -1, EV_PERSIST, on_ping, s);
    struct timeval tv = {.tv_sec = PING_SEC};
    event_add(s->ping, &tv);
}

/* ---- start ---- */

static struct execd_cmd *
cmd_new(struct execd *ex, const struct execd_run *run)
{
    struct execd_cmd *c = sbx_xcalloc(1, sizeof(*c));
    c->ex = ex;
    execd_uuid4(c->id, false);
    (void)snprintf(c->init_id, sizeof(c->init_id), "%s", run->init_id ? run->init_id : c->id);
    c->content = sbx_xstrdup(run->content);
    c->background = run->req->background;
    c->session = run->session;
    c->started_ms = sbx_wall_ms();
    c->start_mono_ms = sbx_now_ms();
    return c;
}

/* Output pipes (foreground) or the merged log file (background); child ends in cfd. */
static int
open_outputs(struct execd *ex, struct execd_cmd *c, bool merged, int pfd[2], int cfd[2])
{
    if (c->background) {
        c->log_path = sbx_xasprintf("%s/%s.log", ex->cfg.state_dir, c->id);
        cfd[0] = open(c->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
        cfd[1] = cfd[0] >= 0 ? fcntl(cfd[0], F_DUPFD_CLOEXEC, 0) : -1;
        return cfd[1] < 0 ? -1 : 0;
    }
    int a[2];
    int b[2] = {-1, -1};
    if (pipe2(a, O_CLOEXEC) < 0)
        return -1;
    if (!merged && pipe2(b, O_CLOEXEC) < 0) {
        close(a[0]);
        close(a[1]);
        return -1;
    }
    pfd[0] = a[0];
    pfd[1] = b[0];
    cfd[0] = a[1];
    cfd[1] = merged ? fcntl(a[1], F_DUPFD_CLOEXEC, 0) : b[1];
    (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    if (pfd[1] >= 0)
        (void)fcntl(pfd[1], F_SETFL, O_NONBLOCK);
    return 0;
}

static void
close_fds(int fds[2])
{
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

/* The direct exec of docs/execd.md "Direct exec": only when the shell is a bash whose exec
 * is emulated, the command is plain words naming a program on PATH and the environment has
 * nothing bash treats specially. Any failure (even of the exec itself, before anything ran)
 * returns -1 and the command goes to bash, which then behaves and reports as always. */
static pid_t
spawn_direct(struct execd *ex, const struct execd_spawn *base, char **words)
{
    if (ex->fast_shell == EXECD_FAST_UNKNOWN)
        ex->fast_shell = execd_fast_shell_ok(ex->shell) ? EXECD_FAST_YES : EXECD_FAST_NO;
    if (ex->fast_shell != EXECD_FAST_YES)
        return -1;
    sbx_autofree char *prog = execd_fast_resolve(words[0], base->envp);
    if (!prog)
        return -1;
    struct execd_spawn sp = *base;
    size_t n = 0;
    while (base->envp[n])
        n++;
    sp.envp = sbx_xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        sp.envp[i] = sbx_xstrdup(base->envp[i]);
    pid_t pid = -1;
    if (execd_fast_env(&sp.envp, base->cwd, prog)) {
        sp.path = prog;
        sp.argv = words;
        sbx_autoerror sbx_error *err = NULL;
        pid = execd_spawn(&sp, &err);
        sbx_debug("direct exec of %s: %s", prog, pid > 0 ? "started" : sbx_error_msg(err));
    }
    execd_strv_free(sp.envp);
    return pid > 0 ? pid : -1;
}

static pid_t
spawn_cmd(struct execd *ex, const struct execd_run *run, const int cfd[2], sbx_error **err)
{
    struct execd_spawn sp = {.argv = run->argv, .fd_out = cfd[0], .fd_err = cfd[1]};
    sp.envp = execd_child_env(ex, run->req->envs);
    sbx_autofree char *cwd = run->req->cwd ? execd_expand_vars(run->req->cwd, sp.envp) : NULL;
    sp.cwd = cwd;
    pid_t pid = -1;
    if (run->direct && !run->req->has_uid)
        pid = spawn_direct(ex, &sp, run->direct);
    if (pid < 0) {
        if (run->req->has_uid)
            execd_spawn_set_user(&sp, run->req->uid, run->req->has_gid, run->req->gid);
        pid = execd_spawn(&sp, err);
    }
    execd_strv_free(sp.envp);
    return pid;
}

static void
reply_background(struct evhttp_request *req, struct execd_cmd *c)
{
    struct evbuffer *b = evbuffer_new();
    execd_sse_text(b, "init", c->id, strlen(c->id));
    execd_sse_begin(b, "execution_complete");
    evbuffer_add(b, ",\"execution_time\":0", 19);
    execd_sse_end(b);
    execd_sse_headers(req);
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

void
execd_cmd_start(struct execd *ex, struct evhttp_request *req, const struct execd_run *run)
{
    sbx_autoerror sbx_error *err = NULL;
    struct execd_cmd *c = cmd_new(ex, run);
    int pfd[2] = {-1, -1};
    int cfd[2] = {-1, -1};
    if (open_outputs(ex, c, run->merged, pfd, cfd) < 0) {
        execd_reply_error(req, 500, "RUNTIME_ERROR", "cannot create output: %s",
                          strerror(errno)); /* NOLINT(concurrency-mt-unsafe): one thread */
        cmd_free(c);
        return;
    }
    pid_t pid = spawn_cmd(ex, run, cfd, &err);
    close_fds(cfd);
    if (pid < 0) {
        close_fds(pfd);
        int status = sbx_error_code(err) == SBX_ENOTFOUND ? 400 : 500;
        execd_reply_error(req, status, "RUNTIME_ERROR", "%s", sbx_error_msg(err));
        cmd_free(c);
        return;
    }
    c->pid = pid;
    c->running = true;
    c->next = ex->cmds;
    ex->cmds = c;
    if (c->session)
        execd_session_note_cmd(c->session, c->id);
    if (run->req->timeout_ms > 0)
        arm_timer(c, &c->timeout_ev, run->req->timeout_ms);
    if (c->background)
        reply_background(req, c);
    else
        stream_start(ex, req, c, pfd);
}

/* ---- exits ---- */

static void
cmd_exited(struct execd *ex, struct execd_cmd *c, int status)
{
    cmd_set_status(c, status);
    c->running = false;
    c->finished_ms = sbx_wall_ms();
    if (c->timeout_ev)
        evtimer_del(c->timeout_ev);
    if (c->kill_ev)
        evtimer_del(c->kill_ev);
    ex->n_finished++;
    if (c->session) {
        execd_session_cmd_done(c->session);
        c->session = NULL;
    }
    if (c->stream) {
        struct stream *s = c->stream;
        stream_pump(&s->out);
        stream_pump(&s->err);
        stream_maybe_finish(s);
    }
    cmd_prune(ex);
}

bool
execd_cmd_reap(struct execd *ex)
{
    for (;;) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0)
            return errno == ECHILD;
        if (pid == 0)
            return false;
        bool known = false;
        for (struct execd_cmd *c = ex->cmds; c; c = c->next) {
            if (c->pid == pid && c->running) {
                cmd_exited(ex, c, status); /* may free c (cmd_prune) */
                known = true;
                break;
            }
        }
        if (!known && !execd_desktop_reaped(ex, pid, status) &&
            !execd_sudo_reaped(ex, pid, status) && !execd_pty_reaped(ex, pid, status))
            (void)execd_kernel_reaped(ex, pid, status);
    }
}

void
execd_cmd_signal_all(struct execd *ex, int sig)
{
    for (struct execd_cmd *c = ex->cmds; c; c = c->next)
        cmd_kill(c, sig);
}

bool
execd_cmd_any_running(const struct execd *ex)
{
    for (const struct execd_cmd *c = ex->cmds; c; c = c->next) {
        if (c->running)
            return true;
    }
    return false;
}

void
execd_cmd_free_all(struct execd *ex)
{
    while (ex->cmds) {
        struct execd_cmd *c = ex->cmds;
        ex->cmds = c->next;
        if (c->session)
            execd_session_cmd_done(c->session);
        if (c->stream) {
            c->stream->cmd = NULL;
            if (c->stream->req)
                evhttp_connection_set_closecb(c->stream->evcon, NULL, NULL);
            stream_free(c->stream);
        }
        cmd_free(c);
    }
}

/* ---- handlers ---- */

void
execd_cmd_run_shell(struct execd *ex, struct evhttp_request *req, const struct execd_cmd_req *cr)
{
    char *argv[] = {(char *)ex->shell, "-c", (char *)cr->command, NULL};
    char **words = cr->has_uid ? NULL : execd_fast_words(cr->command);
    struct execd_run run = {.content = cr->command, .argv = argv, .req = cr, .direct = words};
    execd_cmd_start(ex, req, &run);
    execd_strv_free(words);
}

void
execd_cmd_post(struct execd *ex, struct evhttp_request *req)
{
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    struct execd_cmd_req cr;
    char msg[256];
    if (execd_cmd_req_parse(&cr, j, msg, sizeof(msg)) < 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s", msg);
        json_decref(j);
        return;
    }
    execd_cmd_run_shell(ex, req, &cr);
    json_decref(j);
}

bool
execd_cmd_interrupt(struct execd *ex, const char *id)
{
    struct execd_cmd *c = cmd_find(ex, id);
    if (!c || !c->running)
        return false;
    /* COMPAT 2.4: SIGTERM to the process group, SIGKILL if it is still there after 3 s */
    cmd_kill(c, SIGTERM);
    arm_timer(c, &c->kill_ev, (int64_t)INTERRUPT_GRACE * 1000);
    return true;
}

void
execd_cmd_delete(struct execd *ex, struct evhttp_request *req)
{
    sbx_autofree char *id = execd_query(req, "id");
    if (!id || !id[0]) {
        execd_reply_error(req, 400, "MISSING_QUERY", "missing query parameter `id`");
        return;
    }
    if (execd_interrupt(ex, id)) {
        execd_reply_empty(req);
        return;
    }
    execd_reply_error(req, 500, "RUNTIME_ERROR", "no running command, session or context `%s`", id);
}

/* COMPAT 2.4: one dispatcher for DELETE /command?id= and DELETE /code?id=. */
bool
execd_interrupt(struct execd *ex, const char *id)
{
    return execd_cmd_interrupt(ex, id) || execd_code_interrupt(ex, id) ||
           execd_session_interrupt(ex, id);
}

void
execd_cmd_status(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_cmd *c = cmd_find(ex, id);
    if (!c) {
        execd_reply_error(req, 404, "INVALID_REQUEST_BODY", "no such command `%s`", id);
        return;
    }
    char ts[40];
    execd_rfc3339(ts, sizeof(ts), c->started_ms);
    json_t *j = json_pack("{s:s, s:s, s:b, s:s}", "id", c->id, "content", c->content, "running",
                          c->running, "started_at", ts);
    if (!c->running) {
        execd_rfc3339(ts, sizeof(ts), c->finished_ms);
        (void)json_object_set_new(j, "exit_code", json_integer(c->exit_code));
        (void)json_object_set_new(j, "finished_at", json_string(ts));
    }
    if (c->error)
        (void)json_object_set_new(j, "error", json_string(c->error));
    execd_reply_json(req, 200, j);
}

void
execd_cmd_logs(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_cmd *c = cmd_find(ex, id);
    if (!c || !c->background || !c->log_path) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "no background command `%s`", id);
        return;
    }
    sbx_autofree char *cur = execd_query(req, "cursor");
    uint64_t cursor = 0;
    if (cur && cur[0] && sbx_parse_u64(cur, &cursor, NULL) < 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`cursor` must be a byte offset");
        return;
    }
    sbx_autoclose int fd = open(c->log_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        execd_reply_error(req, 500, "RUNTIME_ERROR", "cannot read the log");
        return;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (cursor > size)
        cursor = size;
    struct evbuffer *b = evbuffer_new();
    if (size > cursor)
        execd_add_file_segment(b, sbx_steal_fd(&fd), cursor, size - cursor);
    char hdr[32];
    (void)snprintf(hdr, sizeof(hdr), "%llu", (unsigned long long)size);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
    evhttp_add_header(h, EXECD_CURSOR_HEADER, hdr);
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
