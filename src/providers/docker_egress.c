/*
 * docker_egress.c - egress policies of docker containers (see docker_egress.h).
 *
 * Why a container cannot undo its policy: the rules are in its own network namespace, and
 * changing them needs CAP_NET_ADMIN there. The provider never grants it (the engine's defaults
 * drop NET_ADMIN and SYS_ADMIN, docker.c's HostConfig drops NET_RAW too, no-new-privileges
 * keeps file capabilities from adding any, and the API has no field that adds capabilities),
 * and enforce checks the container's init all the same: a bounding set holding NET_ADMIN,
 * NET_RAW (packet sockets pass no netfilter hook) or SYS_ADMIN (setns, mounts over
 * resolv.conf) is refused, so a container made otherwise (an engine default changed, a future
 * API field) is never "policed" in name only. A user namespace of the container's own gets no
 * capability over the container's network namespace (owned by the engine's user namespace).
 */
#include "providers/docker_egress.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "net/net.h"
#include "providers/procutil.h"
#include "server/credvault.h"
#ifdef SBX_HAVE_RUNTIME
#include "providers/credca.h"
#define CREDCA_GET sbx_credca_get
#else
#define CREDCA_GET NULL /* (no native runtime built: no egress policies either, nft.h) */
#endif

#define CAP_NET_ADMIN_BIT 12
#define CAP_NET_RAW_BIT   13
#define CAP_SYS_ADMIN_BIT 21

struct sbx_docker_egress {
    pthread_mutex_t mu;
    struct sbx_egress *e; /* opened on first use */
    char *upstream;
    char *upstream_ca;           /* credproxy_upstream_ca; NULL: the system's CAs only */
    struct sbx_credvault *vault; /* the server's: the credential proxy's values; NULL: none */
};

struct sbx_docker_egress *
sbx_docker_egress_new(const struct sbx_docker_egress_conf *conf, struct sbx_credvault *vault)
{
    struct sbx_docker_egress *x = sbx_xcalloc(1, sizeof *x);
    x->vault = vault;
    pthread_mutex_init(&x->mu, NULL);
    x->upstream = conf->upstream && *conf->upstream ? sbx_xstrdup(conf->upstream) : NULL;
    x->upstream_ca =
        conf->upstream_ca && *conf->upstream_ca ? sbx_xstrdup(conf->upstream_ca) : NULL;
    return x;
}

void
sbx_docker_egress_free(struct sbx_docker_egress *x)
{
    if (!x)
        return;
    sbx_egress_close(x->e);
    pthread_mutex_destroy(&x->mu);
    free(x->upstream);
    free(x->upstream_ca);
    free(x);
}

bool
sbx_docker_egress_has_policy(const struct sbx_record *sb)
{
    return json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "policy") != NULL;
}

int
sbx_docker_egress_mount(const char *state_dir, json_t *host_config, sbx_error **err)
{
    static const char text[] = "nameserver " SBX_DOCKER_EGRESS_RESOLVER "\n";
    sbx_autofree char *path = sbx_xasprintf("%s/egress-resolv.conf", state_dir);
    sbx_autofree char *now = NULL;
    /* one file for every policed container: read-only inside, so none can change another's */
    if ((sbx_read_file(path, 4096, &now, NULL, NULL) < 0 || strcmp(now, text) != 0) &&
        sbx_write_file_atomic(path, text, strlen(text), 0644, err) < 0)
        return sbx_error_wrap(err, "networkPolicy: the containers' resolv.conf");
    json_t *mounts = json_object_get(host_config, "Mounts");
    (void)json_array_append_new(mounts,
                                json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source", path,
                                          "Target", "/etc/resolv.conf", "ReadOnly", 1));
    return 0;
}

/* The credential proxy's values of sandbox id (sbx_egress_config.values). */
static int
vault_values(void *arg, const char *id, json_t **values, sbx_error **err)
{
    return sbx_credvault_get(arg, id, values, err);
}

/* The resolver, opened on first use; upstream: the setting, else the host's resolvers. */
static struct sbx_egress *
service(struct sbx_docker_egress *x, sbx_error **err)
{
    pthread_mutex_lock(&x->mu);
    if (!x->e) {
        char dns[256] = "";
        sbx_autofree char *conf = NULL;
        if (!x->upstream && sbx_net_resolv_conf(&conf, NULL) == 0)
            sbx_net_resolv_servers(dns, sizeof dns, conf);
        /* values and ca: the credential proxy (HTTPS: each sandbox's CA, made with the bundle
         * docker.c binds into its container; one without has none: its HTTPS is spliced) */
        struct sbx_egress_config cfg = {.listen = SBX_DOCKER_EGRESS_RESOLVER,
                                        .upstream = x->upstream ? x->upstream : dns,
                                        .values = x->vault ? vault_values : NULL,
                                        .ca = x->vault ? CREDCA_GET : NULL,
                                        .values_arg = x->vault,
                                        .upstream_ca = x->upstream_ca};
        (void)sbx_egress_open(&x->e, &cfg, err);
    }
    struct sbx_egress *e = x->e;
    pthread_mutex_unlock(&x->mu);
    return e;
}

/* The capability bounding set of pid (/proc/<pid>/status CapBnd). */
static int
cap_bounding(pid_t pid, uint64_t *out, sbx_error **err)
{
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    sbx_autofree char *text = NULL;
    if (sbx_read_file(path, 1 << 16, &text, NULL, err) < 0)
        return sbx_error_wrap(err, "capabilities of %d", (int)pid);
    const char *c = strstr(text, "\nCapBnd:");
    if (!c || sscanf(c + 8, "%" SCNx64, out) != 1)
        return sbx_error_set(err, SBX_EIO, 0, "no CapBnd in %s", path);
    return 0;
}

static int
check_caps(pid_t pid, sbx_error **err)
{
    uint64_t bnd = 0;
    int r = cap_bounding(pid, &bnd, err);
    if (r < 0)
        return r;
    uint64_t bad =
        (1ULL << CAP_NET_ADMIN_BIT) | (1ULL << CAP_NET_RAW_BIT) | (1ULL << CAP_SYS_ADMIN_BIT);
    if (bnd & bad)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "the container may hold CAP_NET_ADMIN, CAP_NET_RAW or CAP_SYS_ADMIN "
                             "(bounding set %" PRIx64 "): it could undo its own networkPolicy",
                             bnd);
    return 0;
}

static struct sbx_egress_policy *
policy_of(const struct sbx_record *sb)
{
    const json_t *pol = json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "policy");
    struct sbx_egress_policy *p = NULL;
    if (pol && sbx_egress_policy_parse(pol, &p, NULL) < 0)
        return NULL; /* never: stored after the same check */
    return p;
}

/* The namespace and a pidfd of pid, both opened (and its capabilities read) before its start
 * time is checked again: if the pid was recycled before, the start time differs; after, the
 * fds pin what was checked. */
static int
open_init(pid_t pid, uint64_t start_time, int *ns, int *pidfd, sbx_error **err)
{
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    *ns = open(path, O_RDONLY | O_CLOEXEC);
    *pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (*ns < 0 || *pidfd < 0)
        return sbx_error_set(err, SBX_ECONFLICT, errno, "the container's init %d is gone",
                             (int)pid);
    int r = check_caps(pid, err);
    if (r == 0 && !sbx_proc_same(pid, start_time))
        r = sbx_error_set(err, SBX_ECONFLICT, ESRCH, "the container's init %d is gone", (int)pid);
    return r;
}

/* The bindings of sb's Credential Vault, or NULL (no credentialProxy, no vault). */
static const json_t *
bindings_of(const struct sbx_record *sb)
{
    const json_t *eg = json_object_get(sb->priv, SBX_EGRESS_PRIV);
    if (!json_is_true(json_object_get(eg, "credentialProxy")))
        return NULL;
    return json_object_get(json_object_get(eg, "vault"), "bindings");
}

/* After the policy: the credential proxy's listener and redirect follow the vault's
 * bindings. */
static int
enforce_vault(struct sbx_egress *e, const struct sbx_record *sb, sbx_error **err)
{
    const json_t *eg = json_object_get(sb->priv, SBX_EGRESS_PRIV);
    if (!json_is_true(json_object_get(eg, "credentialProxy")))
        return 0;
    return sbx_egress_vault(e, sb->id, bindings_of(sb), err);
}

int
sbx_docker_egress_enforce(struct sbx_docker_egress *x, const struct sbx_record *sb, pid_t pid,
                          uint64_t start_time, sbx_error **err)
{
    sbx_autoclose int ns = -1;
    sbx_autoclose int pidfd = -1;
    struct sbx_egress_policy *p = policy_of(sb);
    struct sbx_egress *e = NULL;
    int r = p ? 0 : sbx_error_set(err, SBX_EINVAL, 0, "no egress policy");
    if (r == 0)
        r = open_init(pid, start_time, &ns, &pidfd, err);
    if (r == 0 && !(e = service(x, err)))
        r = -SBX_EUNAVAIL;
    if (r == 0) {
        struct sbx_egress_netns where = {.netns_fd = ns, .pidfd = pidfd};
        r = sbx_egress_apply_netns(e, sb->id, &where, p, err);
    }
    if (r == 0)
        r = enforce_vault(e, sb, err);
    sbx_egress_policy_free(p);
    return r < 0 ? sbx_error_wrap(err, "networkPolicy of `%s`", sb->id) : 0;
}

void
sbx_docker_egress_forget(struct sbx_docker_egress *x, const char *id)
{
    pthread_mutex_lock(&x->mu);
    struct sbx_egress *e = x->e;
    pthread_mutex_unlock(&x->mu);
    sbx_autoerror sbx_error *err = NULL;
    if (e && sbx_egress_drop(e, id, &err) < 0)
        sbx_warn("sandbox %s: %s", id, sbx_error_msg(err));
}
