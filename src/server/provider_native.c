/*
 * provider_native.c - the `native` provider: every sandbox is a sbx runtime sandbox (its own
 * pid, mount, uts, ipc, net and cgroup namespaces, overlay root, cgroup limits, dropped
 * capabilities, no_new_privs, seccomp; see docs/runtime.md) with sbx-execd as PID 1.
 *
 * Images: the built-in `host` image or any image in the OCI store under the state dir (pulled or
 * imported with `sbx image`); a sandbox pins its image's layers until it is deleted.
 * Network (setting `network`): `bridge` (default: an address on the sbx0 bridge with NAT for
 * egress; nothing on the host network can connect in) or `none` (loopback only). Either way the
 * router reaches execd and any port through sbx_rt_connect, a socket made inside the sandbox's
 * network namespace. Pause/resume is the cgroup freezer. The runtime records
 * every sandbox under <state>/run before creating anything; a restarted server re-opens
 * running ones with sbx_rt_adopt (pid + start time checked) and sbx_rt_gc removes dead ones.
 */
/* Compiled (and linked to sbx_runtime) only when src/runtime is part of the build. */
#ifdef SBX_HAVE_RUNTIME

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/native.h"
#include "runtime/runtime.h"
#include "server/launch.h"
#include "server/procutil.h"
#include "server/provider.h"
#include "server/srvutil.h"

#define EXECD_PORT   44772
#define DEFAULT_PIDS 4096
#define EXECD_STATE  "/tmp/.sbx-execd"

const char *const sbx_provider_native_keys[] = {"execd", "ping_timeout_ms", "cgroup_parent",
                                                "network", NULL};

struct handle {
    char id[SBX_UUID_LEN + 1];
    struct sbx_rt_sandbox *h;
};

struct native_data {
    struct sbx_rt *rt;
    struct sbx_native_bridge *bridge;
    struct sbx_rt_net_ops net_ops;
    enum sbx_rt_netmode net;
    char *state_dir;
    char *execd;
    char *logs_dir;
    int ping_timeout_ms;
    pthread_mutex_t mu; /* guards hs */
    struct handle *hs;
    size_t n, cap;
};

static struct native_data *
ndata(struct sbx_provider *p)
{
    return p->data;
}

static const char *
priv_str(const struct sbx_record *sb, const char *key)
{
    const char *s = json_string_value(json_object_get(sb->priv, key));
    return s ? s : "";
}

/* ---- open handles (one per sandbox, re-opened with sbx_rt_adopt after a restart) ---- */

static struct sbx_rt_sandbox *
find_locked(struct native_data *d, const char *id)
{
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->hs[i].id, id) == 0)
            return d->hs[i].h;
    }
    return NULL;
}

static void
add_locked(struct native_data *d, const char *id, struct sbx_rt_sandbox *h)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 32;
        d->hs = sbx_xrealloc(d->hs, d->cap * sizeof(struct handle));
    }
    (void)snprintf(d->hs[d->n].id, sizeof d->hs[d->n].id, "%s", id);
    d->hs[d->n++].h = h;
}

/* The open handle of sandbox id, adopting it from the runtime's records when needed. */
static int
get_handle(struct native_data *d, const char *id, struct sbx_rt_sandbox **out, sbx_error **err)
{
    pthread_mutex_lock(&d->mu);
    struct sbx_rt_sandbox *h = find_locked(d, id);
    int r = 0;
    if (!h && (r = sbx_rt_adopt(&h, d->rt, id, err)) >= 0)
        add_locked(d, id, h);
    pthread_mutex_unlock(&d->mu);
    *out = h;
    return r;
}

/* Remove id's handle from the table; the caller owns it (may be NULL). */
static struct sbx_rt_sandbox *
take_handle(struct native_data *d, const char *id)
{
    pthread_mutex_lock(&d->mu);
    struct sbx_rt_sandbox *h = NULL;
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->hs[i].id, id) == 0) {
            h = d->hs[i].h;
            d->hs[i] = d->hs[--d->n];
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return h;
}

/* ---- create / start ---- */

static int
native_create(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)p;
    (void)err;
    char token[65];
    sbx_srv_random_hex(token, 32);
    (void)json_object_set_new(sb->priv, "token", json_string(token));
    return 0;
}

/* "500m" -> 500, "2" -> 2000, "1.5" -> 1500 (Kubernetes CPU quantities). */
static int
parse_cpu(const char *s, uint64_t *millis)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    if (strcmp(end, "m") == 0)
        *millis = (uint64_t)v;
    else if (*end == '\0')
        *millis = (uint64_t)(v * 1000.0);
    else
        return -1;
    return 0;
}

static int
limits_into(const struct sbx_record *sb, struct sbx_rt_spec *spec, sbx_error **err)
{
    const char *mem = json_string_value(json_object_get(sb->limits, "memory"));
    const char *cpu = json_string_value(json_object_get(sb->limits, "cpu"));
    if (mem && sbx_parse_size(mem, &spec->memory_bytes, err) < 0)
        return sbx_error_wrap(err, "resourceLimits.memory");
    if (cpu && parse_cpu(cpu, &spec->cpu_millis) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "resourceLimits.cpu `%s` is not a CPU quantity",
                             cpu);
    spec->pids_max = DEFAULT_PIDS;
    return 0;
}

static int
open_log(struct native_data *d, const char *id)
{
    sbx_autofree char *path = sbx_xasprintf("%s/%s.log", d->logs_dir, id);
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

/* execd writes one byte to its --ready-fd (the write end of ready_rd's pipe, fd 3 in the
 * sandbox) once it listens: no polling of /ping. EOF without that byte means it never got
 * there (setup failed, execd exited). */
static int
wait_ready(struct native_data *d, const struct sbx_record *sb, int ready_rd, sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)d->ping_timeout_ms;
    for (;;) {
        uint64_t now = sbx_now_ms();
        if (now >= deadline)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0, "execd was not ready within %d ms",
                                 d->ping_timeout_ms);
        struct pollfd p = {.fd = ready_rd, .events = POLLIN};
        int n = poll(&p, 1, (int)(deadline - now));
        if (n < 0 && errno == EINTR)
            continue;
        char c = 0;
        if (n > 0 && read(ready_rd, &c, 1) == 1 && c == 'R')
            return 0;
        if (n != 0)
            return sbx_error_set(err, SBX_EUNAVAIL, 0,
                                 "execd exited before it was ready (log: %s/%s.log)", d->logs_dir,
                                 sb->id);
    }
}

static void
record_pid(struct sbx_record *sb, struct sbx_rt_sandbox *h)
{
    pid_t pid = sbx_rt_sandbox_pid(h);
    struct sbx_proc_info pi = {0};
    (void)sbx_proc_info(pid, &pi, NULL);
    (void)json_object_set_new(sb->priv, "pid", json_integer(pid));
    (void)json_object_set_new(sb->priv, "start_time", json_integer((json_int_t)pi.start_time));
}

static int
native_start(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct native_data *d = ndata(p);
    struct sbx_launch l = {.execd = SBX_RT_EXECD_PATH,
                           .port = EXECD_PORT,
                           .token = priv_str(sb, "token"),
                           .state_dir = EXECD_STATE,
                           .home = "/root",
                           .ready_fd = 3};
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "readiness pipe");
    sbx_autoclose int ready_rd = ready[0];
    char **argv = sbx_launch_execd_argv(sb, &l);
    char **envp = sbx_launch_execd_env(sb, &l);
    sbx_autoclose int logfd = open_log(d, sb->id);
    struct sbx_rt_spec spec = {.id = sb->id,
                               .argv = argv,
                               .env = envp,
                               .execd_path = d->execd,
                               .net = d->net,
                               .as_init = true,
                               .pausable = true,
                               .start = true,
                               .stdio = {-1, logfd, logfd},
                               .has_fd3 = true,
                               .fd3 = ready[1]};
    struct sbx_rt_sandbox *h = NULL;
    struct sbx_native_image img = {0};
    const char *uri = json_string_value(json_object_get(sb->image, "uri"));
    int r = limits_into(sb, &spec, err);
    if (r >= 0)
        r = sbx_native_image_apply(&img, &spec, d->state_dir, uri, sb->id, err);
    if (r >= 0)
        r = sbx_rt_create(&h, d->rt, &spec, err);
    (void)close(ready[1]); /* execd holds the only write end now: its exit reads as EOF */
    sbx_native_image_release(&img, r < 0); /* the pin stays while the sandbox exists */
    sbx_strv_free(argv);
    sbx_strv_free(envp);
    if (r < 0)
        return sbx_error_wrap(err, "native sandbox `%s`", sb->id);
    pthread_mutex_lock(&d->mu);
    add_locked(d, sb->id, h);
    pthread_mutex_unlock(&d->mu);
    record_pid(sb, h);
    return wait_ready(d, sb, ready_rd, err);
}

/* ---- the rest of the lifecycle ---- */

static int
native_stop(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct sbx_rt_sandbox *h = NULL;
    if (get_handle(ndata(p), sb->id, &h, err) < 0)
        return -SBX_ENOTFOUND;
    return sbx_rt_kill(h, SIGKILL, err);
}

static int
native_pause(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct sbx_rt_sandbox *h = NULL;
    if (get_handle(ndata(p), sb->id, &h, err) < 0 || sbx_rt_pause(h, err) < 0)
        return sbx_error_wrap(err, "pause `%s`", sb->id);
    (void)json_object_set_new(sb->priv, "paused", json_true());
    return 0;
}

static int
native_resume(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct sbx_rt_sandbox *h = NULL;
    if (get_handle(ndata(p), sb->id, &h, err) < 0 || sbx_rt_resume(h, err) < 0)
        return sbx_error_wrap(err, "resume `%s`", sb->id);
    (void)json_object_set_new(sb->priv, "paused", json_false());
    return 0;
}

struct unpin_job {
    char *state_dir;
    char id[SBX_UUID_LEN + 1];
};

/* After the sandbox is gone: its image's layers may go. */
static void
unpin_when_gone(void *arg, int result)
{
    struct unpin_job *j = arg;
    if (result >= 0)
        sbx_native_image_unpin(j->state_dir, j->id);
    free(j->state_dir);
    free(j);
}

/* The sandbox is stopped (SIGKILL) before this returns; reaping its init (whose exit tears
 * down the namespaces), the lease, the cgroups, the record and the image pin follow on a
 * runtime thread, off the API's path. A server that dies meanwhile leaves a record whose init
 * is gone: the gc at the next start removes it. */
static int
native_delete(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct native_data *d = ndata(p);
    struct sbx_rt_sandbox *h = take_handle(d, sb->id);
    sbx_autoerror sbx_error *aerr = NULL;
    if (!h && sbx_rt_adopt(&h, d->rt, sb->id, &aerr) < 0) {
        /* Not running (or never made): gc removes the records whose init is gone. */
        struct sbx_rt_gc_stats st = {0};
        (void)sbx_rt_gc(&st, d->rt, false, NULL);
    }
    sbx_autofree char *log = sbx_xasprintf("%s/%s.log", d->logs_dir, sb->id);
    (void)unlink(log);
    if (!h) {
        sbx_native_image_unpin(d->state_dir, sb->id);
        return 0;
    }
    struct unpin_job *j = sbx_xcalloc(1, sizeof *j);
    j->state_dir = sbx_xstrdup(d->state_dir);
    (void)snprintf(j->id, sizeof j->id, "%s", sb->id);
    if (sbx_rt_destroy_async(h, unpin_when_gone, j, err) < 0) {
        unpin_when_gone(j, -1);
        return sbx_error_wrap(err, "delete `%s`", sb->id);
    }
    return 0;
}

static int
native_status(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_status *out,
              sbx_error **err)
{
    (void)p;
    (void)err;
    pid_t pid = (pid_t)json_integer_value(json_object_get(sb->priv, "pid"));
    uint64_t start = (uint64_t)json_integer_value(json_object_get(sb->priv, "start_time"));
    if (!sbx_proc_same(pid, start))
        sbx_provider_status_set(out, "dead", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
    else if (json_is_true(json_object_get(sb->priv, "paused")))
        sbx_provider_status_set(out, "frozen", SBX_CLASS_STARTABLE, "SANDBOX_PAUSED");
    else
        sbx_provider_status_set(out, "running", SBX_CLASS_USABLE, "SANDBOX_RUNNING");
    return 0;
}

static int
native_reconcile(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
                 sbx_error **err)
{
    struct sbx_rt_sandbox *h = NULL;
    sbx_autoerror sbx_error *aerr = NULL;
    if (get_handle(ndata(p), sb->id, &h, &aerr) < 0) {
        sbx_provider_status_set(out, "dead", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    record_pid(sb, h);
    return native_status(p, sb, out, err);
}

static int
native_connect(struct sbx_provider *p, const struct sbx_record *sb, int port, int *fd,
               sbx_error **err)
{
    struct sbx_rt_sandbox *h = NULL;
    if (get_handle(ndata(p), sb->id, &h, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s`", sb->id);
    return sbx_rt_connect(fd, h, (uint16_t)port, err);
}

static json_t *
native_proxy_headers(struct sbx_provider *p, const struct sbx_record *sb, int port)
{
    (void)p;
    if (port != EXECD_PORT)
        return NULL;
    return json_pack("{s:s}", "X-EXECD-ACCESS-TOKEN", priv_str(sb, "token"));
}

static void
free_data(struct native_data *d)
{
    for (size_t i = 0; i < d->n; i++)
        sbx_rt_sandbox_free(d->hs[i].h); /* handles only: the sandboxes keep running */
    free(d->hs);
    sbx_rt_close(d->rt);
    sbx_native_bridge_free(d->bridge);
    free(d->state_dir);
    pthread_mutex_destroy(&d->mu);
    free(d->execd);
    free(d->logs_dir);
    free(d);
}

static void
native_free(struct sbx_provider *p)
{
    free_data(ndata(p));
    free(p);
}

static const struct sbx_provider_ops native_ops = {
    .create = native_create,
    .start = native_start,
    .stop = native_stop,
    .pause = native_pause,
    .resume = native_resume,
    .delete = native_delete,
    .status = native_status,
    .connect = native_connect,
    .reconcile = native_reconcile,
    .proxy_headers = native_proxy_headers,
    .free = native_free,
};

/* The daemon bound into every sandbox must be static (any image: no libc needed). A sanitizer
 * build's sbx-execd is dynamic, and that build also makes sbx-execd-static: prefer it. */
static char *
default_execd(const char *exe_dir)
{
    char *path = sbx_xasprintf("%s/sbx-execd-static", exe_dir);
    if (access(path, X_OK) == 0)
        return path;
    free(path);
    return sbx_xasprintf("%s/sbx-execd", exe_dir);
}

static int
parse_network(const char *s, enum sbx_rt_netmode *out, sbx_error **err)
{
    if (!s || strcmp(s, "bridge") == 0)
        *out = SBX_RT_NET_BRIDGE;
    else if (strcmp(s, "none") == 0)
        *out = SBX_RT_NET_NONE;
    else
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.network must be \"bridge\" or \"none\", not `%s`",
                             s);
    return 0;
}

int
sbx_provider_native_new(const json_t *settings, const struct sbx_provider_env *env,
                        struct sbx_provider **out, sbx_error **err)
{
    const char *execd = json_string_value(json_object_get(settings, "execd"));
    json_t *ping = json_object_get(settings, "ping_timeout_ms");
    if (ping && (!json_is_integer(ping) || json_integer_value(ping) < 100))
        return sbx_error_set(err, SBX_EINVAL, 0, "`ping_timeout_ms` must be an integer >= 100");
    enum sbx_rt_netmode net = SBX_RT_NET_BRIDGE;
    if (parse_network(json_string_value(json_object_get(settings, "network")), &net, err) < 0)
        return -SBX_EINVAL;
    struct native_data *d = sbx_xcalloc(1, sizeof *d);
    d->net = net;
    d->state_dir = sbx_xstrdup(env->state_dir);
    (void)sbx_native_bridge_new(&d->bridge, env->state_dir, NULL);
    sbx_native_bridge_ops(&d->net_ops, d->bridge);
    /* The bridge is set up on the host only when the first bridged sandbox is made. */
    struct sbx_rt_config rc = {.state_dir = env->state_dir,
                               .cgroup_parent =
                                   json_string_value(json_object_get(settings, "cgroup_parent")),
                               .net_ops = &d->net_ops};
    pthread_mutex_init(&d->mu, NULL);
    if (sbx_rt_open(&d->rt, &rc, err) < 0) {
        free_data(d);
        return sbx_error_wrap(err, "open the native runtime");
    }
    /* Records of sandboxes whose init is gone (e.g. a delete's teardown cut short by a crash:
     * the store no longer knows them) are removed now; live ones are left alone. */
    struct sbx_rt_gc_stats gs = {0};
    sbx_autoerror sbx_error *gerr = NULL;
    if (sbx_rt_gc(&gs, d->rt, false, &gerr) < 0)
        sbx_warn("provider `native`: %s", sbx_error_msg(gerr));
    d->execd = execd ? sbx_xstrdup(execd) : default_execd(env->exe_dir);
    d->logs_dir = sbx_xasprintf("%s/native-logs", env->state_dir);
    d->ping_timeout_ms = ping ? (int)json_integer_value(ping) : 10000;
    if (sbx_mkdir_p(d->logs_dir, 0700, err) < 0) {
        free_data(d);
        return -SBX_EIO;
    }
    if (access(d->execd, X_OK) < 0)
        sbx_warn("provider `native`: `%s` is not an executable; creates will fail until it is "
                 "(set providers.native.execd)",
                 d->execd);
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &native_ops;
    p->data = d;
    *out = p;
    return 0;
}

#endif /* SBX_HAVE_RUNTIME */
