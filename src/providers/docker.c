/*
 * docker.c - the `docker` provider: every sandbox is a container of a Docker Engine
 * (dockerd, or podman's Docker-compatible service) reached over its unix socket
 * (docker_api.c; no docker CLI).
 *
 * create pulls the image when missing (progress in the server log; registry auth from the
 * request's image.auth) and creates the container `sbx-<id>` with sbx-execd bind-mounted
 * read-only at /.sbx/bin/sbx-execd and the entrypoint overridden: the launcher shell starts the
 * user's entrypoint in the background and execs execd, so execd is PID 1 of the container. Labels
 * carry the sandbox id and the server's state dir, so the containers of a server can be found
 * without its store. Limits: memory, cpu (NanoCpus), pids. stop keeps the container and its
 * filesystem (a later start runs the launcher again); delete force-removes it. The liveness
 * check watches a pidfd of a local container's init (docker_watch) instead of asking status.
 *
 * The router reaches ports in two ways (setting `reach`):
 *   netns   (default) the daemon runs on this host: a socket made inside the container's network
 *           namespace (a thread setns()es into /proc/<pid>/ns/net), connected to 127.0.0.1:port.
 *           execd listens on the container's loopback only and no port is published.
 *   address the daemon is elsewhere (or the server cannot enter namespaces): connect to the
 *           container's IP on its network; execd then listens on all the container's interfaces
 *           (its access token still guards it).
 *
 * networkPolicy (docker_egress.c): enforced inside the container's own network namespace, from
 * its start on: the container starts with no network but loopback (network "sbx", attached
 * after; or "none"), its table and sbx's resolver there are made before the attach, and its
 * resolv.conf names that resolver (a read-only bind). Refused for other networks (the engine's
 * would let the entrypoint's first packets out before the rules exist) and remote engines.
 * credentialProxy rides on it: the proxy's listeners and redirects (ports 80 and 443) are made
 * in the same namespace with the policy; for HTTPS the sandbox's CA is added to its image's CA
 * bundle (read through the engine, docker_credca.c), bound read-only into the container at
 * create (docs/network.md "Credential proxy", "On docker").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/image.h"
#include "providers/docker_api.h"
#include "providers/docker_egress.h"
#include "server/snapshot.h"
#include "providers/launch.h"
#include "providers/procutil.h"
#include "providers/providers.h"
#include "server/provider.h"
#include "server/srvutil.h"
#ifdef SBX_HAVE_RUNTIME
#include "net/net.h"
#include "providers/credca.h"
#include "providers/docker_credca.h"
#endif

#define EXECD_PORT     44772
#define EXECD_IN_IMAGE "/.sbx/bin/sbx-execd"
#define EXECD_STATE    "/tmp/.sbx-execd"
/* net.h's SBX_NET_LEAF_MAX_SIZE (net.h is only there with the runtime). */
#define SBX_DOCKER_LEAF_MAX 1023
#ifdef SBX_HAVE_RUNTIME
_Static_assert(SBX_DOCKER_LEAF_MAX == SBX_NET_LEAF_MAX_SIZE, "the leaf size limit of net.h");
#endif
#define LABEL_ID    "io.sbx.sandbox-id"
#define LABEL_STATE "io.sbx.state-dir"

const char *const sbx_provider_docker_keys[] = {"socket",
                                                "execd",
                                                "network",
                                                "reach",
                                                "pull",
                                                "pull_timeout_s",
                                                "ping_timeout_ms",
                                                "stop_timeout_s",
                                                "pids_limit",
                                                "cgroup_parent",
                                                "bridge",
                                                "subnet",
                                                "network_allow",
                                                "egress_dns",
                                                "leaf_size",
                                                "credproxy_upstream_ca",
                                                NULL};

/* providers.docker.network = "sbx" (the default with a local engine): the container starts
 * with the engine's `none` network (loopback only) and the server then attaches it to sbx's
 * own bridge, as a native sandbox is (src/net): the same isolation (docs/network.md). */
#define NETWORK_SBX "sbx"

enum pull_policy {
    PULL_MISSING,
    PULL_ALWAYS,
    PULL_NEVER
};

struct docker_data {
    struct sbx_docker *api;
    char *execd;
    char *network; /* NULL: the engine's default; NETWORK_SBX: sbx's bridge */
    bool sbx_net;  /* network == NETWORK_SBX */
    pthread_mutex_t net_mu;
    struct sbx_net *net; /* opened on first use */
    char *bridge;        /* NULL: SBX_NET_DEFAULT_BRIDGE (the native provider's) */
    char *subnet;
    unsigned leaf_size; /* sandboxes per leaf bridge (net.h), 0: the default */
    char **allow;       /* network_allow: what sandboxes may reach all the same */
    size_t n_allow;
    char *cgroup_parent; /* NULL: the engine's default */
    char *state_dir;
    bool reach_address;
    enum pull_policy pull;
    long pull_timeout_s;
    int ping_timeout_ms;
    int stop_timeout_s;
    json_int_t pids_limit;
    struct sbx_docker_egress *egress; /* networkPolicy; egress_dns: its upstream resolvers */
    struct sbx_credvault *vault;      /* the server's: credentialProxy's CAs; NULL: none */
};

static struct docker_data *
ddata(struct sbx_provider *p)
{
    return p->data;
}

static const char *
priv_str(const struct sbx_record *sb, const char *key)
{
    const char *s = json_string_value(json_object_get(sb->priv, key));
    return s ? s : "";
}

static json_int_t
priv_int(const struct sbx_record *sb, const char *key)
{
    return json_integer_value(json_object_get(sb->priv, key));
}

static bool
priv_true(const struct sbx_record *sb, const char *key)
{
    return json_is_true(json_object_get(sb->priv, key));
}

static void
priv_set(struct sbx_record *sb, const char *key, json_t *v)
{
    (void)json_object_set_new(sb->priv, key, v);
}

/* The container's name: derived from the id, so a delete finds it even when a crash came
 * between creating it and storing its id. */
static void
cname(const struct sbx_record *sb, char out[SBX_UUID_LEN + 5])
{
    (void)snprintf(out, SBX_UUID_LEN + 5, "sbx-%s", sb->id);
}

/* ---- small Engine API wrappers ---- */

/* A call on container sbx-<id>: method, path suffix ("/start", "?force=1"), a verb for errors. */
struct ccall {
    const char *method;
    const char *suffix;
    const char *verb;
    long timeout_s; /* 0 = the client's default */
    const int *ok;  /* extra success statuses */
};

static int
container_call(struct docker_data *d, const struct sbx_record *sb, const struct ccall *c,
               json_t **resp, sbx_error **err)
{
    char name[SBX_UUID_LEN + 5];
    cname(sb, name);
    sbx_autofree char *path = sbx_xasprintf("/containers/%s%s", name, c->suffix);
    sbx_autofree char *what = sbx_xasprintf("%s container `%s`", c->verb, name);
    struct sbx_docker_req req = {
        .method = c->method, .path = path, .what = what, .timeout_s = c->timeout_s, .ok = c->ok};
    return sbx_docker_call(d->api, &req, NULL, resp, err);
}

static const int not_modified[] = {304, 0};
static const int gone_ok[] = {404, 0};
static const struct ccall call_inspect = {"GET", "/json", "inspect", 0, NULL};
static const struct ccall call_start = {"POST", "/start", "start", 0, not_modified};
static const struct ccall call_pause = {"POST", "/pause", "pause", 0, NULL};
static const struct ccall call_unpause = {"POST", "/unpause", "unpause", 0, NULL};
static const struct ccall call_remove = {"DELETE", "?force=1&v=1", "remove", 0, gone_ok};

/* Inspect is read-only, so a server error is retried a few times: podman answers 500 ("read
 * /proc/<pid>/cgroup: no such process") when it inspects a container whose init is exiting at
 * that moment; the next answer has the exited state. 404s and an unreachable daemon are final. */
static int
inspect(struct docker_data *d, const struct sbx_record *sb, json_t **info, sbx_error **err)
{
    for (int attempt = 1;; attempt++) {
        sbx_autoerror sbx_error *e = NULL;
        int r = container_call(d, sb, &call_inspect, info, &e);
        if (r != -SBX_EIO || attempt == 5) {
            sbx_error_move(err, &e);
            return r;
        }
        (void)usleep(20 * 1000 * attempt);
    }
}

static const char *
state_word(const json_t *info)
{
    const char *s = json_string_value(json_object_get(json_object_get(info, "State"), "Status"));
    return s ? s : "";
}

/* True when pid is on this host and is a process of container id: its cgroup path names the
 * id (docker: /docker/<id> or docker-<id>.scope; podman: libpod-<id>). This is what makes
 * entering its network namespace safe: a pid from another host's (or another pid
 * namespace's) daemon is not mistaken for a local process. */
static bool
owned_by(pid_t pid, const char *id)
{
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    sbx_autofree char *text = NULL;
    if (pid <= 1 || strlen(id) < 32 || sbx_read_file(path, 1 << 16, &text, NULL, NULL) < 0)
        return false;
    return strstr(text, id) != NULL;
}

static const char *
container_ip(const json_t *info)
{
    const json_t *ns = json_object_get(info, "NetworkSettings");
    const char *ip = json_string_value(json_object_get(ns, "IPAddress"));
    if (ip && *ip)
        return ip;
    const char *k = NULL;
    json_t *net = NULL;
    json_object_foreach (json_object_get(ns, "Networks"), k, net) {
        ip = json_string_value(json_object_get(net, "IPAddress"));
        if (ip && *ip)
            return ip;
    }
    return "";
}

/* Record what the router needs from an inspect answer: the container id, its init's pid and
 * start time when it is a local process (0 otherwise), its address. */
static void
record_live(struct sbx_record *sb, const json_t *info)
{
    const char *id = json_string_value(json_object_get(info, "Id"));
    pid_t pid = (pid_t)json_integer_value(json_object_get(json_object_get(info, "State"), "Pid"));
    struct sbx_proc_info pi = {0};
    struct sbx_proc_info again = {0};
    /* The start time is read on both sides of the cgroup check, so the (pid, start time) later
     * used to enter the namespace is the very process that was checked, not a recycled pid. */
    if (!id || sbx_proc_info(pid, &pi, NULL) < 0 || !owned_by(pid, id) ||
        sbx_proc_info(pid, &again, NULL) < 0 || again.start_time != pi.start_time)
        pid = 0;
    priv_set(sb, "container", json_string(id ? id : ""));
    priv_set(sb, "pid", json_integer(pid));
    priv_set(sb, "start_time", json_integer(pid ? (json_int_t)pi.start_time : 0));
    priv_set(sb, "ip", json_string(container_ip(info)));
}

/* ---- create ---- */

static int snapshot_image_load(struct docker_data *d, const char *ref, sbx_error **err);

static bool
is_snapshot_image(const char *ref)
{
    return strncmp(ref, SBX_SNAPSHOT_REPO ":", strlen(SBX_SNAPSHOT_REPO) + 1) == 0;
}

/* Does the engine have image ref? */
static int
image_present(struct docker_data *d, const char *ref, bool *present, sbx_error **err)
{
    sbx_autofree char *path = sbx_xasprintf("/images/%s/json", ref);
    sbx_autofree char *what = sbx_xasprintf("inspect image `%s`", ref);
    static const int ok[] = {404, 0};
    struct sbx_docker_req req = {.method = "GET", .path = path, .what = what, .ok = ok};
    long status = 0;
    int r = sbx_docker_call(d->api, &req, &status, NULL, err);
    *present = r == 0 && status == 200;
    return r;
}

static int
ensure_image(struct docker_data *d, const struct sbx_record *sb, const char *ref, sbx_error **err)
{
    bool present = false;
    int r = 0;
    /* A snapshot's image is never pulled: loaded from sbx's store when the engine lacks it. */
    if (is_snapshot_image(ref)) {
        if ((r = image_present(d, ref, &present, err)) < 0 || present)
            return r;
        return snapshot_image_load(d, ref, err);
    }
    if (d->pull == PULL_NEVER)
        return 0;
    if (d->pull == PULL_MISSING && ((r = image_present(d, ref, &present, err)) < 0 || present))
        return r;
    sbx_autofree char *pull = sbx_docker_pull_ref(ref);
    sbx_autofree char *registry = sbx_docker_ref_registry(pull);
    char *auth = sbx_docker_auth_header(json_object_get(sb->image, "auth"), registry);
    r = sbx_docker_pull(d->api, pull, auth, d->pull_timeout_s, err);
    free(auth);
    return r;
}

static int
limits_into(struct docker_data *d, const struct sbx_record *sb, json_t *hc, sbx_error **err)
{
    const char *mem = json_string_value(json_object_get(sb->limits, "memory"));
    const char *cpu = json_string_value(json_object_get(sb->limits, "cpu"));
    uint64_t bytes = 0;
    uint64_t millis = 0;
    if (mem && sbx_parse_size(mem, &bytes, err) < 0)
        return sbx_error_wrap(err, "resourceLimits.memory");
    if (cpu && sbx_docker_parse_cpu(cpu, &millis) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "resourceLimits.cpu `%s` is not a CPU quantity",
                             cpu);
    if (bytes)
        (void)json_object_set_new(hc, "Memory", json_integer((json_int_t)bytes));
    if (millis)
        (void)json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)millis * 1000000));
    (void)json_object_set_new(hc, "PidsLimit", json_integer(d->pids_limit));
    return 0;
}

static json_t *
strv_json(char *const *v, size_t from, size_t to)
{
    json_t *a = json_array();
    for (size_t i = from; v[i] && i < to; i++)
        (void)json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *
host_config(struct docker_data *d)
{
    /* Beyond the engine's defaults (which already drop SYS_ADMIN, NET_ADMIN, SYS_PTRACE,
     * SYS_MODULE, SYS_TIME...): no raw sockets, no device nodes, no audit writes, and no_new_privs,
     * like the native provider and OpenSandbox's Docker runtime. */
    json_t *hc = json_pack("{s:[{s:s, s:s, s:s, s:b}], s:[s,s,s], s:[s], s:{s:s}}", "Mounts",
                           "Type", "bind", "Source", d->execd, "Target", EXECD_IN_IMAGE, "ReadOnly",
                           1, "CapDrop", "AUDIT_WRITE", "MKNOD", "NET_RAW", "SecurityOpt",
                           "no-new-privileges", "RestartPolicy", "Name", "no");
    if (d->network)
        (void)json_object_set_new(hc, "NetworkMode", json_string(d->sbx_net ? "none" : d->network));
    if (d->cgroup_parent)
        (void)json_object_set_new(hc, "CgroupParent", json_string(d->cgroup_parent));
    return hc;
}

/* credentialProxy over HTTPS (docker_credca.h): the sandbox's CA bundle bound read-only over
 * the image's, named in the environment for clients with bundles of their own (as native). */
static void
credca_into(const char *bundle, json_t *hc, json_t *env)
{
#ifdef SBX_HAVE_RUNTIME
    static const char *const vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                       NULL};
    if (!bundle[0])
        return;
    (void)json_array_append_new(json_object_get(hc, "Mounts"),
                                json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source", bundle,
                                          "Target", SBX_CREDCA_BUNDLE, "ReadOnly", 1));
    for (size_t i = 0; vars[i]; i++)
        (void)json_array_append_new(env, json_sprintf("%s=%s", vars[i], SBX_CREDCA_BUNDLE));
#else
    (void)bundle;
    (void)hc;
    (void)env;
#endif
}

/* The sandbox's CA bundle when it has credentialProxy and its image a bundle (else ""). */
static int
credca_prepare(struct docker_data *d, const struct sbx_record *sb, const char *ref,
               char bundle[4096], sbx_error **err)
{
    bundle[0] = '\0';
#ifdef SBX_HAVE_RUNTIME
    const json_t *eg = json_object_get(sb->priv, SBX_EGRESS_PRIV);
    if (!json_is_true(json_object_get(eg, "credentialProxy")) || !d->vault)
        return 0;
    struct sbx_docker_credca c = {
        .api = d->api, .vault = d->vault, .state_dir = d->state_dir, .id = sb->id, .image = ref};
    return sbx_docker_credca_prepare(&c, bundle, err);
#else
    (void)d;
    (void)sb;
    (void)ref;
    (void)err;
    return 0;
#endif
}

static json_t *
container_body(struct docker_data *d, const struct sbx_record *sb, const char *ref,
               const char *bundle, sbx_error **err)
{
    json_t *hc = host_config(d);
    /* a policed container resolves through sbx's resolver in its own namespace, only */
    if (limits_into(d, sb, hc, err) < 0 ||
        (sbx_docker_egress_has_policy(sb) && sbx_docker_egress_mount(d->state_dir, hc, err) < 0)) {
        json_decref(hc);
        return NULL;
    }
    struct sbx_launch l = {.execd = EXECD_IN_IMAGE,
                           .listen_host = d->reach_address ? "0.0.0.0" : NULL,
                           .port = EXECD_PORT,
                           .token = priv_str(sb, "token"),
                           .state_dir = EXECD_STATE,
                           .home = NULL};
    char **argv = sbx_launch_argv(sb);
    char **envp = sbx_launch_env(sb, &l);
    json_t *env = strv_json(envp, 0, SIZE_MAX);
    credca_into(bundle, hc, env);
    json_t *body =
        json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:s, s:s}, s:o}", "Image", ref, "Hostname", sb->id,
                  "Entrypoint", strv_json(argv, 0, 4), "Cmd", strv_json(argv, 4, SIZE_MAX), "Env",
                  env, "Labels", LABEL_ID, sb->id, LABEL_STATE, d->state_dir, "HostConfig", hc);
    sbx_strv_free(argv);
    sbx_strv_free(envp);
    return body;
}

static int
docker_create(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct docker_data *d = ddata(p);
    const char *ref = json_string_value(json_object_get(sb->image, "uri"));
    if (!ref || !sbx_docker_ref_ok(ref))
        return sbx_error_set(err, SBX_EINVAL, 0, "image `%.200s` is not an image reference",
                             ref ? ref : "");
    /* A local daemon: say so here rather than as a bind error (a remote one checks itself:
     * a bind mount, unlike the legacy Binds, never creates a missing source). */
    if (!d->reach_address && access(d->execd, X_OK) < 0)
        return sbx_error_set(err, SBX_EUNAVAIL, errno,
                             "sbx-execd not found at `%s` (set providers.docker.execd)", d->execd);
    char token[65];
    sbx_srv_random_hex(token, 32);
    priv_set(sb, "token", json_string(token));
    char bundle[4096] = "";
    int r = ensure_image(d, sb, ref, err);
    if (r == 0)
        r = credca_prepare(d, sb, ref, bundle, err);
    if (r < 0)
        return r;
    json_t *body = container_body(d, sb, ref, bundle, err);
    if (!body)
        return -SBX_EINVAL;
    char name[SBX_UUID_LEN + 5];
    cname(sb, name);
    sbx_autofree char *path = sbx_xasprintf("/containers/create?name=%s", name);
    sbx_autofree char *what = sbx_xasprintf("create container `%s`", name);
    struct sbx_docker_req req = {.method = "POST", .path = path, .body = body, .what = what};
    json_t *resp = NULL;
    r = sbx_docker_call(d->api, &req, NULL, &resp, err);
    json_decref(body);
    if (r >= 0)
        priv_set(sb, "container", json_string(json_string_value(json_object_get(resp, "Id"))));
    json_decref(resp);
    return r;
}

/* ---- reaching ports ---- */

/* Ask the daemon for the container's init; *pid = 0 when it is not a local process. */
static int
inspect_pid(struct docker_data *d, const struct sbx_record *sb, bool *running, pid_t *pid,
            uint64_t *start, sbx_error **err)
{
    json_t *info = NULL;
    int r = inspect(d, sb, &info, err);
    if (r < 0)
        return r;
    struct sbx_record *tmp = sbx_record_new();
    record_live(tmp, info);
    *running = strcmp(state_word(info), "running") == 0;
    *pid = (pid_t)priv_int(tmp, "pid");
    *start = (uint64_t)priv_int(tmp, "start_time");
    json_decref(info);
    sbx_record_free(tmp);
    return 0;
}

/* The local init pid and start time of the container: the recorded ones while they still
 * hold, else asked from the daemon. */
static int
local_pid(struct docker_data *d, const struct sbx_record *sb, pid_t *pid, uint64_t *start,
          sbx_error **err)
{
    *pid = (pid_t)priv_int(sb, "pid");
    *start = (uint64_t)priv_int(sb, "start_time");
    if (*pid > 0 && sbx_proc_same(*pid, *start))
        return 0;
    /* "running" with a pid that is not here: a remote daemon, or an init that has just exited
     * and the daemon does not know yet. A few looks tell them apart. */
    for (int i = 0; i < 10; i++) {
        bool running = false;
        int r = inspect_pid(d, sb, &running, pid, start, err);
        if (r < 0)
            return r;
        if (!running)
            return sbx_error_set(err, SBX_ECONFLICT, 0, "container `sbx-%s` is not running",
                                 sb->id);
        if (*pid > 0)
            return 0;
        (void)usleep(20 * 1000);
    }
    return sbx_error_set(err, SBX_EUNAVAIL, 0,
                         "docker: the process of container `sbx-%s` is not on this host (set "
                         "providers.docker.reach = \"address\" for a remote daemon)",
                         sb->id);
}

static int
connect_port(struct docker_data *d, const struct sbx_record *sb, int port, int *fd, sbx_error **err)
{
    if (d->reach_address) {
        const char *ip = priv_str(sb, "ip");
        if (!*ip)
            return sbx_error_set(err, SBX_EUNAVAIL, 0,
                                 "container `sbx-%s` has no address on its network (network "
                                 "`%s`)",
                                 sb->id, d->network ? d->network : "default");
        return sbx_net_connect_ip4(ip, port, 2000, fd, err);
    }
    pid_t pid = 0;
    uint64_t start = 0;
    int r = local_pid(d, sb, &pid, &start, err);
    if (r < 0)
        return r;
    return sbx_netns_connect(pid, start, port, fd, err);
}

/* ---- start / stop ---- */

static int
died_early(struct docker_data *d, const struct sbx_record *sb, const json_t *info, sbx_error **err)
{
    char tail[512];
    char name[SBX_UUID_LEN + 5];
    cname(sb, name);
    sbx_docker_logs_tail(d->api, name, tail, sizeof tail);
    return sbx_error_set(
        err, SBX_EUNAVAIL, 0, "container `%s` is %s (exit code %lld) before execd was ready: %s",
        name, state_word(info),
        (long long)json_integer_value(json_object_get(json_object_get(info, "State"), "ExitCode")),
        *tail ? tail : "no output");
}

/* 0 while the container is running; the error (with its last output) once it is not. */
static int
still_running(struct docker_data *d, const struct sbx_record *sb, sbx_error **err)
{
    pid_t pid = (pid_t)priv_int(sb, "pid");
    if (pid > 0 && sbx_proc_same(pid, (uint64_t)priv_int(sb, "start_time")))
        return 0;
    json_t *info = NULL;
    int r = inspect(d, sb, &info, err);
    if (r >= 0 && strcmp(state_word(info), "running") != 0)
        r = died_early(d, sb, info, err);
    json_decref(info);
    return r;
}

static int
wait_ready(struct docker_data *d, const struct sbx_record *sb, sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)d->ping_timeout_ms;
    bool local = priv_int(sb, "pid") > 0;
    if (!local && !d->reach_address) {
        pid_t pid = 0;
        uint64_t start = 0;
        /* Running where this host cannot enter it, or exited at once (with its output). */
        int r = local_pid(d, sb, &pid, &start, err);
        if (r == -SBX_ECONFLICT)
            r = still_running(d, sb, err);
        if (r < 0)
            return r;
    }
    for (unsigned i = 0;; i++) {
        sbx_autoclose int fd = -1;
        if (connect_port(d, sb, EXECD_PORT, &fd, NULL) == 0 &&
            sbx_execd_ping_fd(fd, priv_str(sb, "token")) == 0)
            return 0;
        /* A local init is checked through /proc each time; a remote one costs a request. */
        int r = local || i % 25 == 24 ? still_running(d, sb, err) : 0;
        if (r < 0)
            return r;
        if (sbx_now_ms() >= deadline)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0, "execd did not answer /ping within %d ms",
                                 d->ping_timeout_ms);
        (void)usleep(20 * 1000);
    }
}

/* ---- sbx's bridge (network = "sbx") ---- */

#ifdef SBX_HAVE_RUNTIME
static struct sbx_net *
bridge(struct docker_data *d, sbx_error **err)
{
    pthread_mutex_lock(&d->net_mu);
    struct sbx_net_config cfg = {
        .bridge = d->bridge, .subnet = d->subnet, .leaf_size = d->leaf_size};
    bool opened = !d->net;
    int r = d->net ? sbx_net_ensure(d->net, err) : sbx_net_open(&d->net, &cfg, err);
    /* The allow-list is host-wide for the bridge (docs/network.md): set at open and after a
     * repair, as the native provider does. */
    if (r >= 0 && (opened || r == 1) && d->n_allow)
        r = sbx_net_allow(d->net, (const char *const *)d->allow, d->n_allow, err);
    pthread_mutex_unlock(&d->net_mu);
    return r < 0 ? NULL : d->net;
}

/* Attach the running container to sbx's bridge: a veth into the network namespace of its init
 * (the pid checked to be the container's, and pinned by the open fd before its start time is
 * checked again, as for connect). Until then the container has loopback only: nothing its
 * processes do before this reaches anywhere. */
static int
attach_net(struct docker_data *d, struct sbx_record *sb, sbx_error **err)
{
    pid_t pid = 0;
    uint64_t start = 0;
    if (local_pid(d, sb, &pid, &start, err) < 0)
        return sbx_error_wrap(err, "attach to sbx's bridge");
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    sbx_autoclose int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || !sbx_proc_same(pid, start))
        return sbx_error_set(err, SBX_ECONFLICT, ns < 0 ? errno : ESRCH,
                             "attach to sbx's bridge: the container's init %d is gone", (int)pid);
    struct sbx_net *n = bridge(d, err);
    struct sbx_net_lease l = {0};
    if (!n)
        return sbx_error_wrap(err, "sbx's bridge");
    /* A lease of before (the container was started, stopped, and is started again in a new
     * namespace) is given up first. */
    (void)sbx_net_detach(n, sb->id, NULL);
    if (sbx_net_attach(&l, n, sb->id, ns, err) < 0)
        return sbx_error_wrap(err, "attach to sbx's bridge");
    priv_set(sb, "ip", json_string(l.addr));
    return 0;
}

static void
detach_net(struct docker_data *d, const struct sbx_record *sb)
{
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_net *n = bridge(d, &err);
    if (!n || sbx_net_detach(n, sb->id, &err) < 0)
        sbx_warn("sandbox %s: leave sbx's bridge: %s", sb->id, sbx_error_msg(err));
}
#else
static int
attach_net(struct docker_data *d, struct sbx_record *sb, sbx_error **err)
{
    (void)d;
    (void)sb;
    return sbx_error_set(err, SBX_EINVAL, 0, "network \"sbx\" needs a build with the runtime");
}

static void
detach_net(struct docker_data *d, const struct sbx_record *sb)
{
    (void)d;
    (void)sb;
}
#endif

/* ---- networkPolicy (docker_egress.c) ---- */

static int
egress_enforce(struct docker_data *d, const struct sbx_record *sb, sbx_error **err)
{
    pid_t pid = 0;
    uint64_t start = 0;
    if (local_pid(d, sb, &pid, &start, err) < 0)
        return sbx_error_wrap(err, "networkPolicy");
    return sbx_docker_egress_enforce(d->egress, sb, pid, start, err);
}

/* The egress API changed the policy (stored already): enforce it now if the container runs
 * (a stopped one gets it at its start). */
static int
docker_egress(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    if (priv_true(sb, "stopped"))
        return 0;
    return egress_enforce(ddata(p), sb, err);
}

/* Bring the container to running (start, or unpause) and record its pid and address. */
static int
run_container(struct docker_data *d, struct sbx_record *sb, sbx_error **err)
{
    json_t *info = NULL;
    int r = inspect(d, sb, &info, err);
    if (r < 0)
        return r;
    const char *s = state_word(info);
    bool started = false;
    if (strcmp(s, "paused") == 0) {
        r = container_call(d, sb, &call_unpause, NULL, err);
    } else if (strcmp(s, "running") != 0) {
        r = container_call(d, sb, &call_start, NULL, err);
        started = true; /* a new network namespace */
    }
    json_decref(info);
    info = NULL;
    if (r >= 0)
        r = inspect(d, sb, &info, err);
    if (r >= 0) {
        record_live(sb, info);
        priv_set(sb, "stopped", json_false());
        priv_set(sb, "paused", json_false());
    }
    json_decref(info);
    /* a new namespace: policed before it gets a network (attach_net), so not one packet of
     * it leaves unpoliced */
    if (r >= 0 && started && sbx_docker_egress_has_policy(sb))
        r = egress_enforce(d, sb, err);
    if (r >= 0 && started && d->sbx_net)
        r = attach_net(d, sb, err);
    return r;
}

static int
docker_start(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct docker_data *d = ddata(p);
    if (run_container(d, sb, err) < 0 || wait_ready(d, sb, err) < 0)
        return sbx_error_wrap(err, "docker sandbox `%s`", sb->id);
    return 0;
}

static int
docker_stop(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct docker_data *d = ddata(p);
    json_t *info = NULL;
    int r = inspect(d, sb, &info, err);
    if (r < 0)
        return r;
    bool paused = strcmp(state_word(info), "paused") == 0;
    json_decref(info);
    /* A frozen container cannot take its SIGTERM: thaw it first. */
    if (paused && (r = container_call(d, sb, &call_unpause, NULL, err)) < 0)
        return r;
    sbx_autofree char *suffix = sbx_xasprintf("/stop?t=%d", d->stop_timeout_s);
    struct ccall stop = {"POST", suffix, "stop", d->stop_timeout_s + 30L, not_modified};
    r = container_call(d, sb, &stop, NULL, err);
    if (r < 0)
        return r;
    if (d->sbx_net)
        detach_net(d, sb);
    sbx_docker_egress_forget(d->egress, sb->id);
    priv_set(sb, "stopped", json_true());
    priv_set(sb, "paused", json_false());
    priv_set(sb, "pid", json_integer(0));
    return 0;
}

static int
docker_pause(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    int r = container_call(ddata(p), sb, &call_pause, NULL, err);
    if (r < 0)
        return r;
    priv_set(sb, "paused", json_true());
    return 0;
}

/* Paused: unpause. (A stopped container belongs to a Stopped sandbox, which the manager starts
 * instead; were one resumed all the same, it is started and waited for.) */
static int
docker_resume(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct docker_data *d = ddata(p);
    bool was_stopped = priv_true(sb, "stopped");
    if (run_container(d, sb, err) < 0 || (was_stopped && wait_ready(d, sb, err) < 0))
        return sbx_error_wrap(err, "resume `%s`", sb->id);
    return 0;
}

static int
docker_delete(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct docker_data *d = ddata(p);
    int r = container_call(d, sb, &call_remove, NULL, err);
    if (r < 0)
        return r;
    if (d->sbx_net)
        detach_net(d, sb);
    sbx_docker_egress_forget(d->egress, sb->id);
#ifdef SBX_HAVE_RUNTIME
    sbx_credca_remove(d->vault, d->state_dir, sb->id); /* its CA and bundle go with it */
#endif
    priv_set(sb, "pid", json_integer(0));
    return 0;
}

/* ---- snapshots ---- */

/* The engine's own commit (the container paused for it unless it is paused or stopped
 * already), saved as an archive for sbx's image store; the engine's copy of the image is
 * removed again (a restore on docker loads it from sbx's store, snapshot_image_load). */
/* The engine's answers are about the engine, not about what the API was asked: an engine that
 * refuses (400) or fails is a failed snapshot (SBX_EIO), not an unsupported one. */
static int
engine_failed(sbx_error **err, sbx_error *inner)
{
    int code = sbx_error_code(inner);
    if (code != SBX_EUNAVAIL && code != SBX_ETIMEDOUT)
        code = SBX_EIO;
    return sbx_error_set(err, code, 0, "%s", sbx_error_msg(inner));
}

/* Save image ref into an unlinked temp file of tmp_dir (*fd), then drop the engine's copy. */
static int
save_image(struct docker_data *d, const char *ref, const char *tmp_dir, int *fd, sbx_error **err)
{
    *fd = open(tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (*fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "temp file in `%s`", tmp_dir);
    sbx_autofree char *get = sbx_xasprintf("/images/%s/get", ref);
    sbx_autofree char *what = sbx_xasprintf("save image `%s`", ref);
    struct sbx_docker_req save = {
        .method = "GET", .path = get, .what = what, .timeout_s = 600, .out_fd = *fd};
    sbx_autoerror sbx_error *serr = NULL;
    int r = sbx_docker_call(d->api, &save, NULL, NULL, &serr) < 0 ? engine_failed(err, serr) : 0;
    sbx_autofree char *del = sbx_xasprintf("/images/%s", ref);
    struct sbx_docker_req rm = {
        .method = "DELETE", .path = del, .what = "remove the committed image"};
    sbx_autoerror sbx_error *rerr = NULL;
    if (sbx_docker_call(d->api, &rm, NULL, NULL, &rerr) < 0)
        sbx_warn("%s", sbx_error_msg(rerr));
    return r;
}

/* The engine's own commit (the container paused for it unless it is paused or stopped
 * already), saved as an archive for sbx's image store; the engine's copy of the image is
 * removed again (a restore on docker loads it from sbx's store, snapshot_image_load). */
static int
docker_snapshot(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_snapshot_capture *c,
                sbx_error **err)
{
    struct docker_data *d = ddata(p);
    char name[SBX_UUID_LEN + 5];
    cname(sb, name);
    bool pause = !priv_true(sb, "stopped") && !priv_true(sb, "paused");
    sbx_autofree char *commit = sbx_xasprintf("/commit?container=%s&repo=%s&tag=%s&pause=%d", name,
                                              SBX_SNAPSHOT_REPO, c->id, pause);
    sbx_autofree char *what = sbx_xasprintf("commit container `%s`", name);
    json_t *none = json_object(); /* the engine wants a JSON body (no config changes) */
    struct sbx_docker_req req = {
        .method = "POST", .path = commit, .what = what, .timeout_s = 600, .body = none};
    uint64_t t0 = sbx_now_ns();
    sbx_autoerror sbx_error *cerr = NULL;
    int r = sbx_docker_call(d->api, &req, NULL, NULL, &cerr);
    json_decref(none);
    c->frozen_us = pause ? (sbx_now_ns() - t0) / 1000 : 0;
    if (r < 0)
        return engine_failed(err, cerr);
    sbx_autofree char *ref = sbx_xasprintf("%s:%s", SBX_SNAPSHOT_REPO, c->id);
    return save_image(d, ref, c->tmp_dir, &c->fd, err);
}

/* A snapshot's image is in sbx's store, not in a registry: exported from there and loaded. */
static int
snapshot_image_load(struct docker_data *d, const char *ref, sbx_error **err)
{
    sbx_autofree char *root = sbx_image_default_root(d->state_dir);
    sbx_autofree char *tmp = sbx_xasprintf("%s/tmp", root);
    struct sbx_image_store *st = NULL;
    sbx_autoclose int fd = -1;
    int r = sbx_image_store_open(&st, root, err);
    if (r == 0 && (fd = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
        r = sbx_error_set(err, SBX_EGENERIC, errno, "temp file in `%s`", tmp);
    if (r == 0)
        r = sbx_image_export(st, ref, fd, err);
    sbx_image_store_close(st);
    if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
        r = sbx_error_set(err, SBX_EIO, errno, "rewind the archive");
    json_t *resp = NULL;
    sbx_autofree char *what = sbx_xasprintf("load image `%s`", ref);
    struct sbx_docker_req req = {.method = "POST",
                                 .path = "/images/load?quiet=1",
                                 .what = what,
                                 .timeout_s = 600,
                                 .in_fd = fd};
    if (r == 0)
        r = sbx_docker_call(d->api, &req, NULL, &resp, err);
    const char *emsg = json_string_value(json_object_get(resp, "error"));
    if (r == 0 && emsg)
        r = sbx_error_set(err, SBX_EIO, 0, "docker: load image `%s`: %s", ref, emsg);
    json_decref(resp);
    return r < 0 ? sbx_error_wrap(err, "snapshot image `%s`", ref) : 0;
}

/* ---- state ---- */

static int
status_from_daemon(struct docker_data *d, const struct sbx_record *sb, json_t **info,
                   struct sbx_provider_status *out, sbx_error **err)
{
    sbx_autoerror sbx_error *ierr = NULL;
    int r = inspect(d, sb, info, &ierr);
    if (r < 0) {
        if (r != -SBX_ENOTFOUND) {
            if (err)
                sbx_error_move(err, &ierr);
            return r;
        }
        sbx_provider_status_set(out, "missing", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    sbx_docker_state_map(json_object_get(*info, "State"), priv_true(sb, "stopped"), out);
    return 0;
}

/* True when the engine still reports the container's init as the process pid, which has
 * exited: it has not seen the exit yet. */
static bool
engine_behind(const json_t *info, pid_t pid)
{
    const json_t *st = json_object_get(info, "State");
    const char *s = state_word(info);
    return (strcmp(s, "running") == 0 || strcmp(s, "paused") == 0) &&
           json_integer_value(json_object_get(st, "Pid")) == (json_int_t)pid;
}

static int
docker_status(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_status *out,
              sbx_error **err)
{
    struct docker_data *d = ddata(p);
    /* While the recorded local init is alive, /proc answers without a daemon round trip. */
    pid_t pid = (pid_t)priv_int(sb, "pid");
    if (pid > 0 && sbx_proc_same(pid, (uint64_t)priv_int(sb, "start_time"))) {
        if (priv_true(sb, "paused"))
            sbx_provider_status_set(out, "paused", SBX_CLASS_STARTABLE, "CONTAINER_PAUSED");
        else
            sbx_provider_status_set(out, "running", SBX_CLASS_USABLE, "CONTAINER_RUNNING");
        return 0;
    }
    json_t *info = NULL;
    int r = status_from_daemon(d, sb, &info, out, err);
    /* The recorded init is gone (its watch fired at once) while the engine, told by its shim
     * or conmon, may still say running for a moment: asked again for up to a second, so the
     * death is seen now and not at the next liveness pass. */
    for (int i = 0; r >= 0 && pid > 0 && i < 50 && engine_behind(info, pid); i++) {
        json_decref(info);
        info = NULL;
        (void)usleep(20 * 1000);
        r = status_from_daemon(d, sb, &info, out, err);
    }
    json_decref(info);
    return r;
}

/* The liveness check's watch: a pidfd of the container's init, so that an idle container
 * costs the reaper no engine call and no /proc read (docs/server.md "Concurrency").
 *
 * Why the fd is the container's init and not a process that reused its pid: record_live kept
 * (pid, start time) from the engine's inspect only when /proc/<pid>/cgroup named the
 * container's id, the start time read on both sides of that check; here the pidfd is made
 * first and the start time compared after (sbx_proc_watch), and a pidfd never changes
 * process, so it refers to that very init, whose exit is the container's end (its pid
 * namespace dies with it). The check is this /proc read, not a second inspect: the manager
 * calls watch under its lock, where an engine round trip must not be.
 *
 * -1 (the reaper asks status every 5 s, as before) when nothing local can be watched: no pid
 * recorded (a remote engine, a pid of another pid namespace: record_live found no local
 * process of the container), a stopped container, an init already gone (status finds out
 * why), or no pidfd_open (kernel < 5.3). The freezer (pause) stops the init without ending
 * it, so the fd does not fire; a stop, a kill or the container's death end it, and the
 * reaper then asks status (terminal: Failed with the container's reason). */
static int
docker_watch(struct sbx_provider *p, const struct sbx_record *sb, bool *owned)
{
    *owned = true;
    (void)p;
    if (priv_true(sb, "stopped"))
        return -1;
    return sbx_proc_watch((pid_t)priv_int(sb, "pid"), (uint64_t)priv_int(sb, "start_time"));
}

/* After a restart (kill -9 included): a policed container's table never left its namespace, so
 * it was policed all along; its resolver is made there again (what it learned is forgotten:
 * it resolves again). */
static void
egress_readopt(struct docker_data *d, const struct sbx_record *sb)
{
    pid_t pid = (pid_t)priv_int(sb, "pid");
    sbx_autoerror sbx_error *err = NULL;
    if (priv_true(sb, "stopped") || pid <= 0 || !sbx_docker_egress_has_policy(sb))
        return;
    if (sbx_docker_egress_enforce(d->egress, sb, pid, (uint64_t)priv_int(sb, "start_time"), &err) <
        0)
        sbx_warn("sandbox %s: %s", sb->id, sbx_error_msg(err));
}

static int
docker_reconcile(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
                 sbx_error **err)
{
    json_t *info = NULL;
    int r = status_from_daemon(ddata(p), sb, &info, out, err);
    if (r >= 0 && info) {
        record_live(sb, info);
        priv_set(sb, "paused", json_boolean(strcmp(state_word(info), "paused") == 0));
    }
    if (r >= 0 && out->cls != SBX_CLASS_TERMINAL)
        egress_readopt(ddata(p), sb);
    json_decref(info);
    return r;
}

static int
docker_connect(struct sbx_provider *p, const struct sbx_record *sb, int port, int *fd,
               sbx_error **err)
{
    if (connect_port(ddata(p), sb, port, fd, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s`", sb->id);
    return 0;
}

static json_t *
docker_proxy_headers(struct sbx_provider *p, const struct sbx_record *sb, int port)
{
    (void)p;
    if (port != EXECD_PORT)
        return NULL;
    return json_pack("{s:s}", "X-EXECD-ACCESS-TOKEN", priv_str(sb, "token"));
}

static void
free_data(struct docker_data *d)
{
    sbx_docker_free(d->api);
#ifdef SBX_HAVE_RUNTIME
    if (d->net)
        sbx_net_close(d->net);
#endif
    sbx_docker_egress_free(d->egress);
    pthread_mutex_destroy(&d->net_mu);
    free(d->bridge);
    free(d->subnet);
    sbx_strv_free(d->allow);
    free(d->execd);
    free(d->network);
    free(d->cgroup_parent);
    free(d->state_dir);
    free(d);
}

static void
docker_free(struct sbx_provider *p)
{
    free_data(ddata(p));
    free(p);
}

/* networkPolicy needs the container's namespace on this host, and no network before its rules
 * exist (see the top of this file). */
static int
docker_check_create(struct sbx_provider *p, const json_t *request, const char **code,
                    sbx_error **err)
{
    struct docker_data *d = ddata(p);
    const json_t *np = json_object_get(request, "networkPolicy");
    if (!np || json_is_null(np))
        return 0;
    *code = "SANDBOX::API_NOT_SUPPORTED";
    if (d->reach_address)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "networkPolicy needs a local engine (providers.docker.reach = "
                             "\"netns\")");
    if (!d->sbx_net && !(d->network && strcmp(d->network, "none") == 0))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "networkPolicy needs providers.docker.network \"sbx\" (or "
                             "\"none\"), not the engine's network `%s`: there the container's "
                             "first packets would leave before its policy is in place",
                             d->network ? d->network : "default");
    return 0;
}

static const struct sbx_provider_ops docker_ops = {
    .create = docker_create,
    .start = docker_start,
    .stop = docker_stop,
    .pause = docker_pause,
    .resume = docker_resume,
    .delete = docker_delete,
    .snapshot = docker_snapshot,
    .status = docker_status,
    .watch = docker_watch,
    .connect = docker_connect,
    .reconcile = docker_reconcile,
    .proxy_headers = docker_proxy_headers,
    .check_create = docker_check_create,
    .egress = docker_egress,
    .free = docker_free,
};

/* ---- settings ---- */

static int
get_int(const json_t *settings, const char *key, json_int_t min, json_int_t def, json_int_t *out,
        sbx_error **err)
{
    json_t *v = json_object_get(settings, key);
    if (v && (!json_is_integer(v) || json_integer_value(v) < min))
        return sbx_error_set(err, SBX_EINVAL, 0, "`providers.docker.%s` must be an integer >= %lld",
                             key, (long long)min);
    *out = v ? json_integer_value(v) : def;
    return 0;
}

static int
get_choice(const json_t *settings, const char *key, const char *const *choices, int *out,
           sbx_error **err)
{
    const char *s = json_string_value(json_object_get(settings, key));
    if (!s)
        return 0;
    for (int i = 0; choices[i]; i++) {
        if (strcmp(s, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return sbx_error_set(err, SBX_EINVAL, 0, "`providers.docker.%s` cannot be `%s`", key, s);
}

/* bridge, subnet, network_allow: as the native provider's (they only apply to network "sbx"). */
static int
bridge_settings(struct docker_data *d, const json_t *settings, sbx_error **err)
{
    const char *br = json_string_value(json_object_get(settings, "bridge"));
    const char *sn = json_string_value(json_object_get(settings, "subnet"));
    json_t *allow = json_object_get(settings, "network_allow");
    d->bridge = br && *br ? sbx_xstrdup(br) : NULL;
    d->subnet = sn && *sn ? sbx_xstrdup(sn) : NULL;
    const json_t *leaf = json_object_get(settings, "leaf_size");
    if (leaf && (!json_is_integer(leaf) || json_integer_value(leaf) < 1 ||
                 json_integer_value(leaf) > SBX_DOCKER_LEAF_MAX))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`providers.docker.leaf_size` must be an integer from 1 to %d",
                             SBX_DOCKER_LEAF_MAX);
    d->leaf_size = leaf ? (unsigned)json_integer_value(leaf) : 0;
    if (allow && !json_is_array(allow))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`providers.docker.network_allow` must be a list of IPv4 "
                             "addresses or CIDRs");
    d->allow = sbx_xcalloc(json_array_size(allow) + 1, sizeof(char *));
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (allow, i, v) {
        const char *c = json_string_value(v);
#ifdef SBX_HAVE_RUNTIME
        if (!c || sbx_net_check_cidr(c, err) < 0)
            return sbx_error_wrap(err, "`providers.docker.network_allow`");
#endif
        d->allow[d->n_allow++] = sbx_xstrdup(c ? c : "");
    }
    return 0;
}

static int
parse_settings(struct docker_data *d, const json_t *settings, sbx_error **err)
{
    static const char *const reaches[] = {"netns", "address", NULL};
    static const char *const pulls[] = {"missing", "always", "never", NULL};
    int reach = 0;
    int pull = PULL_MISSING;
    json_int_t ping = 0;
    json_int_t stop = 0;
    json_int_t pull_s = 0;
    const char *net = json_string_value(json_object_get(settings, "network"));
    /* Every sandbox's execd listens on 127.0.0.1:44772 of its network namespace: on the host's
     * they would collide (and see the host's loopback services). */
    if (net && strcmp(net, "host") == 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`providers.docker.network` cannot be \"host\": sandboxes need "
                             "network namespaces of their own");
    if (get_choice(settings, "reach", reaches, &reach, err) < 0 ||
        get_choice(settings, "pull", pulls, &pull, err) < 0 ||
        get_int(settings, "ping_timeout_ms", 100, 10000, &ping, err) < 0 ||
        get_int(settings, "stop_timeout_s", 0, 10, &stop, err) < 0 ||
        get_int(settings, "pull_timeout_s", 10, 1800, &pull_s, err) < 0 ||
        get_int(settings, "pids_limit", 16, 4096, &d->pids_limit, err) < 0)
        return -SBX_EINVAL;
    const char *cg = json_string_value(json_object_get(settings, "cgroup_parent"));
    /* sbx's bridge unless told otherwise: isolated like a native sandbox. A remote engine's
     * containers cannot be attached to this host's bridge. */
    if (!net && reach == 0)
        net = NETWORK_SBX;
    if (net && strcmp(net, NETWORK_SBX) == 0 && reach == 1)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`providers.docker.network` \"sbx\" needs reach = \"netns\" (a local "
                             "engine): sbx's bridge is on this host");
    d->network = net && *net ? sbx_xstrdup(net) : NULL;
    d->sbx_net = d->network && strcmp(d->network, NETWORK_SBX) == 0;
    if (bridge_settings(d, settings, err) < 0)
        return -SBX_EINVAL;
    d->cgroup_parent = cg && *cg ? sbx_xstrdup(cg) : NULL;
    d->reach_address = reach == 1;
    d->pull = (enum pull_policy)pull;
    d->ping_timeout_ms = (int)ping;
    d->stop_timeout_s = (int)stop;
    d->pull_timeout_s = (long)pull_s;
    return 0;
}

int
sbx_provider_docker_new(const json_t *settings, const struct sbx_provider_env *env,
                        struct sbx_provider **out, sbx_error **err)
{
    struct docker_data *d = sbx_xcalloc(1, sizeof *d);
    pthread_mutex_init(&d->net_mu, NULL);
    if (parse_settings(d, settings, err) < 0) {
        free_data(d);
        return -SBX_EINVAL;
    }
    const char *sock = json_string_value(json_object_get(settings, "socket"));
    const char *execd = json_string_value(json_object_get(settings, "execd"));
    d->api = sbx_docker_new(sock && *sock ? sock : "/var/run/docker.sock");
    d->execd = execd ? sbx_xstrdup(execd) : sbx_launch_default_execd(env->exe_dir);
    d->state_dir = sbx_xstrdup(env->state_dir);
    struct sbx_docker_egress_conf ec = {
        .upstream = json_string_value(json_object_get(settings, "egress_dns")),
        .upstream_ca = json_string_value(json_object_get(settings, "credproxy_upstream_ca"))};
    d->egress = sbx_docker_egress_new(&ec, env->vault);
    d->vault = env->vault;
    /* Nothing is asked of the daemon here: the server starts whether or not it runs, and each
     * request that needs it says so when it is down. */
    struct stat st;
    if (stat(sbx_docker_socket(d->api), &st) < 0)
        sbx_warn("provider `docker`: no socket at %s yet; creates fail until the daemon runs "
                 "(set providers.docker.socket)",
                 sbx_docker_socket(d->api));
    if (!d->reach_address && access(d->execd, X_OK) < 0)
        sbx_warn("provider `docker`: `%s` is not an executable; creates will fail until it is "
                 "(set providers.docker.execd)",
                 d->execd);
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &docker_ops;
    p->data = d;
    *out = p;
    return 0;
}
