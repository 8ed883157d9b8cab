/*
 * nft.h - NAT and forwarding rules of a bridge network, through libnftables.
 *
 * Our tables `ip|ip6|bridge sbx_<bridge>`: masquerade of the subnet leaving by any other
 * interface; only replies (and DNAT'ed traffic) into the bridge from outside; and the
 * isolation of sandboxes: from a sandbox, nothing of the host but DNS to its resolvers, no
 * private, link-local (metadata) or reserved address unless allowed, no other sandbox unless
 * both are in one group, no IPv6 at all (docs/network.md "Isolation").
 * In nftables an accept in one base chain does not override a drop in another at the same hook,
 * so when an iptables-nft `ip filter FORWARD` chain exists (dockerd sets its policy to drop) two
 * accept rules for the bridge are inserted there too, written so that iptables-nft can still
 * parse the chain (`-i B -m comment --comment sbx:B -j ACCEPT`): dockerd keeps working.
 */
#ifndef SBX_NET_NFT_H
#define SBX_NET_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct sbx_nft;

int sbx_nft_new(struct sbx_nft **out, sbx_error **err);
void sbx_nft_free(struct sbx_nft *nft);

/* 1 when the rules of bridge/subnet (with dns, the sandboxes' resolvers, space-separated) are
 * all in place, 0 when something is missing or different. */
int sbx_nft_check(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns);
/* Put the rules in place (idempotent; one transaction). Keeps the elements of the allow-list
 * and of the groups set. */
int sbx_nft_setup(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns,
                  sbx_error **err);
/* Remove our tables and our rules in `ip filter FORWARD` (for tests and `sbx net` cleanup). */
int sbx_nft_teardown(struct sbx_nft *nft, const char *bridge, sbx_error **err);
/* Replace the allow-list: IPv4 addresses or CIDRs sandboxes may reach although they are in
 * the blocked ranges or on this host (checked by the caller). */
int sbx_nft_allow(struct sbx_nft *nft, const char *bridge, const char *const *cidrs, size_t n,
                  sbx_error **err);
/* Let the bridge ports of device group `group` (> 0) reach each other. */
int sbx_nft_group(struct sbx_nft *nft, const char *bridge, uint32_t group, sbx_error **err);

/* Egress policies (docs/network.md "Egress policy"). */
enum sbx_nft_egress_mode {
    SBX_NFT_EGRESS_NONE = 0, /* no policy: the base isolation only */
    SBX_NFT_EGRESS_DENY,     /* only (sandbox . address) in egress_ok4 */
    SBX_NFT_EGRESS_ALLOW,    /* all but (sandbox . address) in egress_block4 */
};
/* Put the sandbox address addr in the set of mode (and out of the other). */
int sbx_nft_egress_mode(struct sbx_nft *nft, const char *bridge, const char *addr,
                        enum sbx_nft_egress_mode mode, sbx_error **err);
/* Delete every element of egress_ok4 and egress_block4 whose sandbox is addr. */
int sbx_nft_egress_forget(struct sbx_nft *nft, const char *bridge, const char *addr,
                          sbx_error **err);
struct sbx_nft_egress_elems {
    bool block; /* egress_block4, else egress_ok4 */
    const char *saddr;
    const char *const *daddrs;
    size_t n;
    unsigned timeout_s;
};
/* Add (saddr . daddrs[i]) with the timeout (an existing element gets the new timeout). */
int sbx_nft_egress_add(struct sbx_nft *nft, const char *bridge,
                       const struct sbx_nft_egress_elems *e, sbx_error **err);
/* Empty egress_ok4 and egress_block4 (a server start: sandboxes resolve again). */
int sbx_nft_egress_flush(struct sbx_nft *nft, const char *bridge, sbx_error **err);
/* Put addr into credproxy4 (on) or take it out: its TCP to ports 80 and 443 goes to the credential
 * proxy on the gateway, as far as the forward chain would let it through. */
int sbx_nft_credproxy(struct sbx_nft *nft, const char *bridge, const char *addr, bool on,
                      sbx_error **err);

/* Egress policy inside a sandbox's own network namespace (the docker provider): the table
 * `inet sbx_egress` of the namespace nft's context was made in (make the context there, on a
 * thread inside it: sbx_netns_run). Mode deny: only addresses in its set ok4; allow: all but
 * those in block4; both: no IPv6, no DNS (53) or DNS over TLS (853) but on loopback, where
 * sbx's resolver listens. One transaction, which also empties both sets. NONE: no table. */
int sbx_nft_ns_egress(struct sbx_nft *nft, enum sbx_nft_egress_mode mode, sbx_error **err);
/* Add daddrs (e->saddr unused) to ok4, or block4 with e->block, with the timeout. */
int sbx_nft_ns_egress_add(struct sbx_nft *nft, const struct sbx_nft_egress_elems *e,
                          sbx_error **err);
/* The mark of the credential proxy's own connections (egress/credproxy.h SBX_CREDPROXY_MARK). */
#define SBX_NFT_CREDPROXY_MARK 0x5b8c0001u
/* In the same table: the credential proxy's redirect of the namespace's TCP to port 80 (what
 * the filter let out, not loopback, not the proxy's own marked connections) to 127.0.0.1:port,
 * and to port 443 to 127.0.0.1:tls_port (tls_port 0: 443 is not redirected); port 0: no
 * redirect at all. */
int sbx_nft_ns_credproxy(struct sbx_nft *nft, unsigned port, unsigned tls_port, sbx_error **err);

#endif
