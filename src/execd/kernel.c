/*
 * kernel.c - start an ipykernel, connect to it over ZMTP, pass Jupyter messages both ways.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/kernel.h"
#include "execd/proc.h"
#include "execd/spawn.h"

#define CONNECT_RETRY_MS 25
#define KINFO_RETRY_MS   100
#define SUN_PATH_MAX     100 /* sizeof(sun_path) is 108; keep room for "-N" */

struct execd_kernel {
    struct execd_kernel *next;
    struct execd *ex;
    struct execd_kernel_ops ops;
    void *arg;
    char id[40];
    char *cwd;
    char session[40];
    char key[65]; /* the HMAC key: these hex characters are the key bytes, as in Jupyter */
    char *conn_path;
    char *ipc_prefix;
    char *log_path;
    pid_t pid; /* process group too */
    bool alive;
    enum {
        K_STARTING,
        K_READY,
        K_DEAD
    } state;
    struct zmtp_conn *shell;
    struct zmtp_conn *iopub;
    bool shell_up;
    bool iopub_up;
    bool kinfo_replied;
    bool iopub_seen;
    char kinfo_id[40];
    struct event *timer;
    struct event *deadline;
    struct event *defer;
    char *fail_why;
    char **cands;
    size_t icand;
    char *tried;
    char *python; /* the candidate running now */
};

/* ---- the interpreter ---- */

static bool
executable(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && eaccess(p, X_OK) == 0;
}

static void
cand_add(char ***v, size_t *n, const char *p)
{
    if (!executable(p))
        return;
    char real[PATH_MAX];
    const char *key = realpath(p, real) ? real : p;
    for (size_t i = 0; i < *n; i++) {
        char other[PATH_MAX];
        if (strcmp((*v)[i], p) == 0 || (realpath((*v)[i], other) && strcmp(other, key) == 0))
            return;
    }
    *v = sbx_xrealloc(*v, (*n + 2) * sizeof(char *));
    (*v)[(*n)++] = sbx_xstrdup(p);
    (*v)[*n] = NULL;
}

/* --python, else what worked before, else python3 on PATH and the usual places. */
static char **
candidates(struct execd *ex, char *const *env)
{
    char **v = sbx_xcalloc(1, sizeof(char *));
    size_t n = 0;
    if (ex->cfg.python) {
        v = sbx_xrealloc(v, 2 * sizeof(char *));
        v[0] = sbx_xstrdup(ex->cfg.python);
        v[1] = NULL;
        return v;
    }
    if (ex->python_ok)
        cand_add(&v, &n, ex->python_ok);
    const char *path = NULL;
    for (size_t i = 0; env && env[i]; i++) {
        if (strncmp(env[i], "PATH=", 5) == 0)
            path = env[i] + 5;
    }
    for (const char *p = path; p && *p;) {
        size_t len = strcspn(p, ":");
        if (len > 0 && p[0] == '/') {
            sbx_autofree char *c = sbx_xasprintf("%.*s/python3", (int)len, p);
            cand_add(&v, &n, c);
        }
        p += len + (p[len] == ':');
    }
    cand_add(&v, &n, "/usr/local/bin/python3");
    cand_add(&v, &n, "/usr/bin/python3");
    return v;
}

/* ---- files ---- */

/* A private short directory for the ipc sockets when the state dir is too deep for a unix
 * socket path (created once, removed at exit by execd_kernel_cleanup). */
static const char *
short_dir(struct execd *ex)
{
    if (!ex->kernel_dir) {
        char tmpl[] = "/tmp/sbx-k-XXXXXX";
        if (mkdtemp(tmpl))
            ex->kernel_dir = sbx_xstrdup(tmpl);
    }
    return ex->kernel_dir ? ex->kernel_dir : "/nonexistent";
}

static void
unlink_ipc(const struct execd_kernel *k)
{
    for (int port = 1; port <= 5; port++) {
        sbx_autofree char *p = sbx_xasprintf("%s-%d", k->ipc_prefix, port);
        (void)unlink(p);
    }
}

static int
write_connection_file(struct execd_kernel *k)
{
    json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:s, s:s}", "shell_port", 1,
                          "iopub_port", 2, "stdin_port", 3, "control_port", 4, "hb_port", 5, "ip",
                          k->ipc_prefix, "key", k->key, "transport", "ipc", "signature_scheme",
                          "hmac-sha256", "kernel_name", "python3");
    sbx_autofree char *s = json_dumps(j, JSON_INDENT(1));
    json_decref(j);
    /* 0600 in the 0700 state dir: the key never leaves execd's user */
    return s ? sbx_write_file_atomic(k->conn_path, s, strlen(s), 0600, NULL) : -1;
}

/* The last non-empty line the candidate printed (its error), or its exit status. */
static char *
last_words(const struct execd_kernel *k, int status)
{
    sbx_autofree char *log = NULL;
    size_t len = 0;
    if (sbx_read_file(k->log_path, 1 << 20, &log, &len, NULL) == 0) {
        while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == '\r' || log[len - 1] == ' '))
            log[--len] = '\0';
        char *nl = strrchr(log, '\n');
        const char *line = nl ? nl + 1 : log;
        if (*line)
            return sbx_xasprintf("%.200s", line);
    }
    if (WIFSIGNALED(status))
        return sbx_xasprintf("killed by signal %d", WTERMSIG(status));
    return sbx_xasprintf("exited with status %d", WEXITSTATUS(status));
}

/* ---- state ---- */

static void
drop_connections(struct execd_kernel *k)
{
    zmtp_conn_free(k->shell);
    zmtp_conn_free(k->iopub);
    k->shell = k->iopub = NULL;
    k->shell_up = k->iopub_up = k->kinfo_replied = k->iopub_seen = false;
    k->kinfo_id[0] = '\0';
}

static void
stop_timers(struct execd_kernel *k)
{
    evtimer_del(k->timer);
    evtimer_del(k->deadline);
}

static void
on_defer(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_kernel *k = arg;
    k->ops.failed(k, k->fail_why ? k->fail_why : "kernel failed", k->arg);
}

/* Report failure from the loop, so the owner may free k in its callback. */
static void
fail_later(struct execd_kernel *k, const char *why)
{
    if (k->fail_why)
        return;
    k->fail_why = sbx_xstrdup(why);
    k->state = K_DEAD;
    drop_connections(k);
    stop_timers(k);
    if (k->alive)
        (void)kill(-k->pid, SIGKILL);
    event_active(k->defer, EV_TIMEOUT, 1);
}

static void
arm(struct event *ev, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (long)(ms % 1000) * 1000};
    evtimer_add(ev, &tv);
}

static void
send_msg(struct execd_kernel *k, const char *type, json_t *content, char *id_out)
{
    struct jmsg_out o;
    jmsg_build(&o, (const uint8_t *)k->key, strlen(k->key), k->session, type, content);
    zmtp_send(k->shell, o.iov, 6);
    if (id_out)
        memcpy(id_out, o.id, strlen(o.id) + 1);
    jmsg_out_clear(&o);
}

static void
check_ready(struct execd_kernel *k)
{
    if (k->state != K_STARTING || !k->kinfo_replied || !k->iopub_seen)
        return;
    k->state = K_READY;
    stop_timers(k);
    if (!k->ex->python_ok || strcmp(k->ex->python_ok, k->python) != 0) {
        free(k->ex->python_ok);
        k->ex->python_ok = sbx_xstrdup(k->python);
    }
    sbx_info("kernel %s ready (%s, pid %d)", k->id, k->python, (int)k->pid);
    k->ops.ready(k, k->arg);
}

static void
on_zmtp_ready(struct zmtp_conn *c, void *arg)
{
    struct execd_kernel *k = arg;
    if (c == k->iopub) {
        k->iopub_up = true;
        struct iovec sub = {.iov_base = "\x01", .iov_len = 1}; /* subscribe to every topic */
        zmtp_send(k->iopub, &sub, 1);
    } else {
        k->shell_up = true;
    }
    if (k->shell_up && k->iopub_up && !k->kinfo_id[0]) {
        send_msg(k, "kernel_info_request", json_object(), k->kinfo_id);
        arm(k->timer, KINFO_RETRY_MS);
    }
}

static void
on_zmtp_msg(struct zmtp_conn *c, const struct zmtp_msg *m, void *arg)
{
    struct execd_kernel *k = arg;
    if (k->state == K_DEAD)
        return;
    struct jmsg j;
    const char *why = NULL;
    if (jmsg_parse(m, (const uint8_t *)k->key, strlen(k->key), &j, &why) < 0) {
        sbx_warn("kernel %s: dropped a message: %s", k->id, why);
        return;
    }
    if (c == k->iopub) {
        k->iopub_seen = true;
        if (k->state == K_READY)
            k->ops.iopub(k, &j, k->arg);
    } else if (strcmp(j.msg_type, "kernel_info_reply") == 0) {
        k->kinfo_replied = true;
    } else if (k->state == K_READY) {
        k->ops.shell(k, &j, k->arg);
    }
    jmsg_clear(&j);
    check_ready(k);
}

static void
on_zmtp_closed(struct zmtp_conn *c, const char *why, void *arg)
{
    (void)c;
    struct execd_kernel *k = arg;
    if (k->state == K_READY) {
        fail_later(k, why);
    } else if (k->state == K_STARTING) {
        /* the process is probably exiting (its reaping decides what comes next); if not,
         * connect again until the start deadline */
        drop_connections(k);
        arm(k->timer, CONNECT_RETRY_MS);
    }
}

static const struct zmtp_handlers zmtp_ops = {
    .ready = on_zmtp_ready,
    .message = on_zmtp_msg,
    .closed = on_zmtp_closed,
};

static void
try_connect(struct execd_kernel *k)
{
    struct event_base *base = k->ex->base;
    if (!k->shell) {
        sbx_autofree char *p = sbx_xasprintf("%s-1", k->ipc_prefix);
        k->shell = zmtp_connect_unix(base, p, ZMTP_DEALER, &zmtp_ops, k);
    }
    if (!k->iopub) {
        sbx_autofree char *p = sbx_xasprintf("%s-2", k->ipc_prefix);
        k->iopub = zmtp_connect_unix(base, p, ZMTP_SUB, &zmtp_ops, k);
    }
    if (!k->shell || !k->iopub)
        arm(k->timer, CONNECT_RETRY_MS);
}

static void
on_timer(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_kernel *k = arg;
    if (k->state != K_STARTING)
        return;
    if (!k->shell || !k->iopub) {
        try_connect(k);
        return;
    }
    if (k->kinfo_id[0] && !(k->kinfo_replied && k->iopub_seen)) {
        /* the subscription may not have been in place for the last status: ask again */
        send_msg(k, "kernel_info_request", json_object(), k->kinfo_id);
        arm(k->timer, KINFO_RETRY_MS);
    }
}

static void
on_deadline(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_kernel *k = arg;
    sbx_autofree char *why =
        sbx_xasprintf("%s: no kernel ready after %d s", k->python, EXECD_KERNEL_START_SEC);
    fail_later(k, why);
}

static void
tried_add(struct execd_kernel *k, const char *what)
{
    char *t = sbx_xasprintf("%s%s%s: %s", k->tried ? k->tried : "", k->tried ? "; " : "", k->python,
                            what);
    free(k->tried);
    k->tried = t;
}

/* Start the next candidate interpreter; false when none is left. */
static bool
launch_next(struct execd_kernel *k)
{
    while (k->cands[k->icand]) {
        k->python = k->cands[k->icand++];
        unlink_ipc(k);
        sbx_autoclose int logfd = open(k->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        char *argv[] = {k->python, "-m", "ipykernel_launcher", "-f", k->conn_path, NULL};
        struct execd_spawn sp = {
            .argv = argv, .fd_out = logfd, .fd_err = logfd, .cwd = k->cwd, .die_with_parent = true};
        sp.envp = execd_child_env(k->ex, NULL);
        sbx_autoerror sbx_error *err = NULL;
        pid_t pid = logfd >= 0 ? execd_spawn(&sp, &err) : -1;
        execd_strv_free(sp.envp);
        if (pid < 0) {
            tried_add(k, logfd < 0 ? "cannot create its log" : sbx_error_msg(err));
            continue;
        }
        k->pid = pid;
        k->alive = true;
        k->kinfo_id[0] = '\0';
        sbx_debug("kernel %s: starting %s (pid %d)", k->id, k->python, (int)pid);
        arm(k->timer, CONNECT_RETRY_MS);
        arm(k->deadline, EXECD_KERNEL_START_SEC * 1000);
        return true;
    }
    return false;
}

static void
no_kernel(struct execd_kernel *k)
{
    sbx_autofree char *why = k->tried
                                 ? sbx_xasprintf("no Python with ipykernel found (%s)", k->tried)
                                 : sbx_xstrdup("no python3 found (set --python or EXECD_PYTHON)");
    fail_later(k, why);
}

struct execd_kernel *
execd_kernel_start(struct execd *ex, const char *id, const char *cwd,
                   const struct execd_kernel_ops *ops, void *arg)
{
    struct execd_kernel *k = sbx_xcalloc(1, sizeof(*k));
    k->ex = ex;
    k->ops = *ops;
    k->arg = arg;
    (void)snprintf(k->id, sizeof(k->id), "%s", id);
    k->cwd = cwd ? sbx_xstrdup(cwd) : NULL;
    execd_uuid4(k->session, false);
    execd_uuid4(k->key, false);
    execd_uuid4(k->key + 32, false);
    k->conn_path = sbx_xasprintf("%s/kernel-%s.json", ex->cfg.state_dir, id);
    k->log_path = sbx_xasprintf("%s/kernel-%s.log", ex->cfg.state_dir, id);
    k->ipc_prefix = sbx_xasprintf("%s/k-%s", ex->cfg.state_dir, id);
    if (strlen(k->ipc_prefix) > SUN_PATH_MAX) {
        /* a deep state dir: the sockets go to the private short directory instead */
        free(k->ipc_prefix);
        k->ipc_prefix = sbx_xasprintf("%s/k-%.12s", short_dir(ex), id);
    }
    k->timer = evtimer_new(ex->base, on_timer, k);
    k->deadline = evtimer_new(ex->base, on_deadline, k);
    k->defer = event_new(ex->base, -1, 0, on_defer, k);
    k->next = ex->kernels;
    ex->kernels = k;
    char **env = execd_child_env(ex, NULL);
    k->cands = candidates(ex, env);
    execd_strv_free(env);
    if (strlen(k->ipc_prefix) > SUN_PATH_MAX || write_connection_file(k) < 0) {
        fail_later(k, "cannot write the kernel connection file");
        return k;
    }
    if (!launch_next(k))
        no_kernel(k);
    return k;
}

/* ---- the warm kernel: one started ahead of need (SBX_WARM_KERNEL=python), handed to the
 * first Python context without a cwd of its own, so its first result does not wait for
 * Python and ipykernel to start (~650 ms) ---- */

static void
warm_ready(struct execd_kernel *k, void *arg)
{
    (void)k;
    (void)arg;
    sbx_info("warm kernel ready");
}

static void
warm_failed(struct execd_kernel *k, const char *why, void *arg)
{
    (void)arg;
    sbx_warn("warm kernel: %s", why);
    if (k->ex->warm == k)
        k->ex->warm = NULL;
    execd_kernel_free(k);
}

static void
warm_msg(struct execd_kernel *k, const struct jmsg *m, void *arg)
{
    (void)k;
    (void)m;
    (void)arg;
}

void
execd_kernel_warm(struct execd *ex)
{
    static const struct execd_kernel_ops ops = {
        .ready = warm_ready, .failed = warm_failed, .iopub = warm_msg, .shell = warm_msg};
    if (!ex->warm)
        ex->warm = execd_kernel_start(ex, "warm", NULL, &ops, NULL);
}

struct execd_kernel *
execd_kernel_take_warm(struct execd *ex, const char *cwd, const struct execd_kernel_ops *ops,
                       void *arg)
{
    struct execd_kernel *k = ex->warm;
    if (!k || (cwd && *cwd))
        return NULL; /* a context with its own cwd gets a kernel started there */
    ex->warm = NULL;
    k->ops = *ops;
    k->arg = arg;
    return k;
}

bool
execd_kernel_is_ready(const struct execd_kernel *k)
{
    return k->state == K_READY;
}

void
execd_kernel_execute(struct execd_kernel *k, const char *code, char *msg_id)
{
    /* stop_on_error would make ipykernel abort requests arriving shortly after a failed
     * one; execd never queues (a busy context refuses), so the next run is independent */
    json_t *c =
        json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0, "store_history", 1,
                  "user_expressions", "allow_stdin", 0, "stop_on_error", 0);
    send_msg(k, "execute_request", c, msg_id);
}

void
execd_kernel_interrupt(struct execd_kernel *k)
{
    if (k->alive)
        (void)kill(-k->pid, SIGINT);
}

void
execd_kernel_free(struct execd_kernel *k)
{
    if (!k)
        return;
    for (struct execd_kernel **pp = &k->ex->kernels; *pp; pp = &(*pp)->next) {
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    }
    /* the whole group: the kernel and whatever the user's code started in it; the zombie is
     * reaped by the SIGCHLD handler like any unknown child */
    if (k->alive)
        (void)kill(-k->pid, SIGKILL);
    drop_connections(k);
    stop_timers(k);
    event_free(k->timer);
    event_free(k->deadline);
    event_free(k->defer);
    unlink_ipc(k);
    (void)unlink(k->conn_path);
    (void)unlink(k->log_path);
    free(k->conn_path);
    free(k->log_path);
    free(k->ipc_prefix);
    free(k->cwd);
    free(k->fail_why);
    free(k->tried);
    execd_strv_free(k->cands);
    free(k);
}

bool
execd_kernel_reaped(struct execd *ex, pid_t pid, int status)
{
    struct execd_kernel *k = ex->kernels;
    while (k && !(k->alive && k->pid == pid))
        k = k->next;
    if (!k)
        return false;
    k->alive = false;
    if (k->state == K_STARTING) {
        sbx_autofree char *words = last_words(k, status);
        tried_add(k, words);
        drop_connections(k);
        stop_timers(k);
        if (launch_next(k))
            return true;
        no_kernel(k);
    } else if (k->state == K_READY) {
        sbx_autofree char *why =
            WIFSIGNALED(status)
                ? sbx_xasprintf("the kernel was killed by signal %d", WTERMSIG(status))
                : sbx_xasprintf("the kernel exited with status %d", WEXITSTATUS(status));
        fail_later(k, why);
    }
    return true;
}

void
execd_kernel_signal_all(struct execd *ex, int sig)
{
    for (struct execd_kernel *k = ex->kernels; k; k = k->next) {
        if (k->alive)
            (void)kill(-k->pid, sig);
    }
}

bool
execd_kernel_any_alive(const struct execd *ex)
{
    for (const struct execd_kernel *k = ex->kernels; k; k = k->next) {
        if (k->alive)
            return true;
    }
    return false;
}

void
execd_kernel_cleanup(struct execd *ex)
{
    for (struct execd_kernel *k = ex->kernels; k; k = k->next) {
        if (k->alive) {
            (void)kill(-k->pid, SIGKILL);
            while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
                ;
            k->alive = false;
        }
    }
    for (struct execd_kernel *k = ex->kernels, *next = NULL; k; k = next) {
        next = k->next;
        execd_kernel_free(k);
    }
    if (ex->kernel_dir) {
        (void)sbx_rm_rf(ex->kernel_dir, NULL);
        free(ex->kernel_dir);
        ex->kernel_dir = NULL;
    }
    free(ex->python_ok);
    ex->python_ok = NULL;
}
