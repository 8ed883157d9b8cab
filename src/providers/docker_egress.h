/*
 * docker_egress.h - egress policies (`networkPolicy`) of the docker provider's containers,
 * enforced inside each container's own network namespace (egress.h netns mode): a table there
 * that the container cannot change, and sbx's resolver on a loopback address there, which the
 * container's resolv.conf names (HostConfig.Dns). docs/network.md "Egress policy".
 */
#ifndef SBX_PROVIDERS_DOCKER_EGRESS_H
#define SBX_PROVIDERS_DOCKER_EGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "server/sandbox.h"

/* Where sbx's resolver listens inside each policed container (port 53). */
#define SBX_DOCKER_EGRESS_RESOLVER "127.0.0.53"

struct sbx_docker_egress;

struct sbx_credvault;

struct sbx_docker_egress_conf {
    const char *upstream;    /* the resolvers to forward to ("a.b.c.d[:port] ..."); NULL: the
                              * host's */
    const char *upstream_ca; /* the credential proxy's extra CAs for HTTPS destinations (a PEM
                              * file); NULL: the system's only */
};

/* vault: the server's Credential Vault values and the sandboxes' CAs (the credential proxy's;
 * NULL: none). Nothing is opened before the first enforce. */
struct sbx_docker_egress *sbx_docker_egress_new(const struct sbx_docker_egress_conf *conf,
                                                struct sbx_credvault *vault);
/* The enforcement stays in the containers (their tables); only our listeners close. */
void sbx_docker_egress_free(struct sbx_docker_egress *x);

bool sbx_docker_egress_has_policy(const struct sbx_record *sb);

/* Add to a HostConfig's Mounts the read-only bind of <state_dir>/egress-resolv.conf (written
 * here when missing or different) over /etc/resolv.conf. */
int sbx_docker_egress_mount(const char *state_dir, json_t *host_config, sbx_error **err);

/* Enforce sb's stored policy on its running container (and its Credential Vault's bindings:
 * the credential proxy, docs/network.md "Credential proxy" "On docker"), whose init is pid
 * (start_time checked again here, after its namespace is opened). Refused (SBX_EINVAL) when that
 * process could change its own rules (CAP_NET_ADMIN, CAP_NET_RAW or CAP_SYS_ADMIN in its bounding
 * set). */
int sbx_docker_egress_enforce(struct sbx_docker_egress *x, const struct sbx_record *sb, pid_t pid,
                              uint64_t start_time, sbx_error **err);
/* The container stopped or went: its listener closes. */
void sbx_docker_egress_forget(struct sbx_docker_egress *x, const char *id);

#endif
