/*
 * sudo.c - `sudo` for a sandbox's desktop user, without setuid: the command is started by
 * execd (the sandbox's PID 1, root of the sandbox) once the caller's password checks out, the
 * way systemd's run0 asks PID 1 instead of relying on a setuid binary.
 *
 * Why: every sandbox runs with no_new_privs (docs/security.md), so the kernel ignores sudo's
 * setuid bit and a real sudo cannot work; OSWorld's tasks still run `echo PW | sudo -S ...` as
 * their user. The client (py/sbx_sudo.py, /usr/local/bin/sudo in the OSWorld image) speaks to
 * SUDO_SOCK: one SOCK_SEQPACKET message with the request (JSON) and the caller's stdin, stdout
 * and stderr (SCM_RIGHTS); execd answers {"pid"} or {"code", "message"}, then {"status"} or
 * {"signal"} when the command ends. A message {"kill": N} from the client signals the command.
 *
 * Boundary: this raises a sandbox process to the sandbox's root, which is what sudo is for,
 * and nothing more: the command runs in the same namespaces, cgroup, capability bounding set
 * and seccomp filter as every other process of the sandbox (execd's own). The socket is only
 * inside the sandbox. The caller is identified by SO_PEERCRED (the kernel's, not a claim), must
 * be root or in the `sudo` group of the sandbox's /etc/group, and must give its password as
 * /etc/shadow has it (crypt_r; a wrong one costs a second, like sudo's delay). Started only for
 * a desktop user (SBX_DESKTOP_USER), where an image asked for a sudo-able user.
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <shadow.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <sodium.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"
#include "execd/spawn.h"

#define SUDO_SOCK    "/run/sbx-sudo.sock"
#define SUDO_MSG_MAX (256u << 10)
#define SUDO_GROUP   "sudo"
#define SECURE_PATH  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define FAIL_DELAY_S 1

struct sudo_conn {
    struct execd *ex;
    struct sudo_conn *next;
    struct event *ev;
    int fd;
    pid_t pid;    /* the command (its own process group), 0 once reaped */
    json_t *late; /* an answer sent when the failure delay is over */
};

static struct evconnlistener *listener;
static struct sudo_conn *conns;

static void
send_json(int fd, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s)
        (void)send(fd, s, strlen(s), MSG_NOSIGNAL | MSG_DONTWAIT);
    free(s);
}

static void
send_error(int fd, const char *code, const char *msg)
{
    send_json(fd, json_pack("{s:s, s:s}", "code", code, "message", msg));
}

static void
conn_free(struct sudo_conn *c)
{
    for (struct sudo_conn **p = &conns; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    if (c->ev)
        event_free(c->ev);
    json_decref(c->late);
    (void)close(c->fd);
    free(c);
}

/* Is `name` (primary gid `gid`) in the sudo group? */
static bool
in_sudo_group(const char *name, gid_t gid)
{
    sbx_autofclose FILE *f = fopen("/etc/group", "re");
    struct group gr;
    struct group *res = NULL;
    char buf[8192];
    while (f && fgetgrent_r(f, &gr, buf, sizeof buf, &res) == 0) {
        if (strcmp(gr.gr_name, SUDO_GROUP) != 0)
            continue;
        if (gr.gr_gid == gid)
            return true;
        for (char **m = gr.gr_mem; m && *m; m++) {
            if (strcmp(*m, name) == 0)
                return true;
        }
    }
    return false;
}

/* The password against /etc/shadow's hash for `name` (crypt_r; compared in constant time). */
static bool
password_ok(const char *name, const char *password)
{
    sbx_autofclose FILE *f = fopen("/etc/shadow", "re");
    struct spwd sp;
    struct spwd *res = NULL;
    char buf[8192];
    while (f && fgetspent_r(f, &sp, buf, sizeof buf, &res) == 0) {
        if (strcmp(sp.sp_namp, name) != 0)
            continue;
        const char *hash = sp.sp_pwdp;
        if (!hash || !*hash || hash[0] == '!' || hash[0] == '*')
            return false; /* locked or no password: sudo's answer is no as well */
        struct crypt_data cd;
        memset(&cd, 0, sizeof cd);
        const char *got = crypt_r(password, hash, &cd);
        size_t n = strlen(hash);
        bool ok = got && got[0] != '*' && strlen(got) == n && sodium_memcmp(got, hash, n) == 0;
        sodium_memzero(&cd, sizeof cd);
        return ok;
    }
    return false;
}

/* argv[0] on sudo's secure_path (sudo never uses the caller's PATH). */
static char *
resolve(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0 ? sbx_xstrdup(prog) : NULL;
    const char *p = SECURE_PATH;
    while (*p) {
        size_t n = strcspn(p, ":");
        char *cand = sbx_xasprintf("%.*s/%s", (int)n, p, prog);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            return cand;
        free(cand);
        p += n + (p[n] == ':');
    }
    return NULL;
}

/* What sudo's env_reset keeps of the caller's environment, and what it sets. */
static char **
command_env(json_t *env, const struct passwd *target, const char *caller, uid_t cuid, gid_t cgid)
{
    static const char *const keep[] = {"DISPLAY",
                                       "TERM",
                                       "COLORTERM",
                                       "LANG",
                                       "LANGUAGE",
                                       "XAUTHORITY",
                                       "DBUS_SESSION_BUS_ADDRESS",
                                       "XDG_RUNTIME_DIR",
                                       "COLORS",
                                       "LS_COLORS"};
    size_t cap = SBX_ARRAY_SIZE(keep) + 16 + json_object_size(env);
    char **e = sbx_xcalloc(cap + 1, sizeof *e);
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach (env, key, v) {
        bool kept = strncmp(key, "LC_", 3) == 0;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(keep) && !kept; i++)
            kept = strcmp(key, keep[i]) == 0;
        if (kept && json_is_string(v) && k < cap - 9)
            e[k++] = sbx_xasprintf("%s=%s", key, json_string_value(v));
    }
    e[k++] = sbx_xstrdup("PATH=" SECURE_PATH);
    e[k++] = sbx_xasprintf("HOME=%s", target->pw_dir);
    e[k++] = sbx_xasprintf("SHELL=%s",
                           target->pw_shell && *target->pw_shell ? target->pw_shell : "/bin/sh");
    e[k++] = sbx_xasprintf("USER=%s", target->pw_name);
    e[k++] = sbx_xasprintf("LOGNAME=%s", target->pw_name);
    e[k++] = sbx_xasprintf("SUDO_USER=%s", caller);
    e[k++] = sbx_xasprintf("SUDO_UID=%u", (unsigned)cuid);
    e[k++] = sbx_xasprintf("SUDO_GID=%u", (unsigned)cgid);
    return e;
}

struct sudo_req {
    json_t *j;
    int fds[3];
    int nfds;
};

/* One message: the JSON and up to three fds. */
static int
recv_req(int fd, struct sudo_req *r, sbx_error **err)
{
    sbx_autofree char *buf = sbx_xmalloc(SUDO_MSG_MAX);
    union {
        char b[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = SUDO_MSG_MAX - 1};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    r->nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int got = -1;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (r->nfds < 3)
                r->fds[r->nfds++] = got;
            else
                (void)close(got);
        }
    }
    if (n <= 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        return sbx_error_set(err, SBX_EINVAL, 0, "a request is one message under %u KiB",
                             SUDO_MSG_MAX >> 10);
    json_error_t je;
    r->j = json_loadb(buf, (size_t)n, 0, &je);
    if (!r->j || !json_is_object(r->j))
        return sbx_error_set(err, SBX_EINVAL, 0, "malformed request: %s", je.text);
    return 0;
}

static void
req_clear(struct sudo_req *r)
{
    json_decref(r->j);
    for (int i = 0; i < r->nfds; i++)
        (void)close(r->fds[i]);
    r->nfds = 0;
    r->j = NULL;
}

/* Check the caller and start the command; its pid, or -1 with a code and a message for the client.
 */
static pid_t
start_command(struct sudo_req *r, const struct ucred *cr, const char **code, char *msg, size_t msgn)
{
    char cbuf[4096];
    char tbuf[4096];
    struct passwd caller;
    struct passwd target;
    char uid[16];
    snprintf(uid, sizeof uid, "#%u", (unsigned)cr->uid);
    *code = "SUDO_DENIED";
    if (!execd_find_user(uid, &caller, cbuf, sizeof cbuf)) {
        snprintf(msg, msgn, "you do not exist in the passwd database");
        return -1;
    }
    const char *pw = json_string_value(json_object_get(r->j, "password"));
    if (cr->uid != 0 && !in_sudo_group(caller.pw_name, caller.pw_gid)) {
        snprintf(msg, msgn, "%s is not in the sudoers file.", caller.pw_name);
        return -1;
    }
    if (cr->uid != 0 && (!pw || !password_ok(caller.pw_name, pw))) {
        *code = "SUDO_PASSWORD"; /* answered after FAIL_DELAY_S: guessing costs time */
        snprintf(msg, msgn, "Sorry, try again.");
        return -1;
    }
    json_t *argv_j = json_object_get(r->j, "argv");
    const char *tname = json_string_value(json_object_get(r->j, "user"));
    if (!execd_find_user(tname ? tname : "root", &target, tbuf, sizeof tbuf)) {
        *code = "SUDO_USAGE";
        snprintf(msg, msgn, "unknown user %.64s", tname ? tname : "root");
        return -1;
    }
    if (json_object_get(r->j, "validate")) /* sudo -v: the password was the question */
        return 0;
    size_t argc = json_array_size(argv_j);
    if (!argc || argc > 4096 || r->nfds != 3) {
        *code = "SUDO_USAGE";
        snprintf(msg, msgn, "want argv (1-4096 strings) and three fds");
        return -1;
    }
    sbx_autofree char **argv = sbx_xcalloc(argc + 1, sizeof *argv);
    for (size_t i = 0; i < argc; i++) {
        argv[i] = (char *)json_string_value(json_array_get(argv_j, i));
        if (!argv[i]) {
            *code = "SUDO_USAGE";
            snprintf(msg, msgn, "argv must be strings");
            return -1;
        }
    }
    sbx_autofree char *path = resolve(argv[0]);
    if (!path) {
        *code = "SUDO_NOTFOUND";
        snprintf(msg, msgn, "%.200s: command not found", argv[0]);
        return -1;
    }
    char **envp =
        command_env(json_object_get(r->j, "env"), &target, caller.pw_name, cr->uid, caller.pw_gid);
    const char *cwd = json_string_value(json_object_get(r->j, "cwd"));
    struct execd_spawn sp = {.path = path,
                             .argv = argv,
                             .envp = envp,
                             .cwd = cwd && access(cwd, X_OK) == 0 ? cwd : NULL,
                             .has_fd_in = true,
                             .fd_in = r->fds[0],
                             .fd_out = r->fds[1],
                             .fd_err = r->fds[2],
                             .die_with_parent = true};
    if (target.pw_uid != 0)
        execd_spawn_set_user(&sp, target.pw_uid, true, target.pw_gid);
    sbx_autoerror sbx_error *err = NULL;
    pid_t pid = execd_spawn(&sp, &err);
    execd_strv_free(envp);
    if (pid < 0) {
        *code = "SUDO_EXEC";
        snprintf(msg, msgn, "%.200s: %s", argv[0], sbx_error_msg(err));
        return -1;
    }
    sbx_info("sudo: %s ran %s as %s (pid %d)", caller.pw_name, path, target.pw_name, (int)pid);
    return pid;
}

/* Readable after the request: {"kill": N} from the client, or its end (the command is killed
 * then: a sudo that went away leaves nothing running, as when its terminal closes). */
static void
on_client(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct sudo_conn *c = arg;
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (c->pid > 0)
            (void)kill(-c->pid, SIGHUP);
        conn_free(c);
        return;
    }
    buf[n] = '\0';
    json_t *j = json_loads(buf, 0, NULL);
    json_int_t sig = json_integer_value(json_object_get(j, "kill"));
    json_decref(j);
    if (c->pid > 0 && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT ||
                       sig == SIGKILL || sig == SIGTSTP || sig == SIGCONT))
        (void)kill(-c->pid, (int)sig);
}

static void
on_late(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sudo_conn *c = arg;
    send_json(c->fd, c->late);
    c->late = NULL;
    conn_free(c);
}

/* A wrong password is answered a second later (sudo's delay), from a timer: execd serves
 * everything else meanwhile. */
static void
answer_late(struct sudo_conn *c, json_t *j)
{
    event_free(c->ev);
    c->late = j;
    c->ev = evtimer_new(c->ex->base, on_late, c);
    struct timeval tv = {.tv_sec = FAIL_DELAY_S};
    if (!c->ev || evtimer_add(c->ev, &tv) < 0)
        on_late(-1, 0, c);
}

static void
on_request(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct sudo_conn *c = arg;
    struct sudo_req r = {0};
    sbx_autoerror sbx_error *err = NULL;
    struct ucred cr;
    socklen_t crl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0) {
        conn_free(c);
        return;
    }
    if (recv_req(fd, &r, &err) < 0) {
        send_error(fd, "SUDO_USAGE", sbx_error_msg(err));
        req_clear(&r);
        conn_free(c);
        return;
    }
    const char *code = NULL;
    char msg[320] = "";
    pid_t pid = start_command(&r, &cr, &code, msg, sizeof msg);
    bool validate = json_object_get(r.j, "validate") != NULL;
    req_clear(&r);
    if (pid < 0 && strcmp(code, "SUDO_PASSWORD") == 0) {
        answer_late(c, json_pack("{s:s, s:s}", "code", code, "message", msg));
        return;
    }
    if (pid < 0 || (pid == 0 && validate)) {
        if (pid < 0)
            send_error(fd, code, msg);
        else
            send_json(fd, json_pack("{s:i}", "status", 0));
        conn_free(c);
        return;
    }
    c->pid = pid;
    send_json(fd, json_pack("{s:i}", "pid", (int)pid));
    event_free(c->ev);
    c->ev = event_new(c->ex->base, fd, EV_READ | EV_PERSIST, on_client, c);
    if (!c->ev || event_add(c->ev, NULL) < 0) {
        (void)kill(-pid, SIGKILL);
        conn_free(c);
    }
}

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    struct execd *ex = arg;
    struct sudo_conn *c = sbx_xcalloc(1, sizeof *c);
    c->ex = ex;
    c->fd = fd;
    c->ev = event_new(ex->base, fd, EV_READ, on_request, c);
    c->next = conns;
    conns = c;
    if (!c->ev || event_add(c->ev, NULL) < 0)
        conn_free(c);
}

bool
execd_sudo_reaped(struct execd *ex, pid_t pid, int status)
{
    (void)ex;
    for (struct sudo_conn *c = conns; c; c = c->next) {
        if (c->pid != pid)
            continue;
        c->pid = 0;
        if (WIFSIGNALED(status))
            send_json(c->fd, json_pack("{s:i}", "signal", WTERMSIG(status)));
        else
            send_json(c->fd, json_pack("{s:i}", "status", WEXITSTATUS(status)));
        conn_free(c);
        return true;
    }
    return false;
}

int
execd_sudo_start(struct execd *ex, sbx_error **err)
{
    if (listener)
        return 0;
    return execd_unix_listen(ex, SUDO_SOCK, SOCK_SEQPACKET, on_accept, &listener, err);
}

void
execd_sudo_stop(void)
{
    while (conns) {
        if (conns->pid > 0)
            (void)kill(-conns->pid, SIGKILL);
        conn_free(conns);
    }
    if (listener) {
        evconnlistener_free(listener);
        (void)unlink(SUDO_SOCK);
    }
    listener = NULL;
}
