/*
 * runtime.c - the parent side: runtime context, create/start/wait/kill/pause/destroy.
 *
 * Hot path of create: mkdir the record dir, record, mkdir cgroups, one clone3 with every
 * namespace flag, then (while the child builds its root in parallel) attach the cgroup and
 * record the pid; one READY message back. No helper processes, no sleeps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

static const char *const default_path =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

static bool
on_tmpfs(const char *path)
{
    struct statfs st;
    return statfs(path, &st) == 0 && (unsigned long)st.f_type == TMPFS_MAGIC;
}

static bool
dir_is_empty(const char *path)
{
    sbx_autoclosedir DIR *d = opendir(path);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return false;
    }
    return d != NULL;
}

/* Records describe running processes, so they need no disk: a tmpfs makes the few metadata
 * operations per sandbox cost microseconds instead of an ext4 journal's hundreds. Mounted once
 * per state dir, under a lock so that concurrent first runs do not stack two tmpfs (the second
 * would hide the first's records); never over existing records. `sbx gc --all` unmounts it. */
static void
ensure_run_tmpfs(const struct sbx_rt *rt)
{
    if (on_tmpfs(rt->run_dir))
        return;
    sbx_autofree char *lock = sbx_xasprintf("%s/run.lock", rt->state_dir);
    sbx_autoclose int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0)
        return;
    if (on_tmpfs(rt->run_dir) || !dir_is_empty(rt->run_dir))
        return;
    if (mount("sbx-run", rt->run_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711,size=64m") < 0)
        sbx_debug("records stay on disk: mount tmpfs on `%s`: %m", rt->run_dir);
}

/* gc --all: drop our tmpfs once it holds no records. */
void
sbx_rt_release_run_tmpfs(const struct sbx_rt *rt)
{
    if (on_tmpfs(rt->run_dir) && !on_tmpfs(rt->state_dir) && dir_is_empty(rt->run_dir))
        (void)umount2(rt->run_dir, MNT_DETACH);
}

int
sbx_rt_open(struct sbx_rt **out, const struct sbx_rt_config *cfg, sbx_error **err)
{
    struct sbx_rt *rt = sbx_xcalloc(1, sizeof *rt);
    rt->state_dir = sbx_xstrdup(cfg && cfg->state_dir ? cfg->state_dir : "/var/lib/sbx");
    rt->run_dir = sbx_xasprintf("%s/run", rt->state_dir);
    rt->host_image = sbx_xasprintf("%s/images/host", rt->state_dir);
    rt->cgroup_parent = sbx_xstrdup(cfg && cfg->cgroup_parent ? cfg->cgroup_parent : "sbx");
    if (cfg && cfg->net_ops) {
        rt->net_ops = *cfg->net_ops;
        rt->has_net_ops = true;
    }
    sbx_caps_default(&rt->caps);
    (void)pthread_mutex_init(&rt->async_mu, NULL);
    (void)pthread_cond_init(&rt->async_cv, NULL);
    /* 0711: a sandbox in its own user namespace runs as an unprivileged host id and must be
     * able to traverse to its scratch dir; listing stays root-only. */
    int ret = sbx_mkdir_p(rt->run_dir, 0711, err);
    sbx_autofree char *images = sbx_xasprintf("%s/images", rt->state_dir);
    if (ret == 0)
        ret = sbx_mkdir_p(images, 0755, err);
    if (ret == 0)
        ensure_run_tmpfs(rt);
    if (ret == 0)
        ret = sbx_read_file("/proc/self/cgroup", 1 << 16, &rt->self_cgroup, NULL, err);
    if (ret == 0)
        ret = sbx_cg_detect(&rt->cg_ops, "/sys/fs/cgroup", err);
    if (ret == 0)
        ret = sbx_seccomp_build(&rt->seccomp, err);
    if (ret < 0) {
        sbx_rt_close(rt);
        return sbx_error_wrap(err, "open the sandbox runtime");
    }
    *out = rt;
    return 0;
}

void
sbx_rt_close(struct sbx_rt *rt)
{
    if (!rt)
        return;
    /* Asynchronous destroys use rt (and its net hook): let them finish. */
    pthread_mutex_lock(&rt->async_mu);
    while (rt->n_async > 0)
        pthread_cond_wait(&rt->async_cv, &rt->async_mu);
    pthread_mutex_unlock(&rt->async_mu);
    (void)pthread_cond_destroy(&rt->async_cv);
    (void)pthread_mutex_destroy(&rt->async_mu);
    sbx_seccomp_free(&rt->seccomp);
    free(rt->state_dir);
    free(rt->run_dir);
    free(rt->host_image);
    free(rt->cgroup_parent);
    free(rt->self_cgroup);
    free(rt);
}

static bool
valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 63 || id[0] == '.')
        return false;
    return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int
check_spec(const struct sbx_rt *rt, const struct sbx_rt_spec *spec, sbx_error **err)
{
    if (!spec->argv || !spec->argv[0])
        return sbx_error_set(err, SBX_EINVAL, 0, "no command to run");
    if (spec->id && !valid_id(spec->id))
        return sbx_error_set(err, SBX_EINVAL, 0, "invalid sandbox id `%s`", spec->id);
    if (spec->net == SBX_RT_NET_BRIDGE && !rt->has_net_ops)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "bridge networking not available");
    if (spec->n_volumes > SBX_MAX_VOLUMES)
        return sbx_error_set(err, SBX_ELIMIT, 0, "too many volumes (at most %d)", SBX_MAX_VOLUMES);
    for (size_t i = 0; i < spec->n_volumes; i++) {
        if (!spec->volumes[i].src || !spec->volumes[i].dst || spec->volumes[i].dst[0] != '/')
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "volume %zu: need a source and an "
                                 "absolute destination",
                                 i);
    }
    if (spec->userns && (!spec->uid_map.count || !spec->gid_map.count))
        return sbx_error_set(err, SBX_EINVAL, 0, "user namespace without an id mapping");
    return 0;
}

static void
make_id(char *out, size_t n, const char *want)
{
    if (want) {
        snprintf(out, n, "%s", want);
        return;
    }
    uint8_t r[6] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, (int)getpid(), sizeof r);
    snprintf(out, n, "sbx-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

static void
state_from_sb(struct sbx_state *st, const struct sbx_rt_sandbox *sb)
{
    memset(st, 0, sizeof *st);
    memcpy(st->id, sb->id, sizeof st->id);
    st->owner = getpid();
    st->pid = sb->pid;
    st->start_time = sb->start_time;
    st->cgroup_backend = (char *)sb->cg.ops->name;
    for (int r = 0; r < SBX_CG_NROLES; r++)
        st->cgroups[r] = sb->cg.dir[r];
    st->lease = sb->has_lease;
    st->net = (int)sb->net;
    st->memory_limit = sb->memory_limit;
}

static int
record(const struct sbx_rt_sandbox *sb, sbx_error **err)
{
    struct sbx_state st;
    state_from_sb(&st, sb); /* borrows; nothing to release */
    return sbx_state_write(sb->dir, &st, err);
}

static struct sbx_rt_sandbox *
sandbox_new(struct sbx_rt *rt, const char *id)
{
    struct sbx_rt_sandbox *sb = sbx_xcalloc(1, sizeof *sb);
    sb->rt = rt;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    sb->dir = sbx_xasprintf("%s/%s", rt->run_dir, id);
    sb->pidfd = -1;
    sb->sync_fd = -1;
    sb->netns_fd = -1;
    sb->cg.ops = rt->cg_ops;
    sb->exit.status = -1;
    sb->exit.code = -1;
    sb->init_status = -1;
    return sb;
}

/* The record dir appears complete or not at all: it is built under a temporary name (with
 * our pid, so gc can tell a crashed builder from a live one) and renamed into place. */
static int
make_record_dir(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    sbx_autofree char *tmp = sbx_xasprintf("%s/.new-%s.%d", sb->rt->run_dir, sb->id, (int)getpid());
    sbx_autofree char *scratch = sbx_xasprintf("%s/scratch", tmp);
    struct sbx_state st;
    state_from_sb(&st, sb);
    int ret = 0;
    if (mkdir(tmp, 0711) < 0 || mkdir(scratch, 0700) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "mkdir `%s`", scratch);
    if (ret == 0)
        ret = sbx_state_write(tmp, &st, err);
    /* rename refuses a non-empty target, and every record dir holds a state.json. */
    if (ret == 0 && rename(tmp, sb->dir) < 0)
        ret = sbx_error_set(err, errno == ENOTEMPTY || errno == EEXIST ? SBX_EEXISTS : SBX_EGENERIC,
                            errno, "create sandbox dir `%s`", sb->dir);
    if (ret < 0) {
        sbx_autoerror sbx_error *ignored = NULL;
        (void)sbx_rm_rf(tmp, &ignored);
    }
    return ret;
}

/* Record, then cgroups: everything the host keeps for this sandbox, in that order. */
static int
prepare_host(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    struct sbx_rt *rt = sb->rt;
    /* Only the controllers this sandbox needs: each one is a mkdir, a write and an rmdir. */
    sb->cg.roles = (spec->memory_bytes ? SBX_CG_ROLE(SBX_CG_MEMORY) : 0) |
                   (spec->pids_max ? SBX_CG_ROLE(SBX_CG_PIDS) : 0) |
                   (spec->cpu_millis ? SBX_CG_ROLE(SBX_CG_CPU) | SBX_CG_ROLE(SBX_CG_CPUACCT) : 0) |
                   (spec->pausable ? SBX_CG_ROLE(SBX_CG_FREEZER) : 0);
    int ret = sb->cg.ops->plan(&sb->cg, "/sys/fs/cgroup", rt->self_cgroup, rt->cgroup_parent,
                               sb->id, err);
    if (ret == 0)
        ret = make_record_dir(sb, err);
    if (ret < 0)
        return ret;
    sb->has_record = true;
    struct sbx_cg_limits lim = {.memory_bytes = spec->memory_bytes,
                                .pids_max = spec->pids_max,
                                .cpu_millis = spec->cpu_millis};
    return sb->cg.ops->create(&sb->cg, &lim, err);
}

/* True when the environment entries a and b set the same variable. */
static bool
same_var(const char *a, const char *b)
{
    size_t la = strcspn(a, "=");
    return la == strcspn(b, "=") && memcmp(a, b, la) == 0;
}

static char **
merge_env(const struct sbx_rt_spec *spec)
{
    size_t n = 4;
    for (size_t i = 0; spec->image_env && spec->image_env[i]; i++)
        n++;
    for (size_t i = 0; spec->env && spec->env[i]; i++)
        n++;
    char **env = sbx_xcalloc(n, sizeof *env);
    size_t k = 0;
    env[k++] = (char *)default_path;
    env[k++] = (char *)(spec->uid == 0 ? "HOME=/root" : "HOME=/");
    char *const *lists[2] = {spec->image_env, spec->env};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; lists[l] && lists[l][i]; i++) {
            size_t j = 0;
            while (j < k && !same_var(env[j], lists[l][i]))
                j++;
            env[j] = lists[l][i]; /* later entries override earlier ones of the same name */
            k += j == k;
        }
    }
    return env;
}

static int
overlay_opts(struct sbx_child_args *a, const struct sbx_rt_spec *spec, sbx_error **err)
{
    size_t cap = sizeof a->overlay_opts;
    size_t off = (size_t)snprintf(a->overlay_opts, cap, "lowerdir=");
    /* overlayfs lists the top layer first; the spec lists the bottom first. */
    for (size_t i = spec->n_layers; i > 0 && off < cap; i--) {
        const char *l = spec->layers[i - 1];
        if (strpbrk(l, ",:"))
            return sbx_error_set(err, SBX_EINVAL, 0, "layer path `%s` has `,` or `:`", l);
        off += (size_t)snprintf(a->overlay_opts + off, cap - off, "%s%s", l, i > 1 ? ":" : "");
    }
    if (spec->n_layers == 0)
        off += (size_t)snprintf(a->overlay_opts + off, cap - off, "%s", a->lower_host);
    if (off < cap)
        off += (size_t)snprintf(a->overlay_opts + off, cap - off,
                                ",upperdir=%s/upper,workdir=%s/work", a->scratch, a->scratch);
    if (off >= cap)
        return sbx_error_set(err, SBX_ELIMIT, 0, "too many image layers");
    return 0;
}

static int
host_lower(struct sbx_child_args *a, const struct sbx_rt *rt, const struct sbx_rt_spec *spec,
           sbx_error **err)
{
    uid_t uid = spec->userns ? spec->uid_map.outside : 0;
    gid_t gid = spec->userns ? spec->gid_map.outside : 0;
    if (uid || gid)
        a->lower_host = sbx_xasprintf("%s-%u-%u", rt->host_image, (unsigned)uid, (unsigned)gid);
    else
        a->lower_host = sbx_xstrdup(rt->host_image);
    return sbx_hostimg_ensure(a->lower_host, uid, gid, err);
}

static int
child_args(struct sbx_child_args *a, struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec,
           sbx_error **err)
{
    a->spec = spec;
    if (spec->n_layers == 0) {
        int ret = host_lower(a, sb->rt, spec, err);
        if (ret < 0)
            return ret;
    }
    a->scratch = sbx_xasprintf("%s/scratch", sb->dir);
    a->hostname = spec->hostname ? spec->hostname : sb->id;
    uint64_t tmpfs = spec->tmpfs_bytes    ? spec->tmpfs_bytes
                     : spec->memory_bytes ? spec->memory_bytes
                                          : 1ULL << 30;
    snprintf(a->tmpfs_opts, sizeof a->tmpfs_opts, "mode=755,size=%" PRIu64, tmpfs);
    if (spec->n_layers == 0)
        a->n_binds = sbx_hostimg_binds(a->binds, SBX_MAX_MOUNTS);
    for (size_t i = 0; i < spec->n_volumes; i++)
        a->binds[a->n_binds++] = (struct sbx_child_bind){
            .src = spec->volumes[i].src, .dst = spec->volumes[i].dst, .ro = spec->volumes[i].ro};
    if (spec->execd_path)
        a->binds[a->n_binds++] =
            (struct sbx_child_bind){.src = spec->execd_path, .dst = SBX_RT_EXECD_PATH, .ro = true};
    a->env = merge_env(spec);
    a->cwd = spec->cwd ? spec->cwd : spec->image_workdir ? spec->image_workdir : "/";
    /* v1: the cgroup namespace is rooted once the parent has attached us (after GO). */
    a->unshare_cgroupns = !sb->cg.ops->clone_into && sbx_cg_any_dir(&sb->cg);
    a->seccomp = &sb->rt->seccomp;
    a->caps = &sb->rt->caps;
    return overlay_opts(a, spec, err);
}

static int
write_map(pid_t pid, const char *file, const struct sbx_rt_idmap *m, sbx_error **err)
{
    char path[64];
    char line[96];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    int n = snprintf(line, sizeof line, "%u %u %u\n", m->inside, m->outside, m->count);
    if (!m->count) /* setgroups */
        n = snprintf(line, sizeof line, "deny");
    sbx_autoclose int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        return sbx_error_set(err, SBX_EGENERIC, errno, "write `%s`", path);
    return 0;
}

static int
map_ids(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    static const struct sbx_rt_idmap deny = {0};
    int ret = write_map(sb->pid, "uid_map", &spec->uid_map, err);
    if (ret == 0)
        ret = write_map(sb->pid, "setgroups", &deny, err);
    if (ret == 0)
        ret = write_map(sb->pid, "gid_map", &spec->gid_map, err);
    if (ret == 0 && sbx_sync_send(sb->sync_fd, SBX_SYNC_MAPPED, 0, 0, NULL) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "release the child");
    return ret;
}

static uint64_t
clone_flags(const struct sbx_rt_spec *spec, bool into_cgroup, bool no_cgroup)
{
    /* Every namespace at once: one clone, nothing shared with the host but what we bind. */
    uint64_t f = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_PIDFD;
    if (spec->net != SBX_RT_NET_HOST)
        f |= CLONE_NEWNET;
    if (spec->userns)
        f |= CLONE_NEWUSER;
    if (into_cgroup)
        f |= CLONE_INTO_CGROUP;
    if (into_cgroup || no_cgroup)
        f |= CLONE_NEWCGROUP;
    return f;
}

static int
spawn(struct sbx_rt_sandbox *sb, struct sbx_child_args *a, sbx_error **err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "socketpair");
    sbx_autoclose int child_end = sv[1];
    sb->sync_fd = sv[0];
    a->sync_fd = sv[1];
    a->parent_fd = sv[0];
    bool into = sb->cg.ops->clone_into && sbx_cg_any_dir(&sb->cg);
    sbx_autoclose int cgfd = into ? sb->cg.ops->clone_fd(&sb->cg) : -1;
    if (into && cgfd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open cgroup `%s`", sbx_cg_any_dir(&sb->cg));
    int pidfd = -1;
    struct clone_args ca = {.flags = clone_flags(a->spec, into, !sbx_cg_any_dir(&sb->cg)),
                            .pidfd = (uint64_t)(uintptr_t)&pidfd,
                            .exit_signal = SIGCHLD,
                            .cgroup = (uint64_t)(cgfd >= 0 ? cgfd : 0)};
    /* The child starts with every signal blocked: as a pid namespace's init it would silently
     * drop any signal without a handler that arrives before its reaper loop runs. The command
     * gets an empty mask at exec. */
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &old);
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        sbx_child_main(a);
    int e = errno;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        return sbx_error_set(err, SBX_EGENERIC, e, "clone the sandbox");
    sb->pid = (pid_t)pid;
    sb->pidfd = pidfd;
    sb->is_child = true;
    return 0;
}

static int
await_ready(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    struct sbx_sync_msg m;
    int r = sbx_sync_recv(sb->sync_fd, &m);
    if (r == 1 && m.type == SBX_SYNC_READY)
        return 0;
    if (r == 1 && m.type == SBX_SYNC_ERROR)
        return sbx_error_set(err, SBX_EGENERIC, m.err, "set up sandbox: %s", m.msg);
    return sbx_error_set(err, SBX_EGENERIC, r < 0 ? -r : 0, "sandbox init died during setup");
}

struct cg_attach_job {
    struct sbx_rt_sandbox *sb;
    int ret;
    sbx_error *err;
};

static void *
cg_attach_main(void *arg)
{
    struct cg_attach_job *j = arg;
    j->ret = j->sb->cg.ops->attach(&j->sb->cg, j->sb->pid, &j->err);
    return NULL;
}

/* v1 only (v2 clones straight into the cgroup): move the init into its cgroups. The first
 * cgroup.procs write after a quiet spell waits for an RCU grace period in the kernel (the
 * global cgroup_threadgroup_rwsem; ~10 ms at HZ=250), so with bridge networking the attach
 * runs on a thread while the veth is set up. The child waits for GO either way: nothing of
 * the sandbox runs before both are done. */
static int
attach_cgroups_begin(struct sbx_rt_sandbox *sb, bool overlap, struct cg_attach_job *j, pthread_t *t,
                     sbx_error **err)
{
    *j = (struct cg_attach_job){.sb = sb};
    if (sb->cg.ops->clone_into || !sbx_cg_any_dir(&sb->cg))
        return 0;
    if (overlap && pthread_create(t, NULL, cg_attach_main, j) == 0)
        return 1;
    return sb->cg.ops->attach(&sb->cg, sb->pid, err);
}

static int
attach_cgroups_end(struct cg_attach_job *j, pthread_t t, int ret, sbx_error **err)
{
    (void)pthread_join(t, NULL);
    if (ret == 0 && j->ret < 0) {
        if (err)
            sbx_error_move(err, &j->err);
        ret = j->ret;
    }
    sbx_error_clear(&j->err);
    return ret;
}

static int
attach_host_side(struct sbx_rt_sandbox *sb, const struct sbx_rt_spec *spec, sbx_error **err)
{
    int ret = spec->userns ? map_ids(sb, spec, err) : 0;
    struct cg_attach_job job;
    pthread_t t = 0;
    /* 1: attaching on thread t, 0: attached (or nothing to attach), < 0: failed */
    int running =
        ret == 0 ? attach_cgroups_begin(sb, spec->net == SBX_RT_NET_BRIDGE, &job, &t, err) : 0;
    if (running < 0)
        ret = running;
    sb->start_time = sbx_proc_start_time(sb->pid);
    if (ret == 0)
        ret = record(sb, err);
    if (ret == 0 && spec->net == SBX_RT_NET_BRIDGE) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
        sb->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
        sb->has_lease = true; /* recorded before it exists */
        ret = sb->netns_fd < 0 ? sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", path)
                               : record(sb, err);
        if (ret == 0)
            ret =
                sb->rt->net_ops.attach(sb->rt->net_ops.net, &sb->lease, sb->id, sb->netns_fd, err);
    }
    if (running == 1)
        ret = attach_cgroups_end(&job, t, ret, err);
    return ret;
}

int
sbx_rt_create(struct sbx_rt_sandbox **out, struct sbx_rt *rt, const struct sbx_rt_spec *spec,
              sbx_error **err)
{
    int ret = check_spec(rt, spec, err);
    if (ret < 0)
        return ret;
    char id[64];
    make_id(id, sizeof id, spec->id);
    struct sbx_rt_sandbox *sb = sandbox_new(rt, id);
    sb->net = spec->net;
    sb->as_init = spec->as_init;
    sb->memory_limit = spec->memory_bytes;
    struct sbx_child_args *a = sbx_xcalloc(1, sizeof *a);
    ret = prepare_host(sb, spec, err);
    if (ret == 0)
        ret = child_args(a, sb, spec, err);
    if (ret == 0)
        ret = spawn(sb, a, err);
    if (ret == 0)
        ret = attach_host_side(sb, spec, err);
    /* spec->start: GO goes out now and the child never blocks on it; READY (or a setup
     * error) is read by sbx_rt_wait. Saves a round trip through the scheduler. */
    if (ret == 0 && spec->start) {
        sb->start_unconfirmed = !spec->as_init;
        ret = sbx_rt_start(sb, err);
    } else if (ret == 0)
        ret = await_ready(sb, err);
    free((void *)a->scratch);
    free((void *)a->lower_host);
    free((void *)a->env);
    free(a);
    if (ret < 0) {
        sbx_autoerror sbx_error *ignored = NULL;
        (void)sbx_rt_destroy(sb, &ignored);
        sbx_rt_sandbox_free(sb);
        return sbx_error_wrap(err, "create sandbox `%s`", id);
    }
    *out = sb;
    return 0;
}

int
sbx_rt_start(struct sbx_rt_sandbox *sb, sbx_error **err)
{
    if (sb->started || sb->sync_fd < 0)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "sandbox `%s` already started", sb->id);
    if (sbx_sync_send(sb->sync_fd, SBX_SYNC_GO, 0, 0, NULL) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "start sandbox `%s`", sb->id);
    sb->started = true;
    if (sb->as_init) {
        /* The init execs directly: EOF on the socket means exec succeeded. */
        struct sbx_sync_msg m;
        int r;
        while ((r = sbx_sync_recv(sb->sync_fd, &m)) == 1 && m.type == SBX_SYNC_READY)
            ;
        (void)close(sb->sync_fd);
        sb->sync_fd = -1;
        if (r == 1 && m.type == SBX_SYNC_ERROR)
            return sbx_error_set(err, SBX_EGENERIC, m.err, "start sandbox `%s`: %s", sb->id, m.msg);
    }
    return 0;
}
