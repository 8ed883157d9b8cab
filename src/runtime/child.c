/*
 * child.c - the sandbox's first process (PID 1 of its pid namespace).
 *
 * After clone it builds the root (rootfs.c), reports READY, waits for GO, then drops to the
 * sandbox's credentials and either execs the command as PID 1 (as_init) or forks it and stays
 * as a tiny init: it forwards signals, reaps every orphan, and reports the command's wait
 * status to the parent before exiting (which makes the kernel kill the rest of the sandbox).
 *
 * Constraint: the parent may be multi-threaded, so nothing here allocates; everything was
 * computed before clone. Errors are sent as {errno, msg} over the sync socket, never printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <linux/sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/internal.h"

int
sbx_sync_send(int fd, int type, int err, int status, const char *msg)
{
    struct sbx_sync_msg m = {.type = type, .err = err, .status = status};
    if (msg)
        snprintf(m.msg, sizeof m.msg, "%s", msg);
    /* MSG_NOSIGNAL: a parent that died must not kill us with SIGPIPE. */
    while (send(fd, &m, sizeof m, MSG_NOSIGNAL) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

int
sbx_sync_recv(int fd, struct sbx_sync_msg *m)
{
    for (;;) {
        ssize_t n = recv(fd, m, sizeof *m, 0);
        if (n == (ssize_t)sizeof *m)
            return 1;
        if (n == 0)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -errno : -EPROTO;
    }
}

void
sbx_close_fds_except(int keep)
{
    sbx_close_fds_except_set(&keep, 1);
}

void
sbx_close_fds_except_set(int *keep, size_t n)
{
    for (size_t i = 1; i < n; i++) { /* insertion sort: small, and no allocation */
        int k = keep[i];
        size_t j = i;
        for (; j > 0 && keep[j - 1] > k; j--)
            keep[j] = keep[j - 1];
        keep[j] = k;
    }
    unsigned from = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < (int)from)
            continue; /* stdio, or a duplicate */
        if ((unsigned)keep[i] > from)
            (void)close_range(from, (unsigned)keep[i] - 1, 0);
        from = (unsigned)keep[i] + 1;
    }
    (void)close_range(from, ~0U, 0);
}

void
sbx_child_fail(int fd, int e, const char *fmt, ...)
{
    char msg[244];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap); /* NOLINT(clang-analyzer-valist.Uninitialized) */
    va_end(ap);
    (void)sbx_sync_send(fd, SBX_SYNC_ERROR, e, 0, msg);
    _exit(127);
}

static void
wait_for(struct sbx_child_args *a, int type)
{
    struct sbx_sync_msg m;
    int r = sbx_sync_recv(a->sync_fd, &m);
    /* EOF: the parent died before releasing us; nothing may run unsupervised. */
    if (r <= 0)
        _exit(127);
    if (m.type != type)
        sbx_child_fail(a->sync_fd, EPROTO, "unexpected sync message %d", m.type);
}

static void
setup_stdio(struct sbx_child_args *a)
{
    const int *io = a->stdio;
    /* Move the fds above 2 first so dup2 cannot clobber one we still need. A slot without an
     * fd gets a placeholder (an O_PATH fd of the caller's root, which no one uses: it is
     * replaced by the sandbox's /dev/null in stdio_devnull before anything runs). */
    int tmp[3];
    for (int i = 0; i < 3; i++) {
        int src = io[i] >= 0 ? io[i] : open("/", O_PATH | O_CLOEXEC);
        tmp[i] = src < 0 ? -1 : fcntl(src, F_DUPFD_CLOEXEC, 3);
        if (tmp[i] < 0)
            sbx_child_fail(a->sync_fd, errno, "stdio %d", i);
        if (io[i] < 0)
            (void)close(src);
    }
    for (int i = 0; i < 3; i++) {
        if (dup2(tmp[i], i) < 0)
            sbx_child_fail(a->sync_fd, errno, "dup2 stdio %d", i);
        (void)close(tmp[i]);
    }
}

/* In the sandbox's root (pivoted, or moved into the template): the slots without an fd get the
 * sandbox's own /dev/null, whose mount is read-only (rootfs.c), so no fd of the command leads to a
 * host inode it could change. */
static void
stdio_devnull(struct sbx_child_args *a)
{
    if (a->stdio[0] >= 0 && a->stdio[1] >= 0 && a->stdio[2] >= 0)
        return;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        sbx_child_fail(a->sync_fd, errno, "open /dev/null");
    for (int i = 0; i < 3; i++) {
        if (a->stdio[i] < 0 && dup2(null, i) < 0)
            sbx_child_fail(a->sync_fd, errno, "dup2 stdio %d", i);
    }
    (void)close(null);
}

static void
drop_privileges(struct sbx_child_args *a)
{
    const char *what = "";
    int r = sbx_security_apply(a->caps, a->spec->uid, a->spec->gid, a->spec->userns, &what);
    if (r < 0)
        sbx_child_fail(a->sync_fd, -r, "%s", what);
}

/* execve, and for ENOEXEC (no #! line) /bin/sh with the file as its script, like execvp. */
static void
exec_or_sh(const char *file, char *const *argv, char *const *envp)
{
    execve(file, argv, envp);
    if (errno != ENOEXEC)
        return;
    char *sh_argv[256];
    size_t n = 0;
    sh_argv[n++] = (char *)"/bin/sh";
    sh_argv[n++] = (char *)file;
    for (size_t i = 1; argv[i] && n < SBX_ARRAY_SIZE(sh_argv) - 1; i++)
        sh_argv[n++] = argv[i];
    sh_argv[n] = NULL;
    execve("/bin/sh", sh_argv, envp);
    errno = ENOEXEC;
}

/* execvp with the sandbox's environment (a->env), without setting `environ`: the child may
 * share its memory with the caller (shared spawn), whose environment is not ours to change.
 * PATH from a->env (else "/bin:/usr/bin", glibc's default); EACCES is reported when a match was
 * not executable and nothing else ran; a file without a #! line is run by /bin/sh, as execvp
 * does. Returns only on failure, with errno set. */
static void
exec_in_path(struct sbx_child_args *a)
{
    char *const *argv = a->spec->argv;
    char *const *envp = (char *const *)a->env;
    const char *file = argv[0];
    if (strchr(file, '/')) {
        exec_or_sh(file, argv, envp);
        return;
    }
    const char *path = "/bin:/usr/bin";
    for (size_t i = 0; envp[i]; i++) {
        if (strncmp(envp[i], "PATH=", 5) == 0)
            path = envp[i] + 5;
    }
    bool denied = false;
    char buf[4096];
    for (const char *p = path;; p += strcspn(p, ":") + 1) {
        size_t len = strcspn(p, ":");
        int n = len ? snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, file)
                    : snprintf(buf, sizeof buf, "%s", file); /* empty element: the cwd */
        if (n > 0 && (size_t)n < sizeof buf) {
            exec_or_sh(buf, argv, envp);
            if (errno == EACCES)
                denied = true;
            else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV &&
                     errno != ETIMEDOUT)
                return;
        }
        if (p[len] == '\0')
            break;
    }
    errno = denied ? EACCES : ENOENT;
}

__attribute__((noreturn)) static void
exec_command(struct sbx_child_args *a)
{
    if (chdir(a->cwd) < 0)
        sbx_child_fail(a->sync_fd, errno, "chdir `%s`", a->cwd);
    /* The filter goes last: it forbids setns/mount that the setup above needed. */
    int r = sbx_seccomp_apply(a->seccomp);
    if (r < 0)
        sbx_child_fail(a->sync_fd, -r, "load seccomp filter");
    /* The command starts with no blocked signals, whatever the caller had blocked. */
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    /* The passed fd lands on 3, inheritable (dup2 clears CLOEXEC); sync_fd is above 3. */
    if (a->fd3 >= 0 && a->fd3 != 3 && dup2(a->fd3, 3) < 0)
        sbx_child_fail(a->sync_fd, errno, "pass fd 3");
    if (a->fd3 == 3 && fcntl(3, F_SETFD, 0) < 0)
        sbx_child_fail(a->sync_fd, errno, "pass fd 3");
    /* Setup is over: from here on an EOF is the exec (or an ERROR its failure). Without this
     * the parent told a command that exited at once (already a zombie when it looked) from an
     * init that died during setup only by timing. */
    (void)sbx_sync_send(a->sync_fd, SBX_SYNC_EXEC, 0, 0, NULL);
    exec_in_path(a);
    int e = errno;
    char msg[200];
    snprintf(msg, sizeof msg, "exec `%s`", a->spec->argv[0]);
    (void)sbx_sync_send(a->sync_fd, SBX_SYNC_ERROR, e, 0, msg);
    _exit(e == ENOENT ? 127 : 126);
}

static int
status_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Under the init's seccomp filter: raw syscalls only, exactly the ones it allows
 * (seccomp_profile.c). libc's wrappers may be intercepted (a sanitizer runtime checks its
 * alternate stack and thread id in them), which the filter would refuse. */
__attribute__((noreturn)) static void
init_loop(struct sbx_child_args *a, pid_t cmd, const sigset_t *all)
{
    /* First, the init's own filter: only what this loop calls (seccomp_profile.c). The
     * process is non-dumpable too (no /proc/1/mem, environ or fd/ for the sandbox), so even
     * code that got in could not widen the sandbox from here. Loaded here, not by the caller:
     * nothing may run between the filter and the loop (a sanitizer's hook before a call to a
     * noreturn function asks for the signal stack, which the filter refuses). */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, a->init_seccomp) < 0) {
        struct sbx_sync_msg m = {.type = SBX_SYNC_ERROR, .err = errno};
        memcpy(m.msg, "load the init's seccomp filter", sizeof "load the init's seccomp filter");
        (void)syscall(SYS_kill, cmd, SIGKILL);
        (void)syscall(SYS_sendto, a->sync_fd, &m, sizeof m, MSG_NOSIGNAL, NULL, 0);
        (void)syscall(SYS_exit_group, 127);
    }
    /* Filtered: the command may start (run_init's child waits for this). */
    (void)syscall(SYS_kill, cmd, SIGUSR1);
    for (;;) {
        siginfo_t si;
        long sig = syscall(SYS_rt_sigtimedwait, all, &si, NULL, (size_t)(_NSIG / 8));
        if (sig < 0)
            continue;
        if (sig != SIGCHLD) {
            /* forward: the command decides what a signal means */
            (void)syscall(SYS_kill, cmd, (int)sig);
            continue;
        }
        int st = 0;
        long p;
        /* Reap everything: orphans of the command are re-parented to us. */
        while ((p = syscall(SYS_wait4, -1, &st, WNOHANG, NULL)) > 0) {
            if (p != cmd)
                continue;
            struct sbx_sync_msg m = {.type = SBX_SYNC_EXIT, .status = st};
            (void)syscall(SYS_sendto, a->sync_fd, &m, sizeof m, MSG_NOSIGNAL, NULL, 0);
            /* Our exit kills whatever is left in the pid namespace. */
            (void)syscall(SYS_exit_group, status_code(st));
        }
    }
}

/* The init of a plain spawn is a copy of the caller's memory: the caller's argv and its whole
 * environment (API keys an agent exported, ...) are in it, and /proc/1/cmdline shows argv to
 * everyone. Wipe both; argv becomes "sbx-init". */
static void
scrub(struct sbx_child_args *a)
{
    static const char name[] = "sbx-init";
    if (a->scrub_env[0])
        memset((void *)a->scrub_env[0], 0, a->scrub_env[1] - a->scrub_env[0]);
    if (a->scrub_arg[0]) {
        size_t len = a->scrub_arg[1] - a->scrub_arg[0];
        memset((void *)a->scrub_arg[0], 0, len);
        if (len > sizeof name)
            memcpy((void *)a->scrub_arg[0], name, sizeof name);
    }
}

__attribute__((noreturn)) static void
run_init(struct sbx_child_args *a)
{
    sigset_t all;
    sigfillset(&all); /* already blocked since clone (see spawn) */
    /* Raw clone3, not fork(): glibc's fork takes its internal locks, which a multi-threaded
     * caller may have held at the moment we were cloned from it. */
    struct clone_args ca = {.exit_signal = SIGCHLD};
    pid_t cmd = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
    if (cmd < 0)
        sbx_child_fail(a->sync_fd, errno, "fork the command");
    if (cmd == 0) {
        /* The command must not outlive its init, even if it escapes our signals. */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Nothing of the sandbox runs before its init is under its own filter (init_loop sends
         * SIGUSR1 once it is): the command waits here, with every signal still blocked, so one
         * that came first stays pending. Before, a command could look at (or race) an init
         * that had no filter yet. */
        sigset_t go;
        sigemptyset(&go);
        sigaddset(&go, SIGUSR1);
        siginfo_t si;
        while (sigwaitinfo(&go, &si) < 0 && errno == EINTR)
            ;
        /* A terminal the caller made for the command (its own pty pair, never the caller's
         * terminal) becomes its controlling terminal: Ctrl-C there signals its foreground
         * group, and job control works. A session of its own first (the init has one). */
        if (a->spec->tty && (setsid() < 0 || ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0))
            sbx_child_fail(a->sync_fd, errno, "make the terminal the command's");
        exec_command(a);
    }
    /* The init holds nothing but the sync socket and the inherited stdio: close stdio so the
     * caller sees EOF exactly when the command (and its children) close theirs. */
    if (a->fd3 >= 0)
        (void)close(a->fd3);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; devnull >= 0 && i < 3; i++)
        (void)dup2(devnull, i);
    if (devnull > 2)
        (void)close(devnull);
    scrub(a);
    init_loop(a, cmd, &all);
}

/* The cgroups the parent made while we set up (it sends GO only once they exist): join them
 * (as sbx_cg_join_self, "0" to each `tasks`) through the cgroup root it opened for us before
 * the clone, since the host's /sys/fs/cgroup is no longer in our root. */
static void
join_late(struct sbx_child_args *a)
{
    for (size_t i = 0; i < a->n_cg_rel; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/tasks", a->cg_rel[i]);
        int fd = openat(a->cg_root_fd, p, O_WRONLY | O_CLOEXEC);
        int r = fd < 0 ? -errno : sbx_cg_join_self(&fd, 1);
        if (r < 0)
            sbx_child_fail(a->sync_fd, -r, "join cgroup `%s`", a->cg_rel[i]);
    }
    if (a->cg_root_fd >= 0)
        (void)close(a->cg_root_fd);
}

static void
bring_lo_up(struct sbx_child_args *a)
{
    int r = sbx_netns_lo_up();
    if (r < 0)
        sbx_child_fail(a->sync_fd, -r, "bring up lo");
}

static void
die_with_parent(struct sbx_child_args *a)
{
    /* PDEATHSIG covers a parent that dies from now on; one that died before it was set is
     * seen as a hung-up socket (its GO may already be queued, so reading is not enough). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        sbx_child_fail(a->sync_fd, errno, "PR_SET_PDEATHSIG");
    struct pollfd p = {.fd = a->sync_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP)))
        _exit(127);
}

/* A table of our own before any descriptor is touched: cloned with the caller's shared
 * (CLONE_FILES), we drop it for a copy without the parked range (every descriptor from
 * fds_shared up: the server's per-sandbox pidfds, common/util.h). Nothing of the caller's can
 * be closed or opened through us once this returns; if it fails we must not go on sharing it,
 * so we leave without a word (the parent reads EOF). */
static void
own_fd_table(const struct sbx_child_args *a)
{
    if (a->fds_shared && close_range(a->fds_shared, ~0U, CLOSE_RANGE_UNSHARE) < 0 &&
        unshare(CLONE_FILES) < 0)
        _exit(127);
}

void
sbx_child_main(struct sbx_child_args *a)
{
    const struct sbx_rt_spec *spec = a->spec;
    own_fd_table(a);
    /* Non-dumpable from the first instruction: the sandbox's processes (same uid, no
     * CAP_SYS_PTRACE) can then not open /proc/1/mem, environ, fd/ or ptrace us, whatever our
     * memory holds (a copy of the caller's). An exec (as_init) resets it for the new program,
     * which decides for itself (execd sets it again). */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    (void)close(a->parent_fd);
    if (a->hello)
        (void)sbx_sync_send(a->sync_fd, SBX_SYNC_HELLO, 0, 0, NULL);
    /* A pooled network namespace (netpool.c) replaces the CLONE_NEWNET the clone left out:
     * entered before anything (sysfs, the command) could see the host's. */
    bool pooled_netns = a->netns_fd >= 0;
    if (pooled_netns && setns(a->netns_fd, CLONE_NEWNET) < 0)
        sbx_child_fail(a->sync_fd, errno, "enter the sandbox's network namespace");
    if (pooled_netns)
        (void)close(a->netns_fd);
    /* stdio first (its fds may be anywhere), then nothing else of the caller's survives: the
     * init lives as long as the sandbox and would otherwise pin the caller's sockets, pipes and
     * files (a restarted server could not bind its port again). */
    if (a->sync_fd < 3) {
        int fd = fcntl(a->sync_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            _exit(127);
        a->sync_fd = fd;
    }
    /* v1: into our cgroups before anything else, so what the setup allocates and forks is
     * accounted to the sandbox (v2 cloned us into them). */
    int jr = sbx_cg_join_self(a->cg_join_fds, a->n_cg_join);
    if (jr < 0)
        sbx_child_fail(a->sync_fd, -jr, "join the sandbox's cgroups");
    /* A passed fd is kept above 3 (where stdio and the sync socket cannot clobber it) until
     * exec_command moves it to 3; the sync socket goes above it. */
    a->fd3 = -1;
    if (spec->has_fd3) {
        a->fd3 = fcntl(spec->fd3, F_DUPFD_CLOEXEC, 4);
        int fd = a->fd3 < 0 ? -1 : fcntl(a->sync_fd, F_DUPFD_CLOEXEC, a->fd3 + 1);
        if (fd < 0)
            sbx_child_fail(a->sync_fd, errno, "pass fd 3");
        a->sync_fd = fd;
    }
    setup_stdio(a);
    /* Volume sources given as fds stay open until the root is built. */
    int keep[SBX_MAX_MOUNTS + 5]; /* the 5 single fds below, and one per bind at most */
    size_t n_keep = 0;
    keep[n_keep++] = a->sync_fd;
    if (a->fd3 >= 0)
        keep[n_keep++] = a->fd3;
    if (a->upper_loop_fd >= 0)
        keep[n_keep++] = a->upper_loop_fd;
    if (a->cg_root_fd >= 0)
        keep[n_keep++] = a->cg_root_fd;
    if (a->mnt_template_fd >= 0)
        keep[n_keep++] = a->mnt_template_fd;
    for (size_t i = 0; i < a->n_binds; i++) {
        if (a->binds[i].src_fd > 0)
            keep[n_keep++] = a->binds[i].src_fd;
    }
    sbx_close_fds_except_set(keep, n_keep);
    /* A session of our own: process-group signals (kill(0, ...)) are not filtered by pid
     * namespace, so sharing the caller's group would let the sandbox signal host processes;
     * and a tty that is not our controlling terminal refuses TIOCSTI injection. */
    if (setsid() < 0)
        sbx_child_fail(a->sync_fd, errno, "setsid");
    sbx_nofile_restore(); /* the server's raised RLIMIT_NOFILE stays the server's */
    if (spec->die_with_parent)
        die_with_parent(a);
    if (spec->userns) {
        wait_for(a, SBX_SYNC_MAPPED);
        /* Become the namespace's root now that it is mapped: files we create must belong to
         * a mapped id (an unmapped one fails with EOVERFLOW). */
        if (sbx_raw_setresgid(0) < 0 || sbx_raw_setresuid(0) < 0)
            sbx_child_fail(a->sync_fd, errno, "become root in the user namespace");
    }
    /* With a bridge, the parent's net hook brings lo up with the rest (runtime.h); a pooled
     * namespace has it up already. */
    if (spec->net == SBX_RT_NET_NONE && !pooled_netns)
        bring_lo_up(a);
    if (sethostname(a->hostname, strlen(a->hostname)) < 0)
        sbx_child_fail(a->sync_fd, errno, "sethostname");
    (void)sbx_rootfs_setup(a);
    stdio_devnull(a);
    if (a->upper_loop_fd >= 0)
        (void)close(a->upper_loop_fd); /* mounted now: the mount keeps the device */
    for (size_t i = 0; i < a->n_binds; i++) {
        if (a->binds[i].src_fd > 0)
            (void)close(a->binds[i].src_fd);
    }
    (void)sbx_sync_send(a->sync_fd, SBX_SYNC_READY, 0, 0, NULL);
    wait_for(a, SBX_SYNC_GO);
    /* v1: we joined our cgroups at the start; the cgroup namespace is rooted there (so
     * /proc/self/cgroup shows "/" and hides the host's layout). */
    join_late(a);
    if (a->unshare_cgroupns && unshare(CLONE_NEWCGROUP) < 0)
        sbx_child_fail(a->sync_fd, errno, "unshare cgroup namespace");
    drop_privileges(a);
    if (spec->as_init)
        exec_command(a);
    run_init(a);
}
