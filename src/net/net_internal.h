/*
 * net_internal.h - what the files of src/net share (and tests use), not for other modules.
 */
#ifndef SBX_NET_INTERNAL_H
#define SBX_NET_INTERNAL_H

#include <stdint.h>

#include "net/ipam.h"
#include "net/net.h"

struct sbx_nft;

struct sbx_net {
    char bridge[16];
    char subnet[32]; /* canonical "a.b.c.d/n" */
    char *dir;       /* <state_dir>/<bridge> */
    struct sbx_ipam ipam;
    struct sbx_nft *nft;
    char dns[256];       /* the sandboxes' resolvers, space-separated (sbx_net_config.dns) */
    char nft_stamp[384]; /* "<boot id> <ruleset generation> <dns>" when our rules were verified */
};

/* The keep-alive veth pair of a bridge: "<bridge>-kp" (a bridge port) and "<bridge>-kx". */
void sbx_net_keepalive_names(char port[16], char peer[16], const char *bridge);

/* Host end of the veth of addr: "vsbx" + 8 hex digits, unique per address (so a veth left by
 * a crash is found from its lease alone). */
void sbx_net_host_ifname(char buf[16], uint32_t addr);

/* The lease record of addr (address, gateway, host ifname, MAC). */
void sbx_net_fill_lease(struct sbx_net_lease *out, const struct sbx_net *n, uint32_t addr);

struct sbx_nl;
/* Delete the veth of addr (if any) and release the lease of addr held by id. */
int sbx_net_release_addr(struct sbx_net *n, struct sbx_nl *nl, uint32_t addr, const char *id,
                         sbx_error **err);

/* Remove the bridge, our nftables table and our rules in `ip filter FORWARD`. */
int sbx_net_teardown(struct sbx_net *n, sbx_error **err);

/* sbx_net_resolv_conf() with the files to read (for tests). */
int sbx_net_resolv_conf_from(char **out, const char *host_path, const char *fallback_path,
                             sbx_error **err);

#endif
