/*
 * nft.h - NAT and forwarding rules of a bridge network, through libnftables.
 *
 * Our table `ip sbx_<bridge>`: masquerade of the subnet leaving by any other interface, and
 * a forward chain that lets only replies (and DNAT'ed traffic) into the bridge from outside.
 * In nftables an accept in one base chain does not override a drop in another at the same hook,
 * so when an iptables-nft `ip filter FORWARD` chain exists (dockerd sets its policy to drop) two
 * accept rules for the bridge are inserted there too, written so that iptables-nft can still
 * parse the chain (`-i B -m comment --comment sbx:B -j ACCEPT`): dockerd keeps working.
 */
#ifndef SBX_NET_NFT_H
#define SBX_NET_NFT_H

#include <stdint.h>

#include "common/error.h"

struct sbx_nft;

int sbx_nft_new(struct sbx_nft **out, sbx_error **err);
void sbx_nft_free(struct sbx_nft *nft);

/* 1 when the rules of bridge/subnet are all in place, 0 when something is missing. */
int sbx_nft_check(struct sbx_nft *nft, const char *bridge, const char *subnet);
/* Put the rules in place (idempotent; one transaction for our table). */
int sbx_nft_setup(struct sbx_nft *nft, const char *bridge, const char *subnet, sbx_error **err);
/* Remove our table and our rules in `ip filter FORWARD` (for tests and `sbx net` cleanup). */
int sbx_nft_teardown(struct sbx_nft *nft, const char *bridge, sbx_error **err);

#endif
