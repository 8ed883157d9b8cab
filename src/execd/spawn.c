/*
 * spawn.c - child environments, user lookup without NSS, fork+exec into a new process group.
 *
 * execd is static, so getpwnam() (NSS, dlopen) is off limits: /etc/passwd and /etc/group are
 * parsed with fgetpwent_r/fgetgrent_r, which read the files directly.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "execd/proc.h"
#include "execd/spawn.h"

extern char **environ;

struct envv {
    char **v;
    size_t n;
};

static void
env_set(struct envv *e, const char *key, size_t klen, const char *val)
{
    char *kv = sbx_xasprintf("%.*s=%s", (int)klen, key, val);
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], key, klen) == 0 && e->v[i][klen] == '=') {
            free(e->v[i]);
            e->v[i] = kv;
            return;
        }
    }
    e->v = sbx_xrealloc(e->v, (e->n + 2) * sizeof(char *));
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
}

static const char *
env_get(char *const *env, const char *key, size_t klen)
{
    for (size_t i = 0; env && env[i]; i++) {
        if (strncmp(env[i], key, klen) == 0 && env[i][klen] == '=')
            return env[i] + klen + 1;
    }
    return NULL;
}

static size_t
var_name_len(const char *s)
{
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_')
        n++;
    return n;
}

char *
execd_expand_vars(const char *s, char *const *env)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    while (*s) {
        const char *name = NULL;
        size_t nlen = 0;
        size_t skip = 0;
        if (s[0] == '$' && s[1] == '{' && strchr(s + 2, '}')) {
            name = s + 2;
            nlen = (size_t)(strchr(s + 2, '}') - name);
            skip = nlen + 3;
        } else if (s[0] == '$' && (nlen = var_name_len(s + 1)) > 0) {
            name = s + 1;
            skip = nlen + 1;
        }
        if (!name) {
            (void)sbx_buf_append(&b, s++, 1, NULL);
            continue;
        }
        const char *v = env_get(env, name, nlen);
        if (v)
            (void)sbx_buf_append_str(&b, v, NULL);
        s += skip;
    }
    return sbx_buf_steal(&b);
}

/* EXECD_ENVS: KEY=VALUE lines, '#' comments, optional quotes, $VAR expanded. */
static void
env_load_file(struct envv *e, const char *path)
{
    sbx_autofree char *data = NULL;
    if (!path || sbx_read_file(path, 1 << 20, &data, NULL, NULL) < 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        while (isspace((unsigned char)*line))
            line++;
        if (sbx_str_starts(line, "export "))
            line += 7;
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq || eq == line)
            continue;
        char *val = eq + 1;
        size_t vl = strcspn(val, "\r");
        val[vl] = '\0';
        if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
            val[vl - 1] = '\0';
            val++;
        }
        sbx_autofree char *exp = execd_expand_vars(val, e->v);
        env_set(e, line, (size_t)(eq - line), exp);
    }
}

char **
execd_child_env(struct execd *ex, json_t *envs)
{
    struct envv e = {.v = sbx_xcalloc(1, sizeof(char *))};
    for (char **p = environ; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        if (eq)
            env_set(&e, *p, (size_t)(eq - *p), eq + 1);
    }
    /* the desktop's DISPLAY, buses and XDG dirs: a command can start a GUI program */
    for (const char *const *d = execd_desktop_env(ex); d && *d; d++) {
        const char *eq = strchr(*d, '=');
        if (eq)
            env_set(&e, *d, (size_t)(eq - *d), eq + 1);
    }
    env_load_file(&e, ex->cfg.envs_file);
    const char *k;
    json_t *v;
    json_object_foreach (envs, k, v) {
        if (json_is_string(v))
            env_set(&e, k, strlen(k), json_string_value(v));
    }
    return e.v;
}

/* Primary gid and supplementary groups of uid, from /etc/passwd and /etc/group. */
static void
lookup_groups(struct execd_spawn *sp)
{
    sbx_autofclose FILE *pf = fopen("/etc/passwd", "re");
    struct passwd pw;
    struct passwd *res = NULL;
    char buf[4096];
    char name[256] = "";
    while (pf && fgetpwent_r(pf, &pw, buf, sizeof(buf), &res) == 0) {
        if (pw.pw_uid == sp->uid) {
            if (!sp->has_gid)
                sp->gid = pw.pw_gid;
            sp->has_gid = true;
            (void)snprintf(name, sizeof(name), "%s", pw.pw_name);
            break;
        }
    }
    if (!sp->has_gid) {
        sp->gid = sp->uid;
        sp->has_gid = true;
    }
    sp->groups[0] = sp->gid;
    sp->ngroups = 1;
    sbx_autofclose FILE *gf = name[0] ? fopen("/etc/group", "re") : NULL;
    struct group gr;
    struct group *gres = NULL;
    while (gf && sp->ngroups < EXECD_MAX_GROUPS &&
           fgetgrent_r(gf, &gr, buf, sizeof(buf), &gres) == 0) {
        for (char **m = gr.gr_mem; m && *m; m++) {
            if (strcmp(*m, name) == 0 && gr.gr_gid != sp->gid) {
                sp->groups[sp->ngroups++] = gr.gr_gid;
                break;
            }
        }
    }
}

bool
execd_find_user(const char *want, struct passwd *pw, char *buf, size_t n)
{
    sbx_autofclose FILE *f = fopen("/etc/passwd", "re");
    struct passwd *res = NULL;
    while (f && fgetpwent_r(f, pw, buf, n, &res) == 0) {
        char uid[16];
        (void)snprintf(uid, sizeof uid, "#%u", (unsigned)pw->pw_uid);
        if (strcmp(pw->pw_name, want) == 0 || strcmp(uid, want) == 0)
            return true;
    }
    return false;
}

void
execd_spawn_set_user(struct execd_spawn *sp, uint32_t uid, bool has_gid, uint32_t gid)
{
    sp->has_uid = true;
    sp->uid = uid;
    sp->has_gid = has_gid;
    sp->gid = gid;
    lookup_groups(sp);
}

/* Child side: only async-signal-safe calls from here to exec. */
static void __attribute__((noreturn)) child(const struct execd_spawn *sp, int errfd, pid_t parent)
{
    if (sp->die_with_parent) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* execd died before the prctl */
            _exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)signal(SIGPIPE, SIG_DFL);
    (void)setpgid(0, 0);
    execd_oom_self(true);
    int in = sp->has_fd_in ? sp->fd_in : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || dup2(in, 0) < 0 || dup2(sp->fd_out, 1) < 0 || dup2(sp->fd_err, 2) < 0)
        goto fail;
    /* every other fd of ours (sockets, pipes of other commands) must not leak into the child */
    (void)syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
    if (sp->cwd && chdir(sp->cwd) < 0)
        goto fail;
    if (sp->has_uid) {
        if (setgroups(sp->ngroups, sp->groups) < 0 || setgid(sp->gid) < 0 || setuid(sp->uid) < 0)
            goto fail;
    }
    execve(sp->path ? sp->path : sp->argv[0], sp->argv, sp->envp);
fail:;
    int e = errno;
    (void)!write(errfd, &e, sizeof(e));
    _exit(127);
}

/* glibc's posix_spawn sets its internal signals (SIGCANCEL, SIGSETXID: 32 and 33) to SIG_IGN
 * in the child unless they are in the default set, and an exec keeps a signal ignored: every
 * command would start with them ignored, unlike under a shell (which forks). sigaddset refuses
 * them, so their bits go in directly (glibc's sigset_t: signal n is bit n-1). */
static void
add_libc_signals(sigset_t *set)
{
#ifdef __GLIBC__
    const size_t bits = 8 * sizeof set->__val[0];
    for (int sig = 32; sig < SIGRTMIN; sig++)
        set->__val[(size_t)(sig - 1) / bits] |= 1UL << ((size_t)(sig - 1) % bits);
#else
    (void)set;
#endif
}

/* The common case (no user change) goes through posix_spawn: glibc uses a vfork-style clone,
 * cheaper than fork, and reports chdir/exec failures as its return value. */
static int
spawn_fast(const struct execd_spawn *sp, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none;
    sigset_t deflt;
    sigemptyset(&none);
    sigemptyset(&deflt);
    sigaddset(&deflt, SIGPIPE); /* ignored in execd; handled ones reset by exec anyway */
    sigaddset(&deflt, SIGCHLD);
    sigaddset(&deflt, SIGTERM);
    sigaddset(&deflt, SIGINT);
    add_libc_signals(&deflt);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &deflt);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, sp->fd_out, 1);
    posix_spawn_file_actions_adddup2(&fa, sp->fd_err, 2);
    /* every other fd of ours (sockets, pipes of other commands) must not leak into the child */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    if (sp->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, sp->cwd);
    int r = posix_spawn(pid, sp->path ? sp->path : sp->argv[0], &fa, &attr, sp->argv, sp->envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return r;
}

/* The OOM killer picks the process with the highest badness (its memory, plus
 * oom_score_adj/1000 of the limit). execd is the sandbox's PID 1: killed, the sandbox is lost
 * (its API, every command's output); a command killed is one failed command. So every child
 * starts with +500, a head start the OOM killer respects: the sandbox's processes die first,
 * execd survives and reports their deaths. It also makes them a host-wide OOM's first choice
 * over the host's own services. Any process may raise its own value and lower it again down to
 * its floor (0 unless a privileged process set one), so no capability is needed. The value is
 * in place when the child starts (it inherits ours), not written after it runs: a forked child
 * writes its own; around posix_spawn we raise ours and put it back (a few microseconds in
 * which execd would be the OOM killer's choice). Best effort. */
void
execd_oom_self(bool child)
{
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)!write(fd, child ? EXECD_CHILD_OOM_ADJ : "0", child ? sizeof EXECD_CHILD_OOM_ADJ - 1 : 1);
    (void)close(fd);
}

pid_t
execd_spawn(const struct execd_spawn *sp, sbx_error **err)
{
    if (!sp->has_uid && !sp->die_with_parent && !sp->has_fd_in) {
        pid_t pid = -1;
        execd_oom_self(true);
        int e = spawn_fast(sp, &pid);
        execd_oom_self(false);
        if (e == 0)
            return pid;
        const char *what = sp->cwd && e == ENOENT ? "working directory" : "command";
        return sbx_error_set(err, e == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC, e, "start %s", what);
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "pipe");
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        return sbx_error_set(err, SBX_EGENERIC, e, "fork");
    }
    if (pid == 0)
        child(sp, ep[1], parent);
    close(ep[1]);
    (void)setpgid(pid, pid); /* also from the parent: no window where kill(-pid) misses */
    int child_errno = 0;
    ssize_t n;
    while ((n = read(ep[0], &child_errno, sizeof(child_errno))) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (n == (ssize_t)sizeof(child_errno)) {
        /* the failed child is reaped by the SIGCHLD handler like any other */
        const char *what = sp->cwd && child_errno == ENOENT ? "working directory" : "command";
        return sbx_error_set(err, child_errno == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC, child_errno,
                             "start %s", what);
    }
    return pid;
}
