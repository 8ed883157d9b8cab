/*
 * lifecycle.c - wait, kill, pause/resume, destroy, adopt and gc of sandboxes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

static int
status_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Handle one message from the init. Returns 1 when the command's status is known. */
static int
on_message(struct sbx_rt_sandbox *sb, const struct sbx_sync_msg *m)
{
    if (m->type == SBX_SYNC_READY)
        sb->ready_seen = true;
    if (m->type == SBX_SYNC_ERROR) {
        snprintf(sb->exit.start_error, sizeof sb->exit.start_error, "%.180s: %.60s", m->msg,
                 strerror(m->err)); /* NOLINT(concurrency-mt-unsafe): glibc's is thread-safe */
        return 0;
    }
    if (m->type == SBX_SYNC_EXIT) {
        sb->exit.status = m->status;
        return 1;
    }
    return 0;
}

static void
forward_signal(struct sbx_rt_sandbox *sb, int sigfd)
{
    struct signalfd_siginfo si;
    if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        (void)syscall(SYS_pidfd_send_signal, sb->pidfd, (int)si.ssi_signo, NULL, 0);
}

/* Read the messages queued on the sync socket without blocking. Returns 1 once the command's
 * status is known (EXIT), -1 when the init's end is closed (it is exiting), else 0. */
static int
read_messages(struct sbx_rt_sandbox *sb)
{
    struct sbx_sync_msg m;
    for (;;) {
        ssize_t n = recv(sb->sync_fd, &m, sizeof m, MSG_DONTWAIT);
        /* A peer that exited with our GO unread reports ECONNRESET once; what it sent before
         * is still queued behind that. */
        if (n < 0 && (errno == ECONNRESET || errno == EINTR))
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n != (ssize_t)sizeof m)
            return -1;
        if (on_message(sb, &m) == 1)
            return 1;
    }
}

/* Sleep until the command's status arrives on the sync socket or the init exits (its pidfd
 * turns readable), forwarding signals meanwhile. Returns true when the status came first: the
 * init is then still tearing the sandbox down (killing leftovers, releasing its namespaces),
 * which the caller need not wait for. */
static bool
wait_for_init(struct sbx_rt_sandbox *sb, const sigset_t *forward)
{
    sbx_autoclose int sigfd = forward ? signalfd(-1, forward, SFD_CLOEXEC) : -1;
    /* An as_init command is the init itself: its status is the init's, read by waitpid. */
    int syncfd = sb->as_init ? -1 : sb->sync_fd;
    struct pollfd p[3] = {{.fd = sb->pidfd, .events = POLLIN},
                          {.fd = syncfd, .events = POLLIN},
                          {.fd = sigfd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (p[2].revents & POLLIN)
            forward_signal(sb, sigfd);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
            return false;
        if (p[1].revents && read_messages(sb) != 0) {
            if (sb->exit.status != -1)
                return true;
            p[1].fd = -1; /* hung up without a status: the pidfd tells the rest */
        }
    }
}

/* Read what the init left on the socket: setup/exec errors and the command's status. */
static void
drain_messages(struct sbx_rt_sandbox *sb)
{
    (void)read_messages(sb);
    (void)close(sb->sync_fd);
    sb->sync_fd = -1;
}

static int
reap(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->reaped)
        return 0;
    int st = 0;
    if (sb->is_child) {
        while (waitpid(sb->pid, &st, __WALL) < 0) {
            if (errno != EINTR)
                return sbx_error_set(err, SBX_EGENERIC, errno, "wait for `%s`", sb->id);
        }
    } else {
        /* Adopted: not our child. The pidfd becomes readable when the process exits. */
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
        st = -1;
    }
    sb->reaped = true;
    sb->init_status = st;
    return 0;
}

int
sbx_rt_wait(struct sbx_rt_exit *out, struct sbx_rt_sandbox *sb, const sigset_t *forward,
            sbx_error **err)
{
    if (!sb->started && sb->is_child)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` was not started", sb->id);
    /* The command's status usually arrives before the init has exited: no need to wait for
     * the rest of the teardown (destroy reaps the init). */
    bool early = !sb->reaped && sb->exit.status == -1 && wait_for_init(sb, forward);
    int ret = early ? 0 : reap(sb, err);
    if (!early && sb->sync_fd >= 0)
        drain_messages(sb);
    if (ret < 0)
        return ret;
    /* spec.start: a failure before READY is a setup failure (sbx's), not the command's. */
    if (sb->start_unconfirmed && !sb->ready_seen)
        return sbx_error_set(err, SBX_EGENERIC, 0, "set up sandbox `%s`: %s", sb->id,
                             sb->exit.start_error[0] ? sb->exit.start_error : "init died");
    if (sb->exit.status == -1)
        sb->exit.status = sb->init_status; /* as_init, or the init died without reporting */
    sb->exit.code = sb->exit.status == -1 ? -1 : status_code(sb->exit.status);
    uint64_t kills = 0;
    sbx_autoerror sbx_error *ignored = NULL;
    if (sb->cg.ops->oom_kills(&sb->cg, &kills, &ignored) == 0)
        sb->exit.oom_killed = kills > 0;
    *out = sb->exit;
    return 0;
}

int
sbx_rt_kill(struct sbx_rt_sandbox *sb, int sig, sbx_error **err)
{
    if (sb->reaped)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` has exited", sb->id);
    /* A pidfd cannot hit a recycled pid. Signals to the init are forwarded to the command;
     * SIGKILL ends the whole pid namespace. */
    if (syscall(SYS_pidfd_send_signal, sb->pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
        return sbx_error_set(err, SBX_EGENERIC, errno, "signal sandbox `%s`", sb->id);
    return 0;
}

void
sbx_rt_usage(const struct sbx_rt_sandbox *sb, struct sbx_rt_usage *u)
{
    struct sbx_cg_usage cu = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    if (sb->cg.ops && sb->cg.ops->usage)
        sb->cg.ops->usage(&sb->cg, &cu);
    *u = (struct sbx_rt_usage){cu.memory_bytes, cu.cpu_ns, cu.pids};
}

int
sbx_rt_pause(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    int ret = sb->cg.ops->freeze(&sb->cg, true, err);
    if (ret < 0)
        return sbx_error_wrap(err, "pause sandbox `%s`", sb->id);
    sb->frozen = true;
    return 0;
}

int
sbx_rt_resume(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    int ret = sb->cg.ops->freeze(&sb->cg, false, err);
    if (ret < 0)
        return sbx_error_wrap(err, "resume sandbox `%s`", sb->id);
    sb->frozen = false;
    return 0;
}

static void
kill_and_reap(struct sbx_rt_sandbox *sb)
{
    if (sb->pidfd < 0 || sb->reaped)
        return;
    sbx_autoerror sbx_error *ignored = NULL;
    /* Frozen tasks cannot die: thaw first. An adopted sandbox's state is unknown, so always. */
    if (sb->frozen || !sb->is_child)
        (void)sb->cg.ops->freeze(&sb->cg, false, &ignored);
    (void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    (void)reap(sb, &ignored);
}

static int
release_lease(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (!sb->has_lease)
        return 0;
    /* Without the net module the lease cannot be given back: keep the record for a gc that
     * has it rather than forget the address. */
    if (!sb->rt->has_net_ops)
        return sbx_error_set(err, SBX_EUNAVAIL, 0,
                             "bridge lease kept: bridge networking not available here");
    int ret = sb->rt->net_ops.detach(sb->rt->net_ops.net, sb->id, err);
    sb->has_lease = ret < 0;
    return ret;
}

/* The record goes in one step: renamed out of its id (to `.gone-<id>.<pid>`, which gc finishes
 * once that pid is gone), then removed. A removal cut short (the server killed mid-way) never
 * leaves a half record under the sandbox's id, which gc could not read and would keep. */
static int
remove_record(const char *dir, sbx_error **err)
{
    const char *slash = strrchr(dir, '/');
    if (!slash)
        return sbx_rm_rf(dir, err);
    sbx_autofree char *gone =
        sbx_xasprintf("%.*s/.gone-%s.%d", (int)(slash - dir), dir, slash + 1, (int)getpid());
    if (rename(dir, gone) < 0)
        return errno == ENOENT ? 0 : sbx_error_set(err, SBX_EGENERIC, errno, "rename `%s`", dir);
    return sbx_rm_rf(gone, err);
}

int
sbx_rt_destroy(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->destroyed)
        return 0;
    kill_and_reap(sb);
    sbx_rt_close_spare_socks(sb); /* they keep its network namespace alive */
    int ret = 0;
    ret = release_lease(sb, err);
    /* The layer before the cgroups: its files' page cache is charged to the memory cgroup
     * until they are gone, and a cgroup with little charged left can be kept for the next
     * create (cgspare.c). */
    if (ret == 0 && sb->has_record && sb->upper && !sbx_rt_upper_is_kept(sb->upper))
        ret = sbx_rm_rf(sb->upper, err);
    if (ret == 0 && sb->has_record) {
        sbx_rt_cgs_give(sb->rt, &sb->cg); /* its dirs for the next create, or not */
        ret = sb->cg.ops->destroy(&sb->cg, err);
    }
    /* The record goes last: as long as anything above remains, gc can still find it. A
     * create that failed before its record existed (e.g. the id was taken) owns nothing. */
    if (ret == 0 && sb->has_record)
        ret = remove_record(sb->dir, err);
    if (ret < 0)
        return sbx_error_wrap(err, "destroy sandbox `%s`", sb->id);
    sb->destroyed = true;
    return 0;
}

/* In the detached process: the init is a sibling now, so wait on its pidfd instead of
 * waitpid; the caller (its parent) exits and the init is reaped by whoever inherits it. */
__attribute__((noreturn)) static void
teardown_detached(struct sbx_rt_sandbox *sb)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; null >= 0 && fd < 3; fd++)
        (void)dup2(null, fd);
    (void)setsid(); /* no terminal signals from the caller's session */
    (void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    while (poll(&p, 1, -1) < 0 && errno == EINTR)
        ;
    sb->reaped = true;
    sbx_autoerror sbx_error *err = NULL;
    /* A failure leaves the record, which `sbx gc` completes (as after a crash). */
    _exit(sbx_rt_destroy(sb, &err) < 0 ? 1 : 0);
}

int
sbx_rt_destroy_detached(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->destroyed)
        return 0;
    if (sb->reaped || sb->pidfd < 0 || !sb->is_child || sb->frozen || !sb->has_record)
        return sbx_rt_destroy(sb, err);
    /* The record dir stays locked until the teardown is done (the lock is taken here and held
     * by the forked process's copy of the fd): gc leaves it alone, or with --all waits. */
    int lock = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0 || flock(lock, LOCK_EX) < 0) {
        if (lock >= 0)
            (void)close(lock);
        return sbx_rt_destroy(sb, err);
    }
    (void)fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid == 0)
        teardown_detached(sb); /* inherits the locked fd; it closes at exit */
    (void)close(lock);
    if (pid < 0)
        return sbx_rt_destroy(sb, err); /* no process: do it now */
    sb->destroyed = true;
    return 0;
}

/* ---- kept writable layers (the server's stop/start) ----
 *
 * A layer is kept when <upper_dir>/<id>/kept exists. The owner marks it before it destroys the
 * sandbox, and the mark stays while a sandbox runs again on the layer, so a destroy, a gc of a
 * crashed sandbox, or a failed start never removes it; only sbx_rt_upper_remove (the owner's
 * delete) and gc --all do. The sandbox never sees it: only <layer>/upper is in its root. */

#define KEPT_MARK "kept"

bool
sbx_rt_upper_is_kept(const char *upper)
{
    sbx_autofree char *mark = sbx_xasprintf("%s/" KEPT_MARK, upper);
    return access(mark, F_OK) == 0;
}

bool
sbx_rt_upper_kept(const char *state_dir, const char *id)
{
    if (!sbx_rt_valid_id(id))
        return false;
    sbx_autofree char *layer = sbx_xasprintf("%s/upper/%s", state_dir, id);
    return sbx_rt_upper_is_kept(layer);
}

/* Write the mark durably: a kept layer must survive a power loss right after the stop (gc at
 * boot would otherwise sweep it as an orphan). It holds the boot id: a layer whose volatile
 * mount a crash interrupted can only be trusted within the same boot (sbx_rt_upper_recover). */
static int
mark_kept(const char *upper, sbx_error **err)
{
    sbx_autoclose int dir = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open the writable layer `%s`", upper);
    sbx_autoclose int fd =
        openat(dir, KEPT_MARK, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    char id[SBX_BOOT_ID_SIZE];
    (void)sbx_boot_id(id);
    if (fd < 0 || sbx_write_all(fd, id, strlen(id)) < 0 || fsync(fd) < 0 || fsync(dir) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "mark `%s` kept", upper);
    return 0;
}

int
sbx_rt_upper_keep(struct sbx_rt *rt, const char *id, sbx_error **err)
{
    if (!sbx_rt_valid_id(id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", id);
    sbx_autofree char *layer = sbx_xasprintf("%s/%s", rt->upper_dir, id);
    if (access(layer, F_OK) < 0)
        return sbx_error_set(err, errno == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC, errno,
                             "sandbox `%s` has no writable layer on disk", id);
    return mark_kept(layer, err);
}

static int settle_layer(const char *layer, sbx_error **err);

int
sbx_rt_upper_settle(struct sbx_rt *rt, const char *id, sbx_error **err)
{
    if (!sbx_rt_valid_id(id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", id);
    sbx_autofree char *layer = sbx_xasprintf("%s/%s", rt->upper_dir, id);
    return settle_layer(layer, err);
}

int
sbx_rt_upper_recover(const char *layer, sbx_error **err)
{
    sbx_autofree char *mark = sbx_xasprintf("%s/" SBX_RT_VOLATILE_MARK, layer);
    if (access(mark, F_OK) < 0)
        return 0;
    /* Still marked: the stop was cut short between the sandbox's end and its settle. Within
     * the same boot every write is still in the page cache, so settling now is as good as
     * then; after a reboot the writes overlayfs never synced may be lost. */
    char now[SBX_BOOT_ID_SIZE];
    sbx_autofree char *kept = sbx_xasprintf("%s/" KEPT_MARK, layer);
    if (sbx_boot_id(now) < 0 || !sbx_file_is(kept, now))
        return sbx_error_set(err, SBX_ECONFLICT, 0,
                             "its writable layer was mounted without syncs (volatile) when the "
                             "host went down during its stop, so its files may be incomplete; "
                             "delete the sandbox");
    return settle_layer(layer, err);
}

static int
settle_layer(const char *layer, sbx_error **err)
{
    sbx_autoclose int dir = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return sbx_error_set(err, errno == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC, errno,
                             "open the writable layer `%s`", layer);
    /* Its files first (the sandbox is gone: nothing writes to them any more), then the mark
     * overlayfs left in the work dir, durably: once it is gone the layer counts as intact. */
    if (syncfs(dir) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "sync the writable layer `%s`", layer);
    sbx_autofree char *work = sbx_xasprintf("%s/" SBX_RT_VOLATILE_MARK, layer);
    if (access(work, F_OK) < 0)
        return 0;
    sbx_autofree char *incompat = sbx_xasprintf("%s/work/work/incompat", layer);
    sbx_autofree char *workwork = sbx_xasprintf("%s/work/work", layer);
    if (sbx_rm_rf(incompat, err) < 0)
        return sbx_error_wrap(err, "settle the writable layer `%s`", layer);
    sbx_autoclose int ww = open(workwork, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ww < 0 || fsync(ww) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "settle the writable layer `%s`", layer);
    return 0;
}

int
sbx_rt_upper_unkeep(struct sbx_rt *rt, const char *id, sbx_error **err)
{
    if (!sbx_rt_valid_id(id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", id);
    sbx_autofree char *layer = sbx_xasprintf("%s/%s", rt->upper_dir, id);
    sbx_autoclose int dir = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0 && errno == ENOENT)
        return 0;
    if (dir < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open the writable layer `%s`", layer);
    if (unlinkat(dir, KEPT_MARK, 0) < 0)
        return errno == ENOENT ? 0 : sbx_error_set(err, SBX_EGENERIC, errno, "unkeep `%s`", layer);
    /* Durable, as the mark was: a layer kept again by a power loss would outlive its sandbox. */
    if (fsync(dir) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "unkeep `%s`", layer);
    return 0;
}

bool
sbx_rt_knows(struct sbx_rt *rt, const char *id)
{
    if (!sbx_rt_valid_id(id))
        return false;
    sbx_autofree char *rec = sbx_xasprintf("%s/%s", rt->run_dir, id);
    sbx_autofree char *layer = sbx_xasprintf("%s/%s", rt->upper_dir, id);
    return access(rec, F_OK) == 0 || access(layer, F_OK) == 0;
}

int
sbx_rt_upper_files(struct sbx_rt *rt, const char *id, char **out, sbx_error **err)
{
    if (!sbx_rt_valid_id(id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", id);
    sbx_autofree char *img = sbx_xasprintf("%s/%s/layer.img", rt->upper_dir, id);
    if (access(img, F_OK) == 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "the writable layer of `%s` is a capped file system of its own "
                             "(providers.native.upper_size), mounted only inside the sandbox",
                             id);
    char *dir = sbx_xasprintf("%s/%s/upper", rt->upper_dir, id);
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        free(dir);
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` has no writable layer on disk",
                             id);
    }
    *out = dir;
    return 0;
}

int
sbx_rt_upper_remove(struct sbx_rt *rt, const char *id, sbx_error **err)
{
    if (!sbx_rt_valid_id(id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", id);
    sbx_autofree char *rec = sbx_xasprintf("%s/%s", rt->run_dir, id);
    if (access(rec, F_OK) == 0)
        return sbx_error_set(err, SBX_ECONFLICT, 0,
                             "sandbox `%s` still exists: destroy it before its layer", id);
    sbx_autofree char *layer = sbx_xasprintf("%s/%s", rt->upper_dir, id);
    return sbx_rm_rf(layer, err) < 0 ? sbx_error_wrap(err, "remove the layer of `%s`", id) : 0;
}

struct deferred {
    struct sbx_cg cg;
    char *upper; /* may be NULL */
    char *dir;
};

static void *
deferred_remove(void *arg)
{
    struct deferred *d = arg;
    sbx_autoerror sbx_error *err = NULL;
    /* Same order as sbx_rt_destroy: the record goes only after the layer and the cgroups, so a
     * process exit before this finishes leaves a record that gc completes. */
    if ((!d->upper || sbx_rt_upper_is_kept(d->upper) || sbx_rm_rf(d->upper, &err) == 0) &&
        d->cg.ops->destroy(&d->cg, &err) == 0)
        (void)remove_record(d->dir, &err);
    if (err)
        sbx_warn("deferred removal: %s (run `sbx gc`)", sbx_error_msg(err));
    sbx_cg_release(&d->cg);
    free(d->upper);
    free(d->dir);
    free(d);
    return NULL;
}

int
sbx_rt_destroy_deferred(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->destroyed)
        return 0;
    kill_and_reap(sb);
    if (release_lease(sb, err) < 0)
        return sbx_error_wrap(err, "destroy sandbox `%s`", sb->id);
    if (!sb->has_record) {
        sb->destroyed = true;
        return 0;
    }
    struct deferred *d = sbx_xcalloc(1, sizeof *d);
    d->cg.ops = sb->cg.ops;
    for (int r = 0; r < SBX_CG_NROLES; r++)
        d->cg.dir[r] = sb->cg.dir[r] ? sbx_xstrdup(sb->cg.dir[r]) : NULL;
    d->dir = sbx_xstrdup(sb->dir);
    d->upper = sb->upper ? sbx_xstrdup(sb->upper) : NULL;
    pthread_attr_t attr;
    pthread_t t;
    (void)pthread_attr_init(&attr);
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&t, &attr, deferred_remove, d);
    (void)pthread_attr_destroy(&attr);
    if (r != 0) {
        (void)deferred_remove(d); /* no thread: do it now */
    }
    sb->destroyed = true;
    return 0;
}

struct async_destroy {
    struct sbx_rt_sandbox *sb;
    void (*done)(void *arg, int result);
    void *arg;
};

static void *
async_destroy_main(void *p)
{
    struct async_destroy *a = p;
    struct sbx_rt *rt = a->sb->rt;
    sbx_autoerror sbx_error *err = NULL;
    int r = sbx_rt_destroy(a->sb, &err);
    if (r < 0)
        sbx_warn("%s (run `sbx gc`)", sbx_error_msg(err));
    if (a->done)
        a->done(a->arg, r);
    sbx_rt_sandbox_free(a->sb);
    free(a);
    pthread_mutex_lock(&rt->async_mu);
    rt->n_async--;
    pthread_cond_broadcast(&rt->async_cv);
    pthread_mutex_unlock(&rt->async_mu);
    return NULL;
}

int
sbx_rt_destroy_async(struct sbx_rt_sandbox *sb, void (*done)(void *arg, int result), void *arg,
                     sbx_error **err)
{
    /* Stopped now: SIGKILL (after a thaw: frozen tasks cannot die) ends the pid namespace. */
    if (!sb->destroyed && !sb->reaped && sb->pidfd >= 0) {
        sbx_autoerror sbx_error *ignored = NULL;
        if (sb->frozen || !sb->is_child)
            (void)sb->cg.ops->freeze(&sb->cg, false, &ignored);
        if (syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH) {
            int e = errno;
            sbx_rt_sandbox_free(sb);
            return sbx_error_set(err, SBX_EGENERIC, e, "kill sandbox");
        }
    }
    struct async_destroy *a = sbx_xcalloc(1, sizeof *a);
    *a = (struct async_destroy){.sb = sb, .done = done, .arg = arg};
    struct sbx_rt *rt = sb->rt;
    pthread_mutex_lock(&rt->async_mu);
    rt->n_async++;
    pthread_mutex_unlock(&rt->async_mu);
    pthread_attr_t attr;
    pthread_t t;
    (void)pthread_attr_init(&attr);
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&t, &attr, async_destroy_main, a);
    (void)pthread_attr_destroy(&attr);
    if (r != 0)
        (void)async_destroy_main(a); /* no thread: do it now */
    return 0;
}

void
sbx_rt_sandbox_free(struct sbx_rt_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->pidfd >= 0)
        (void)close(sb->pidfd);
    if (sb->sync_fd >= 0)
        (void)close(sb->sync_fd);
    if (sb->netns_fd >= 0)
        (void)close(sb->netns_fd);
    sbx_rt_close_spare_socks(sb);
    sbx_cg_release(&sb->cg);
    free(sb->upper);
    free(sb->dir);
    free(sb);
}

/* A sandbox object for a record, without a live process yet. */
static int
from_record(struct sbx_rt_sandbox **out, struct sbx_rt *rt, const char *id, sbx_error **err)
{
    struct sbx_rt_sandbox *sb = sbx_xcalloc(1, sizeof *sb);
    sb->rt = rt;
    sb->dir = sbx_xasprintf("%s/%s", rt->run_dir, id);
    sb->pidfd = sb->sync_fd = sb->netns_fd = -1;
    for (int i = 0; i < SBX_RT_SPARE_SOCKS; i++)
        sb->spare_socks[i] = -1;
    sb->exit.status = sb->exit.code = sb->init_status = -1;
    struct sbx_state st;
    int ret = sbx_state_read(&st, sb->dir, err);
    if (ret < 0) {
        sbx_rt_sandbox_free(sb);
        return ret;
    }
    memcpy(sb->id, st.id, sizeof sb->id);
    sb->pid = st.pid;
    sb->owner = st.owner;
    sb->start_time = st.start_time;
    sb->has_lease = st.lease;
    sb->upper = st.upper ? sbx_xasprintf("%s/%s", rt->upper_dir, sb->id) : NULL;
    sb->net = (enum sbx_rt_netmode)st.net;
    sb->memory_limit = st.memory_limit;
    sb->cg.ops =
        st.cgroup_backend && strcmp(st.cgroup_backend, "v2") == 0 ? &sbx_cg_v2_ops : &sbx_cg_v1_ops;
    for (int r = 0; r < SBX_CG_NROLES; r++)
        sb->cg.dir[r] = sbx_steal_ptr(&st.cgroups[r]);
    sbx_state_release(&st);
    sb->started = true;
    sb->has_record = true;
    *out = sb;
    return 0;
}

/* Open a pidfd for the recorded init if it is still the same process. */
static bool
open_live(struct sbx_rt_sandbox *sb)
{
    if (sb->pid <= 0 || !sb->start_time)
        return false;
    int fd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
    /* Checked after pidfd_open: if the start time still matches, the fd is the right one. */
    if (fd < 0 || sbx_proc_start_time(sb->pid) != sb->start_time) {
        if (fd >= 0)
            (void)close(fd);
        return false;
    }
    sb->pidfd = sbx_fd_park(fd); /* held as long as the sandbox lives (common/util.h) */
    return true;
}

int
sbx_rt_adopt(struct sbx_rt_sandbox **out, struct sbx_rt *rt, const char *id, sbx_error **err)
{
    struct sbx_rt_sandbox *sb = NULL;
    int ret = from_record(&sb, rt, id, err);
    if (ret < 0)
        return sbx_error_wrap(err, "adopt sandbox `%s`", id);
    if (!open_live(sb)) {
        sbx_rt_sandbox_free(sb);
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "adopt sandbox `%s`: not running", id);
    }
    sb->as_init = true; /* no sync socket: exit status comes from nowhere we own */
    *out = sb;
    return 0;
}

/* A record dir still being built (".new-<id>.<pid>") or being removed (".gone-<id>.<pid>"):
 * garbage once that process is gone. */
static int
gc_unfinished(struct sbx_rt *rt, const char *name, sbx_error **err)
{
    const char *dot = strrchr(name, '.');
    uint64_t pid = 0;
    sbx_autoerror sbx_error *bad = NULL;
    if (!dot || sbx_parse_u64(dot + 1, &pid, &bad) < 0 || pid == 0 || pid > INT32_MAX)
        return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return 0;
    sbx_autofree char *dir = sbx_xasprintf("%s/%s", rt->run_dir, name);
    return sbx_rm_rf(dir, err) < 0 ? -1 : 1;
}

/* gc of one record dir. Returns 1 removed, 0 kept, 2 gone meanwhile, <0 error. */
static int
gc_one(struct sbx_rt *rt, const char *name, bool all, sbx_error **err)
{
    if (sbx_str_starts(name, ".new-") || sbx_str_starts(name, ".gone-"))
        return gc_unfinished(rt, name, err);
    if (name[0] == '.')
        return 0;
    /* A detached teardown (sbx_rt_destroy_detached) holds this lock until the record is
     * gone: leave the record to it, or with --all wait for it. */
    sbx_autofree char *dir = sbx_xasprintf("%s/%s", rt->run_dir, name);
    sbx_autoclose int lock = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0)
        return errno == ENOENT ? 2 : sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", dir);
    if (flock(lock, LOCK_EX | (all ? 0 : LOCK_NB)) < 0)
        return 0; /* being torn down right now */
    struct stat st;
    if (fstat(lock, &st) == 0 && st.st_nlink == 0)
        return 2; /* removed while we waited */
    struct sbx_rt_sandbox *sb = NULL;
    int ret = from_record(&sb, rt, name, err);
    if (ret < 0)
        return sbx_error_wrap(err, "unreadable record `%s` (left alone)", name);
    /* Live: its init runs, or its creator is still between the record and the clone. */
    bool creating = sb->pid == 0 && sb->owner > 0 && (kill(sb->owner, 0) == 0 || errno != ESRCH);
    if ((open_live(sb) || creating) && !all) {
        sbx_rt_sandbox_free(sb);
        return 0;
    }
    ret = sbx_rt_destroy(sb, err);
    sbx_rt_sandbox_free(sb);
    return ret < 0 ? ret : 1;
}

/* Writable layers whose record is gone: the records live on a tmpfs, so after a reboot every
 * layer on disk is such an orphan. A layer dir is made only after its record is in place and
 * removed before it, so one without a record is never in use. Kept layers (a stopped sandbox's
 * files, which its owner still knows) stay unless `all`. */
static void
gc_orphan_layers(struct sbx_rt *rt, bool all)
{
    sbx_autoclosedir DIR *d = opendir(rt->upper_dir);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        sbx_autofree char *rec = sbx_xasprintf("%s/%s", rt->run_dir, e->d_name);
        if (access(rec, F_OK) == 0 || errno != ENOENT)
            continue;
        sbx_autofree char *layer = sbx_xasprintf("%s/%s", rt->upper_dir, e->d_name);
        if (!all && sbx_rt_upper_is_kept(layer))
            continue;
        sbx_autoerror sbx_error *one = NULL;
        if (sbx_rm_rf(layer, &one) < 0)
            sbx_warn("gc: %s", sbx_error_msg(one));
    }
}

int
sbx_rt_gc(struct sbx_rt_gc_stats *out, struct sbx_rt *rt, bool all, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    sbx_autoclosedir DIR *d = opendir(rt->run_dir);
    if (!d)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", rt->run_dir);
    int ret = 0;
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        sbx_autoerror sbx_error *one = NULL;
        int r = gc_one(rt, e->d_name, all, &one);
        if (r < 0) {
            sbx_warn("gc: %s", sbx_error_msg(one));
            ret = -SBX_EGENERIC;
        }
        out->removed += r == 1;
        out->kept += r == 0;
    }
    gc_orphan_layers(rt, all);
    sbx_rt_cgs_sweep(rt, false); /* cgroups kept by servers that are gone */
    sbx_autoerror sbx_error *net_err = NULL;
    if (rt->has_net_ops && rt->net_ops.gc && rt->net_ops.gc(rt->net_ops.net, &net_err) < 0)
        sbx_warn("gc: %s", sbx_error_msg(net_err));
    if (ret < 0)
        return sbx_error_set(err, SBX_EGENERIC, 0, "gc: some sandboxes could not be removed");
    if (all)
        sbx_rt_release_run_tmpfs(rt);
    return 0;
}

int
sbx_rt_gc_id(struct sbx_rt *rt, const char *id, sbx_error **err)
{
    /* A record name, not a path: gc_one joins it to the run dir. */
    if (!id[0] || id[0] == '.' || strchr(id, '/'))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", id);
    int r = gc_one(rt, id, true, err);
    return r < 0 ? r : 0;
}

const char *
sbx_rt_sandbox_id(const struct sbx_rt_sandbox *sb)
{
    return sb->id;
}

pid_t
sbx_rt_sandbox_pid(const struct sbx_rt_sandbox *sb)
{
    return sb->pid;
}

int
sbx_rt_sandbox_pidfd(const struct sbx_rt_sandbox *sb)
{
    return sb->pidfd;
}

const char *
sbx_rt_sandbox_dir(const struct sbx_rt_sandbox *sb)
{
    return sb->dir;
}

uint64_t
sbx_rt_sandbox_memory_limit(const struct sbx_rt_sandbox *sb)
{
    return sb->memory_limit;
}

const char *
sbx_rt_sandbox_cgroup(const struct sbx_rt_sandbox *sb)
{
    return sbx_cg_any_dir(&sb->cg);
}

int
sbx_rt_sandbox_netns_fd(struct sbx_rt_sandbox *sb)
{
    if (sb->netns_fd >= 0)
        return sb->netns_fd;
    if (sb->reaped || sbx_proc_start_time(sb->pid) != sb->start_time) {
        errno = ESRCH;
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
    sb->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
    return sb->netns_fd;
}

const struct sbx_rt_lease *
sbx_rt_sandbox_lease(const struct sbx_rt_sandbox *sb)
{
    return sb->has_lease ? &sb->lease : NULL;
}

bool
sbx_rt_sandbox_pooled(const struct sbx_rt_sandbox *sb)
{
    return sb->pooled;
}
