/*
 * native.c - the `native` provider: every sandbox is a sbx runtime sandbox (its own
 * pid, mount, uts, ipc, net and cgroup namespaces, overlay root, cgroup limits, dropped
 * capabilities, no_new_privs, seccomp; see docs/runtime.md) with sbx-execd as PID 1.
 *
 * Images: the built-in `host` image or any image in the OCI store under the state dir (pulled or
 * imported with `sbx image`); a sandbox pins its image's layers until it is deleted.
 * Network (setting `network`): `bridge` (default: an address on the sbx0 bridge with NAT for
 * egress; nothing on the host network can connect in) or `none` (loopback only). Either way the
 * router reaches execd and any port through sbx_rt_connect, a socket made inside the sandbox's
 * network namespace. The writable layer is on disk under <state>/upper (setting `upper`;
 * "tmpfs" puts it in RAM, and such a sandbox cannot be stopped). Stop destroys the runtime
 * sandbox but keeps its layer (marked kept, so gc leaves it) and its image pin; start runs a new
 * runtime sandbox of the same id on that layer, with the image digest of the first start;
 * delete removes both. Volumes: `host` binds from the allow-list `allowed_host_paths`
 * and `pvc` named volumes under <state>/volumes (volumes.c); they are resolved at start from
 * the request's volumes kept in the record (priv.volumes), so a restarted server still knows
 * what to release. Pause/resume is the cgroup freezer. The runtime records
 * every sandbox under <state>/run before creating anything; a restarted server re-opens
 * running ones with sbx_rt_adopt (pid + start time checked) and sbx_rt_gc removes dead ones.
 */
/* Compiled (and linked to sbx_runtime) only when src/runtime is part of the build. */
#ifdef SBX_HAVE_RUNTIME

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "image/image.h"
#include "runtime/native.h"
#include "runtime/runtime.h"
#include "providers/credca.h"
#include "providers/launch.h"
#include "providers/procutil.h"
#include "providers/providers.h"
#include "server/credvault.h"
#include "server/provider.h"
#include "server/srvutil.h"
#include "providers/volumes.h"

#define EXECD_PORT 44772
/* The create extension that puts a sandbox in a network group (docs/network.md). */
#define SBX_NETWORK_GROUP_EXT "sbx.network.group"
/* Network namespaces kept ready (docs/server.md "netns_pool"); the runtime's limit. */
#define SBX_NATIVE_NETNS_POOL_DEFAULT 4
#define SBX_NATIVE_NETNS_POOL_MAX     64
/* Cgroups of deleted sandboxes kept for the next creates, per hierarchy (cgroup v1): enough
 * for creates that follow deletes in bursts, few enough that what they hold (a memory cgroup's
 * kernel state, ~0.3 MiB charged each) stays small when nothing is created again. */
#define SBX_NATIVE_SPARE_CGROUPS 32
/* Defaults that protect the host (docs/server.md, native: "Limits that protect the host"). */
#define DEFAULT_PIDS          "1024" /* per sandbox: a fork bomb stays small */
#define DEFAULT_TOTAL_MEMORY  "90%"  /* of the host's RAM, all sandboxes together */
#define DEFAULT_TOTAL_PIDS    "50%"  /* of the host's pid_max (and threads-max) */
#define DEFAULT_MIN_FREE_DISK "5%"   /* of the state dir's file system: below, creates fail */
#define DEFAULT_TOTAL_DISK    "50%"  /* of it, for all writable layers (never more than is free) */
#define EXECD_STATE           SBX_RT_EXECD_STATE

/* clang-format off */
const char *const sbx_provider_native_keys[] = {
    "execd", "ping_timeout_ms", "cgroup_parent", "network", "upper", "upper_size",
    "allowed_host_paths", "netns_pool", "bridge", "subnet", "network_allow", "pids",
    "total_memory", "total_pids", "min_free_disk", "total_disk", "egress_dns",
    "credproxy_upstream_ca", "leaf_size", NULL};
/* clang-format on */

struct native_data {
    struct sbx_rt *rt;
    struct sbx_native_bridge *bridge;
    struct sbx_rt_net_ops net_ops;
    enum sbx_rt_netmode net;
    enum sbx_rt_upper upper;
    uint64_t upper_size;    /* the layer's size (tmpfs) or cap (disk); 0 = the runtime's default */
    uint64_t pids;          /* per sandbox */
    uint64_t min_free_disk; /* bytes free on the state dir's file system below which creates
                               are refused; 0 = no check */
    struct sbx_vols *vols;
    char *state_dir;
    char *execd;
    int ping_timeout_ms;
    /* egress policies (docs/network.md "Egress policy"): the resolver and the sets, made on
     * the first sandbox with a policy; egress_dns: its upstream resolvers (setting
     * `egress_dns`; NULL: the sandboxes' resolvers) */
    pthread_mutex_t egress_mu;
    struct sbx_egress *egress;
    struct sbx_credvault *vault; /* the server's, for the credential proxy */
    char *upstream_ca;           /* setting `credproxy_upstream_ca` (NULL: the system's CAs) */
    char egress_gw[16];
    char *egress_dns;
    pthread_mutex_t mu;   /* guards hs */
    struct sbx_strmap hs; /* sandbox id -> its open handle (struct sbx_rt_sandbox *) */
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
    return sbx_strmap_get(&d->hs, id);
}

static void
add_locked(struct native_data *d, const char *id, struct sbx_rt_sandbox *h)
{
    (void)sbx_strmap_put(&d->hs, id, h);
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
    struct sbx_rt_sandbox *h = sbx_strmap_del(&d->hs, id);
    pthread_mutex_unlock(&d->mu);
    return h;
}

/* ---- egress policies ---- */

static bool
is_stopped(const struct sbx_record *sb)
{
    return json_is_true(json_object_get(sb->priv, "stopped"));
}

/* The sandbox's egress policy (priv), or NULL when it has none. */
static struct sbx_egress_policy *
policy_of(const struct sbx_record *sb)
{
    const json_t *pol = json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "policy");
    struct sbx_egress_policy *p = NULL;
    if (pol && sbx_egress_policy_parse(pol, &p, NULL) < 0)
        return NULL; /* never: stored after the same check */
    return p;
}

static bool
has_policy(const struct sbx_record *sb)
{
    return json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "policy") != NULL;
}

/* The credential proxy's values of sandbox id (sbx_egress_config.values). */
static int
vault_values(void *arg, const char *id, json_t **values, sbx_error **err)
{
    if (!arg)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "no credential vault store");
    return sbx_credvault_get(arg, id, values, err);
}

/* The bindings of the sandbox's Credential Vault, or NULL (no credentialProxy, no vault). */
static const json_t *
bindings_of(const struct sbx_record *sb)
{
    const json_t *eg = json_object_get(sb->priv, SBX_EGRESS_PRIV);
    if (!json_is_true(json_object_get(eg, "credentialProxy")))
        return NULL;
    return json_object_get(json_object_get(eg, "vault"), "bindings");
}

/* The resolver and sets of this server's bridge, made on first use (the bridge is set up
 * then if it is not yet). */
static struct sbx_egress *
egress_service(struct native_data *d, sbx_error **err)
{
    pthread_mutex_lock(&d->egress_mu);
    if (!d->egress) {
        struct sbx_net_info ni;
        int r = sbx_native_bridge_host(d->bridge, &ni, err);
        struct sbx_egress_config cfg = {.bridge = ni.bridge,
                                        .listen = ni.gateway,
                                        .upstream = d->egress_dns ? d->egress_dns : ni.dns,
                                        .values = vault_values,
                                        .ca = sbx_credca_get,
                                        .values_arg = d->vault,
                                        .upstream_ca = d->upstream_ca};
        if (r >= 0 && sbx_egress_open(&d->egress, &cfg, err) >= 0)
            (void)snprintf(d->egress_gw, sizeof d->egress_gw, "%s", ni.gateway);
    }
    struct sbx_egress *e = d->egress;
    pthread_mutex_unlock(&d->egress_mu);
    return e;
}

/* The sandbox's address on the bridge ("" when it has none). */
static void
address_of(const struct sbx_rt_sandbox *h, char out[16])
{
    const struct sbx_rt_lease *l = sbx_rt_sandbox_lease(h);
    out[0] = '\0';
    if (l)
        (void)snprintf(out, 16, "%.*s", (int)strcspn(l->address, "/"), l->address);
}

/* Enforce sb's policy on the running sandbox h. */
static int
egress_enforce(struct native_data *d, const struct sbx_record *sb, struct sbx_rt_sandbox *h,
               sbx_error **err)
{
    char addr[16];
    address_of(h, addr);
    /* a handle adopted after a restart has no lease: the address recorded at its start */
    if (!addr[0])
        (void)snprintf(addr, sizeof addr, "%s", priv_str(sb, "address"));
    struct sbx_egress *e = egress_service(d, err);
    if (!e)
        return sbx_error_wrap(err, "egress policy of `%s`", sb->id);
    if (!addr[0])
        return sbx_error_set(err, SBX_EINVAL, 0, "sandbox `%s` has no bridge address", sb->id);
    struct sbx_egress_policy *p = policy_of(sb);
    int r = p ? sbx_egress_apply(e, sb->id, addr, p, err) : 0;
    sbx_egress_policy_free(p);
    /* after the policy: the proxy's redirect needs the sandbox's entry */
    if (r >= 0 && p)
        r = sbx_egress_vault(e, sb->id, bindings_of(sb), err);
    return r;
}

/* A sandbox without a policy got its address: nothing a former holder was allowed or refused
 * stays with it. Only when policies are in use (the resolver exists). */
static void
egress_clear(struct native_data *d, struct sbx_rt_sandbox *h)
{
    char addr[16];
    pthread_mutex_lock(&d->egress_mu);
    struct sbx_egress *e = d->egress;
    pthread_mutex_unlock(&d->egress_mu);
    address_of(h, addr);
    sbx_autoerror sbx_error *err = NULL;
    if (e && addr[0] && sbx_egress_clear_addr(e, addr, &err) < 0)
        sbx_warn("%s", sbx_error_msg(err));
}

/* The sandbox is gone or stopped: its address leaves the sets. */
static void
egress_forget(struct native_data *d, const char *id)
{
    pthread_mutex_lock(&d->egress_mu);
    struct sbx_egress *e = d->egress;
    pthread_mutex_unlock(&d->egress_mu);
    sbx_autoerror sbx_error *err = NULL;
    if (e && sbx_egress_drop(e, id, &err) < 0)
        sbx_warn("sandbox %s: %s", id, sbx_error_msg(err));
}

/* The egress API changed the policy (stored already): enforce it now if the sandbox runs. */
static int
native_egress(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct native_data *d = ndata(p);
    struct sbx_rt_sandbox *h = NULL;
    if (is_stopped(sb))
        return 0;
    if (get_handle(d, sb->id, &h, err) < 0 || egress_enforce(d, sb, h, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s`", sb->id);
    return 0;
}

/* A policed sandbox is created with its command held (spec.start false), policed, and only
 * then let go: not one packet of it leaves before its policy is enforced. Its resolv.conf
 * names sbx's resolver on the gateway. */
static int
egress_prepare(struct native_data *d, const struct sbx_record *sb, struct sbx_rt_spec *spec,
               char resolv[64], sbx_error **err)
{
    if (!has_policy(sb))
        return 0;
    if (d->net != SBX_RT_NET_BRIDGE)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "networkPolicy needs the bridge network (providers.native.network "
                             "is \"none\")");
    if (!egress_service(d, err))
        return sbx_error_wrap(err, "networkPolicy");
    (void)snprintf(resolv, 64, "nameserver %s\n", d->egress_gw);
    spec->resolv_conf = resolv;
    spec->start = false;
    return 0;
}

static int
egress_started(struct native_data *d, struct sbx_record *sb, struct sbx_rt_sandbox *h,
               sbx_error **err)
{
    char addr[16];
    address_of(h, addr);
    (void)json_object_set_new(sb->priv, "address", json_string(addr));
    if (!has_policy(sb)) {
        egress_clear(d, h);
        return 0;
    }
    int r = egress_enforce(d, sb, h, err);
    if (r >= 0)
        r = sbx_rt_start(h, err);
    if (r < 0) {
        (void)sbx_rt_destroy(h, NULL);
        sbx_rt_sandbox_free(h);
        egress_forget(d, sb->id);
    }
    return r;
}

/* ---- create / start ---- */

/* Where this sandbox's writable layer lives: chosen at create (the `upper` setting then) and
 * kept for its life, so a start after a config change still finds the layer a stop kept. */
static enum sbx_rt_upper
upper_of(const struct native_data *d, const struct sbx_record *sb)
{
    const char *u = priv_str(sb, "upper");
    if (!*u)
        return d->upper;
    return strcmp(u, "tmpfs") == 0 ? SBX_RT_UPPER_TMPFS : SBX_RT_UPPER_DISK;
}

static int
native_create(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)err;
    char token[65];
    sbx_srv_random_hex(token, 32);
    (void)json_object_set_new(sb->priv, "token", json_string(token));
    bool tmpfs = ndata(p)->upper == SBX_RT_UPPER_TMPFS;
    (void)json_object_set_new(sb->priv, "upper", json_string(tmpfs ? "tmpfs" : "disk"));
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
limits_into(const struct sbx_record *sb, struct sbx_rt_spec *spec, uint64_t pids_default,
            sbx_error **err)
{
    const char *mem = json_string_value(json_object_get(sb->limits, "memory"));
    const char *cpu = json_string_value(json_object_get(sb->limits, "cpu"));
    if (mem && sbx_parse_size(mem, &spec->memory_bytes, err) < 0)
        return sbx_error_wrap(err, "resourceLimits.memory");
    if (cpu && parse_cpu(cpu, &spec->cpu_millis) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "resourceLimits.cpu `%s` is not a CPU quantity",
                             cpu);
    spec->pids_max = pids_default;
    return 0;
}

/* execd writes `R` to its --ready-fd (the write end of ready_rd's pipe, fd 3 in the sandbox)
 * once it listens: no polling of /ping. `E` and a reason: it could not start. EOF without
 * either means it never got that far (the sandbox's setup failed, or execd died). */
static int
wait_ready(struct native_data *d, const struct sbx_record *sb, int ready_rd, sbx_error **err)
{
    (void)sb;
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
        if (n == 0)
            continue;
        /* Bounded: the sandbox controls what comes through this pipe. */
        char msg[512];
        ssize_t got = read(ready_rd, msg, sizeof msg - 1);
        if (got > 0 && msg[0] == 'R')
            return 0;
        msg[got > 0 ? got : 0] = '\0';
        for (char *c = msg; *c; c++) { /* printable ASCII only: it ends up in a JSON error */
            if (*c < 0x20 || *c >= 0x7f)
                *c = '?';
        }
        if (got > 1 && msg[0] == 'E')
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "execd could not start: %s", msg + 1);
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "execd exited before it was ready");
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

/* A sandbox writes its layer to the state dir's file system; a nearly full one would fill up
 * under the sandboxes already running, and with the store and records on it, the server's
 * own writes would fail. So a create (or start) is refused while less than min_free_disk is
 * free: the host keeps room, and the error says why. */
static int
disk_room(const struct native_data *d, sbx_error **err)
{
    struct statvfs vs;
    if (!d->min_free_disk || statvfs(d->state_dir, &vs) < 0)
        return 0;
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    if (avail >= d->min_free_disk)
        return 0;
    return sbx_error_set(err, SBX_ELIMIT, 0,
                         "the state dir's file system (%s) has %" PRIu64 " MiB free, less than "
                         "providers.native.min_free_disk (%" PRIu64 " MiB): free space or lower "
                         "the setting",
                         d->state_dir, avail >> 20, d->min_free_disk >> 20);
}

/* extensions["sbx.network.group"]: sandboxes of one group reach each other on the bridge;
 * every other sandbox is isolated from them (and they from it). */
static int
network_group(struct native_data *d, const struct sbx_record *sb, struct sbx_rt_spec *spec,
              sbx_error **err)
{
    const json_t *v = json_object_get(sb->extensions, SBX_NETWORK_GROUP_EXT);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return sbx_error_set(err, SBX_EINVAL, 0, "extensions.%s must be a string",
                             SBX_NETWORK_GROUP_EXT);
    if (d->net != SBX_RT_NET_BRIDGE)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "extensions.%s needs the bridge network (providers.native.network "
                             "is \"none\")",
                             SBX_NETWORK_GROUP_EXT);
    if (sbx_native_bridge_group(d->bridge, json_string_value(v), &spec->net_group, err) < 0)
        return sbx_error_wrap(err, "extensions.%s", SBX_NETWORK_GROUP_EXT);
    return 0;
}

/* What a sandbox with credentialProxy gets for HTTPS (credca.h): its CA bundle bound over the
 * image's, named in its environment. */
struct credca_extra {
    char bundle[4096];          /* the host path (kept until the spec is used) */
    struct sbx_rt_volume *vols; /* the spec's volumes and the bundle's (the caller frees it) */
    char ***envp;               /* grows by three */
};

static int
credca_into(struct native_data *d, const struct sbx_record *sb, struct sbx_rt_spec *spec,
            struct credca_extra *x, sbx_error **err)
{
    const json_t *eg = json_object_get(sb->priv, SBX_EGRESS_PRIV);
    if (!json_is_true(json_object_get(eg, "credentialProxy")) || !d->vault)
        return 0;
    if (sbx_credca_prepare(d->vault, d->state_dir, sb->id, spec, x->bundle, err) < 0)
        return -SBX_EIO;
    if (!x->bundle[0])
        return 0;
    x->vols = sbx_xcalloc(spec->n_volumes + 1, sizeof *x->vols);
    if (spec->n_volumes)
        memcpy(x->vols, spec->volumes, spec->n_volumes * sizeof *x->vols);
    x->vols[spec->n_volumes] =
        (struct sbx_rt_volume){.src = x->bundle, .dst = SBX_CREDCA_BUNDLE, .ro = true};
    spec->volumes = x->vols;
    spec->n_volumes++;
    char **env = *x->envp;
    size_t n = 0;
    while (env[n])
        n++;
    env = sbx_xrealloc(env, (n + 4) * sizeof *env);
    env[n++] = sbx_xstrdup("SSL_CERT_FILE=" SBX_CREDCA_BUNDLE);
    env[n++] = sbx_xstrdup("REQUESTS_CA_BUNDLE=" SBX_CREDCA_BUNDLE);
    env[n++] = sbx_xstrdup("NODE_EXTRA_CA_CERTS=" SBX_CREDCA_BUNDLE);
    env[n] = NULL;
    *x->envp = env;
    spec->env = env;
    return 0;
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
    /* A start after a stop runs on the layer the stop kept. */
    bool restart = is_stopped(sb);
    enum sbx_rt_upper upper = upper_of(d, sb);
    struct sbx_rt_spec spec = {.id = sb->id,
                               .argv = argv,
                               .env = envp,
                               .execd_path = d->execd,
                               .net = d->net,
                               .upper = upper,
                               .tmpfs_bytes = upper == SBX_RT_UPPER_TMPFS ? d->upper_size : 0,
                               .disk_bytes = upper == SBX_RT_UPPER_DISK ? d->upper_size : 0,
                               .reuse_upper = restart,
                               .as_init = true,
                               .pausable = true,
                               .start = true,
                               /* the sandbox's /dev/null: execd keeps its log and the
                                * entrypoint's output in memory (GET /logs), never in a
                                * host file the sandbox could reach through /proc/1/fd */
                               .stdio = {-1, -1, -1},
                               .has_fd3 = true,
                               .fd3 = ready[1]};
    struct sbx_rt_sandbox *h = NULL;
    struct sbx_native_image img = {0};
    struct sbx_vols_mounts mounts = {0};
    char resolv[64];
    const json_t *vols = json_object_get(sb->priv, "volumes");
    /* ... and with the exact image of the first start (its digest): the layer's files are
     * changes on top of that image. */
    const char *digest = json_string_value(json_object_get(sb->priv, "image_digest"));
    const char *uri = digest ? digest : json_string_value(json_object_get(sb->image, "uri"));
    int r = disk_room(d, err);
    if (r >= 0)
        r = egress_prepare(d, sb, &spec, resolv, err);
    if (r >= 0)
        r = limits_into(sb, &spec, d->pids, err);
    if (r >= 0)
        r = network_group(d, sb, &spec, err);
    if (r >= 0)
        r = sbx_native_image_apply(&img, &spec, d->state_dir, uri, sb->id, err);
    if (r >= 0 && img.img)
        (void)json_object_set_new(sb->priv, "image_digest", json_string(img.img->digest));
    if (r >= 0 && json_array_size(vols) > 0) {
        r = sbx_vols_attach(d->vols, sb->id, vols, &mounts, err);
        spec.volumes = mounts.vols;
        spec.n_volumes = mounts.n;
    }
    struct credca_extra cx = {.envp = &envp};
    if (r >= 0)
        r = credca_into(d, sb, &spec, &cx, err);
    bool attached = r >= 0 && json_array_size(vols) > 0;
    if (r >= 0)
        r = sbx_rt_create(&h, d->rt, &spec, err);
    if (r >= 0)
        r = egress_started(d, sb, h, err); /* destroys h when it fails */
    (void)close(ready[1]); /* execd holds the only write end now: its exit reads as EOF */
    if (attached)
        sbx_vols_started(d->vols, sb->id, &mounts); /* its record says whether it lives now */
    /* The pin stays while the sandbox exists, also while it is stopped (a failed start after a
     * stop keeps it: the kept layer still needs that image). */
    sbx_native_image_release(&img, r < 0 && !restart);
    sbx_strv_free(argv);
    sbx_strv_free(envp);
    free(cx.vols);
    if (r < 0)
        return sbx_error_wrap(err, "native sandbox `%s`", sb->id);
    pthread_mutex_lock(&d->mu);
    add_locked(d, sb->id, h);
    pthread_mutex_unlock(&d->mu);
    (void)json_object_del(sb->priv, "stopped");
    record_pid(sb, h);
    return wait_ready(d, sb, ready_rd, err);
}

/* ---- the rest of the lifecycle ---- */

/* No handle of id can be had (stopped, never made, or a create whose own teardown failed and
 * left a record without an init): its record, if any, goes with what it holds. The manager
 * runs one operation per sandbox at a time, so no create of id is under way that this could
 * cut short; and only this record is read, not every sandbox's (a delete of a stopped
 * sandbox stays flat in the count). */
static int
forget_runtime(struct native_data *d, const char *id, sbx_error **err)
{
    return sbx_rt_gc_id(d->rt, id, err);
}

/* The runtime sandbox id (its handle, or its record when the init is gone) is destroyed. */
static int
destroy_runtime(struct native_data *d, const char *id, bool paused, sbx_error **err)
{
    struct sbx_rt_sandbox *h = take_handle(d, id);
    sbx_autoerror sbx_error *aerr = NULL;
    if (!h && sbx_rt_adopt(&h, d->rt, id, &aerr) < 0)
        return forget_runtime(d, id, err);
    /* A frozen cgroup (v1) holds a SIGKILL until it is thawed. */
    if (paused)
        (void)sbx_rt_resume(h, NULL);
    int r = sbx_rt_destroy(h, err);
    sbx_rt_sandbox_free(h);
    return r;
}

static void
mark_stopped(struct sbx_record *sb)
{
    (void)json_object_set_new(sb->priv, "stopped", json_true());
    (void)json_object_set_new(sb->priv, "paused", json_false());
    (void)json_object_del(sb->priv, "pid");
    (void)json_object_del(sb->priv, "start_time");
}

/* Stop is not delete: the processes, cgroups, bridge lease and runtime record go; the writable
 * layer (kept first, so no destroy or gc removes it) and the image pin stay for the next
 * start. A layer in RAM would be lost: refused, before anything is touched. */
static int
native_stop(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct native_data *d = ndata(p);
    if (upper_of(d, sb) == SBX_RT_UPPER_TMPFS)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "sandbox `%s` keeps its writable layer in memory "
                             "(providers.native.upper = \"tmpfs\"): stopping it would lose its "
                             "files; delete it instead",
                             sb->id);
    if (sbx_rt_upper_keep(d->rt, sb->id, err) < 0 ||
        destroy_runtime(d, sb->id, json_is_true(json_object_get(sb->priv, "paused")), err) < 0 ||
        sbx_rt_upper_settle(d->rt, sb->id, err) < 0)
        return sbx_error_wrap(err, "stop `%s`", sb->id);
    egress_forget(d, sb->id); /* its processes are dead: nothing is loosened */
    mark_stopped(sb);
    return 0;
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

/* The layer's files are read as the host sees them (<state>/upper/<id>/upper) while the
 * sandbox's cgroup is frozen: nothing in it can write, rename or swap a path for a symlink
 * during the walk, and the walk follows no symlink (sbx_image_layer_write). A paused sandbox
 * stays paused, a stopped one has nothing running. */
static int
native_snapshot(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_snapshot_capture *c,
                sbx_error **err)
{
    struct native_data *d = ndata(p);
    const char *base = json_string_value(json_object_get(sb->priv, "image_digest"));
    if (upper_of(d, sb) == SBX_RT_UPPER_TMPFS)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "sandbox `%s` keeps its writable layer in memory "
                             "(providers.native.upper = \"tmpfs\"): it cannot be snapshotted",
                             sb->id);
    if (!base)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "sandbox `%s` runs the built-in `host` image (the host's own "
                             "/usr): only sandboxes of OCI images can be snapshotted",
                             sb->id);
    sbx_autofree char *dir = NULL;
    if (sbx_rt_upper_files(d->rt, sb->id, &dir, err) < 0)
        return sbx_error_wrap(err, "snapshot `%s`", sb->id);
    bool running = !json_is_true(json_object_get(sb->priv, "stopped"));
    bool freeze = running && !json_is_true(json_object_get(sb->priv, "paused"));
    struct sbx_rt_sandbox *h = NULL;
    if (freeze && get_handle(d, sb->id, &h, err) < 0)
        return sbx_error_wrap(err, "snapshot `%s`", sb->id);
    c->fd = open(c->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (c->fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "temp file in `%s`", c->tmp_dir);
    uint64_t t0 = sbx_now_ns();
    if (freeze && sbx_rt_pause(h, err) < 0)
        return sbx_error_wrap(err, "freeze `%s` for its snapshot", sb->id);
    int r = sbx_image_layer_write(dir, c->fd, &c->diff_id, NULL, err);
    sbx_autoerror sbx_error *terr = NULL;
    if (freeze && sbx_rt_resume(h, &terr) < 0) {
        sbx_error_log("sandbox %s: thaw after its snapshot: %s", sb->id, sbx_error_msg(terr));
        if (r == 0)
            r = sbx_error_set(err, SBX_EIO, 0, "thaw `%s` after its snapshot: %s", sb->id,
                              sbx_error_msg(terr));
    }
    c->frozen_us = (sbx_now_ns() - t0) / 1000;
    if (r < 0)
        return sbx_error_wrap(err, "snapshot `%s`", sb->id);
    c->is_layer = true;
    c->base = sbx_xstrdup(base);
    return 0;
}

struct gone_job {
    struct native_data *d; /* outlives the job: sbx_rt_close waits for async destroys */
    char id[SBX_UUID_LEN + 1];
    json_t *volumes; /* the record's priv.volumes (a copy), may be NULL */
};

static void
gone_job_free(struct gone_job *j)
{
    json_decref(j->volumes);
    free(j);
}

/* What a sandbox keeps outside its runtime record, once that is gone: a kept writable layer
 * (the sandbox was stopped once), its image pin, its volumes. */
static int
release_gone(struct gone_job *j, sbx_error **err)
{
    egress_forget(j->d, j->id); /* its processes are dead: nothing is loosened */
    if (sbx_rt_upper_remove(j->d->rt, j->id, err) < 0)
        return -SBX_EGENERIC;
    sbx_native_image_unpin(j->d->state_dir, j->id);
    sbx_vols_detach(j->d->vols, j->id, j->volumes);
    return 0;
}

static void
release_when_gone(void *arg, int result)
{
    struct gone_job *j = arg;
    sbx_autoerror sbx_error *err = NULL;
    /* A failed teardown leaves the record for gc: the layer, pin and volumes stay with it. */
    if (result >= 0 && release_gone(j, &err) < 0)
        sbx_warn("delete `%s`: %s", j->id, sbx_error_msg(err));
    gone_job_free(j);
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
    if (!h && sbx_rt_adopt(&h, d->rt, sb->id, &aerr) < 0 && forget_runtime(d, sb->id, err) < 0)
        return sbx_error_wrap(err, "delete `%s`", sb->id);
    struct gone_job *j = sbx_xcalloc(1, sizeof *j);
    j->d = d;
    (void)snprintf(j->id, sizeof j->id, "%s", sb->id);
    j->volumes = json_deep_copy(json_object_get(sb->priv, "volumes"));
    if (json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "credentialProxy"))
        sbx_credca_remove(d->vault, d->state_dir, sb->id); /* its CA and bundle go with it */
    /* A layer kept by an earlier stop goes with the sandbox's teardown, so a crash before that
     * is done leaves nothing that gc would keep. */
    if (h && sbx_rt_upper_unkeep(d->rt, sb->id, err) < 0) {
        gone_job_free(j);
        pthread_mutex_lock(&d->mu);
        add_locked(d, sb->id, h);
        pthread_mutex_unlock(&d->mu);
        return sbx_error_wrap(err, "delete `%s`", sb->id);
    }
    if (!h) {
        int r = release_gone(j, err);
        gone_job_free(j);
        return r < 0 ? sbx_error_wrap(err, "delete `%s`", sb->id) : 0;
    }
    if (sbx_rt_destroy_async(h, release_when_gone, j, err) < 0) {
        gone_job_free(j);
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
    if (is_stopped(sb))
        sbx_provider_status_set(out, "stopped", SBX_CLASS_STARTABLE, "SANDBOX_STOPPED");
    else if (!sbx_proc_same(pid, start))
        sbx_provider_status_set(out, "dead", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
    else if (json_is_true(json_object_get(sb->priv, "paused")))
        sbx_provider_status_set(out, "frozen", SBX_CLASS_STARTABLE, "SANDBOX_PAUSED");
    else
        sbx_provider_status_set(out, "running", SBX_CLASS_USABLE, "SANDBOX_RUNNING");
    return 0;
}

/* The open handle's pidfd of the recorded init itself, not a second descriptor: an idle
 * sandbox then costs the server one fd, which is what lets 10,000 of them fit under a hard
 * RLIMIT_NOFILE of 20,000 (docs/server.md "Many sandboxes"). The handle, and so the fd, stays
 * until stop, delete or a failed start takes it (take_handle), which the manager never calls
 * while it polls the fd (provider.h). No handle open (not adopted yet): a pidfd of our own. */
static int
native_watch(struct sbx_provider *p, const struct sbx_record *sb, bool *owned)
{
    struct native_data *d = ndata(p);
    if (is_stopped(sb))
        return -1;
    pid_t pid = (pid_t)json_integer_value(json_object_get(sb->priv, "pid"));
    pthread_mutex_lock(&d->mu);
    const struct sbx_rt_sandbox *h = find_locked(d, sb->id);
    int fd = h && pid > 0 && sbx_rt_sandbox_pid(h) == pid ? sbx_rt_sandbox_pidfd(h) : -1;
    pthread_mutex_unlock(&d->mu);
    *owned = fd < 0;
    if (fd >= 0)
        return fd;
    return sbx_proc_watch(pid,
                          (uint64_t)json_integer_value(json_object_get(sb->priv, "start_time")));
}

static int
native_reconcile(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
                 sbx_error **err)
{
    struct native_data *d = ndata(p);
    struct sbx_rt_sandbox *h = NULL;
    sbx_autoerror sbx_error *aerr = NULL;
    /* Stopped, or a stop or start the server did not see finish: the layer is kept (a stop
     * keeps it first), so nothing of the sandbox may run on - a start that was under way is
     * undone - and the layer waits for the next start. */
    bool interrupted = (strcmp(sb->state, "Stopping") == 0 || strcmp(sb->state, "Starting") == 0) &&
                       sbx_rt_upper_kept(d->state_dir, sb->id);
    if (is_stopped(sb) || interrupted) {
        if (destroy_runtime(d, sb->id, json_is_true(json_object_get(sb->priv, "paused")), &aerr) <
            0)
            sbx_warn("sandbox %s: %s", sb->id, sbx_error_msg(aerr));
        mark_stopped(sb);
        return native_status(p, sb, out, err);
    }
    if (get_handle(d, sb->id, &h, &aerr) < 0) {
        sbx_provider_status_set(out, "dead", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    /* The freezer must agree with the record: a pause (or a snapshot's freeze) cut short by a
     * crash leaves the cgroup frozen while the record says it runs (its commands would hang),
     * a resume cut short leaves it thawed while the record says paused. */
    bool paused = json_is_true(json_object_get(sb->priv, "paused"));
    if ((paused ? sbx_rt_pause(h, &aerr) : sbx_rt_resume(h, &aerr)) < 0)
        sbx_warn("sandbox %s: %s", sb->id, sbx_error_msg(aerr));
    record_pid(sb, h);
    /* After a restart (kill -9 included): its address never left the mode set (nftables
     * keeps it), so it was policed all along; the resolver answers for it again. */
    if (has_policy(sb) && egress_enforce(d, sb, h, &aerr) < 0)
        sbx_warn("sandbox %s: %s", sb->id, sbx_error_msg(aerr));
    return native_status(p, sb, out, err);
}

static int
native_usage(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_usage *u)
{
    struct sbx_rt_sandbox *h = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (is_stopped(sb) || get_handle(ndata(p), sb->id, &h, &err) < 0)
        return -SBX_ENOTFOUND;
    struct sbx_rt_usage ru;
    sbx_rt_usage(h, &ru);
    *u = (struct sbx_provider_usage){ru.memory_bytes, ru.cpu_ns, ru.pids};
    return 0;
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

static int
native_check_create(struct sbx_provider *p, const json_t *request, const char **code,
                    sbx_error **err)
{
    json_t *vols = json_object_get(request, "volumes");
    json_t *np = json_object_get(request, "networkPolicy");
    if (np && !json_is_null(np) && ndata(p)->net != SBX_RT_NET_BRIDGE) {
        *code = "SANDBOX::API_NOT_SUPPORTED";
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "networkPolicy needs the bridge network; this server's native "
                             "provider has providers.native.network = \"none\"");
    }
    if (json_array_size(vols) == 0)
        return 0;
    return sbx_vols_check(ndata(p)->vols, vols, code, err);
}

static void
free_handle(const char *id, void *h, void *ud)
{
    (void)id;
    (void)ud;
    sbx_rt_sandbox_free(h);
}

static void
free_data(struct native_data *d)
{
    sbx_strmap_each(&d->hs, free_handle, NULL); /* handles only: the sandboxes keep running */
    sbx_strmap_free(&d->hs);
    sbx_rt_close(d->rt);
    sbx_egress_close(d->egress); /* the sets stay: sandboxes stay policed while we are away */
    free(d->egress_dns);
    free(d->upstream_ca);
    pthread_mutex_destroy(&d->egress_mu);
    sbx_native_bridge_free(d->bridge);
    sbx_vols_free(d->vols);
    free(d->state_dir);
    pthread_mutex_destroy(&d->mu);
    free(d->execd);
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
    .snapshot = native_snapshot,
    .usage = native_usage,
    .resume = native_resume,
    .delete = native_delete,
    .status = native_status,
    .watch = native_watch,
    .connect = native_connect,
    .reconcile = native_reconcile,
    .proxy_headers = native_proxy_headers,
    .check_create = native_check_create,
    .egress = native_egress,
    .free = native_free,
};

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

/* `upper` ("disk", the default, or "tmpfs") and `upper_size` (a size such as "2Gi"; disk: a cap,
 * default none; tmpfs: its size, default the memory limit, else 1 GiB). */
static int
parse_upper(const json_t *settings, enum sbx_rt_upper *mode, uint64_t *size, sbx_error **err)
{
    const char *u = json_string_value(json_object_get(settings, "upper"));
    json_t *sz = json_object_get(settings, "upper_size");
    *mode = SBX_RT_UPPER_DISK;
    *size = 0;
    if (json_object_get(settings, "upper") &&
        (!u || (strcmp(u, "disk") != 0 && strcmp(u, "tmpfs") != 0)))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.upper must be \"disk\" or \"tmpfs\"");
    if (u && strcmp(u, "tmpfs") == 0)
        *mode = SBX_RT_UPPER_TMPFS;
    if (!sz)
        return 0;
    if (!json_is_string(sz) || sbx_parse_size(json_string_value(sz), size, NULL) < 0 || !*size)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.upper_size must be a size such as \"512Mi\"");
    return 0;
}

/* Settings that must be strings when given (the config parser also lets lists through). */
static int
check_string_settings(const json_t *settings, sbx_error **err)
{
    static const char *const keys[] = {"execd",      "cgroup_parent", "network", "upper",
                                       "upper_size", "bridge",        "subnet",  "egress_dns"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(keys); i++) {
        json_t *v = json_object_get(settings, keys[i]);
        if (v && !json_is_string(v))
            return sbx_error_set(err, SBX_EINVAL, 0, "providers.native.%s must be a string",
                                 keys[i]);
    }
    return 0;
}

/* The host's RAM, and the most processes it can have (pid_max, threads-max). */
static uint64_t
host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

static uint64_t
host_pids(void)
{
    uint64_t best = 0;
    static const char *const files[] = {"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(files); i++) {
        sbx_autofree char *text = NULL;
        uint64_t v = 0;
        if (sbx_read_file(files[i], 64, &text, NULL, NULL) == 0 &&
            sbx_parse_u64(text, &v, NULL) == 0 && v > 0 && (!best || v < best))
            best = v;
    }
    return best;
}

/* A setting that is a count or size (integer, or "512Mi"), or a percentage of total ("90%");
 * absent: dflt. "0" turns the limit off. */
struct amount {
    const char *key;
    const char *dflt;
    uint64_t total; /* what a percentage is of */
    bool size;      /* "8Gi" allowed, else a plain number */
    uint64_t *out;
};

static int
parse_amount(const json_t *settings, const struct amount *a, sbx_error **err)
{
    const json_t *v = json_object_get(settings, a->key);
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *a->out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = v ? json_string_value(v) : a->dflt;
    size_t n = s ? strlen(s) : 0;
    uint64_t pct = 0;
    if (n > 1 && s[n - 1] == '%') {
        sbx_autofree char *num = sbx_xstrndup(s, n - 1);
        if (sbx_parse_u64(num, &pct, NULL) == 0 && pct <= 100) {
            *a->out = a->total / 100 * pct;
            return 0;
        }
    } else if (s &&
               (a->size ? sbx_parse_size(s, a->out, NULL) : sbx_parse_u64(s, a->out, NULL)) == 0) {
        return 0;
    }
    return sbx_error_set(err, SBX_EINVAL, 0,
                         "providers.native.%s must be %s or a percentage such as \"50%%\"", a->key,
                         a->size ? "a size such as \"8Gi\"" : "a number");
}

static int
parse_limits(struct native_data *d, const json_t *settings, struct sbx_rt_config *rc,
             sbx_error **err)
{
    struct statvfs vs;
    uint64_t disk = statvfs(d->state_dir, &vs) == 0 ? (uint64_t)vs.f_blocks * vs.f_frsize : 0;
    const struct amount amounts[] = {
        {"pids", DEFAULT_PIDS, 0, false, &d->pids},
        {"total_memory", DEFAULT_TOTAL_MEMORY, host_memory(), true, &rc->total_memory_bytes},
        {"total_pids", DEFAULT_TOTAL_PIDS, host_pids(), false, &rc->total_pids},
        {"min_free_disk", DEFAULT_MIN_FREE_DISK, disk, true, &d->min_free_disk},
        {"total_disk", DEFAULT_TOTAL_DISK, disk, true, &rc->total_disk_bytes},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(amounts); i++) {
        if (parse_amount(settings, &amounts[i], err) < 0)
            return -SBX_EINVAL;
    }
    /* Never more than the space free now, less the reserve: a cap the disk cannot honour
     * would still let sandboxes fill it. (Used when the layers' file system is first made.) */
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    uint64_t room = avail > d->min_free_disk ? avail - d->min_free_disk : 0;
    if (rc->total_disk_bytes > room)
        rc->total_disk_bytes = room;
    if (rc->total_disk_bytes < (64u << 20))
        rc->total_disk_bytes = 0; /* too small for a file system of its own: min_free_disk only */
    return 0;
}

/* `bridge`, `subnet` and the isolation allow-list `network_allow` (docs/network.md
 * "Isolation": what a sandbox may reach). Checked now, applied on the first bridged sandbox. */
static int
configure_bridge(struct native_data *d, const json_t *settings, sbx_error **err)
{
    const json_t *allow = json_object_get(settings, "network_allow");
    size_t n = json_array_size(allow);
    const char **list = sbx_xcalloc(n + 1, sizeof *list);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        list[i] = json_string_value(json_array_get(allow, i));
        if (!list[i])
            r = sbx_error_set(err, SBX_EINVAL, 0,
                              "providers.native.network_allow[%zu] must be a string", i);
    }
    const json_t *leaf = json_object_get(settings, "leaf_size");
    if (r == 0 && leaf &&
        (!json_is_integer(leaf) || json_integer_value(leaf) < 1 ||
         json_integer_value(leaf) > SBX_NET_LEAF_MAX_SIZE))
        r = sbx_error_set(err, SBX_EINVAL, 0,
                          "providers.native.leaf_size must be an integer from 1 to %d",
                          SBX_NET_LEAF_MAX_SIZE);
    if (r == 0 && leaf)
        sbx_native_bridge_set_leaf_size(d->bridge, (unsigned)json_integer_value(leaf));
    if (r == 0)
        r = sbx_native_bridge_configure(
            d->bridge, json_string_value(json_object_get(settings, "bridge")),
            json_string_value(json_object_get(settings, "subnet")), list, n, err);
    free(list);
    return r < 0 ? sbx_error_wrap(err, "providers.native") : 0;
}

/* Image pins of sandboxes that are gone: a delete answers once the sandbox is killed and drops
 * its pin after the teardown (release_gone); a server killed in between leaves the pin, whose
 * owner neither the store (the row went with the answer) nor the runtime (gc removed its record
 * and layer) knows any more, and the image's layers would never be collected. Called at start,
 * before any create: a pin without a runtime record or layer belongs to no live sandbox (a
 * stopped one keeps its layer). */
static void
sweep_pins(struct native_data *d)
{
    sbx_autofree char *root = sbx_image_default_root(d->state_dir);
    sbx_autofree char *dir = sbx_xasprintf("%s/pins", root);
    sbx_autoclosedir DIR *pins = opendir(dir);
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while (pins && (e = readdir(pins))) {
        if (e->d_name[0] == '.' || sbx_rt_knows(d->rt, e->d_name))
            continue;
        sbx_info("provider `native`: dropping the image pin of gone sandbox %s", e->d_name);
        sbx_native_image_unpin(d->state_dir, e->d_name);
    }
}

int
sbx_provider_native_new(const json_t *settings, const struct sbx_provider_env *env,
                        struct sbx_provider **out, sbx_error **err)
{
    if (check_string_settings(settings, err) < 0)
        return -SBX_EINVAL;
    const char *execd = json_string_value(json_object_get(settings, "execd"));
    json_t *ping = json_object_get(settings, "ping_timeout_ms");
    if (ping && (!json_is_integer(ping) || json_integer_value(ping) < 100))
        return sbx_error_set(err, SBX_EINVAL, 0, "`ping_timeout_ms` must be an integer >= 100");
    enum sbx_rt_netmode net = SBX_RT_NET_BRIDGE;
    if (parse_network(json_string_value(json_object_get(settings, "network")), &net, err) < 0)
        return -SBX_EINVAL;
    enum sbx_rt_upper upper = SBX_RT_UPPER_DISK;
    uint64_t upper_size = 0;
    if (parse_upper(settings, &upper, &upper_size, err) < 0)
        return -SBX_EINVAL;
    json_t *pool = json_object_get(settings, "netns_pool");
    if (pool && (!json_is_integer(pool) || json_integer_value(pool) < 0 ||
                 json_integer_value(pool) > SBX_NATIVE_NETNS_POOL_MAX))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.netns_pool must be an integer from 0 to %d",
                             SBX_NATIVE_NETNS_POOL_MAX);
    const json_t *allow = json_object_get(settings, "network_allow");
    if (allow && !json_is_array(allow))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.native.network_allow must be a list of IPv4 addresses "
                             "or CIDRs");
    struct native_data *d = sbx_xcalloc(1, sizeof *d);
    d->net = net;
    d->upper = upper;
    d->upper_size = upper_size;
    d->state_dir = sbx_xstrdup(env->state_dir);
    d->vault = env->vault;
    pthread_mutex_init(&d->egress_mu, NULL);
    const char *edns = json_string_value(json_object_get(settings, "egress_dns"));
    d->egress_dns = edns ? sbx_xstrdup(edns) : NULL;
    const char *uca = json_string_value(json_object_get(settings, "credproxy_upstream_ca"));
    d->upstream_ca = uca ? sbx_xstrdup(uca) : NULL;
    (void)sbx_native_bridge_new(&d->bridge, env->state_dir, NULL);
    if (configure_bridge(d, settings, err) < 0) {
        free_data(d);
        return -SBX_EINVAL;
    }
    sbx_native_bridge_ops(&d->net_ops, d->bridge);
    /* The bridge is set up on the host only when the first bridged sandbox is made. */
    struct sbx_rt_config rc = {
        .state_dir = env->state_dir,
        .cgroup_parent = json_string_value(json_object_get(settings, "cgroup_parent")),
        .net_ops = &d->net_ops,
        .netns_pool = pool ? (unsigned)json_integer_value(pool) : SBX_NATIVE_NETNS_POOL_DEFAULT,
        .netns_pool_net = net,
        /* cgroup v2 under systemd (Delegate=yes): the server into <own>/server, the sandboxes
         * into <own>/<cgroup_parent>/<id> (docs/install.md "The unit") */
        .own_cgroup_leaf = "server",
        /* long-lived: one pivot_root at open, not one per sandbox (runtime/template.c) */
        .pivot_once = true,
        /* and its cgroups are kept for the next creates, not removed (runtime/cgspare.c) */
        .spare_cgroups = SBX_NATIVE_SPARE_CGROUPS};
    if (parse_limits(d, settings, &rc, err) < 0) {
        free_data(d);
        return -SBX_EINVAL;
    }
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
    sweep_pins(d);
    d->execd = execd ? sbx_xstrdup(execd) : sbx_launch_default_execd(env->exe_dir);
    if (sbx_vols_open(&d->vols, env->state_dir, json_object_get(settings, "allowed_host_paths"),
                      err) < 0) {
        free_data(d);
        return -SBX_EINVAL;
    }
    d->ping_timeout_ms = ping ? (int)json_integer_value(ping) : 10000;
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
