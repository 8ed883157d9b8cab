/*
 * main.c - sbx-execd: arguments, signals, PID 1 duties, the event loop.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/desktop.h"
#include "execd/execd.h"
#include "execd/fastpath.h"
#include "execd/kernel.h"
#include "execd/spawn.h"

extern char **environ;

#define STOP_GRACE_SEC 3

static const char usage[] =
    "Usage: sbx-execd [OPTIONS] [-- ENTRYPOINT [ARG...]]\n\n"
    "The in-sandbox daemon speaking the OpenSandbox execd API.\n\n"
    "  --listen ADDR:PORT     listen address (default 0.0.0.0:44772)\n"
    "  --port PORT            listen port (default 44772)\n"
    "  --access-token TOKEN   require header X-EXECD-ACCESS-TOKEN (env EXECD_ACCESS_TOKEN)\n"
    "  --access-token-file F  the same, read from the file F, which is then removed (so no\n"
    "                         process started later finds it; a warning if it cannot be)\n"
    "  --max-upload SIZE      largest upload request body (default 64g; 413 beyond)\n"
    "  --state-dir DIR        where background logs and session state live\n"
    "                         (default $TMPDIR/sbx-execd-<pid>)\n"
    "  --envs-file PATH       KEY=VALUE lines merged into every command's environment\n"
    "                         (env EXECD_ENVS, default /opt/opensandbox/.env)\n"
    "  --python PATH          interpreter for Python kernels (env EXECD_PYTHON; default:\n"
    "                         the first python3 on PATH, /usr/local/bin, /usr/bin with ipykernel)\n"
    "  --log-level LEVEL      error|warn|info|debug|trace (default info)\n"
    "  --ready-fd FD          write `R` to FD (then close it) once listening; `E` and the\n"
    "                         reason when starting failed\n"
    "  --log-buffer SIZE      bytes of log (ours and the entrypoint's output) kept in memory\n"
    "                         for GET /logs (default 256k)\n"
    "  --desktop SPEC         start a desktop with execd: WxH[xD][,wm=openbox|none], or\n"
    "                         `true` for 1280x800 (the /desktop endpoints start one later)\n"
    "  -- ENTRYPOINT...       also start ENTRYPOINT (stdin /dev/null; its stdout/stderr go to\n"
    "                         the log, see --log-buffer)\n"
    "  --install DEST         copy this binary to DEST (mode 0755, atomically: a temp file\n"
    "                         renamed into place) and exit; for an init container that puts\n"
    "                         execd into a volume shared with the sandbox's container\n"
    "  --install-token SRC:DEST  with --install: also copy the file SRC to DEST (mode 0444,\n"
    "                         atomically), for --access-token-file DEST in that container\n"
    "  --version, --help\n";

enum {
    OPT_LISTEN = 256,
    OPT_PORT,
    OPT_TOKEN,
    OPT_MAX_UPLOAD,
    OPT_STATE,
    OPT_ENVS,
    OPT_LOG,
    OPT_READY,
    OPT_PYTHON,
    OPT_LOG_BUFFER,
    OPT_DESKTOP,
    OPT_INSTALL,
    OPT_TOKEN_FILE,
    OPT_INSTALL_TOKEN
};

static const struct option long_opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"port", required_argument, NULL, OPT_PORT},
    {"access-token", required_argument, NULL, OPT_TOKEN},
    {"max-upload", required_argument, NULL, OPT_MAX_UPLOAD},
    {"state-dir", required_argument, NULL, OPT_STATE},
    {"envs-file", required_argument, NULL, OPT_ENVS},
    {"log-level", required_argument, NULL, OPT_LOG},
    {"ready-fd", required_argument, NULL, OPT_READY},
    {"python", required_argument, NULL, OPT_PYTHON},
    {"log-buffer", required_argument, NULL, OPT_LOG_BUFFER},
    {"desktop", required_argument, NULL, OPT_DESKTOP},
    {"install", required_argument, NULL, OPT_INSTALL},
    {"access-token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"install-token", required_argument, NULL, OPT_INSTALL_TOKEN},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static int
parse_port(const char *s, uint16_t *out)
{
    uint64_t v = 0;
    if (sbx_parse_u64(s, &v, NULL) < 0 || v == 0 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

static int
parse_listen(struct execd_config *cfg, const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon)
        return parse_port(s, &cfg->port);
    if (parse_port(colon + 1, &cfg->port) < 0)
        return -1;
    free(cfg->listen_host);
    cfg->listen_host = sbx_xstrndup(s, (size_t)(colon - s));
    if (cfg->listen_host[0] == '\0') {
        free(cfg->listen_host);
        cfg->listen_host = sbx_xstrdup("0.0.0.0");
    }
    return 0;
}

static int
parse_opt(struct execd_config *cfg, int c, const char *arg)
{
    enum sbx_log_level lvl = SBX_LOG_INFO;
    switch (c) {
    case OPT_LISTEN:
        return parse_listen(cfg, arg);
    case OPT_PORT:
        return parse_port(arg, &cfg->port);
    case OPT_TOKEN:
        free(cfg->token);
        cfg->token = sbx_xstrdup(arg);
        return 0;
    case OPT_MAX_UPLOAD:
        return sbx_parse_size(arg, &cfg->max_upload, NULL) < 0 ? -1 : 0;
    case OPT_STATE:
        free(cfg->state_dir);
        cfg->state_dir = sbx_xstrdup(arg);
        return 0;
    case OPT_ENVS:
        free(cfg->envs_file);
        cfg->envs_file = sbx_xstrdup(arg);
        return 0;
    case OPT_LOG:
        if (sbx_log_parse_level(arg, &lvl) < 0)
            return -1;
        sbx_log_set_level(lvl);
        return 0;
    case OPT_PYTHON:
        free(cfg->python);
        cfg->python = sbx_xstrdup(arg);
        return 0;
    case OPT_LOG_BUFFER:
        if (sbx_parse_size(arg, &cfg->log_ring, NULL) < 0 || cfg->log_ring < 4096 ||
            cfg->log_ring > (64u << 20))
            return -1;
        return 0;
    case OPT_INSTALL:
        if (!*arg)
            return -1;
        free(cfg->install);
        cfg->install = sbx_xstrdup(arg);
        return 0;
    case OPT_TOKEN_FILE:
        if (!*arg)
            return -1;
        free(cfg->token_file);
        cfg->token_file = sbx_xstrdup(arg);
        return 0;
    case OPT_INSTALL_TOKEN:
        if (!strchr(arg, ':') || *arg == ':' || arg[strlen(arg) - 1] == ':')
            return -1;
        free(cfg->install_token);
        cfg->install_token = sbx_xstrdup(arg);
        return 0;
    case OPT_DESKTOP: {
        struct sbx_desktop_opts o = {0};
        if (sbx_desktop_parse_spec(arg, &o, NULL) < 0)
            return -1;
        free(cfg->desktop);
        cfg->desktop = sbx_xstrdup(arg);
        return 0;
    }
    default:
        return -1;
    }
}

/* Environment-provided settings are read once and removed so commands do not inherit the
 * token (a child could otherwise read it from its own environment). */
static void
config_from_env(struct execd_config *cfg)
{
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded, before the loop starts */
    char *tok = getenv("EXECD_ACCESS_TOKEN");
    if (tok && *tok && !cfg->token)
        cfg->token = sbx_xstrdup(tok);
    /* unsetenv drops the pointer, not the bytes: the original string lives in the block the
     * kernel serves as /proc/<pid>/environ. Wipe it there. */
    if (tok)
        explicit_bzero(tok, strlen(tok));
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded, before the loop starts */
    (void)unsetenv("EXECD_ACCESS_TOKEN");
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded, before the loop starts */
    const char *envs = getenv("EXECD_ENVS");
    if (!cfg->envs_file)
        cfg->envs_file = sbx_xstrdup(envs && *envs ? envs : "/opt/opensandbox/.env");
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded, before the loop starts */
    const char *py = getenv("EXECD_PYTHON");
    if (!cfg->python && py && *py)
        cfg->python = sbx_xstrdup(py);
}

static void
config_defaults(struct execd_config *cfg)
{
    cfg->listen_host = sbx_xstrdup("0.0.0.0");
    cfg->port = EXECD_DEFAULT_PORT;
    cfg->max_upload = EXECD_DEFAULT_MAX_UPLOAD;
}

static void
config_dispose(struct execd_config *cfg)
{
    free(cfg->listen_host);
    free(cfg->token);
    free(cfg->state_dir);
    free(cfg->envs_file);
    free(cfg->python);
    free(cfg->desktop);
    free(cfg->install);
    free(cfg->token_file);
    free(cfg->install_token);
}

/* Returns 0 to run, 1 for a usage error, 2 when --help/--version already answered. */
static int
parse_args(struct execd_config *cfg, int *ready_fd, char ***entrypoint, int argc, char **argv)
{
    int c;
    while ((c = getopt_long(argc, argv, "hV", long_opts, NULL)) != -1) {
        uint64_t fd = 0;
        if (c == OPT_READY && sbx_parse_u64(optarg, &fd, NULL) == 0 && fd > 2 && fd < 65536) {
            *ready_fd = (int)fd;
            continue;
        }
        if (c == 'h') {
            fputs(usage, stdout);
            return 2;
        }
        if (c == 'V') {
            printf("sbx-execd %s\n", SBX_VERSION);
            return 2;
        }
        if (c == '?' || parse_opt(cfg, c, optarg) < 0) {
            if (c != '?')
                fprintf(stderr, "sbx-execd: invalid value for --%s: `%s`\n",
                        long_opts[c - OPT_LISTEN].name, optarg);
            fputs(usage, stderr);
            return 1;
        }
    }
    if (optind < argc && strcmp(argv[optind - 1], "--") == 0) {
        *entrypoint = argv + optind;
    } else if (optind < argc) {
        fprintf(stderr, "sbx-execd: unexpected argument `%s`\n", argv[optind]);
        return 1;
    }
    return 0;
}

static int
make_state_dir(struct execd_config *cfg, sbx_error **err)
{
    if (!cfg->state_dir) {
        /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded startup */
        const char *tmp = getenv("TMPDIR");
        cfg->state_dir =
            sbx_xasprintf("%s/sbx-execd-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    }
    if (sbx_mkdir_p(cfg->state_dir, 0700, err) < 0)
        return sbx_error_wrap(err, "state dir");
    return 0;
}

static const char *
find_shell(void)
{
    /* COMPAT 2.4: commands run with bash -c, or sh -c when the image has no bash. */
    if (access("/bin/bash", X_OK) == 0)
        return "/bin/bash";
    if (access("/usr/bin/bash", X_OK) == 0)
        return "/usr/bin/bash";
    return "/bin/sh";
}

static void
on_stop_timer(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd *ex = arg;
    sbx_warn("children still running after %d s: killing them", STOP_GRACE_SEC);
    execd_cmd_signal_all(ex, SIGKILL);
    execd_kernel_signal_all(ex, SIGKILL);
    execd_pty_signal_all(ex, SIGKILL);
    if (ex->pid1)
        (void)kill(-1, SIGKILL);
    event_base_loopexit(ex->base, NULL);
}

static bool
children_left(const struct execd *ex)
{
    return execd_cmd_any_running(ex) || execd_kernel_any_alive(ex) || execd_pty_any_running(ex);
}

static void
begin_stop(struct execd *ex, int sig)
{
    if (ex->stopping) {
        event_base_loopexit(ex->base, NULL);
        return;
    }
    sbx_info("signal %d: stopping", sig);
    ex->stopping = true;
    execd_http_stop(ex);
    execd_desktop_free(ex); /* stops its processes (SIGTERM, then SIGKILL after 0.5 s) */
    execd_cmd_signal_all(ex, sig);
    execd_kernel_signal_all(ex, SIGTERM); /* a kernel ignores SIGINT when idle */
    execd_pty_signal_all(ex, SIGHUP);     /* what a terminal's hangup sends */
    if (ex->pid1)
        (void)kill(-1, sig); /* PID 1 of a pid namespace: every other process is ours */
    bool none_left = execd_cmd_reap(ex);
    if (!children_left(ex) && (!ex->pid1 || none_left)) {
        event_base_loopexit(ex->base, NULL);
        return;
    }
    struct timeval tv = {.tv_sec = STOP_GRACE_SEC};
    ex->stop_timer = evtimer_new(ex->base, on_stop_timer, ex);
    evtimer_add(ex->stop_timer, &tv);
}

static void
on_signal(int sig, short what, void *arg)
{
    (void)what;
    struct execd *ex = arg;
    if (sig == SIGCHLD) {
        bool none_left = execd_cmd_reap(ex);
        if (ex->stopping && !children_left(ex) && (!ex->pid1 || none_left))
            event_base_loopexit(ex->base, NULL);
        return;
    }
    begin_stop(ex, sig);
}

static int
setup_signals(struct execd *ex)
{
    /* A client vanishing mid-write must be an EPIPE, not a dead daemon. */
    (void)signal(SIGPIPE, SIG_IGN);
    ex->sig_chld = evsignal_new(ex->base, SIGCHLD, on_signal, ex);
    ex->sig_term = evsignal_new(ex->base, SIGTERM, on_signal, ex);
    ex->sig_int = evsignal_new(ex->base, SIGINT, on_signal, ex);
    if (!ex->sig_chld || !ex->sig_term || !ex->sig_int)
        return -1;
    if (evsignal_add(ex->sig_chld, NULL) < 0 || evsignal_add(ex->sig_term, NULL) < 0 ||
        evsignal_add(ex->sig_int, NULL) < 0)
        return -1;
    return 0;
}

static void
teardown(struct execd *ex)
{
    execd_http_stop(ex);
    execd_metrics_free_all(ex);
    execd_cmd_free_all(ex); /* before sessions: a running command points at its session */
    execd_session_free_all(ex);
    execd_code_free_all(ex);
    execd_pty_free_all(ex);   /* after the connections: their clients are gone */
    execd_kernel_cleanup(ex); /* no kernel outlives execd */
    execd_desktop_free(ex);
    struct event *evs[] = {ex->sig_chld, ex->sig_term, ex->sig_int, ex->stop_timer};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(evs); i++) {
        if (evs[i])
            event_free(evs[i]);
    }
    if (ex->base)
        event_base_free(ex->base);
    (void)sbx_rm_rf(ex->cfg.state_dir, NULL);
    execd_logs_free(ex);
    config_dispose(&ex->cfg);
}

/* The launcher (e.g. sbx serve) waits on the other end of ready_fd instead of polling /ping. */
static void
signal_ready(int ready_fd)
{
    if (ready_fd < 0)
        return;
    while (write(ready_fd, "R", 1) < 0 && errno == EINTR)
        ;
    (void)close(ready_fd);
}

/* Starting failed: log why, and tell the launcher the reason on ready_fd ("E" + text), since
 * our log is in our memory (logs.c), which is about to go. */
__attribute__((format(printf, 2, 3))) static int
start_failed(int ready_fd, const char *fmt, ...)
{
    char msg[512];
    msg[0] = 'E';
    va_list ap;
    va_start(ap, fmt);
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): false positive, va_start above */
    (void)vsnprintf(msg + 1, sizeof msg - 1, fmt, ap);
    va_end(ap);
    sbx_error_log("%s", msg + 1);
    if (ready_fd >= 0) {
        (void)!write(ready_fd, msg, strlen(msg));
        (void)close(ready_fd);
    }
    return 1;
}

/* What a launcher shell would do (`ENTRYPOINT </dev/null & exec sbx-execd`), without the
 * shell: one exec less on the way to readiness. Like the shell's `&`, the entrypoint is forked
 * and not waited for (and only after readiness is reported: its fork and exec, a dynamic
 * binary's loading, run while the launcher answers its client), and a
 * failed exec is reported on our stderr by the child (exit 127), as the shell would. It gets
 * our environment, from which the access token is already gone, no fd of ours above stderr
 * (all CLOEXEC), no blocked signal and the default disposition of those we handle or ignore.
 * Its exit is reaped like any other child's. */
static void
start_entrypoint(struct execd *ex, char **argv)
{
    if (!argv || !argv[0])
        return;
    int out = execd_logs_output_pipe(ex);
    pid_t pid = fork();
    if (pid == 0) {
        if (out >= 0 && (dup2(out, 1) < 0 || dup2(out, 2) < 0))
            _exit(126);
        execd_oom_self(true);
        sigset_t none;
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        static const int sigs[] = {SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP};
        for (size_t i = 0; i < SBX_ARRAY_SIZE(sigs); i++)
            (void)signal(sigs[i], SIG_DFL);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in >= 0 && in != 0)
            (void)dup2(in, 0);
        execvp(argv[0], argv);
        int e = errno;
        char msg[256];
        int n = snprintf(msg, sizeof msg, "sbx-execd: entrypoint `%s`: %s\n", argv[0],
                         strerror(e)); // NOLINT(concurrency-mt-unsafe): single-threaded child
        if (n > 0)
            (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        _exit(e == ENOENT ? 127 : 126);
    }
    if (out >= 0)
        (void)close(out);
    if (pid < 0) {
        sbx_log_errno(SBX_LOG_WARN, "entrypoint `%s`: fork", argv[0]);
        return;
    }
    sbx_info("entrypoint `%s` started (pid %d)", argv[0], (int)pid);
}

static int
run(struct execd *ex, int ready_fd, char **entrypoint)
{
    sbx_autoerror sbx_error *err = NULL;
    ex->pid1 = getpid() == 1;
    /* As an ordinary process, orphaned grandchildren re-parent to us so they get reaped. */
    if (!ex->pid1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        sbx_log_errno(SBX_LOG_WARN, "PR_SET_CHILD_SUBREAPER");
    ex->shell = find_shell();
    if (make_state_dir(&ex->cfg, &err) < 0)
        return start_failed(ready_fd, "%s", sbx_error_msg(err));
    ex->base = event_base_new();
    if (!ex->base || setup_signals(ex) < 0)
        return start_failed(ready_fd, "event loop setup failed");
    if (execd_http_start(ex, &err) < 0)
        return start_failed(ready_fd, "%s", sbx_error_msg(err));
    sbx_info("listening on %s:%u%s", ex->cfg.listen_host, ex->cfg.port,
             ex->cfg.token ? " (access token required)" : "");
    /* The desktop before ready: a sandbox created with one has it when its create answers. */
    if (ex->cfg.desktop)
        (void)execd_desktop_boot(ex, ex->cfg.desktop);
    /* Ready first: the launcher answers its client while we fork the entrypoint. */
    signal_ready(ready_fd);
    start_entrypoint(ex, entrypoint);
    /* SBX_WARM_KERNEL=python (the image's config or the create's env): a Python kernel
     * started now, for the first code context to take (kernel.c) */
    const char *warm = getenv("SBX_WARM_KERNEL"); // NOLINT(concurrency-mt-unsafe): one thread
    if (warm && strcmp(warm, "python") == 0)
        execd_kernel_warm(ex);
    else if (warm && *warm)
        sbx_warn("SBX_WARM_KERNEL=%.32s: only `python` is known", warm);
    /* Whether plain commands may be exec'd directly (reads the shell): now, while the launcher
     * answers its client, rather than on the first command's path. */
    if (ex->fast_shell == EXECD_FAST_UNKNOWN)
        ex->fast_shell = execd_fast_shell_ok(ex->shell) ? EXECD_FAST_YES : EXECD_FAST_NO;
    if (event_base_dispatch(ex->base) < 0)
        return 1;
    return ex->exit_code;
}

/* --install DEST: copy /proc/self/exe to DEST.tmp-<pid> next to DEST, make it 0755, sync it
 * and rename it over DEST, so a reader never sees half a binary (and a running copy at DEST is
 * replaced, not overwritten: ETXTBSY). 0, or 1 with a message on stderr. */
static int
install_self(const char *dest)
{
    sbx_autoclose int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fprintf(stderr, "sbx-execd: --install: open /proc/self/exe: %m\n");
        return 1;
    }
    sbx_autofree char *tmp = sbx_xasprintf("%s.tmp-%d", dest, (int)getpid());
    sbx_autoclose int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (out < 0) {
        fprintf(stderr, "sbx-execd: --install: create `%s`: %m\n", tmp);
        return 1;
    }
    char buf[65536];
    ssize_t n = 0;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        if (sbx_write_all(out, buf, (size_t)n) < 0) {
            n = -1;
            break;
        }
    }
    if (n < 0 || fchmod(out, 0755) < 0 || fsync(out) < 0 || rename(tmp, dest) < 0) {
        fprintf(stderr, "sbx-execd: --install: write `%s`: %m\n", dest);
        (void)unlink(tmp);
        return 1;
    }
    return 0;
}

/* Up to 4 KiB of the file at path, trailing whitespace cut, into buf (wiped by the caller).
 * The length, or -1 with errno. */
static ssize_t
read_small(const char *path, char *buf, size_t cap)
{
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    size_t got = 0;
    ssize_t n = 0;
    while (got + 1 < cap && (n = read(fd, buf + got, cap - 1 - got)) > 0)
        got += (size_t)n;
    if (n < 0)
        return -1;
    while (got > 0 && isspace((unsigned char)buf[got - 1]))
        got--;
    buf[got] = '\0';
    return (ssize_t)got;
}

/* --access-token-file: the token from the file, which is then removed. Security: in a pod the
 * file is a copy the init container wrote into a volume only this container mounts, and it is
 * unlinked here before execd starts the entrypoint or any command, so no process in the
 * sandbox can read it later (a secret volume mounted here directly would stay readable: it is
 * read-only). 0, or 1 with a message on stderr. */
static int
token_from_file(struct execd_config *cfg)
{
    char buf[4096];
    ssize_t n = read_small(cfg->token_file, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0)
            fprintf(stderr, "sbx-execd: --access-token-file `%s` is empty\n", cfg->token_file);
        else
            fprintf(stderr, "sbx-execd: --access-token-file `%s`: %m\n", cfg->token_file);
        return 1;
    }
    if (!cfg->token)
        cfg->token = sbx_xstrndup(buf, (size_t)n);
    explicit_bzero(buf, sizeof buf);
    if (unlink(cfg->token_file) < 0 && errno != ENOENT)
        sbx_log_errno(SBX_LOG_WARN,
                      "the token file `%s` stays (processes in the sandbox can read it)",
                      cfg->token_file);
    return 0;
}

/* --install-token SRC:DEST: SRC copied to DEST.tmp-<pid>, 0444 (the sandbox container's user
 * is not known here; the file lives until its execd reads and removes it), renamed over DEST.
 * 0, or 1 with a message on stderr. */
static int
install_token(const char *spec)
{
    const char *colon = strchr(spec, ':');
    sbx_autofree char *src = sbx_xstrndup(spec, (size_t)(colon - spec));
    const char *dest = colon + 1;
    char buf[4096];
    ssize_t n = read_small(src, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0)
            fprintf(stderr, "sbx-execd: --install-token: `%s` is empty\n", src);
        else
            fprintf(stderr, "sbx-execd: --install-token: read `%s`: %m\n", src);
        return 1;
    }
    sbx_autofree char *tmp = sbx_xasprintf("%s.tmp-%d", dest, (int)getpid());
    sbx_autoclose int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    int r = out < 0 || sbx_write_all(out, buf, (size_t)n) < 0 || fchmod(out, 0444) < 0 ||
                    fsync(out) < 0 || rename(tmp, dest) < 0
                ? 1
                : 0;
    explicit_bzero(buf, sizeof buf);
    if (r) {
        fprintf(stderr, "sbx-execd: --install-token: write `%s`: %m\n", dest);
        (void)unlink(tmp);
    }
    return r;
}

static int
install(const struct execd_config *cfg)
{
    int r = install_self(cfg->install);
    if (r == 0 && cfg->install_token)
        r = install_token(cfg->install_token);
    return r;
}

int
main(int argc, char **argv)
{
    struct execd ex = {0};
    /* Non-dumpable: our memory holds the access token, and as the sandbox's PID 1 our fds
     * and environment would otherwise be open to every process in it (/proc/1/mem, fd/,
     * environ need ptrace access, which this denies to anyone without CAP_SYS_PTRACE).
     * Children are dumpable again after their exec. */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    sbx_log_init("sbx-execd", SBX_LOG_INFO, SBX_LOG_TEXT);
    config_defaults(&ex.cfg);
    int ready_fd = -1;
    char **entrypoint = NULL;
    int r = parse_args(&ex.cfg, &ready_fd, &entrypoint, argc, argv);
    if (r != 0) {
        config_dispose(&ex.cfg);
        return r == 2 ? 0 : 2;
    }
    if (ex.cfg.install) {
        r = install(&ex.cfg);
        config_dispose(&ex.cfg);
        return r;
    }
    if (ex.cfg.install_token) {
        fputs("sbx-execd: --install-token goes with --install\n", stderr);
        config_dispose(&ex.cfg);
        return 2;
    }
    if (ex.cfg.token_file && token_from_file(&ex.cfg) != 0) {
        config_dispose(&ex.cfg);
        return 2;
    }
    config_from_env(&ex.cfg);
    execd_logs_init(&ex, (size_t)ex.cfg.log_ring);
    umask(022);
    /* Commands must not inherit it (closed once written, but a failed start exits first). */
    if (ready_fd >= 0 && fcntl(ready_fd, F_SETFD, FD_CLOEXEC) < 0)
        ready_fd = -1;
    r = run(&ex, ready_fd, entrypoint);
    teardown(&ex);
    return r;
}
