/*
 * exec.c - sbx_rt_exec_into: an nsenter-style process inside a running sandbox.
 *
 * fork -> join the sandbox's cgroup -> setns(pidfd, all its namespaces) -> fork (a pid
 * namespace applies to children only) -> the same capability drop, no_new_privs and seccomp
 * filter as the sandbox's own command -> exec. The middle process stays outside the sandbox's
 * pid namespace, waits, and exits with the command's status, so the caller can waitpid() it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

extern char **environ;

struct exec_plan {
    char procs[SBX_CG_NROLES][4096]; /* <cgroup dir>/cgroup.procs */
    size_t n_procs;
    int ns_flags;
    char *env[2];
};

static int
same_ns(pid_t pid, const char *ns)
{
    char a[64];
    char b[64];
    struct stat sa;
    struct stat sb;
    snprintf(a, sizeof a, "/proc/%d/ns/%s", (int)pid, ns);
    snprintf(b, sizeof b, "/proc/self/ns/%s", ns);
    if (stat(a, &sa) < 0 || stat(b, &sb) < 0)
        return -1;
    return sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

static void
plan(struct exec_plan *p, const struct sbx_rt_sandbox *sb)
{
    const char *dirs[SBX_CG_NROLES];
    p->n_procs = sbx_cg_unique_dirs(&sb->cg, dirs, SBX_CG_NROLES);
    for (size_t i = 0; i < p->n_procs; i++)
        snprintf(p->procs[i], sizeof p->procs[i], "%s/cgroup.procs", dirs[i]);
    p->ns_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP;
    /* setns into our own user/net namespace fails (EINVAL for user): only join what differs. */
    if (same_ns(sb->pid, "net") == 0)
        p->ns_flags |= CLONE_NEWNET;
    if (same_ns(sb->pid, "user") == 0)
        p->ns_flags |= CLONE_NEWUSER;
}

__attribute__((noreturn)) static void
die(const char *what)
{
    /* The only channel left is the exit status; the message goes to the command's stderr. */
    dprintf(2, "sbx exec: %s: %m\n", what);
    _exit(126);
}

__attribute__((noreturn)) static void
inner(struct sbx_rt_sandbox *sb, const struct sbx_rt_exec *ex, const struct exec_plan *p)
{
    const char *what = "";
    if (chdir(ex->cwd ? ex->cwd : "/") < 0)
        die("chdir");
    if (sbx_security_apply(&sb->rt->caps, ex->uid, ex->gid, (p->ns_flags & CLONE_NEWUSER) != 0,
                           &what) < 0)
        die(what);
    if (sbx_seccomp_apply(&sb->rt->seccomp) < 0)
        die("seccomp");
    /* Nothing of the caller's leaks in: no blocked signals, no inherited fds above stdio. */
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
        die("close_range");
    sbx_nofile_restore();
    environ = ex->env ? (char **)ex->env : (char **)p->env;
    execvp(ex->argv[0], ex->argv);
    die("exec");
}

__attribute__((noreturn)) static void
middle(struct sbx_rt_sandbox *sb, const struct sbx_rt_exec *ex, const struct exec_plan *p)
{
    /* A copy of the caller's memory (a server's keys, its environment) about to enter the
     * sandbox's namespaces, and the command forked from it until its exec: non-dumpable, so
     * the sandbox's processes cannot read it through /proc/<pid>/mem or environ meanwhile
     * (exec makes the command dumpable again, with nothing of ours left in it). */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    for (int i = 0; i < 3; i++) {
        if (ex->stdio[i] >= 0 && dup2(ex->stdio[i], i) < 0)
            die("stdio");
    }
    /* This process waits as long as the command runs: it must not pin the caller's fds. */
    sbx_close_fds_except(sb->pidfd);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    for (size_t i = 0; i < p->n_procs; i++) {
        int fd = open(p->procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
            die("join cgroup");
        (void)close(fd);
    }
    /* setns via the pidfd enters all namespaces atomically, and only of that process. */
    if (setns(sb->pidfd, p->ns_flags) < 0)
        die("setns");
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    pid_t c = fork();
    if (c < 0)
        die("fork");
    if (c == 0)
        inner(sb, ex, p);
    int st;
    while (waitpid(c, &st, 0) < 0) {
        if (errno != EINTR)
            _exit(127);
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

int
sbx_rt_exec_into(pid_t *pid, struct sbx_rt_sandbox *sb, const struct sbx_rt_exec *ex,
                 sbx_error **err)
{
    if (!ex->argv || !ex->argv[0])
        return sbx_error_set(err, SBX_EINVAL, 0, "no command to run");
    if (sb->reaped || sb->pidfd < 0 || sbx_proc_start_time(sb->pid) != sb->start_time)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` is not running", sb->id);
    struct exec_plan *p = sbx_xcalloc(1, sizeof *p);
    plan(p, sb);
    p->env[0] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    pid_t c = fork();
    if (c == 0)
        middle(sb, ex, p);
    int e = errno;
    free(p);
    if (c < 0)
        return sbx_error_set(err, SBX_EGENERIC, e, "fork");
    *pid = c;
    return 0;
}
