/*
 * egress.h - enforcement of sandboxes' egress policies: a DNS resolver in the server process
 * (UDP and TCP port 53) that answers by each querying sandbox's policy, and nftables sets that
 * let a sandbox reach only what its resolver answered for allowed names (deny default) or
 * anything but its denied names' addresses (allow default). See docs/network.md "Egress
 * policy". Two modes, one resolver core:
 *
 * bridge (native sandboxes): the resolver listens on the bridge's gateway, the sets are in the
 * bridge's table keyed by sandbox address; a sandbox is known by its address (any other source
 * gets REFUSED).
 *   sbx_egress_open(&e, &cfg, &err);              cfg.bridge set, once the bridge exists
 *   sbx_egress_apply(e, id, addr, policy, &err);  a sandbox's policy (start, PATCH, DELETE)
 *
 * netns (docker containers): each sandbox gets a listener at cfg.listen (a loopback address)
 * made inside its own network namespace and a table of its own there (nft.h:
 * sbx_nft_ns_egress); a sandbox is known by the listener its query came in on.
 *   sbx_egress_open(&e, &cfg, &err);              cfg.bridge NULL
 *   sbx_egress_apply_netns(e, id, &ns, policy, &err);
 *
 * Both: sbx_egress_drop(e, id, &err) when the sandbox stops or goes; sbx_egress_close(e).
 */
#ifndef SBX_EGRESS_EGRESS_H
#define SBX_EGRESS_EGRESS_H

#include "common/error.h"
#include "egress/policy.h"

struct sbx_egress;

struct sbx_egress_config {
    const char *bridge;   /* bridge mode: whose table (ip sbx_<bridge>) holds the sets; NULL:
                           * netns mode */
    const char *listen;   /* where the resolver listens (port 53): bridge mode the gateway;
                           * netns mode the address inside each sandbox's namespace */
    const char *upstream; /* resolvers to forward to: "a.b.c.d[:port] ...", at least one */
    /* The credential proxy's values: sandbox id's Credential Vault values (an object of
     * name -> value; the caller's store), read at each request it injects into. */
    int (*values)(void *arg, const char *id, json_t **values, sbx_error **err);
    /* HTTPS: sandbox id's CA (tlsca.h) as PEM texts, the caller frees them (the key is
     * secret); NULL: HTTPS is never intercepted. */
    int (*ca)(void *arg, const char *id, char **key_pem, char **cert_pem, sbx_error **err);
    void *values_arg; /* (of both) */
    /* a PEM file of CAs the proxy trusts for destinations besides the system's; NULL: none */
    const char *upstream_ca;
};

/* Bridge mode: bind the resolver (SBX_EEXISTS naming the port when something else has it),
 * and empty the learned sets (a server restart: sandboxes resolve again). Both: start its
 * threads. */
int sbx_egress_open(struct sbx_egress **out, const struct sbx_egress_config *cfg, sbx_error **err);
void sbx_egress_close(struct sbx_egress *e);

/* Enforce policy (copied) for sandbox id at addr, at once: its mode set, the addresses it had
 * learned forgotten (a changed policy must not keep what the old one allowed), and in
 * allow-default mode its exact deny targets resolved into the block set. */
int sbx_egress_apply(struct sbx_egress *e, const char *id, const char *addr,
                     const struct sbx_egress_policy *policy, sbx_error **err);
/* The network namespace of a sandbox (netns mode): netns_fd (/proc/<pid>/ns/net) and a pidfd
 * of its init, both checked by the caller to be the sandbox's (both are dup'ed). When that
 * process exits, the sandbox's listener is closed at once (nothing of ours keeps the dead
 * namespace alive); its policy stays until drop or the next apply. */
struct sbx_egress_netns {
    int netns_fd;
    int pidfd;
};

/* Netns mode: enforce policy for sandbox id inside its namespace, at once: the table there
 * (made, or rewritten: the mode, the addresses it had learned forgotten), then its listener
 * (made with the first apply in this namespace; SBX_EGENERIC when it cannot be, e.g. a process
 * of the sandbox holds the port: the table is in place all the same), and in allow-default mode
 * its exact deny targets resolved into the block set. */
int sbx_egress_apply_netns(struct sbx_egress *e, const char *id, const struct sbx_egress_netns *ns,
                           const struct sbx_egress_policy *policy, sbx_error **err);

/* Stop enforcing for id: bridge mode: its address leaves the mode sets and every element it
 * learned goes (another sandbox may get the address next); netns mode: its listener is closed
 * (its table goes with its namespace). Unknown id: nothing. */
int sbx_egress_drop(struct sbx_egress *e, const char *id, sbx_error **err);
/* The bindings of sandbox id's Credential Vault (a JSON array as api_vault.c stores them,
 * copied; NULL or empty: none): with some, its TCP to port 80 (and 443; netns mode: only with
 * cfg.ca) goes through the credential proxy (docs/network.md "Credential proxy"; netns mode:
 * its listeners made in the sandbox's namespace and the namespace's redirects to them). After
 * sbx_egress_apply or sbx_egress_apply_netns. */
int sbx_egress_vault(struct sbx_egress *e, const char *id, const json_t *bindings, sbx_error **err);
/* Bridge mode: clear addr of anything a former holder left (a sandbox without policy got it). */
int sbx_egress_clear_addr(struct sbx_egress *e, const char *addr, sbx_error **err);

#endif
