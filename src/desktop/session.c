/*
 * session.c - the desktop's processes: Xvnc, the window manager, the accessibility bus with
 * its registry, a session bus; started without sleeps (readiness comes through -displayfd and
 * --print-address pipes) and supervised (a dead X server is restarted with its clients, at
 * most RESTART_MAX times a minute).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/desktop_int.h"

extern char **environ;

#define READY_TIMEOUT_MS 10000
#define RESTART_MAX      5
#define STOP_GRACE_MS    500
#define A11Y_CONF        "/usr/share/defaults/at-spi2/accessibility.conf"
#define REGISTRYD        "/usr/libexec/at-spi2-registryd"
#define PULSEAUDIO       "/usr/bin/pulseaudio"
#define SESSION_CONF     "/usr/share/dbus-1/session.conf"
#define WM_READY         "wm-ready"
#define WM_WAIT_MS       3000

static const char *const proc_name[P_COUNT] = {
    "Xvnc",        "window manager", "accessibility bus", "at-spi2-registryd",
    "session bus", "recorder",       "PulseAudio"};

int
sbx_desktop_new(struct sbx_desktop **out, sbx_error **err)
{
    (void)err;
    struct sbx_desktop *d = sbx_xcalloc(1, sizeof *d);
    d->display = -1;
    *out = d;
    return 0;
}

void
sbx_desktop_free(struct sbx_desktop *d)
{
    if (!d)
        return;
    sbx_desktop_stop(d);
    free(d);
}

bool
sbx_desktop_running(const struct sbx_desktop *d)
{
    return d && d->state == SBX_DESKTOP_RUNNING;
}

/* The desktop's programs get the owner's environment plus d->env (which wins). */
static char **
spawn_env(const struct sbx_desktop *d)
{
    size_t n = 0;
    size_t m = 0;
    while (environ[n])
        n++;
    while (d->env && d->env[m])
        m++;
    char **e = sbx_xcalloc(n + m + 1, sizeof *e);
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        e[k++] = d->env[i];
    for (size_t i = 0; i < n; i++) {
        size_t klen = strcspn(environ[i], "=");
        bool shadowed = false;
        for (size_t j = 0; j < m && !shadowed; j++)
            shadowed = strncmp(d->env[j], environ[i], klen) == 0 && d->env[j][klen] == '=';
        if (!shadowed)
            e[k++] = environ[i];
    }
    return e;
}

/* The child of spawn_as_user, up to exec: async-signal-safe calls only (the owner may have
 * threads). An exec failure's errno goes back on errfd (close-on-exec: silent on success). */
static void __attribute__((noreturn)) as_user_child(const struct sbx_desktop *d, char **argv,
                                                    char **envp, int pass_fd, int logfd, int errfd)
{
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s < NSIG; s++)
        (void)signal(s, SIG_DFL);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)setsid();
    int null_in = open("/dev/null", O_RDONLY | O_CLOEXEC); /* dup2 copies lose the flag */
    int null_out = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_in < 0 || null_out < 0 || dup2(null_in, 0) < 0 || dup2(null_out, 1) < 0 ||
        dup2(logfd >= 0 ? logfd : null_out, 2) < 0 || (pass_fd > 2 && dup2(pass_fd, 3) < 0))
        goto fail;
    /* every other fd of the owner's stays out of the desktop's programs */
    (void)syscall(SYS_close_range, pass_fd > 2 ? 4U : 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
    /* groups first, then gid, then uid: after setuid the others could not be changed */
    if (setgroups(d->opts.ngroups, d->opts.groups) < 0 ||
        setresgid(d->opts.gid, d->opts.gid, d->opts.gid) < 0 ||
        setresuid(d->opts.uid, d->opts.uid, d->opts.uid) < 0)
        goto fail;
    execvpe(argv[0], argv, envp);
fail:;
    int e = errno;
    (void)!write(errfd, &e, sizeof e);
    _exit(127);
}

/* posix_spawn cannot change the user: with a desktop user, fork + exec, and the exec's
 * failure reported as posix_spawnp reports it (the errno). */
static int
spawn_as_user(struct sbx_desktop *d, char **argv, char **envp, int pass_fd, int logfd, pid_t *pid)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return errno;
    *pid = fork();
    if (*pid == 0)
        as_user_child(d, argv, envp, pass_fd, logfd, ep[1]);
    int fork_errno = errno;
    (void)close(ep[1]);
    if (*pid < 0) {
        (void)close(ep[0]);
        return fork_errno;
    }
    int e = 0;
    ssize_t got;
    do {
        got = read(ep[0], &e, sizeof e);
    } while (got < 0 && errno == EINTR);
    (void)close(ep[0]);
    if (got == (ssize_t)sizeof e) {
        (void)waitpid(*pid, NULL, 0);
        return e ? e : EIO;
    }
    return 0;
}

static int
spawn_as_owner(struct sbx_desktop *d, char **argv, char **envp, int pass_fd, int logfd, pid_t *pid)
{
    (void)d;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    (void)posix_spawn_file_actions_init(&fa);
    (void)posix_spawnattr_init(&at);
    /* A session of its own: stopped as a group, never signalled with execd's. */
    (void)posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
    sigset_t none;
    sigset_t all;
    sigemptyset(&none);
    sigfillset(&all);
    (void)posix_spawnattr_setsigmask(&at, &none);
    (void)posix_spawnattr_setsigdefault(&at, &all);
    (void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    (void)posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (logfd >= 0)
        (void)posix_spawn_file_actions_adddup2(&fa, logfd, 2);
    else
        (void)posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (pass_fd > 2)
        (void)posix_spawn_file_actions_adddup2(&fa, pass_fd, 3);
    (void)posix_spawn_file_actions_addclosefrom_np(&fa, pass_fd > 2 ? 4 : 3);
    int r = posix_spawnp(pid, argv[0], &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return r;
}

int
desk_spawn(struct sbx_desktop *d, enum desk_proc which, char **argv, int pass_fd, sbx_error **err)
{
    /* ffmpeg's errors go to a file beside the recording (record.c reads it) */
    sbx_autoclose int logfd = -1;
    if (which == P_RECORDER && d->rec_path) {
        sbx_autofree char *log = sbx_xasprintf("%s.log", d->rec_path);
        logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (logfd >= 0 && d->opts.as_user && fchown(logfd, d->opts.uid, d->opts.gid) < 0)
            sbx_log_errno(SBX_LOG_WARN, "desktop: chown %s", log);
    }
    char **envp = spawn_env(d);
    if (d->opts.pre_spawn)
        d->opts.pre_spawn(d->opts.spawn_ctx);
    pid_t pid = 0;
    int r = d->opts.as_user ? spawn_as_user(d, argv, envp, pass_fd, logfd, &pid)
                            : spawn_as_owner(d, argv, envp, pass_fd, logfd, &pid);
    if (d->opts.post_spawn)
        d->opts.post_spawn(d->opts.spawn_ctx);
    free(envp);
    if (r != 0)
        return sbx_error_set(err, r == ENOENT ? SBX_EUNAVAIL : SBX_EGENERIC, r, "start %s (`%s`)",
                             proc_name[which], argv[0]);
    d->pid[which] = pid;
    return 0;
}

/* One line from fd (a -displayfd or --print-address pipe) within the deadline. */
static int
read_line(int fd, uint64_t deadline, char *buf, size_t n, const char *what, sbx_error **err)
{
    size_t len = 0;
    while (len + 1 < n) {
        uint64_t now = sbx_now_ms();
        if (now >= deadline)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0, "%s: not ready in %d ms", what,
                                 READY_TIMEOUT_MS);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)(deadline - now));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t got = read(fd, buf + len, n - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "%s exited before it was ready", what);
        len += (size_t)got;
        buf[len] = '\0';
        if (memchr(buf, '\n', len)) {
            buf[strcspn(buf, "\n")] = '\0';
            return 0;
        }
    }
    return sbx_error_set(err, SBX_EIO, 0, "%s: answer too long", what);
}

/* Start a program that reports readiness on fd 3 (a pipe); *rd gets the read end. */
static int
spawn_with_pipe(struct sbx_desktop *d, enum desk_proc which, char **argv, int *rd, sbx_error **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "pipe");
    int r = desk_spawn(d, which, argv, p[1], err);
    (void)close(p[1]);
    if (r < 0) {
        (void)close(p[0]);
        return r;
    }
    *rd = p[0];
    return 0;
}

static int
start_xvnc(struct sbx_desktop *d, int *rd, sbx_error **err)
{
    /* The X socket dir, sticky and world-writable as X expects (the sandbox's own /tmp). */
    if (mkdir("/tmp/.X11-unix", 01777) < 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir /tmp/.X11-unix");
    (void)chmod("/tmp/.X11-unix", 01777);
    char geom[32];
    char depth[8];
    char port[16];
    snprintf(geom, sizeof geom, "%ux%u", d->opts.width, d->opts.height);
    snprintf(depth, sizeof depth, "%u", d->opts.depth);
    snprintf(port, sizeof port, "%d", d->opts.vnc_port < 0 ? -1 : d->opts.vnc_port);
    /* -nolisten tcp: X only on its unix socket; -localhost: VNC only on 127.0.0.1 of the
     * sandbox's own network namespace; no VNC password: the API key guards the way in
     * (provider.connect), nothing else can reach that address. */
    char *argv[] = {"Xvnc",           "-geometry", geom,         "-depth",   depth,
                    "-SecurityTypes", "None",      "-localhost", "-rfbport", port,
                    "-nolisten",      "tcp",       "-extension", "GLX",      "-AlwaysShared",
                    "-dpi",           "96",        "-displayfd", "3",        NULL};
    return spawn_with_pipe(d, P_XVNC, argv, rd, err);
}

/* With a desktop user, the session bus is the user's, and dbus lets only its owner connect:
 * root in the sandbox (execd, commands run through the API, which run as root) could not use
 * gsettings or start the session's services. So the bus runs Debian's session config plus one
 * rule letting root connect too; root of the sandbox can do anything the user can anyway.
 * NULL (plain --session) without a user or without the distribution's session.conf. */
static char *
session_conf(const struct sbx_desktop *d)
{
    static const char conf[] =
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
        " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
        "<busconfig>\n"
        "  <include>" SESSION_CONF "</include>\n"
        "  <policy context=\"default\"><allow user=\"root\"/></policy>\n"
        "</busconfig>\n";
    if (!d->opts.as_user || access(SESSION_CONF, R_OK) < 0)
        return NULL;
    sbx_autofree char *path = sbx_xasprintf("%s/session-bus.conf", d->runtime_dir);
    sbx_autoclose int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || sbx_write_all(fd, conf, sizeof conf - 1) < 0)
        return NULL;
    return sbx_xasprintf("--config-file=%s", path);
}

/* A bus socket left by a killed bus (an X restart relaunches it) would make the new one fail. */
static int
unlink_bus(const struct sbx_desktop *d)
{
    sbx_autofree char *path = sbx_xasprintf("%s/bus", d->runtime_dir);
    return unlink(path);
}

static int
start_bus(struct sbx_desktop *d, enum desk_proc which, int *rd, sbx_error **err)
{
    static char conf[] = "--config-file=" A11Y_CONF;
    char *a11y[] = {"dbus-daemon", conf, "--nofork", "--print-address=3", NULL};
    /* at $XDG_RUNTIME_DIR/bus, where a desktop distribution's session bus is (OSWorld's
     * tasks and tools look for /run/user/1000/bus) */
    (void)unlink_bus(d);
    sbx_autofree char *addr = sbx_xasprintf("--address=unix:path=%s/bus", d->runtime_dir);
    sbx_autofree char *conf_opt = session_conf(d);
    char *session[] = {
        "dbus-daemon", conf_opt ? conf_opt : "--session", addr, "--nofork", "--print-address=3",
        NULL};
    return spawn_with_pipe(d, which, which == P_A11Y_BUS ? a11y : session, rd, err);
}

static void
build_env(struct sbx_desktop *d)
{
    const char *vals[][2] = {
        {"HOME", d->home},
        {"XDG_RUNTIME_DIR", d->runtime_dir},
        {"ACCESSIBILITY_ENABLED", "1"},
        {"GTK_USE_PORTAL", "0"},
        {"NO_AT_BRIDGE", "0"},
    };
    size_t n = SBX_ARRAY_SIZE(vals) + 8;
    d->env = sbx_xcalloc(n + 1, sizeof *d->env);
    size_t k = 0;
    d->env[k++] = sbx_xasprintf("DISPLAY=:%d", d->display);
    if (d->session_bus)
        d->env[k++] = sbx_xasprintf("DBUS_SESSION_BUS_ADDRESS=%s", d->session_bus);
    if (d->a11y_bus)
        d->env[k++] = sbx_xasprintf("AT_SPI_BUS_ADDRESS=%s", d->a11y_bus);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(vals); i++)
        d->env[k++] = sbx_xasprintf("%s=%s", vals[i][0], vals[i][1]);
    d->env[k++] = sbx_xasprintf("XDG_CONFIG_HOME=%s/.config", d->home);
    d->env[k++] = sbx_xasprintf("XDG_CACHE_HOME=%s/.cache", d->home);
    d->env[k++] = sbx_xasprintf("XDG_DATA_HOME=%s/.local/share", d->home);
    if (d->opts.as_user) {
        d->env[k++] = sbx_xasprintf("USER=%s", d->opts.user);
        d->env[k++] = sbx_xasprintf("LOGNAME=%s", d->opts.user);
    }
}

static void
free_env(struct sbx_desktop *d)
{
    for (size_t i = 0; d->env && d->env[i]; i++)
        free(d->env[i]);
    free(d->env);
    d->env = NULL;
}

static void
kill_all(struct sbx_desktop *d)
{
    for (int i = P_COUNT - 1; i >= 0; i--) {
        if (d->pid[i] > 0)
            (void)kill(-d->pid[i], SIGTERM);
    }
    uint64_t deadline = sbx_now_ms() + STOP_GRACE_MS;
    for (int i = P_COUNT - 1; i >= 0; i--) {
        if (d->pid[i] <= 0)
            continue;
        while (waitpid(d->pid[i], NULL, WNOHANG) == 0 && sbx_now_ms() < deadline)
            (void)usleep(2000);
        (void)kill(-d->pid[i], SIGKILL);
        (void)waitpid(d->pid[i], NULL, 0); /* ECHILD when the owner reaped it already */
        d->pid[i] = 0;
    }
}

/* openbox, which touches WM_READY in the runtime dir once it has set itself up (key bindings
 * grabbed): --startup runs after that, before its event loop. */
static int
start_wm(struct sbx_desktop *d, sbx_error **err)
{
    sbx_autofree char *flag = sbx_xasprintf("%s/" WM_READY, d->runtime_dir);
    sbx_autofree char *touch = sbx_xasprintf("touch %s", flag);
    (void)unlink(flag);
    d->wm_ready = false;
    char *wm[] = {"openbox", "--startup", touch, NULL};
    return desk_spawn(d, P_WM, wm, -1, err);
}

void
desk_wait_wm(struct sbx_desktop *d)
{
    if (d->wm_ready || d->opts.no_wm || !d->runtime_dir)
        return;
    sbx_autofree char *flag = sbx_xasprintf("%s/" WM_READY, d->runtime_dir);
    uint64_t deadline = sbx_now_ms() + WM_WAIT_MS;
    while (access(flag, F_OK) < 0 && sbx_now_ms() < deadline && d->pid[P_WM] > 0)
        (void)usleep(5000);
    d->wm_ready = true; /* ready, or never will be: asked once */
}

/* The processes that need X: the window manager and the accessibility registry. */
static void
start_clients(struct sbx_desktop *d)
{
    sbx_autoerror sbx_error *e = NULL;
    if (!d->opts.no_wm && start_wm(d, &e) < 0)
        snprintf(d->last_error, sizeof d->last_error, "%s", sbx_error_msg(e));
    /* PulseAudio refuses to run as root outside its system mode: only for a desktop user */
    if (d->opts.as_user && access(PULSEAUDIO, X_OK) == 0) {
        sbx_error_clear(&e);
        char *pa[] = {PULSEAUDIO, "--daemonize=no", "--exit-idle-time=-1", NULL};
        if (desk_spawn(d, P_AUDIO, pa, -1, &e) < 0)
            snprintf(d->last_error, sizeof d->last_error, "%s", sbx_error_msg(e));
    }
    if (d->a11y_bus && access(REGISTRYD, X_OK) == 0) {
        sbx_error_clear(&e);
        char *reg[] = {REGISTRYD, NULL};
        if (desk_spawn(d, P_REGISTRYD, reg, -1, &e) < 0)
            snprintf(d->last_error, sizeof d->last_error, "%s", sbx_error_msg(e));
    }
}

/* Both buses are optional: without dbus (or at-spi2-core) the desktop runs, and the calls
 * that need a bus say so. */
static void
read_bus(struct sbx_desktop *d, int rd, uint64_t deadline, char **addr, const char *what)
{
    char buf[512];
    sbx_autoerror sbx_error *e = NULL;
    if (rd >= 0 && read_line(rd, deadline, buf, sizeof buf, what, &e) == 0)
        *addr = sbx_xstrdup(buf);
    else if (e)
        snprintf(d->last_error, sizeof d->last_error, "%s", sbx_error_msg(e));
    if (rd >= 0)
        (void)close(rd);
}

static int
launch(struct sbx_desktop *d, sbx_error **err)
{
    uint64_t t0 = sbx_now_ns();
    uint64_t deadline = sbx_now_ms() + READY_TIMEOUT_MS;
    sbx_autoclose int xrd = -1;
    int a11y_rd = -1;
    int sess_rd = -1;
    /* All three at once: the buses start while X does. */
    int r = start_xvnc(d, &xrd, err);
    sbx_autoerror sbx_error *ignored = NULL;
    if (r == 0 && access(A11Y_CONF, R_OK) == 0)
        (void)start_bus(d, P_A11Y_BUS, &a11y_rd, &ignored);
    if (r == 0)
        (void)start_bus(d, P_SESSION_BUS, &sess_rd, &ignored);
    char buf[64];
    if (r == 0)
        r = read_line(xrd, deadline, buf, sizeof buf, "Xvnc", err);
    uint64_t num = 0;
    if (r == 0 && (sbx_parse_u64(buf, &num, NULL) < 0 || num > 65535))
        r = sbx_error_set(err, SBX_EIO, 0, "Xvnc reported display `%.16s`", buf);
    if (r == 0)
        d->display = (int)num;
    read_bus(d, a11y_rd, deadline, &d->a11y_bus, "the accessibility bus");
    read_bus(d, sess_rd, deadline, &d->session_bus, "the session bus");
    if (r == 0) {
        build_env(d);
        r = desk_x_connect(d, err);
    }
    if (r == 0) {
        desk_session_bus_env(d);
        start_clients(d);
    }
    d->ready_ms = (double)(sbx_now_ns() - t0) / 1e6;
    return r;
}

static void
teardown(struct sbx_desktop *d)
{
    desk_x_disconnect(d);
    kill_all(d);
    free_env(d);
    free(d->a11y_bus);
    free(d->session_bus);
    d->a11y_bus = d->session_bus = NULL;
    d->display = -1;
}

/* dconf's change flag ($XDG_RUNTIME_DIR/dconf/user), made by whichever client comes first,
 * 0600: a root command (commands through the API run as root, with the desktop's environment)
 * running gsettings first would leave one the user's programs cannot open, and dconf would stop
 * working for them. So it is the user's from the start. */
static int
own_dconf_flag(const struct sbx_desktop *d)
{
    sbx_autofree char *dir = sbx_xasprintf("%s/dconf", d->runtime_dir);
    sbx_autofree char *flag = sbx_xasprintf("%s/user", dir);
    (void)mkdir(dir, 0700);
    sbx_autoclose int fd = open(flag, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (chown(dir, d->opts.uid, d->opts.gid) < 0 ||
        (fd >= 0 && fchown(fd, d->opts.uid, d->opts.gid) < 0))
        sbx_log_errno(SBX_LOG_WARN,
                      "desktop: %s is not the desktop user's (dconf may not work "
                      "for it)",
                      flag);
    return 0;
}

/* XDG_RUNTIME_DIR: owned by the desktop's user, 0700 (the spec's rule). A desktop user gets
 * /run/user/UID, where programs of a desktop distribution look; otherwise a fresh dir in /tmp. */
static int
make_runtime_dir(struct sbx_desktop *d, sbx_error **err)
{
    if (d->opts.as_user) {
        char path[64];
        snprintf(path, sizeof path, "/run/user/%u", (unsigned)d->opts.uid);
        (void)mkdir("/run/user", 0755);
        if ((mkdir(path, 0700) < 0 && errno != EEXIST) ||
            chown(path, d->opts.uid, d->opts.gid) < 0 || chmod(path, 0700) < 0)
            return sbx_error_set(err, SBX_EGENERIC, errno, "make XDG_RUNTIME_DIR %s", path);
        d->runtime_dir = sbx_xstrdup(path);
        return own_dconf_flag(d);
    }
    char tmpl[] = "/tmp/sbx-desktop-XXXXXX";
    if (!mkdtemp(tmpl))
        return sbx_error_set(err, SBX_EGENERIC, errno, "make XDG_RUNTIME_DIR");
    d->runtime_dir = sbx_xstrdup(tmpl);
    return 0;
}

int
sbx_desktop_start(struct sbx_desktop *d, const struct sbx_desktop_opts *o, sbx_error **err)
{
    if (d->state == SBX_DESKTOP_RUNNING)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "the desktop is running already");
    d->opts = *o;
    if (!d->opts.width || !d->opts.height) {
        d->opts.width = 1280;
        d->opts.height = 800;
    }
    if (!d->opts.depth)
        d->opts.depth = 24;
    if (d->opts.vnc_port == 0)
        d->opts.vnc_port = 5900;
    free(d->home);
    const char *home = o->home ? o->home : getenv("HOME"); // NOLINT(concurrency-mt-unsafe)
    d->home = sbx_xstrdup(home && *home ? home : "/root");
    if (!d->runtime_dir && make_runtime_dir(d, err) < 0)
        return sbx_error_wrap(err, "start the desktop");
    d->restarts = d->restarts_in_window = 0;
    d->restart_window_ms = sbx_now_ms();
    d->last_error[0] = '\0';
    d->stopping = false;
    int r = launch(d, err);
    if (r < 0) {
        teardown(d);
        d->state = SBX_DESKTOP_STOPPED;
        return sbx_error_wrap(err, "start the desktop");
    }
    d->state = SBX_DESKTOP_RUNNING;
    return 0;
}

void
sbx_desktop_stop(struct sbx_desktop *d)
{
    d->stopping = true;
    teardown(d);
    if (d->runtime_dir) {
        (void)sbx_rm_rf(d->runtime_dir, NULL);
        free(d->runtime_dir);
        d->runtime_dir = NULL;
    }
    free(d->home);
    d->home = NULL;
    free(d->rec_path); /* removed with runtime_dir */
    d->rec_path = NULL;
    d->rec_exited = false;
    d->state = SBX_DESKTOP_STOPPED;
    d->stopping = false;
}

static void
restart(struct sbx_desktop *d, const char *why)
{
    uint64_t now = sbx_now_ms();
    if (now - d->restart_window_ms > 60000) {
        d->restart_window_ms = now;
        d->restarts_in_window = 0;
    }
    snprintf(d->last_error, sizeof d->last_error, "%s", why);
    teardown(d);
    if (++d->restarts_in_window > RESTART_MAX) {
        d->state = SBX_DESKTOP_FAILED;
        snprintf(d->last_error, sizeof d->last_error,
                 "%s; restarted %d times in a minute: given up (start it again)", why, RESTART_MAX);
        sbx_warn("desktop: %s", d->last_error);
        return;
    }
    d->restarts++;
    sbx_autoerror sbx_error *e = NULL;
    if (launch(d, &e) < 0) {
        snprintf(d->last_error, sizeof d->last_error, "%s; restart failed: %s", why,
                 sbx_error_msg(e));
        teardown(d);
        d->state = SBX_DESKTOP_FAILED;
    }
    sbx_warn("desktop: %s; restarted (%u)", why, d->restarts);
}

bool
sbx_desktop_child_exited(struct sbx_desktop *d, pid_t pid, int status)
{
    if (!d || pid <= 0)
        return false;
    int which = -1;
    for (int i = 0; i < P_COUNT; i++) {
        if (d->pid[i] == pid)
            which = i;
    }
    if (which < 0)
        return false;
    d->pid[which] = 0;
    if (which == P_RECORDER) { /* a stop asked for it, or ffmpeg failed: record.c reports */
        d->rec_exited = true;
        d->rec_status = status;
        return true;
    }
    if (d->stopping || d->state != SBX_DESKTOP_RUNNING)
        return true;
    char why[160];
    snprintf(why, sizeof why, "%s exited (%s %d)", proc_name[which],
             WIFSIGNALED(status) ? "signal" : "status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    if (which == P_XVNC) {
        restart(d, why);
    } else if (which == P_WM) {
        snprintf(d->last_error, sizeof d->last_error, "%s", why);
        sbx_autoerror sbx_error *e = NULL;
        if (++d->restarts_in_window <= RESTART_MAX * 2)
            (void)start_wm(d, &e);
    } else {
        snprintf(d->last_error, sizeof d->last_error, "%s", why);
    }
    return true;
}

void
sbx_desktop_status(const struct sbx_desktop *d, struct sbx_desktop_status *st)
{
    memset(st, 0, sizeof *st);
    st->state = d->state;
    st->width = d->opts.width;
    st->height = d->opts.height;
    st->depth = d->opts.depth;
    st->display = d->display;
    st->vnc_port = d->opts.vnc_port;
    st->restarts = d->restarts;
    st->ready_ms = d->ready_ms;
    st->wm = !d->opts.no_wm;
    st->as_user = d->opts.as_user;
    st->uid = d->opts.uid;
    st->gid = d->opts.gid;
    snprintf(st->last_error, sizeof st->last_error, "%s", d->last_error);
}

const char *const *
sbx_desktop_env(const struct sbx_desktop *d)
{
    return d && d->state == SBX_DESKTOP_RUNNING ? (const char *const *)d->env : NULL;
}

const char *
sbx_desktop_a11y_bus(const struct sbx_desktop *d)
{
    return d && d->state == SBX_DESKTOP_RUNNING ? d->a11y_bus : NULL;
}
