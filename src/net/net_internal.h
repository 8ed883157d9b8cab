/*
 * net_internal.h - what the files of src/net share (and tests use), not for other modules.
 */
#ifndef SBX_NET_INTERNAL_H
#define SBX_NET_INTERNAL_H

#include <stdbool.h>
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
    unsigned leaf_size;  /* sandboxes per leaf bridge */
};

/* Names of leaf k (1-based) of a bridge and of its uplink pair (docs/network.md "More than
 * 1022 bridged sandboxes"): the leaf `<bridge>.<k>` (`lsbx<hash>.<k>` when that is longer than
 * 15 bytes), the uplink `usbx<hash>r<k>` on the bridge and `usbx<hash>l<k>` on the leaf. Every
 * uplink of every bridge starts with SBX_NET_UPLINK_PREFIX: the host-wide bridge table
 * matches it. */
#define SBX_NET_UPLINK_PREFIX "usbx"
/* Group numbers are below this (nft.c carries them in a packet mark's low 19 bits). */
#define SBX_NET_MAX_GROUP 0x80000U
struct sbx_net_leaf_names {
    char leaf[16];
    char root_end[16];
    char leaf_end[16];
};
void sbx_net_leaf_names(struct sbx_net_leaf_names *out, const char *bridge, unsigned k);
/* "usbx<hash>", the start of every uplink name of bridge's leaves. */
void sbx_net_uplink_prefix(char out[16], const char *bridge);
/* The prefix every leaf of bridge's name starts with ("sbx0." / "lsbx<hash>."). */
void sbx_net_leaf_prefix(char out[16], const char *bridge);
/* The leaf (1-based) of a leased address. */
unsigned sbx_net_leaf_index(const struct sbx_net *n, uint32_t addr);
/* The ifindex and MTU of the leaf of addr (a sandbox's veth goes there), the leaf made with
 * its uplink when it does not exist: lock_fd is the setup lock, held shared by the caller
 * (sbx_net_lock), which this turns exclusive for that. */
struct sbx_nl;
struct sbx_net_port {
    int master;
    int mtu;
};
int sbx_net_leaf_ready(struct sbx_net *n, struct sbx_nl *nl, uint32_t addr, int lock_fd,
                       struct sbx_net_port *out, sbx_error **err);
/* Delete the leaves of n that hold no sandbox port (all: every leaf) with their uplinks, and
 * uplinks of n whose leaf is gone. The caller holds the setup lock exclusively. Returns the
 * number of leaves removed. */
int sbx_net_remove_leaves(struct sbx_net *n, struct sbx_nl *nl, bool all, sbx_error **err);
/* 0 when name can be a bridge's (1-15 of [A-Za-z0-9_.-]), else SBX_EINVAL. */
int sbx_net_check_bridge_name(const char *name, sbx_error **err);
/* Serialises host changes (setup, leaves) between processes: flock on
 * <dir>/setup.lock, `how` LOCK_SH or LOCK_EX; *fd is the lock (close it to unlock). */
int sbx_net_lock(int *fd, const struct sbx_net *n, int how, sbx_error **err);
/* Wait (bounded) until name passes traffic (attach.c). */
void sbx_net_wait_ready(struct sbx_nl *nl, const char *name);

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
