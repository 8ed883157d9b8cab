/*
 * process.c - the `process` provider: sbx-execd as a plain host process.
 *
 * NO ISOLATION. The sandbox is a private directory (<state>/sandboxes/<id>/root) used as the
 * working directory of execd and of the entrypoint, both in a session of their own; they run as
 * the server's user with the host's filesystem, network and pid namespace. A port "inside" the
 * sandbox is the host's loopback port. Meant for development and for hosts without namespaces.
 *
 * The session (setsid) is the sandbox: pause/resume send SIGSTOP/SIGCONT to every process of
 * the session, delete SIGKILLs it. A process that calls setsid itself escapes (weak, honest).
 * The session leader is not tied to the server: it survives a kill -9 of the server and is
 * re-adopted by pid + start time (/proc/PID/stat field 22) on restart.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "providers/launch.h"
#include "providers/procutil.h"
#include "providers/providers.h"
#include "server/provider.h"
#include "server/srvutil.h"

#define EXECD_PORT 44772

const char *const sbx_provider_process_keys[] = {"execd", "ping_timeout_ms", NULL};

struct proc_data {
    char *execd;
    char *sandboxes_dir;
    int ping_timeout_ms;
};

static struct proc_data *
pdata(struct sbx_provider *p)
{
    return p->data;
}

static int
priv_int(const struct sbx_record *sb, const char *key)
{
    return (int)json_integer_value(json_object_get(sb->priv, key));
}

static const char *
priv_str(const struct sbx_record *sb, const char *key)
{
    const char *s = json_string_value(json_object_get(sb->priv, key));
    return s ? s : "";
}

static uint64_t
priv_start(const struct sbx_record *sb)
{
    return (uint64_t)json_integer_value(json_object_get(sb->priv, "start_time"));
}

static int
proc_create(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    sbx_autofree char *dir = sbx_xasprintf("%s/%s", pdata(p)->sandboxes_dir, sb->id);
    sbx_autofree char *root = sbx_xasprintf("%s/root", dir);
    char token[65];
    int port = 0;
    if (sbx_mkdir_p(root, 0700, err) < 0 || sbx_net_free_port(&port, err) < 0)
        return sbx_error_wrap(err, "prepare sandbox `%s`", sb->id);
    sbx_srv_random_hex(token, 32);
    (void)json_object_set_new(sb->priv, "dir", json_string(dir));
    (void)json_object_set_new(sb->priv, "root", json_string(root));
    (void)json_object_set_new(sb->priv, "port", json_integer(port));
    (void)json_object_set_new(sb->priv, "token", json_string(token));
    return 0;
}

static char **
build_env(const struct sbx_record *sb, const char *execd)
{
    sbx_autofree char *state = sbx_xasprintf("%s/execd-state", priv_str(sb, "dir"));
    struct sbx_launch l = {.execd = execd,
                           .port = priv_int(sb, "port"),
                           .token = priv_str(sb, "token"),
                           .state_dir = state,
                           .home = priv_str(sb, "root")};
    return sbx_launch_env(sb, &l);
}

static int
spawn_launcher(const struct sbx_record *sb, const char *execd, pid_t *pid, sbx_error **err)
{
    sbx_autofree char *log = sbx_xasprintf("%s/execd.log", priv_str(sb, "dir"));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    /* A session of its own: no controlling tty, not killed with the server's process group. */
    (void)posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
    sigset_t none;
    sigset_t all;
    sigemptyset(&none);
    sigfillset(&all);
    (void)posix_spawnattr_setsigmask(&attr, &none);
    (void)posix_spawnattr_setsigdefault(&attr, &all);
    (void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    (void)posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    (void)posix_spawn_file_actions_adddup2(&fa, 1, 2);
    (void)posix_spawn_file_actions_addchdir_np(&fa, priv_str(sb, "root"));
    char **argv = sbx_launch_argv(sb);
    char **envp = build_env(sb, execd);
    int rc = posix_spawn(pid, "/bin/sh", &fa, &attr, argv, envp);
    sbx_strv_free(argv);
    sbx_strv_free(envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return sbx_error_set(err, SBX_EGENERIC, rc, "spawn execd");
    return 0;
}

/* Send GET /ping with the token; 0 when execd answers 200. */
static int
ping_once(int port, const char *token)
{
    sbx_autoclose int fd = -1;
    if (sbx_net_connect_local(port, 200, &fd, NULL) < 0)
        return -1;
    return sbx_execd_ping_fd(fd, token);
}

static void
reap(pid_t pid)
{
    /* Only our own child can be reaped; after a server restart init does it. */
    (void)waitpid(pid, NULL, WNOHANG);
}

static int
log_tail(const struct sbx_record *sb, char *out, size_t n)
{
    sbx_autofree char *path = sbx_xasprintf("%s/execd.log", priv_str(sb, "dir"));
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    out[0] = '\0';
    if (fd < 0)
        return -1;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)n - 1 ? end - (off_t)n + 1 : 0;
    ssize_t got = pread(fd, out, n - 1, from);
    out[got > 0 ? got : 0] = '\0';
    for (char *c = out; *c; c++) {
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    }
    return 0;
}

static int
wait_ready(struct proc_data *d, const struct sbx_record *sb, pid_t pid, uint64_t start,
           sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)d->ping_timeout_ms;
    while (sbx_now_ms() < deadline) {
        if (ping_once(priv_int(sb, "port"), priv_str(sb, "token")) == 0)
            return 0;
        if (!sbx_proc_same(pid, start)) {
            reap(pid);
            char tail[256];
            (void)log_tail(sb, tail, sizeof tail);
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "execd exited before it was ready: %s",
                                 tail);
        }
        (void)usleep(20 * 1000);
    }
    return sbx_error_set(err, SBX_ETIMEDOUT, 0, "execd did not answer /ping within %d ms",
                         d->ping_timeout_ms);
}

static int
write_pidfile(const struct sbx_record *sb, pid_t pid, uint64_t start, sbx_error **err)
{
    sbx_autofree char *path = sbx_xasprintf("%s/execd.pid", priv_str(sb, "dir"));
    char line[64];
    int n = snprintf(line, sizeof line, "%d %llu\n", (int)pid, (unsigned long long)start);
    return sbx_write_file_atomic(path, line, (size_t)n, 0600, err);
}

/* Starting again after a stop: the old loopback port may have been taken meanwhile. */
static int
prepare_restart(struct sbx_record *sb, sbx_error **err)
{
    if (!json_is_true(json_object_get(sb->priv, "stopped")))
        return 0;
    int port = 0;
    if (sbx_net_free_port(&port, err) < 0)
        return sbx_error_wrap(err, "restart sandbox `%s`", sb->id);
    (void)json_object_set_new(sb->priv, "port", json_integer(port));
    (void)json_object_del(sb->priv, "stopped");
    return 0;
}

/* The session of the recorded execd, or 0 when it is gone (or is another process now). */
static pid_t
live_sid(const struct sbx_record *sb)
{
    pid_t pid = priv_int(sb, "pid");
    return sbx_proc_same(pid, priv_start(sb)) ? pid : 0;
}

/* The sandbox's session id, also after execd (its leader) died: Linux never hands out a pid
 * that is still some process's session id, so while members are left the recorded pid cannot
 * belong to anyone else. Only a live process with that pid and another start time means the
 * session is gone (0). */
static pid_t
owned_sid(const struct sbx_record *sb)
{
    pid_t pid = priv_int(sb, "pid");
    struct sbx_proc_info pi = {0};
    if (pid <= 1)
        return 0;
    if (sbx_proc_info(pid, &pi, NULL) == 0 && pi.start_time != priv_start(sb))
        return 0;
    return pid;
}

static int
kill_session(const struct sbx_record *sb, int grace_ms)
{
    pid_t sid = owned_sid(sb);
    if (!sid)
        return 0;
    if (grace_ms > 0) {
        (void)sbx_proc_signal_session(sid, SIGTERM);
        (void)sbx_proc_signal_session(sid, SIGCONT);
        for (int waited = 0; waited < grace_ms && sbx_proc_signal_session(sid, 0) > 0;
             waited += 20) {
            reap(sid);
            (void)usleep(20 * 1000);
        }
    }
    for (int i = 0; i < 100 && sbx_proc_signal_session(sid, SIGKILL) > 0; i++) {
        reap(sid);
        (void)usleep(10 * 1000);
    }
    reap(sid);
    return 0;
}

/* Spawn execd once on the recorded port and wait until it answers. */
static int
launch(struct proc_data *d, struct sbx_record *sb, sbx_error **err)
{
    pid_t pid = 0;
    if (spawn_launcher(sb, d->execd, &pid, err) < 0)
        return -SBX_EGENERIC;
    struct sbx_proc_info pi = {0};
    (void)sbx_proc_info(pid, &pi, NULL);
    (void)json_object_set_new(sb->priv, "pid", json_integer(pid));
    (void)json_object_set_new(sb->priv, "start_time", json_integer((json_int_t)pi.start_time));
    /* The pid file lets a delete after a crash find execd even if the store lost the pid. */
    if (write_pidfile(sb, pid, pi.start_time, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s`", sb->id);
    return wait_ready(d, sb, pid, pi.start_time, err);
}

static bool
port_taken(const sbx_error *err)
{
    return err && sbx_error_code(err) == SBX_EUNAVAIL &&
           strstr(sbx_error_msg(err), "Address already in use") != NULL;
}

static int
proc_start(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct proc_data *d = pdata(p);
    if (access(d->execd, X_OK) < 0)
        return sbx_error_set(err, SBX_EUNAVAIL, errno,
                             "sbx-execd not found at `%s` (set providers.process.execd)", d->execd);
    if (prepare_restart(sb, err) < 0)
        return -SBX_EGENERIC;
    sbx_warn("sandbox %s: process provider, NO ISOLATION: execd runs as a plain host process",
             sb->id);
    for (int attempt = 1;; attempt++) {
        int r = launch(d, sb, err);
        /* The port was free when the create picked it, but something (another sandbox's
         * execd, a client's ephemeral port) may have bound it since: pick another. */
        if (r == 0 || attempt == 3 || !port_taken(*err))
            return r;
        (void)kill_session(sb, 0);
        sbx_error_clear(err);
        int port = 0;
        if (sbx_net_free_port(&port, err) < 0)
            return sbx_error_wrap(err, "start sandbox `%s`", sb->id);
        (void)json_object_set_new(sb->priv, "port", json_integer(port));
    }
}

/* Stop is not delete: the session goes, the sandbox's directory stays for the next start. */
static int
proc_stop(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)p;
    (void)err;
    (void)kill_session(sb, 2000);
    /* Forget the session: its pid may be reused by anyone once it is gone. */
    sbx_autofree char *pidfile = sbx_xasprintf("%s/execd.pid", priv_str(sb, "dir"));
    (void)unlink(pidfile);
    (void)json_object_del(sb->priv, "pid");
    (void)json_object_del(sb->priv, "start_time");
    (void)json_object_set_new(sb->priv, "stopped", json_true());
    return 0;
}

static int
signal_live(struct sbx_record *sb, int sig, sbx_error **err)
{
    pid_t sid = live_sid(sb);
    if (!sid)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s`: execd is not running", sb->id);
    (void)sbx_proc_signal_session(sid, sig);
    return 0;
}

static int
proc_pause(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)p;
    return signal_live(sb, SIGSTOP, err);
}

static int
proc_resume(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)p;
    return signal_live(sb, SIGCONT, err);
}

/* Fill pid/start_time from the pid file when the store does not have them (a crash between
 * spawn and the store write). */
static void
adopt_pidfile(struct sbx_record *sb)
{
    if (priv_int(sb, "pid") > 0 || !*priv_str(sb, "dir"))
        return;
    sbx_autofree char *path = sbx_xasprintf("%s/execd.pid", priv_str(sb, "dir"));
    sbx_autofree char *text = NULL;
    int pid = 0;
    unsigned long long start = 0;
    if (sbx_read_file(path, 256, &text, NULL, NULL) < 0 ||
        sscanf(text, "%d %llu", &pid, &start) != 2)
        return;
    (void)json_object_set_new(sb->priv, "pid", json_integer(pid));
    (void)json_object_set_new(sb->priv, "start_time", json_integer((json_int_t)start));
}

static int
proc_delete(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    adopt_pidfile(sb);
    (void)kill_session(sb, 0);
    /* A crash between spawn and the pid file leaves an execd nobody recorded; it still sits
     * in the sandbox's root (its cwd), which is how it is found. */
    if (*priv_str(sb, "root"))
        (void)sbx_proc_signal_cwd(priv_str(sb, "root"), SIGKILL);
    const char *dir = priv_str(sb, "dir");
    sbx_autofree char *fallback = sbx_xasprintf("%s/%s", pdata(p)->sandboxes_dir, sb->id);
    if (sbx_rm_rf(*dir ? dir : fallback, err) < 0)
        return sbx_error_wrap(err, "remove sandbox `%s`", sb->id);
    return 0;
}

static int
proc_watch(struct sbx_provider *p, const struct sbx_record *sb, bool *owned)
{
    *owned = true;
    (void)p;
    if (json_is_true(json_object_get(sb->priv, "stopped")))
        return -1;
    return sbx_proc_watch(priv_int(sb, "pid"), priv_start(sb));
}

static int
proc_status(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_status *out,
            sbx_error **err)
{
    (void)p;
    (void)err;
    struct sbx_proc_info pi = {0};
    if (json_is_true(json_object_get(sb->priv, "stopped"))) {
        sbx_provider_status_set(out, "stopped", SBX_CLASS_STARTABLE, "SANDBOX_STOPPED");
        return 0;
    }
    pid_t sid = live_sid(sb);
    if (!sid || sbx_proc_info(sid, &pi, NULL) < 0) {
        sbx_provider_status_set(out, "dead", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    if (pi.state == 'T' || pi.state == 't')
        sbx_provider_status_set(out, "paused", SBX_CLASS_STARTABLE, "PROCESS_STOPPED");
    else
        sbx_provider_status_set(out, "running", SBX_CLASS_USABLE, "PROCESS_RUNNING");
    return 0;
}

static int
proc_reconcile(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
               sbx_error **err)
{
    adopt_pidfile(sb);
    return proc_status(p, sb, out, err);
}

static int
proc_connect(struct sbx_provider *p, const struct sbx_record *sb, int port, int *fd,
             sbx_error **err)
{
    (void)p;
    /* No isolation: the sandbox's ports are the host's loopback ports, except execd's. */
    int real = port == EXECD_PORT ? priv_int(sb, "port") : port;
    return sbx_net_connect_local(real, 2000, fd, err);
}

static json_t *
proc_proxy_headers(struct sbx_provider *p, const struct sbx_record *sb, int port)
{
    (void)p;
    if (port != EXECD_PORT)
        return NULL;
    return json_pack("{s:s}", "X-EXECD-ACCESS-TOKEN", priv_str(sb, "token"));
}

static void
proc_free(struct sbx_provider *p)
{
    struct proc_data *d = pdata(p);
    free(d->execd);
    free(d->sandboxes_dir);
    free(d);
    free(p);
}

static const struct sbx_provider_ops process_ops = {
    .create = proc_create,
    .start = proc_start,
    .stop = proc_stop,
    .pause = proc_pause,
    .resume = proc_resume,
    .delete = proc_delete,
    .status = proc_status,
    .watch = proc_watch,
    .connect = proc_connect,
    .reconcile = proc_reconcile,
    .proxy_headers = proc_proxy_headers,
    .free = proc_free,
};

int
sbx_provider_process_new(const json_t *settings, const struct sbx_provider_env *env,
                         struct sbx_provider **out, sbx_error **err)
{
    const char *execd = json_string_value(json_object_get(settings, "execd"));
    json_t *ping = json_object_get(settings, "ping_timeout_ms");
    if (ping && (!json_is_integer(ping) || json_integer_value(ping) < 100))
        return sbx_error_set(err, SBX_EINVAL, 0, "`ping_timeout_ms` must be an integer >= 100");
    struct proc_data *d = sbx_xcalloc(1, sizeof *d);
    d->execd = execd ? sbx_xstrdup(execd) : sbx_xasprintf("%s/sbx-execd", env->exe_dir);
    if (!execd && access(d->execd, X_OK) < 0) { /* installed: /usr/lib/sbx/sbx-execd */
        free(d->execd);
        d->execd = sbx_launch_installed_execd(env->exe_dir);
    }
    d->sandboxes_dir = sbx_xasprintf("%s/sandboxes", env->state_dir);
    d->ping_timeout_ms = ping ? (int)json_integer_value(ping) : 10000;
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &process_ops;
    p->data = d;
    sbx_warn("provider `process` enabled: sandboxes run as plain host processes with NO "
             "ISOLATION (execd: %s)",
             d->execd);
    if (access(d->execd, X_OK) < 0)
        sbx_warn("provider `process`: `%s` is not an executable; creates will fail until it is "
                 "(set providers.process.execd)",
                 d->execd);
    *out = p;
    return 0;
}
