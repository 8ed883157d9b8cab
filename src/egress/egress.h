/*
 * egress.h - enforcement of sandboxes' egress policies on a bridge: a DNS resolver in the
 * server process on the bridge's gateway (UDP and TCP port 53) that answers by each querying
 * sandbox's policy, and the nftables sets that let a sandbox reach only what its resolver
 * answered for allowed names (deny default) or anything but its denied names' addresses
 * (allow default). See docs/network.md "Egress policy".
 *
 *   sbx_egress_open(&e, &cfg, &err);              once the bridge (and its table) exist
 *   sbx_egress_apply(e, id, addr, policy, &err);  a sandbox's policy (start, PATCH, DELETE)
 *   sbx_egress_drop(e, id, &err);                 the sandbox stops or goes
 *   sbx_egress_close(e);
 *
 * A sandbox is known by its address: the resolver answers REFUSED to any other source.
 */
#ifndef SBX_EGRESS_EGRESS_H
#define SBX_EGRESS_EGRESS_H

#include "common/error.h"
#include "egress/policy.h"

struct sbx_egress;

struct sbx_egress_config {
    const char *bridge;   /* whose nftables table (ip sbx_<bridge>) holds the sets */
    const char *listen;   /* the gateway address: where the resolver listens (port 53) */
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

/* Bind the resolver (SBX_EEXISTS naming the port when something else has it), start its
 * threads, and empty the learned sets (a server restart: sandboxes resolve again). */
int sbx_egress_open(struct sbx_egress **out, const struct sbx_egress_config *cfg, sbx_error **err);
void sbx_egress_close(struct sbx_egress *e);

/* Enforce policy (copied) for sandbox id at addr, at once: its mode set, the addresses it had
 * learned forgotten (a changed policy must not keep what the old one allowed), and in
 * allow-default mode its exact deny targets resolved into the block set. */
int sbx_egress_apply(struct sbx_egress *e, const char *id, const char *addr,
                     const struct sbx_egress_policy *policy, sbx_error **err);
/* Stop enforcing for id: its address leaves the mode sets and every element it learned goes
 * (another sandbox may get the address next). Unknown id: nothing. */
int sbx_egress_drop(struct sbx_egress *e, const char *id, sbx_error **err);
/* The bindings of sandbox id's Credential Vault (a JSON array as api_vault.c stores them,
 * copied; NULL or empty: none): with some, its TCP to port 80 goes through the credential
 * proxy (docs/network.md "Credential proxy"). After sbx_egress_apply. */
int sbx_egress_vault(struct sbx_egress *e, const char *id, const json_t *bindings, sbx_error **err);
/* Clear addr of anything a former holder left (a sandbox without policy got it). */
int sbx_egress_clear_addr(struct sbx_egress *e, const char *addr, sbx_error **err);

#endif
