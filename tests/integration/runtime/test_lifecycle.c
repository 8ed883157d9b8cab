/*
 * test_lifecycle.c - the runtime library on real sandboxes: pause/resume, exec_into, connect,
 * adopt, as_init, the bridge hook's plumbing, idempotent destroy, gc, kept writable layers.
 *
 *   test_runtime_lifecycle PROBE      (PROBE: the static probe binary)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/cgroup.h"
#include "runtime/internal.h"
#include "runtime/runtime.h"

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
            failures++;                                          \
            return;                                              \
        }                                                        \
    } while (0)
static int failures;
extern char **environ;

static char tmp[256];
static char probe_dir[300];
static struct sbx_rt *rt;

static void
msleep(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static long
read_counter(const char *path)
{
    char buf[64] = {0};
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0)
        return -1;
    return strtol(buf, NULL, 10);
}

static void
base_spec(struct sbx_rt_spec *s, char **argv, struct sbx_rt_volume *vol)
{
    memset(s, 0, sizeof *s);
    s->argv = argv;
    s->stdio[0] = -1;
    s->stdio[1] = -1;
    s->stdio[2] = 2;
    *vol = (struct sbx_rt_volume){.src = probe_dir, .dst = "/probe", .ro = false};
    s->volumes = vol;
    s->n_volumes = 1;
    s->hostname = "lifecycle-host";
}

static void
test_pause_resume(void)
{
    char *argv[] = {"/probe/probe", "counter", "/probe/count", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.pausable = true;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    CHECK(sbx_rt_start(sb, &err) == 0, "start: %s", sbx_error_msg(err));
    char path[400];
    snprintf(path, sizeof path, "%s/count", probe_dir);
    msleep(200);
    long n1 = read_counter(path);
    CHECK(sbx_rt_pause(sb, &err) == 0, "pause: %s", sbx_error_msg(err));
    long n2 = read_counter(path);
    msleep(300);
    long n3 = read_counter(path);
    CHECK(sbx_rt_resume(sb, &err) == 0, "resume: %s", sbx_error_msg(err));
    msleep(200);
    long n4 = read_counter(path);
    printf("counter: running %ld, paused %ld -> %ld, resumed %ld\n", n1, n2, n3, n4);
    CHECK(n1 > 0, "counter never advanced");
    CHECK(n3 == n2, "counter advanced while paused (%ld -> %ld)", n2, n3);
    CHECK(n4 > n3, "counter did not continue after resume");
    /* destroy of a paused-then-resumed sandbox, twice (idempotent) */
    CHECK(sbx_rt_pause(sb, &err) == 0, "pause again: %s", sbx_error_msg(err));
    CHECK(sbx_rt_destroy(sb, &err) == 0, "destroy frozen: %s", sbx_error_msg(err));
    CHECK(sbx_rt_destroy(sb, &err) == 0, "destroy again: %s", sbx_error_msg(err));
    CHECK(access(sbx_rt_sandbox_dir(sb), F_OK) < 0, "record dir left");
    sbx_rt_sandbox_free(sb);
}

static void
read_all(int fd, char *buf, size_t n)
{
    size_t off = 0;
    ssize_t r;
    while (off + 1 < n && (r = read(fd, buf + off, n - 1 - off)) > 0)
        off += (size_t)r;
    buf[off] = '\0';
}

static void
check_exec_into(struct sbx_rt_sandbox *sb)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
    char *argv[] = {"/bin/sh", "-c",
                    "hostname; grep CapEff /proc/self/status; grep -c . /proc/1/cmdline; "
                    "grep NoNewPrivs /proc/self/status",
                    NULL};
    struct sbx_rt_exec ex = {.argv = argv, .stdio = {-1, p[1], 2}};
    pid_t pid = -1;
    sbx_autoerror sbx_error *err = NULL;
    int r = sbx_rt_exec_into(&pid, sb, &ex, &err);
    (void)close(p[1]);
    char out[1024];
    read_all(p[0], out, sizeof out);
    (void)close(p[0]);
    CHECK(r == 0, "exec_into: %s", sbx_error_msg(err));
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "exec_into status %d", st);
    printf("exec_into output:\n%s", out);
    CHECK(strstr(out, "lifecycle-host\n"), "not in the sandbox's uts namespace");
    CHECK(strstr(out, "CapEff:\t00000000a00405fb"), "capabilities not dropped");
    CHECK(strstr(out, "NoNewPrivs:\t1"), "no_new_privs not set");
}

static void
check_connect(struct sbx_rt_sandbox *sb, int out_fd)
{
    char buf[64];
    read_all(out_fd, buf, 11); /* "listening\n" */
    CHECK(strstr(buf, "listening"), "probe did not listen: %s", buf);
    int fd = -1;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_connect(&fd, sb, 8123, &err) == 0, "connect: %s", sbx_error_msg(err));
    read_all(fd, buf, sizeof buf);
    (void)close(fd);
    CHECK(strcmp(buf, "hello\n") == 0, "connect read `%s`", buf);
}

static void
test_exec_connect_adopt(void)
{
    char *argv[] = {"/probe/probe", "listen", "8123", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
    spec.stdio[1] = p[1];
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    int r = sbx_rt_create(&sb, rt, &spec, &err);
    (void)close(p[1]);
    sbx_autoclose int out_fd = p[0];
    CHECK(r == 0, "create: %s", sbx_error_msg(err));
    CHECK(sbx_rt_start(sb, &err) == 0, "start: %s", sbx_error_msg(err));
    CHECK(sbx_rt_pause(sb, &err) == -SBX_EUNAVAIL, "pause of a sandbox not created pausable");
    check_exec_into(sb);
    /* adopt: a second handle from the record, as a restarted server would. */
    struct sbx_rt_sandbox *again = NULL;
    CHECK(sbx_rt_adopt(&again, rt, sbx_rt_sandbox_id(sb), &err) == 0, "adopt: %s",
          sbx_error_msg(err));
    CHECK(sbx_rt_sandbox_pid(again) == sbx_rt_sandbox_pid(sb), "adopted a different pid");
    check_connect(sb, out_fd);
    struct sbx_rt_exit ex;
    CHECK(sbx_rt_wait(&ex, sb, NULL, &err) == 0, "wait: %s", sbx_error_msg(err));
    CHECK(ex.code == 0, "listen probe exit %d", ex.code);
    /* Its init killed while a spare socket made at create is left (the first connect took
     * one; the spare keeps the namespace): a connect says it is not running, never uses the
     * spare. */
    CHECK(kill(sbx_rt_sandbox_pid(sb), SIGKILL) == 0, "kill the init");
    int cr = 0;
    for (int i = 0; i < 500; i++) {
        int fd = -1;
        sbx_autoerror sbx_error *cerr = NULL;
        cr = sbx_rt_connect(&fd, sb, 8123, &cerr);
        if (fd >= 0)
            (void)close(fd);
        if (cr == -SBX_ECONFLICT)
            break;
        (void)usleep(10 * 1000);
    }
    CHECK(cr == -SBX_ECONFLICT, "connect to a sandbox whose init was killed: %d", cr);
    CHECK(sbx_rt_destroy(again, &err) == 0, "destroy adopted: %s", sbx_error_msg(err));
    CHECK(sbx_rt_destroy(sb, &err) == 0, "destroy: %s", sbx_error_msg(err));
    sbx_rt_sandbox_free(again);
    sbx_rt_sandbox_free(sb);
    CHECK(sbx_rt_adopt(&again, rt, "no-such-sandbox", &err) < 0, "adopted a missing sandbox");
}

static void
test_as_init(void)
{
    /* The execd binary is bound read-only at its fixed path and runs as PID 1. */
    char *argv[] = {"/bin/sh", "-c",
                    "test $$ -eq 1 && test -x " SBX_RT_EXECD_PATH " && ! touch " SBX_RT_EXECD_PATH
                    " 2>/dev/null && " SBX_RT_EXECD_PATH " spin 1 >/dev/null && exit 7",
                    NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    char execd[400];
    snprintf(execd, sizeof execd, "%s/probe", probe_dir);
    spec.execd_path = execd;
    spec.as_init = true;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_rt_exit ex;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    CHECK(sbx_rt_start(sb, &err) == 0, "start: %s", sbx_error_msg(err));
    CHECK(sbx_rt_wait(&ex, sb, NULL, &err) == 0, "wait: %s", sbx_error_msg(err));
    CHECK(ex.code == 7, "as_init: command was not PID 1 (exit %d)", ex.code);
    CHECK(sbx_rt_destroy(sb, &err) == 0, "destroy: %s", sbx_error_msg(err));
    sbx_rt_sandbox_free(sb);
}

/* sbx run's teardown: the status comes back while the init still has a background process to
 * kill; destroy_detached returns at once and a forked process finishes. gc --all waits for it
 * (the record dir is locked until it is gone), so everything is gone when gc returns. */
static void
test_detached_destroy(void)
{
    char *argv[] = {"/bin/sh", "-c", "sleep 100 & exit 3", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.memory_bytes = 64 << 20;
    spec.start = true;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_rt_exit ex;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    CHECK(sbx_rt_wait(&ex, sb, NULL, &err) == 0 && ex.code == 3, "wait: %d %s", ex.code,
          sbx_error_msg(err));
    sbx_autofree char *dir = sbx_xstrdup(sbx_rt_sandbox_dir(sb));
    sbx_autofree char *cg = sbx_xstrdup(sbx_rt_sandbox_cgroup(sb));
    pid_t init = sbx_rt_sandbox_pid(sb);
    CHECK(sbx_rt_destroy_detached(sb, &err) == 0, "detached: %s", sbx_error_msg(err));
    sbx_rt_sandbox_free(sb);
    struct sbx_rt_gc_stats gs;
    CHECK(sbx_rt_gc(&gs, rt, true, &err) == 0, "gc: %s", sbx_error_msg(err));
    CHECK(gs.removed == 0, "gc --all removed %u: it did not wait for the teardown", gs.removed);
    CHECK(access(dir, F_OK) < 0 && access(cg, F_OK) < 0, "record or cgroup left");
    /* Our children now: the init (gone, its background sleep with it: the pid namespace ended)
     * and the teardown process (exit 0). */
    int st = 0;
    CHECK(waitpid(init, &st, 0) == init, "init not reaped");
    pid_t p = waitpid(-1, &st, 0);
    CHECK(p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "teardown process failed");
}

/* The server's delete: stopped (SIGKILL) when the call returns, the rest on a thread that
 * reports through the callback; sbx_rt_close waits for such threads. */
struct async_seen {
    int calls;
    int result;
};

static void
async_done(void *arg, int result)
{
    struct async_seen *s = arg;
    s->calls++;
    s->result = result;
}

static void
test_async_destroy(void)
{
    char *argv[] = {"/bin/sleep", "1000", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.memory_bytes = 64 << 20;
    spec.pausable = true;
    spec.start = true;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    CHECK(sbx_rt_pause(sb, &err) == 0, "pause: %s", sbx_error_msg(err)); /* frozen: thawed first */
    sbx_autofree char *dir = sbx_xstrdup(sbx_rt_sandbox_dir(sb));
    sbx_autofree char *cg = sbx_xstrdup(sbx_rt_sandbox_cgroup(sb));
    struct async_seen seen = {0, 1};
    CHECK(sbx_rt_destroy_async(sb, async_done, &seen, &err) == 0, "async: %s", sbx_error_msg(err));
    int i = 0;
    while ((seen.calls == 0 || access(dir, F_OK) == 0) && i++ < 1000)
        msleep(10);
    CHECK(seen.calls == 1 && seen.result == 0, "callback: %d calls, result %d", seen.calls,
          seen.result);
    CHECK(access(dir, F_OK) < 0 && access(cg, F_OK) < 0, "record or cgroup left");
}

/* A create whose own teardown failed leaves a record without an init, owned by the live
 * server: gc must keep it (it cannot tell it from a create under way), and the owner's
 * delete removes it with sbx_rt_gc_id, cgroup and all. */
static void
test_gc_id(void)
{
    char *argv[] = {"/bin/sleep", "1000", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.memory_bytes = 64 << 20;
    spec.start = true;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    sbx_autofree char *id = sbx_xstrdup(sbx_rt_sandbox_id(sb));
    sbx_autofree char *dir = sbx_xstrdup(sbx_rt_sandbox_dir(sb));
    sbx_autofree char *cg = sbx_xstrdup(sbx_rt_sandbox_cgroup(sb));
    pid_t init = sbx_rt_sandbox_pid(sb);
    int st = 0;
    CHECK(kill(init, SIGKILL) == 0 && waitpid(init, &st, 0) == init, "kill the init");
    sbx_rt_sandbox_free(sb);
    /* the record as a failed clone leaves it: no init, made by this (live) process */
    sbx_autofree char *rec = sbx_xasprintf("%s/state.json", dir);
    json_t *j = json_load_file(rec, 0, NULL);
    CHECK(j && json_object_set_new(j, "pid", json_integer(0)) == 0 &&
              json_dump_file(j, rec, 0) == 0,
          "rewrite %s", rec);
    json_decref(j);
    struct sbx_rt_gc_stats gs;
    CHECK(sbx_rt_gc(&gs, rt, false, &err) == 0, "gc: %s", sbx_error_msg(err));
    CHECK(access(dir, F_OK) == 0 && access(cg, F_OK) == 0,
          "gc kept the record of a create that may be under way");
    CHECK(sbx_rt_gc_id(rt, "../run", &err) < 0, "a path is not an id");
    sbx_error_clear(&err);
    CHECK(sbx_rt_gc_id(rt, id, &err) == 0, "gc of the id: %s", sbx_error_msg(err));
    CHECK(access(dir, F_OK) < 0 && access(cg, F_OK) < 0, "record or cgroup left");
    CHECK(sbx_rt_gc_id(rt, id, &err) == 0, "gc of an id without a record: %s", sbx_error_msg(err));
}

/* In a child of its own mount namespace: sbx_cg_mkdir where the file system has no inode
 * left (a tmpfs of one inode, its root's) gets ENOSPC, the errno a host out of memory cgroup
 * ids gives, which cannot be reached here (65,535 cgroups). 0: a SBX_ELIMIT naming it. */
static int
cg_mkdir_enospc_child(void)
{
    char dir[] = "/tmp/sbx-cg-enospc-XXXXXX";
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        !mkdtemp(dir))
        return 2;
    int r = mount("tmpfs", dir, "tmpfs", 0, "nr_inodes=1") < 0 ? 2 : 1;
    sbx_autofree char *sub = sbx_xasprintf("%s/cg", dir);
    sbx_autoerror sbx_error *err = NULL;
    if (r == 1 && sbx_cg_mkdir(sub, &err) == -SBX_ELIMIT && sbx_error_code(err) == SBX_ELIMIT &&
        strstr(sbx_error_msg(err), "no cgroup left"))
        r = 0;
    (void)umount2(dir, MNT_DETACH);
    (void)rmdir(dir);
    return r;
}

static void
test_cg_mkdir_enospc(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        _exit(cg_mkdir_enospc_child());
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st), "the child");
    CHECK(WEXITSTATUS(st) == 0, "cgroup mkdir's ENOSPC is a limit that names itself (%d)",
          WEXITSTATUS(st));
}

static int
entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) // NOLINT(concurrency-mt-unsafe): this DIR alone
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    (void)closedir(d);
    return n;
}

/* In a child: join the template namespace as a sandbox's child does, and check what is in it:
 * "/" (LOOKUP_DOWN of the namespace's root) is the template's read-only tmpfs holding only
 * empty/, sys/ and net, and sys/ is a read-only sysfs whose network namespace (bound on net,
 * which keeps it: the maker that made it is gone) has only `lo`. */
static int
template_inside(int mnt)
{
    if (setns(mnt, CLONE_NEWNS) < 0)
        return 10;
    /* no shell in there: the entries are counted here */
    if (entries("/") != 3 || access("/empty", F_OK) < 0 || access("/net", F_OK) < 0 ||
        entries("/empty") != 0 || entries("/sys/class/net") != 1 ||
        access("/sys/class/net/lo", F_OK) < 0)
        return 11;
    if (mkdir("/x", 0755) == 0 || errno != EROFS || mkdir("/sys/x", 0755) == 0)
        return 12;
    return 0;
}

/* A chrooted caller (its root a bind mount below its namespace's root): no template, since the
 * mounts above the chroot would stay below every sandbox's root. */
static int
template_chrooted(const char *dir)
{
    struct sbx_rt t = {.mnt_template = -1};
    t.run_dir = sbx_xasprintf("%s/root/run", dir);
    sbx_autofree char *root = sbx_xasprintf("%s/root", dir);
    sbx_autofree char *proc = sbx_xasprintf("%s/root/proc", dir);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mkdir(root, 0755) < 0 || mkdir(t.run_dir, 0755) < 0 || mkdir(proc, 0755) < 0 ||
        mount(root, root, NULL, MS_BIND, NULL) < 0 ||
        mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
        chroot(root) < 0 || chdir("/") < 0)
        return 20;
    free(t.run_dir);
    t.run_dir = sbx_xstrdup("/run");
    sbx_rt_template_open(&t);
    free(t.run_dir);
    return t.mnt_template < 0 && !t.sys_template ? 0 : 21;
}

static void
test_template(const char *state)
{
    struct sbx_rt t = {.mnt_template = -1};
    t.run_dir = sbx_xasprintf("%s/run", state);
    sbx_rt_template_open(&t);
    free(t.run_dir);
    CHECK(t.mnt_template >= 0 && t.sys_template, "a template with its sysfs");
    pid_t pid = fork();
    if (pid == 0)
        _exit(template_inside(t.mnt_template));
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st), "the child");
    (void)close(t.mnt_template);
    CHECK(WEXITSTATUS(st) == 0,
          "the template holds only an empty dir, a sysfs of lo alone and its netns, all "
          "read-only (%d)",
          WEXITSTATUS(st));
    sbx_autofree char *dir = sbx_xasprintf("%s/chroot", tmp);
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    pid = fork();
    if (pid == 0)
        _exit(template_chrooted(dir));
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st), "the chrooted child");
    CHECK(WEXITSTATUS(st) == 0, "no template for a chrooted caller (%d)", WEXITSTATUS(st));
}

static void
test_deferred_destroy(void)
{
    char *argv[] = {"/bin/true", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.memory_bytes = 64 << 20;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_rt_exit ex;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    CHECK(sbx_rt_start(sb, &err) == 0 && sbx_rt_wait(&ex, sb, NULL, &err) == 0, "run: %s",
          sbx_error_msg(err));
    sbx_autofree char *dir = sbx_xstrdup(sbx_rt_sandbox_dir(sb));
    CHECK(sbx_rt_destroy_deferred(sb, &err) == 0, "deferred: %s", sbx_error_msg(err));
    sbx_rt_sandbox_free(sb);
    int i = 0;
    while (access(dir, F_OK) == 0 && i++ < 500)
        msleep(10);
    CHECK(access(dir, F_OK) < 0, "deferred removal did not finish");
}

/* Run spec in a new sandbox of r, wait, and keep it (not destroyed). */
static int
run_spec(struct sbx_rt *r, const struct sbx_rt_spec *spec, struct sbx_rt_sandbox **out,
         sbx_error **err)
{
    struct sbx_rt_exit ex;
    int ret = sbx_rt_create(out, r, spec, err);
    if (ret == 0)
        ret = sbx_rt_start(*out, err);
    if (ret == 0)
        ret = sbx_rt_wait(&ex, *out, NULL, err);
    return ret;
}

/* Run argv in a new sandbox of r with a memory limit, wait, and keep it (not destroyed). */
static int
run_limited(struct sbx_rt *r, char **argv, uint64_t memory, struct sbx_rt_sandbox **out,
            sbx_error **err)
{
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.memory_bytes = memory;
    return run_spec(r, &spec, out, err);
}

static ino_t
ino_of(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? st.st_ino : 0;
}

/* The spares of process pid in dir: how many, and the inode of the last one seen. */
static int
spares_of(const char *dir, pid_t pid, ino_t *ino)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, ".spare-%d.", (int)pid);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) { // NOLINT(concurrency-mt-unsafe): own DIR
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        sbx_autofree char *path = sbx_xasprintf("%s/%s", dir, e->d_name);
        if (ino)
            *ino = ino_of(path);
        n++;
    }
    if (d)
        (void)closedir(d);
    return n;
}

static pid_t
dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    (void)waitpid(pid, NULL, 0);
    return pid;
}

/* A sandbox's memory dir (a copy) and its inode, before it is destroyed. */
struct cg_seen {
    char *dir;
    ino_t ino;
};

static void
destroy_seen(struct sbx_rt_sandbox *sb, struct cg_seen *seen)
{
    if (!sb)
        return;
    seen->dir = sb->cg.dir[SBX_CG_MEMORY] ? sbx_xstrdup(sb->cg.dir[SBX_CG_MEMORY]) : NULL;
    seen->ino = ino_of(seen->dir);
    (void)sbx_rt_destroy(sb, NULL);
    sbx_rt_sandbox_free(sb);
}

static char *
dir_name(const char *path)
{
    return sbx_xstrndup(path, (size_t)(strrchr(path, '/') - path));
}

/* A destroyed sandbox's memory cgroup is kept as one spare, and the next create is renamed into
 * it (the same inode) with its own limit. *mem: the memory parent (caller frees), NULL when the
 * first sandbox failed. */
static void
spares_reuse(struct sbx_rt *r, char **mem)
{
    char *true_argv[] = {"/bin/true", NULL};
    struct sbx_rt_sandbox *a = NULL;
    struct sbx_rt_sandbox *b = NULL;
    sbx_autoerror sbx_error *err = NULL;
    struct cg_seen sa = {0};
    struct cg_seen sb = {0};
    int ret = run_limited(r, true_argv, 64 << 20, &a, &err);
    destroy_seen(a, &sa);
    *mem = sa.dir ? dir_name(sa.dir) : NULL;
    ino_t spare = 0;
    int n = *mem ? spares_of(*mem, getpid(), &spare) : -1;
    if (ret == 0)
        ret = run_limited(r, true_argv, 32 << 20, &b, &err);
    sbx_autofree char *lim_path =
        sbx_xasprintf("%s/memory.limit_in_bytes", b ? b->cg.dir[SBX_CG_MEMORY] : "");
    long lim_b = read_counter(lim_path);
    int n_taken = *mem ? spares_of(*mem, getpid(), NULL) : -1;
    destroy_seen(b, &sb);
    bool gone_a = sa.dir && access(sa.dir, F_OK) < 0;
    free(sa.dir);
    free(sb.dir);
    CHECK(ret == 0, "sandboxes: %s", sbx_error_msg(err));
    CHECK(sa.ino && n == 1 && spare == sa.ino && gone_a,
          "a destroyed sandbox's memory cgroup is kept as one spare (%d, inode %lu vs %lu)", n,
          (unsigned long)spare, (unsigned long)sa.ino);
    CHECK(sb.ino == sa.ino && lim_b == 32 << 20 && n_taken == 0,
          "the next create is renamed into it with its own limit (inode %lu vs %lu, limit %ld, "
          "%d spares left)",
          (unsigned long)sb.ino, (unsigned long)sa.ino, lim_b, n_taken);
}

/* The one spare left by spares_reuse is taken by an OOM-killed sandbox, whose cgroup is then
 * removed; a sandbox that wrote 20 MiB to its layer (charged as page cache until the layer is
 * removed, which destroy does before it decides) is kept. */
static void
spares_oom_and_written(struct sbx_rt *r, const char *mem)
{
    /* out of memory: 256 MiB in a 32 MiB sandbox without swap */
    char *hog_argv[] = {"/usr/bin/python3", "-c",
                        "b = bytearray(256 << 20); b[::4096] = b'x' * (256 << 8)", NULL};
    char *writer_argv[] = {"/usr/bin/python3", "-c", "open('/big', 'wb').write(b'x' * (20 << 20))",
                           NULL};
    struct sbx_rt_sandbox *c = NULL;
    struct sbx_rt_sandbox *e = NULL;
    sbx_autoerror sbx_error *err = NULL;
    struct cg_seen sc = {0};
    struct cg_seen se = {0};
    int ret = run_limited(r, hog_argv, 32 << 20, &c, &err);
    uint64_t kills = 0;
    if (c)
        (void)c->cg.ops->oom_kills(&c->cg, &kills, NULL);
    destroy_seen(c, &sc);
    int n_after_oom = spares_of(mem, getpid(), NULL);
    bool gone_c = sc.dir && access(sc.dir, F_OK) < 0;
    if (ret == 0)
        ret = run_limited(r, writer_argv, 64 << 20, &e, &err);
    sbx_autofree char *charged_path =
        sbx_xasprintf("%s/memory.usage_in_bytes", e ? e->cg.dir[SBX_CG_MEMORY] : "");
    long charged = read_counter(charged_path);
    destroy_seen(e, &se);
    ino_t spare = 0;
    int n_after_write = spares_of(mem, getpid(), &spare);
    free(sc.dir);
    free(se.dir);
    CHECK(ret == 0, "sandboxes: %s", sbx_error_msg(err));
    CHECK(kills > 0, "the hog was OOM-killed (%lu kills)", (unsigned long)kills);
    CHECK(n_after_oom == 0 && gone_c,
          "an OOM-killed sandbox's cgroup is removed, not kept (%d spares)", n_after_oom);
    CHECK(charged > 20 << 20 && n_after_write == 1 && spare == se.ino,
          "a sandbox that wrote 20 MiB (%ld charged) is kept once its layer is gone (%d)", charged,
          n_after_write);
}

/* Run /bin/true with a CPU quota, a pids limit and pausable; record each role's dir and
 * inode, then destroy. */
static int
run_cpu_pids(struct sbx_rt *r, uint64_t cpu_millis, uint64_t pids, struct cg_seen seen[],
             long *quota, sbx_error **err)
{
    char *argv[] = {"/bin/true", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.cpu_millis = cpu_millis;
    spec.pids_max = pids;
    spec.pausable = true;
    struct sbx_rt_sandbox *sb = NULL;
    int ret = run_spec(r, &spec, &sb, err);
    for (int k = 0; sb && k < SBX_CG_NROLES; k++) {
        seen[k].dir = sb->cg.dir[k] ? sbx_xstrdup(sb->cg.dir[k]) : NULL;
        seen[k].ino = ino_of(seen[k].dir);
    }
    sbx_autofree char *qpath = sbx_xasprintf(
        "%s/cpu.cfs_quota_us", sb && sb->cg.dir[SBX_CG_CPU] ? sb->cg.dir[SBX_CG_CPU] : "");
    *quota = read_counter(qpath);
    if (sb)
        (void)sbx_rt_destroy(sb, NULL);
    sbx_rt_sandbox_free(sb);
    return ret;
}

static void
free_seen(struct cg_seen seen[])
{
    for (int k = 0; k < SBX_CG_NROLES; k++)
        free(seen[k].dir);
}

/* The cpu, pids and freezer cgroups are kept too (one spare in each hierarchy); the next
 * sandbox gets the same ones, and a kept cpu cgroup keeps its quota (no write when the next
 * sandbox asks for the same, a write when it asks for another). */
static void
spares_cpu_pids_freezer(struct sbx_rt *r)
{
    static const int roles[] = {SBX_CG_CPU, SBX_CG_PIDS, SBX_CG_FREEZER};
    struct cg_seen s1[SBX_CG_NROLES] = {0};
    struct cg_seen s2[SBX_CG_NROLES] = {0};
    struct cg_seen s3[SBX_CG_NROLES] = {0};
    sbx_autoerror sbx_error *err = NULL;
    long q1 = 0;
    long q2 = 0;
    long q3 = 0;
    int ret = run_cpu_pids(r, 500, 64, s1, &q1, &err);
    int kept[3] = {0};
    for (int i = 0; i < 3; i++) {
        const char *d = s1[roles[i]].dir;
        sbx_autofree char *parent = d ? dir_name(d) : NULL;
        ino_t ino = 0;
        kept[i] = parent && spares_of(parent, getpid(), &ino) == 1 && ino == s1[roles[i]].ino;
    }
    if (ret == 0)
        ret = run_cpu_pids(r, 500, 32, s2, &q2, &err);
    if (ret == 0)
        ret = run_cpu_pids(r, 250, 32, s3, &q3, &err);
    bool same = true;
    for (int i = 0; i < 3; i++)
        same = same && s1[roles[i]].ino && s2[roles[i]].ino == s1[roles[i]].ino &&
               s3[roles[i]].ino == s1[roles[i]].ino;
    free_seen(s1);
    free_seen(s2);
    free_seen(s3);
    CHECK(ret == 0, "sandboxes: %s", sbx_error_msg(err));
    CHECK(kept[0] && kept[1] && kept[2], "cpu (%d), pids (%d) and freezer (%d) cgroups are kept",
          kept[0], kept[1], kept[2]);
    CHECK(same, "the next sandboxes get the same cpu, pids and freezer cgroups");
    CHECK(q1 == 50000 && q2 == 50000 && q3 == 25000,
          "each has its own quota (%ld, %ld, %ld us per 100 ms)", q1, q2, q3);
}

/* A dead server's spares: the next open with spares takes them over, gc removes them. */
static void
spares_orphans(const struct sbx_rt_config *cfg, const char *mem)
{
    pid_t dead = dead_pid();
    sbx_autofree char *orphan = sbx_xasprintf("%s/.spare-%d.7", mem, (int)dead);
    CHECK(mkdir(orphan, 0755) == 0, "mkdir `%s`", orphan);
    struct sbx_rt *r = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_open(&r, cfg, &err) == 0, "open: %s", sbx_error_msg(err));
    int adopted = spares_of(mem, getpid(), NULL);
    bool orphan_gone = access(orphan, F_OK) < 0;
    char *true_argv[] = {"/bin/true", NULL};
    struct sbx_rt_sandbox *d = NULL;
    int ret = run_limited(r, true_argv, 16 << 20, &d, &err);
    int after_reuse = spares_of(mem, getpid(), NULL);
    struct cg_seen sd = {0};
    destroy_seen(d, &sd);
    free(sd.dir);
    sbx_rt_close(r);
    CHECK(ret == 0, "a sandbox after the takeover: %s", sbx_error_msg(err));
    CHECK(adopted == 1 && orphan_gone && after_reuse == 0,
          "open takes a dead server's spare over (%d) and a create uses it (%d left)", adopted,
          after_reuse);
    CHECK(mkdir(orphan, 0755) == 0, "mkdir `%s`", orphan);
    struct sbx_rt_gc_stats gs;
    CHECK(sbx_rt_gc(&gs, rt, false, &err) == 0, "gc: %s", sbx_error_msg(err));
    CHECK(access(orphan, F_OK) < 0, "gc removes a dead server's spare");
}

/* Kept cgroups (cgspare.c, cgroup v1): kept on destroy, reused by the next create, removed
 * after an OOM kill and by close; a dead server's taken over by open, removed by gc. */
static void
test_cg_spares(const char *state, const char *parent)
{
    if (!rt->cg_ops->keep) {
        printf("test_cg_spares: cgroup %s keeps no cgroups (only v1 can rename)\n",
               rt->cg_ops->name);
        return;
    }
    struct sbx_rt_config cfg = {.state_dir = state, .cgroup_parent = parent, .spare_cgroups = 2};
    struct sbx_rt *r = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_open(&r, &cfg, &err) == 0, "open: %s", sbx_error_msg(err));
    sbx_autofree char *mem = NULL;
    spares_reuse(r, &mem);
    if (mem)
        spares_oom_and_written(r, mem);
    spares_cpu_pids_freezer(r);
    sbx_rt_close(r);
    CHECK(mem, "spares_reuse failed");
    int left = spares_of(mem, getpid(), NULL);
    CHECK(left == 0, "close removes the spares (%d left)", left);
    spares_orphans(&cfg, mem);
}

/* The server's case: the creator exits, the sandbox keeps running (die_with_parent off), and a
 * new process takes it back from its record. */
static void
test_adopt_after_creator_exit(void)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
    pid_t creator = fork();
    if (creator == 0) {
        char *argv[] = {"/probe/probe", "counter", "/probe/count2", NULL};
        struct sbx_rt_spec spec;
        struct sbx_rt_volume vol;
        base_spec(&spec, argv, &vol);
        spec.start = true;
        struct sbx_rt_sandbox *sb = NULL;
        if (sbx_rt_create(&sb, rt, &spec, NULL) < 0)
            _exit(1);
        (void)!write(p[1], sbx_rt_sandbox_id(sb), strlen(sbx_rt_sandbox_id(sb)));
        _exit(0); /* no destroy: the sandbox outlives us */
    }
    (void)close(p[1]);
    char id[64] = {0};
    read_all(p[0], id, sizeof id);
    (void)close(p[0]);
    int st = 0;
    CHECK(creator > 0 && waitpid(creator, &st, 0) == creator && st == 0 && id[0], "creator");
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_adopt(&sb, rt, id, &err) == 0, "adopt: %s", sbx_error_msg(err));
    CHECK(kill(sbx_rt_sandbox_pid(sb), 0) == 0, "adopted sandbox not running");
    CHECK(sbx_rt_kill(sb, SIGTERM, &err) == 0, "kill: %s", sbx_error_msg(err));
    struct sbx_rt_exit ex;
    CHECK(sbx_rt_wait(&ex, sb, NULL, &err) == 0, "wait: %s", sbx_error_msg(err));
    CHECK(ex.code == -1, "an adopted sandbox's status is unknown, got %d", ex.code);
    CHECK(sbx_rt_destroy(sb, &err) == 0, "destroy: %s", sbx_error_msg(err));
    CHECK(access(sbx_rt_sandbox_dir(sb), F_OK) < 0, "record left");
    sbx_rt_sandbox_free(sb);
}

struct fake_net {
    int attached, detached;
    bool netns_ok, lease_seen;
};

static int
fake_attach(void *net, struct sbx_rt_lease *out, const char *id, int netns_fd, sbx_error **err)
{
    (void)id;
    (void)err;
    struct fake_net *f = net;
    struct stat a;
    struct stat self;
    /* The hook must get the sandbox's own netns, not ours. */
    f->netns_ok = fstat(netns_fd, &a) == 0 && stat("/proc/self/ns/net", &self) == 0 &&
                  a.st_ino != self.st_ino;
    snprintf(out->address, sizeof out->address, "10.99.0.2/24");
    f->attached++;
    return 0;
}

static int
fake_detach(void *net, const char *id, sbx_error **err)
{
    (void)id;
    (void)err;
    ((struct fake_net *)net)->detached++;
    return 0;
}

static void
test_bridge_hook(const char *state, const char *parent)
{
    char *argv[] = {"/bin/true", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.net = SBX_RT_NET_BRIDGE;
    struct sbx_rt_sandbox *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == -SBX_EUNAVAIL, "bridge without the net module");
    struct fake_net f = {0};
    struct sbx_rt_net_ops ops = {.net = &f, .attach = fake_attach, .detach = fake_detach};
    struct sbx_rt_config cfg = {.state_dir = state, .cgroup_parent = parent, .net_ops = &ops};
    struct sbx_rt *hooked = NULL;
    CHECK(sbx_rt_open(&hooked, &cfg, &err) == 0, "open: %s", sbx_error_msg(err));
    struct sbx_rt_exit ex;
    int r = sbx_rt_create(&sb, hooked, &spec, &err);
    if (r == 0) {
        const struct sbx_rt_lease *l = sbx_rt_sandbox_lease(sb);
        f.lease_seen =
            l && strcmp(l->address, "10.99.0.2/24") == 0 && sbx_rt_sandbox_netns_fd(sb) >= 0;
        r = sbx_rt_start(sb, &err) || sbx_rt_wait(&ex, sb, NULL, &err) || sbx_rt_destroy(sb, &err);
        sbx_rt_sandbox_free(sb);
    }
    sbx_rt_close(hooked);
    CHECK(r == 0, "bridge sandbox: %s", sbx_error_msg(err));
    CHECK(f.lease_seen, "lease not exposed while attached");
    CHECK(f.attached == 1 && f.detached == 1 && f.netns_ok, "hook calls %d/%d ns %d", f.attached,
          f.detached, f.netns_ok);
}

/* ---- the network namespace pool ---- */

struct pool_net {
    int attached, pool_attached, transferred, detached, pool_detached;
    bool ids_ok;         /* attach got placeholder ids, transfer handed them to the sandbox */
    const char *sandbox; /* the id a transfer must hand to */
    bool dead_reclaimed; /* the lease of a dead pool owner was released */
    bool live_reclaimed; /* ... and one of a live owner (ours) was (wrongly) */
    char live_id[64];
};

static int
pool_attach(void *net, struct sbx_rt_lease *out, const char *id, int netns_fd, sbx_error **err)
{
    (void)netns_fd;
    (void)err;
    struct pool_net *f = net;
    bool placeholder = strncmp(id, "pool.", 5) == 0;
    /* the pool's own attaches, and a cold create's (under the sandbox's id) */
    f->ids_ok = f->ids_ok && (placeholder || (f->sandbox && strcmp(id, f->sandbox) == 0));
    f->pool_attached += placeholder;
    snprintf(out->address, sizeof out->address, "10.99.1.%d/24", 2 + f->attached++);
    return 0;
}

static int
pool_transfer(void *net, const char *from, const char *to, sbx_error **err)
{
    (void)err;
    struct pool_net *f = net;
    f->ids_ok =
        f->ids_ok && strncmp(from, "pool.", 5) == 0 && f->sandbox && strcmp(to, f->sandbox) == 0;
    f->transferred++;
    return 0;
}

static int
pool_detach(void *net, const char *id, sbx_error **err)
{
    (void)err;
    struct pool_net *f = net;
    f->detached++;
    f->pool_detached += strncmp(id, "pool.", 5) == 0;
    f->dead_reclaimed = f->dead_reclaimed || strcmp(id, "pool.999999999.1.1") == 0;
    f->live_reclaimed = f->live_reclaimed || strcmp(id, f->live_id) == 0;
    return 0;
}

/* Leases left by a crashed server's pool (a pid that does not exist) and by a live one. */
static int
pool_foreach(void *net, int (*fn)(const char *id, void *payload), void *payload, sbx_error **err)
{
    (void)err;
    struct pool_net *f = net;
    int r = fn("pool.999999999.1.1", payload);
    return r < 0 ? r : fn(f->live_id, payload);
}

static bool
pool_fills(struct sbx_rt *r, unsigned n)
{
    for (int i = 0; i < 500; i++) {
        if (sbx_rt_pool_ready(r) >= n)
            return true;
        msleep(10);
    }
    return false;
}

/* A started sandbox of the pooled runtime on network `net` running `script`; *pid its init. */
static int
pooled_start(struct sbx_rt *r, enum sbx_rt_netmode net, const char *id, char *script,
             struct sbx_rt_sandbox **out, sbx_error **err)
{
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.id = id;
    spec.net = net;
    int ret = sbx_rt_create(out, r, &spec, err);
    return ret < 0 ? ret : sbx_rt_start(*out, err);
}

static ino_t
netns_of(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* `lo` is up in the sandbox, and it holds only `lo` (and, bridged, eth0): a namespace of its
 * own, never the host's nor another sandbox's. */
#define POOL_NONE_SCRIPT                                                                      \
    "test \"$(cat /sys/class/net/lo/flags)\" = 0x9 && test \"$(ls /sys/class/net)\" = lo && " \
    "sleep 30"

static void
test_netns_pool_none(const char *state, const char *parent)
{
    struct sbx_rt_config cfg = {.state_dir = state,
                                .cgroup_parent = parent,
                                .netns_pool = 2,
                                .netns_pool_net = SBX_RT_NET_NONE};
    struct sbx_rt *pooled = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_open(&pooled, &cfg, &err) == 0, "open: %s", sbx_error_msg(err));
    msleep(50);
    CHECK(sbx_rt_pool_ready(pooled) == 0, "nothing is made before the first create");
    struct sbx_rt_sandbox *a = NULL;
    struct sbx_rt_sandbox *b = NULL;
    struct sbx_rt_sandbox *c = NULL;
    int r = pooled_start(pooled, SBX_RT_NET_NONE, "pool-none-a", POOL_NONE_SCRIPT, &a, &err);
    bool cold = r == 0 && !sbx_rt_sandbox_pooled(a);
    bool filled = r == 0 && pool_fills(pooled, 2);
    if (r == 0)
        r = pooled_start(pooled, SBX_RT_NET_NONE, "pool-none-b", POOL_NONE_SCRIPT, &b, &err);
    if (r == 0)
        r = pooled_start(pooled, SBX_RT_NET_NONE, "pool-none-c", POOL_NONE_SCRIPT, &c, &err);
    ino_t host = netns_of(getpid());
    ino_t na = a ? netns_of(sbx_rt_sandbox_pid(a)) : 0;
    ino_t nb = b ? netns_of(sbx_rt_sandbox_pid(b)) : 0;
    ino_t nc = c ? netns_of(sbx_rt_sandbox_pid(c)) : 0;
    bool pooled_bc = b && c && sbx_rt_sandbox_pooled(b) && sbx_rt_sandbox_pooled(c);
    struct sbx_rt_exit ex[3] = {{0}};
    struct sbx_rt_sandbox *all[] = {a, b, c};
    bool alive = true; /* each script passed its checks and sleeps */
    for (int i = 0; i < 3; i++) {
        if (!all[i])
            continue;
        alive = alive && sbx_rt_kill(all[i], SIGTERM, NULL) == 0;
        (void)sbx_rt_wait(&ex[i], all[i], NULL, NULL);
        alive = alive && ex[i].code == 128 + SIGTERM;
        (void)sbx_rt_destroy(all[i], NULL);
        sbx_rt_sandbox_free(all[i]);
    }
    sbx_rt_close(pooled);
    CHECK(r == 0, "pooled sandboxes: %s", sbx_error_msg(err));
    CHECK(cold && filled, "the first create is cold (%d) and fills the pool (%d)", cold, filled);
    CHECK(pooled_bc, "the next creates take ready namespaces");
    CHECK(alive, "in each: lo up, nothing else (exit codes %d %d %d)", ex[0].code, ex[1].code,
          ex[2].code);
    CHECK(host && na && nb && nc && na != host && nb != host && nc != host && na != nb &&
              nb != nc && na != nc,
          "one network namespace per sandbox, none the host's");
}

/* Field 22 of /proc/self/stat: our start time, as a pool's placeholder ids carry it. */
static unsigned long long
own_start_time(void)
{
    char buf[1024] = {0};
    sbx_autoclose int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0)
        return 0;
    const char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void
test_netns_pool_bridge(const char *state, const char *parent)
{
    struct pool_net f = {.ids_ok = true};
    /* a lease of a live pool owner (this process, as if it ran a second pool) */
    snprintf(f.live_id, sizeof f.live_id, "pool.%d.%llu.7", (int)getpid(), own_start_time());
    struct sbx_rt_net_ops ops = {.net = &f,
                                 .attach = pool_attach,
                                 .detach = pool_detach,
                                 .transfer = pool_transfer,
                                 .foreach_lease = pool_foreach};
    struct sbx_rt_config cfg = {.state_dir = state,
                                .cgroup_parent = parent,
                                .net_ops = &ops,
                                .netns_pool = 1,
                                .netns_pool_net = SBX_RT_NET_BRIDGE};
    struct sbx_rt *pooled = NULL;
    sbx_autoerror sbx_error *err = NULL;
    CHECK(sbx_rt_open(&pooled, &cfg, &err) == 0, "open: %s", sbx_error_msg(err));
    struct sbx_rt_sandbox *a = NULL;
    struct sbx_rt_sandbox *b = NULL;
    f.sandbox = "pool-bridge-a";
    int r = pooled_start(pooled, SBX_RT_NET_BRIDGE, f.sandbox, "sleep 30", &a, &err);
    bool filled = r == 0 && pool_fills(pooled, 1);
    f.sandbox = "pool-bridge-b";
    if (r == 0)
        r = pooled_start(pooled, SBX_RT_NET_BRIDGE, f.sandbox, "test -e /sys/class/net/lo", &b,
                         &err);
    bool pooled_b = b && sbx_rt_sandbox_pooled(b);
    const struct sbx_rt_lease *l = b ? sbx_rt_sandbox_lease(b) : NULL;
    bool lease_b = l && strncmp(l->address, "10.99.1.", 8) == 0;
    struct sbx_rt_exit ex = {.code = -1};
    if (b)
        (void)sbx_rt_wait(&ex, b, NULL, NULL);
    int detached_before = f.detached;
    for (int i = 0; i < 2; i++) {
        struct sbx_rt_sandbox *s = i ? b : a;
        if (s) {
            (void)sbx_rt_destroy(s, NULL);
            sbx_rt_sandbox_free(s);
        }
    }
    int sandbox_detaches = f.detached - detached_before;
    bool refilled = pool_fills(pooled, 1);
    sbx_rt_close(pooled);
    CHECK(r == 0, "pooled bridge sandboxes: %s", sbx_error_msg(err));
    CHECK(filled && pooled_b && lease_b, "the second create takes an attached namespace (%d %d %d)",
          filled, pooled_b, lease_b);
    CHECK(ex.code == 0, "its command ran (%d)", ex.code);
    CHECK(f.transferred == 1 && f.ids_ok, "its lease was handed from a placeholder id to it");
    CHECK(sandbox_detaches == 2, "each destroy releases its sandbox's lease (%d)",
          sandbox_detaches);
    CHECK(refilled && f.pool_detached >= 1 + 1, "close releases the ready ones' leases");
    CHECK(f.dead_reclaimed && !f.live_reclaimed,
          "a dead pool owner's lease is reclaimed, a live process's is not");
    CHECK(f.pool_attached - f.transferred == f.pool_detached - 1,
          "every placeholder lease is handed over or released (%d attached, %d handed, %d "
          "released)",
          f.pool_attached, f.transferred, f.pool_detached - 1);
}

/* Run `script` in a sandbox of id on the disk layer (reuse: the kept one); its exit code. */
static int
run_on_layer(const char *id, const char *script, bool reuse, sbx_error **err)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.id = id;
    spec.reuse_upper = reuse;
    struct sbx_rt_sandbox *sb = NULL;
    struct sbx_rt_exit ex = {.code = -1};
    int r = sbx_rt_create(&sb, rt, &spec, err);
    if (r == 0)
        r = sbx_rt_start(sb, err);
    if (r == 0)
        r = sbx_rt_wait(&ex, sb, NULL, err);
    if (sb && sbx_rt_destroy(sb, r == 0 ? err : NULL) < 0)
        r = -1;
    sbx_rt_sandbox_free(sb);
    return r < 0 ? r : ex.code;
}

/* A sandbox of id that writes /kept-file, stopped the server's way: its layer kept, then
 * destroyed while it runs. */
static int
keep_one(const char *id, sbx_error **err)
{
    char *argv[] = {"/bin/sh", "-c", "echo one > /kept-file && sleep 60", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.id = id;
    spec.start = true;
    struct sbx_rt_sandbox *sb = NULL;
    int r = sbx_rt_create(&sb, rt, &spec, err);
    if (r < 0)
        return r;
    sbx_autofree char *file = sbx_xasprintf("/proc/%d/root/kept-file", (int)sbx_rt_sandbox_pid(sb));
    for (int i = 0; i < 300 && access(file, F_OK) < 0; i++)
        msleep(10);
    r = sbx_rt_upper_keep(rt, id, err);
    if (r == 0) {
        /* the layer cannot be removed while a sandbox may still run on it */
        sbx_autoerror sbx_error *rerr = NULL;
        r = sbx_rt_upper_remove(rt, id, &rerr) == -SBX_ECONFLICT ? 0 : -SBX_EGENERIC;
    }
    if (sbx_rt_destroy(sb, r == 0 ? err : NULL) < 0)
        r = -SBX_EGENERIC;
    sbx_rt_sandbox_free(sb);
    return r;
}

/* A sandbox of id running on its kept layer, deleted the server's way: unkept first (when
 * `unkeep`), then sbx_rt_destroy_async. 0 once its teardown is done. */
static int
async_on_kept(const char *id, bool unkeep, sbx_error **err)
{
    char *argv[] = {"/bin/sleep", "1000", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    spec.id = id;
    spec.reuse_upper = true;
    spec.start = true;
    struct sbx_rt_sandbox *sb = NULL;
    int r = sbx_rt_create(&sb, rt, &spec, err);
    if (r < 0)
        return r;
    if (unkeep && (r = sbx_rt_upper_unkeep(rt, id, err)) < 0) {
        (void)sbx_rt_destroy(sb, NULL);
        sbx_rt_sandbox_free(sb);
        return r;
    }
    sbx_autofree char *dir = sbx_xstrdup(sbx_rt_sandbox_dir(sb));
    struct async_seen seen = {0, 1};
    r = sbx_rt_destroy_async(sb, async_done, &seen, err);
    for (int i = 0; r == 0 && (seen.calls == 0 || access(dir, F_OK) == 0) && i < 1000; i++)
        msleep(10);
    return r < 0 ? r : seen.calls == 1 ? seen.result : -SBX_ETIMEDOUT;
}

/* The server's stop/start: a kept layer outlives its sandbox, gc and a failed run; a fresh
 * create never wipes it; the next sandbox of that id runs on it; only upper_remove (refused
 * while a record exists) and gc --all remove it. */
static void
test_kept_layer(const char *state)
{
    const char *id = "kept-layer-1";
    sbx_autofree char *layer = sbx_xasprintf("%s/upper/%s", state, id);
    sbx_autofree char *mark = sbx_xasprintf("%s/kept", layer);
    sbx_autoerror sbx_error *err = NULL;
    CHECK(run_on_layer(id, "echo one > /kept-file", false, &err) == 0, "first: %s",
          sbx_error_msg(err));
    CHECK(access(layer, F_OK) < 0, "a layer that is not kept goes with its sandbox");
    CHECK(sbx_rt_upper_keep(rt, id, &err) == -SBX_ENOTFOUND, "keep without a layer");
    sbx_error_clear(&err);
    CHECK(keep_one(id, &err) == 0, "keep: %s", sbx_error_msg(err));
    CHECK(access(mark, F_OK) == 0, "the kept layer outlives its sandbox");
    /* A fresh layer is mounted volatile: overlayfs's mark stays until the stop settles it. */
    sbx_autofree char *vmark = sbx_xasprintf("%s/work/work/incompat/volatile", layer);
    CHECK(access(vmark, F_OK) == 0, "a fresh disk layer is mounted volatile");
    CHECK(sbx_rt_upper_settle(rt, id, &err) == 0 && access(vmark, F_OK) < 0, "settle: %s",
          sbx_error_msg(err));
    CHECK(sbx_rt_upper_settle(rt, id, &err) == 0, "settle again: %s", sbx_error_msg(err));
    CHECK(run_on_layer(id, "test \"$(cat /kept-file)\" = one", true, &err) == 0,
          "a settled layer runs again: %s", sbx_error_msg(err));
    CHECK(sbx_rt_upper_remove(rt, id, &err) == 0, "remove: %s", sbx_error_msg(err));
    /* A stop cut short by a crash: unsettled. In the same boot the next start settles it;
     * after a reboot (another boot id in the mark) it refuses, naming why. */
    CHECK(keep_one(id, &err) == 0 && access(vmark, F_OK) == 0, "keep unsettled: %s",
          sbx_error_msg(err));
    CHECK(run_on_layer(id, "test \"$(cat /kept-file)\" = one", true, &err) == 0 &&
              access(vmark, F_OK) < 0,
          "an unsettled layer of this boot is settled by its next start: %s", sbx_error_msg(err));
    CHECK(sbx_rt_upper_remove(rt, id, &err) == 0, "remove: %s", sbx_error_msg(err));
    CHECK(keep_one(id, &err) == 0, "keep for a reboot: %s", sbx_error_msg(err));
    {
        sbx_autoclose int fd = open(mark, O_WRONLY | O_TRUNC | O_CLOEXEC);
        CHECK(fd >= 0 && write(fd, "another-boot\n", 13) == 13, "fake a reboot");
    }
    CHECK(run_on_layer(id, "true", true, &err) == -SBX_ECONFLICT &&
              strstr(sbx_error_msg(err), "volatile") && access(vmark, F_OK) == 0,
          "an unsettled layer of another boot is refused: %s", sbx_error_msg(err));
    sbx_error_clear(&err);
    CHECK(sbx_rt_upper_settle(rt, id, &err) == 0 && access(vmark, F_OK) < 0, "settle: %s",
          sbx_error_msg(err));
    CHECK(sbx_rt_upper_kept(state, id), "sbx_rt_upper_kept");
    struct sbx_rt_gc_stats gs;
    CHECK(sbx_rt_gc(&gs, rt, false, &err) == 0 && access(mark, F_OK) == 0, "gc keeps it");
    CHECK(run_on_layer(id, "true", false, &err) == -SBX_ECONFLICT, "a fresh create wipes it");
    sbx_error_clear(&err);
    CHECK(run_on_layer(id, "exit 3", true, &err) == 3, "a failing run: %s", sbx_error_msg(err));
    CHECK(run_on_layer(id, "test \"$(cat /kept-file)\" = one && echo two >> /kept-file", true,
                       &err) == 0,
          "the next sandbox runs on the kept layer: %s", sbx_error_msg(err));
    CHECK(run_on_layer(id, "test $(cat /kept-file | wc -l) = 2", true, &err) == 0,
          "and the one after it: %s", sbx_error_msg(err));
    /* the server's delete of a started-again sandbox: async destroy keeps a kept layer... */
    CHECK(async_on_kept(id, false, &err) == 0 && access(mark, F_OK) == 0,
          "an async destroy keeps a kept layer: %s", sbx_error_msg(err));
    CHECK(run_on_layer(id, "test $(cat /kept-file | wc -l) = 2", true, &err) == 0,
          "its files after the async destroy: %s", sbx_error_msg(err));
    /* ... and removes one unkept before it (so does gc, for a teardown cut short) */
    CHECK(async_on_kept(id, true, &err) == 0 && access(layer, F_OK) < 0,
          "an unkept layer goes with its sandbox's async destroy: %s", sbx_error_msg(err));
    CHECK(sbx_rt_upper_unkeep(rt, id, &err) == 0, "unkeep of nothing: %s", sbx_error_msg(err));
    CHECK(keep_one(id, &err) == 0, "keep once more: %s", sbx_error_msg(err));
    CHECK(sbx_rt_upper_unkeep(rt, id, &err) == 0 && access(mark, F_OK) < 0 &&
              sbx_rt_gc(&gs, rt, false, &err) == 0 && access(layer, F_OK) < 0,
          "gc removes an unkept layer without a record: %s", sbx_error_msg(err));
    CHECK(keep_one(id, &err) == 0, "keep after unkeep: %s", sbx_error_msg(err));
    CHECK(sbx_rt_upper_remove(rt, id, &err) == 0 && access(layer, F_OK) < 0, "remove: %s",
          sbx_error_msg(err));
    CHECK(run_on_layer(id, "true", true, &err) == -SBX_ENOTFOUND, "reuse of nothing");
    sbx_error_clear(&err);
    CHECK(keep_one(id, &err) == 0, "keep again: %s", sbx_error_msg(err));
    CHECK(sbx_rt_gc(&gs, rt, true, &err) == 0 && access(layer, F_OK) < 0,
          "gc --all removes a kept layer");
}

/* as_init + start: the server's way, where the child shares the caller's memory until its
 * exec (shared spawn). It must run the command as PID 1 with the spec's environment (PATH
 * searched in it, never in ours), leave the caller's environment and memory alone, and report
 * an exec failure, a setup failure and a bridge-less run like the plain spawn does. */
static int
run_started(char **argv, char **env, const char *volume_src, int *code, sbx_error **err)
{
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, argv, &vol);
    if (volume_src)
        vol.src = volume_src;
    spec.env = env;
    spec.as_init = true;
    spec.start = true;
    spec.pausable = true;
    spec.memory_bytes = 64 << 20;
    struct sbx_rt_sandbox *sb = NULL;
    int r = sbx_rt_create(&sb, rt, &spec, err);
    struct sbx_rt_exit ex = {.code = -1};
    if (r == 0)
        r = sbx_rt_wait(&ex, sb, NULL, err);
    if (sb && sbx_rt_destroy(sb, r == 0 ? err : NULL) < 0)
        r = -SBX_EGENERIC;
    sbx_rt_sandbox_free(sb);
    *code = ex.code;
    return r;
}

static void
test_shared_spawn(void)
{
    static char canary[4096];
    memset(canary, 0x5a, sizeof canary);
    char **env_before = environ;
    const char *path_before = getenv("PATH"); // NOLINT(concurrency-mt-unsafe): single-threaded
    sbx_autoerror sbx_error *err = NULL;
    int code = -1;
    char *ok_argv[] = {"sh", "-c", "test $$ -eq 1 && test \"$SBX_T\" = yes && exit 5", NULL};
    char *ok_env[] = {"PATH=/usr/bin:/bin", "SBX_T=yes", NULL};
    CHECK(run_started(ok_argv, ok_env, NULL, &code, &err) == 0 && code == 5,
          "PID 1 with the spec's environment: %d %s", code, sbx_error_msg(err));
    /* PATH is the spec's: `sh` is not found on a PATH without it, even though ours has it */
    char *nopath_env[] = {"PATH=/nonexistent", NULL};
    CHECK(run_started(ok_argv, nopath_env, NULL, &code, &err) < 0 &&
              strstr(sbx_error_msg(err), "exec `sh`"),
          "exec failure reported: %s", sbx_error_msg(err));
    sbx_error_clear(&err);
    /* a setup failure (a volume source that is not there) */
    int sr = run_started(ok_argv, ok_env, "/nonexistent-sbx-volume", &code, &err);
    CHECK(sr < 0, "setup failure reported: %d code %d %s", sr, code, sbx_error_msg(err));
    sbx_error_clear(&err);
    // NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded
    CHECK(environ == env_before && getenv("PATH") == path_before, "our environment changed");
    /* its processes are in the sandbox's cgroups (v1: joined after GO, made meanwhile) */
    char *cg_argv[] = {"sh", "-c", "sleep 5", NULL};
    struct sbx_rt_spec spec;
    struct sbx_rt_volume vol;
    base_spec(&spec, cg_argv, &vol);
    spec.env = ok_env;
    spec.as_init = spec.start = spec.pausable = true;
    spec.memory_bytes = 64 << 20;
    spec.pids_max = 64;
    struct sbx_rt_sandbox *sb = NULL;
    CHECK(sbx_rt_create(&sb, rt, &spec, &err) == 0, "create: %s", sbx_error_msg(err));
    if (sb) {
        sbx_autofree char *cg = sbx_xstrdup(sbx_rt_sandbox_cgroup(sb));
        sbx_autofree char *tasks = sbx_xasprintf("%s/cgroup.procs", cg);
        sbx_autofree char *procs = NULL;
        (void)sbx_read_file(tasks, 4096, &procs, NULL, NULL);
        char pid[32];
        snprintf(pid, sizeof pid, "%d\n", (int)sbx_rt_sandbox_pid(sb));
        CHECK(procs && strstr(procs, pid), "init not in `%s`: %s", tasks, procs ? procs : "?");
        CHECK(sbx_rt_destroy(sb, &err) == 0, "destroy: %s", sbx_error_msg(err));
        sbx_rt_sandbox_free(sb);
    }
    bool intact = true;
    for (size_t i = 0; i < sizeof canary; i++)
        intact = intact && canary[i] == 0x5a;
    CHECK(intact, "our memory changed");
    struct sbx_rt_gc_stats gs;
    CHECK(sbx_rt_gc(&gs, rt, false, &err) == 0 && gs.kept == 0 && gs.removed == 0,
          "records left: kept %u removed %u", gs.kept, gs.removed);
}

static int
can_run(void)
{
    if (geteuid() != 0)
        return 0;
    pid_t p = fork();
    if (p == 0)
        _exit(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) == 0 ? 0 : 1);
    int st = 1;
    return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int
main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    if (!can_run()) {
        printf("SKIP: needs root and namespaces\n");
        return 77;
    }
    snprintf(tmp, sizeof tmp, "/tmp/sbx-rt-lifecycle.%d", (int)getpid());
    snprintf(probe_dir, sizeof probe_dir, "%s/probe", tmp);
    sbx_autofree char *state = sbx_xasprintf("%s/state", tmp);
    sbx_autofree char *cmd =
        sbx_xasprintf("mkdir -p %s && cp %s %s/probe", probe_dir, argv[1], probe_dir);
    /* NOLINTNEXTLINE(cert-env33-c,concurrency-mt-unsafe): fixed command, single-threaded */
    if (system(cmd) != 0)
        return 1;
    char parent[64];
    snprintf(parent, sizeof parent, "sbx-test-lifecycle-%d", (int)getpid());
    struct sbx_rt_config cfg = {.state_dir = state, .cgroup_parent = parent};
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_rt_open(&rt, &cfg, &err) < 0) {
        fprintf(stderr, "open: %s\n", sbx_error_msg(err));
        return 1;
    }
    test_pause_resume();
    test_exec_connect_adopt();
    test_as_init();
    test_shared_spawn();
    test_deferred_destroy();
    test_detached_destroy();
    test_async_destroy();
    test_gc_id();
    test_cg_mkdir_enospc();
    test_template(state);
    test_cg_spares(state, parent);
    test_adopt_after_creator_exit();
    test_bridge_hook(state, parent);
    test_netns_pool_none(state, parent);
    test_netns_pool_bridge(state, parent);
    test_kept_layer(state);
    struct sbx_rt_gc_stats gs;
    if (sbx_rt_gc(&gs, rt, true, &err) < 0 || gs.removed != 0) {
        fprintf(stderr, "FAIL gc after clean destroys removed %u\n", gs.removed);
        failures++;
    }
    sbx_rt_close(rt);
    sbx_autofree char *rm = sbx_xasprintf(
        "find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -depth -type d -name %s -exec rmdir {} + "
        "2>/dev/null; rm -rf %s",
        parent, tmp);
    /* NOLINTNEXTLINE(cert-env33-c,concurrency-mt-unsafe): fixed command, single-threaded */
    (void)!system(rm);
    printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
