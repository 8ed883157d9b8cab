/*
 * net.h - networking of native sandboxes: `--network bridge` (a veth pair into a host bridge,
 * an address from a pool, NAT for egress) and `--network none` (loopback only).
 *
 * The runtime creates each sandbox's network namespace (clone(CLONE_NEWNET)) and, from the
 * parent, before the sandbox's process runs:
 *
 *   sbx_net_open(&n, &cfg, &err);                    once per process (idempotent host setup)
 *   sbx_net_attach(&lease, n, id, netns_fd, &err);   per sandbox: veth + address + routes
 *   ...
 *   sbx_net_detach(n, id, &err);                     per sandbox, idempotent
 *   sbx_net_gc(n, alive, payload, &err);             after a crash
 *
 * Everything per sandbox is netlink (no `ip`, no `iptables`); the one-time host setup is
 * netlink plus libnftables. See docs/network.md.
 */
#ifndef SBX_NET_NET_H
#define SBX_NET_NET_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SBX_NET_DEFAULT_BRIDGE    "sbx0"
#define SBX_NET_DEFAULT_SUBNET    "10.88.0.0/16"
#define SBX_NET_DEFAULT_STATE_DIR "/run/sbx/net" /* leases die with veths at reboot */
/* A Linux bridge has at most BR_MAX_PORTS (1024) ports, numbered from 1; one is the
 * keep-alive port (docs/network.md), so about 1020 sandboxes fit on one bridge. */
#define SBX_NET_BRIDGE_MAX_PORTS     1024
#define SBX_NET_BRIDGE_MAX_SANDBOXES 1022
/* Sandboxes go onto leaf bridges `<bridge>.1`, `<bridge>.2`, ... joined to the bridge by an
 * uplink veth pair each (docs/network.md "More than 1022 bridged sandboxes"): a leaf holds at
 * most SBX_NET_LEAF_MAX_SIZE sandboxes (its ports but the uplink), the bridge at most
 * SBX_NET_MAX_LEAVES leaves (its ports but the keep-alive port). */
#define SBX_NET_DEFAULT_LEAF_SIZE 1000
#define SBX_NET_LEAF_MAX_SIZE     (SBX_NET_BRIDGE_MAX_PORTS - 1)
#define SBX_NET_MAX_LEAVES        (SBX_NET_BRIDGE_MAX_PORTS - 1)

struct sbx_net_config {
    const char *bridge; /* default SBX_NET_DEFAULT_BRIDGE (at most 15 bytes) */
    const char *subnet; /* IPv4 CIDR, default SBX_NET_DEFAULT_SUBNET (/8 .. /30) */
    const char
        *state_dir; /* leases live in <state_dir>/<bridge>/; default SBX_NET_DEFAULT_STATE_DIR */
    /* The sandboxes' resolvers (IPv4, space-separated), the only host or private addresses
     * they reach by default (port 53). NULL: the nameservers of sbx_net_resolv_conf(). */
    const char *dns;
    /* Sandboxes per leaf bridge, 1 .. SBX_NET_LEAF_MAX_SIZE; 0: SBX_NET_DEFAULT_LEAF_SIZE.
     * Address a goes onto leaf 1 + (a - first address) / leaf_size. Every process sharing a
     * bridge should use one value (a different one only packs leaves differently). */
    unsigned leaf_size;
};

struct sbx_net_lease {
    char addr[16];        /* the sandbox's address, "10.88.0.2" */
    int prefix;           /* subnet prefix length, 16 */
    char gateway[16];     /* the bridge's address, "10.88.0.1" */
    char host_ifname[16]; /* host end of the veth ("sbx0a580002") */
    char mac[18];         /* MAC of the sandbox's eth0 */
};

struct sbx_net;

/* Host setup (idempotent; a few cheap checks when already done): the bridge exists, is up
 * and holds the gateway address (first host of the subnet); ip_forward is on; NAT (masquerade)
 * for the subnet leaving by any other interface; forward accept for the bridge (also in an
 * iptables-nft `ip filter FORWARD` chain such as the one dockerd sets to policy drop).
 * NULL fields of cfg take the defaults. Thread-safe handle afterwards (except ensure). */
int sbx_net_open(struct sbx_net **out, const struct sbx_net_config *cfg, sbx_error **err);
void sbx_net_close(struct sbx_net *n);
/* Check the host setup again and repair it (e.g. dockerd started since and set the FORWARD
 * policy to drop). ~0.1 ms when nothing changed: a long-running caller may call it before each
 * attach. 0: nothing to do; 1: set up again (re-apply an allow-list). */
int sbx_net_ensure(struct sbx_net *n, sbx_error **err);
/* Open the lease state of cfg's network only, changing nothing on the host (for listing and
 * gc by tools). attach needs sbx_net_open. */
int sbx_net_open_state(struct sbx_net **out, const struct sbx_net_config *cfg, sbx_error **err);

/* Lease an address for sandbox_id, create the veth pair (host end on the bridge, peer
 * created directly in netns_fd as `eth0`), address it, bring lo and eth0 up and add the
 * default route via the gateway. The calling thread's netns is not changed. On failure
 * nothing is left behind (the lease is released). SBX_ELIMIT: the pool is exhausted;
 * SBX_EEXISTS: sandbox_id is already attached. */
int sbx_net_attach(struct sbx_net_lease *out, struct sbx_net *n, const char *sandbox_id,
                   int netns_fd, sbx_error **err);

/* Delete the host veth end if it still exists (which removes both ends) and release the
 * lease of sandbox_id. Idempotent: an unknown sandbox is success. */
int sbx_net_detach(struct sbx_net *n, const char *sandbox_id, sbx_error **err);

/* Release the lease of a sandbox whose network namespace is gone (its processes exited and
 * no fd holds it): the kernel deletes the veth pair with the netns, asynchronously, so this is
 * two unlink()s where detach waits ~35 ms for the device removal. Use it on the sandbox
 * teardown path (`sbx run` exit). Should the netns still be alive, its veth lingers on the
 * bridge until the address is leased again (attach replaces it) or sbx_net_gc removes it as an
 * orphan. Idempotent. */
int sbx_net_release(struct sbx_net *n, const char *sandbox_id, sbx_error **err);

/* Hand the lease (address, veth) of from_id to to_id: a namespace attached ahead of time under
 * a placeholder id becomes a sandbox's. SBX_ENOTFOUND: from_id holds no lease. */
int sbx_net_transfer(struct sbx_net *n, const char *from_id, const char *to_id, sbx_error **err);

/* Isolation (docs/network.md "Isolation"): a sandbox reaches no address of this host but its
 * resolvers (port 53), no private, link-local (metadata), loopback or reserved address, and no
 * other sandbox. Replace the operator's allow-list: IPv4 addresses or CIDRs ("10.1.2.0/24")
 * sandboxes may reach all the same (host-wide for the bridge: the last caller's list holds).
 * SBX_EINVAL names a bad entry. */
int sbx_net_allow(struct sbx_net *n, const char *const *cidrs, size_t count, sbx_error **err);
/* An IPv4 address or CIDR with no host bits set ("10.1.2.0/24"), or SBX_EINVAL saying why. */
int sbx_net_check_cidr(const char *s, sbx_error **err);
/* The device group number of a named group ([A-Za-z0-9._-], 1-63), made on first use and kept
 * in the state dir, so every process and restart maps a name to the same number. */
int sbx_net_group_id(struct sbx_net *n, const char *name, uint32_t *group, sbx_error **err);
/* Put sandbox_id's port in group (> 0): sandboxes of one group reach each other (and only
 * each other) on the bridge. 0 isolates it again. SBX_ENOTFOUND: not attached. */
int sbx_net_set_group(struct sbx_net *n, const char *sandbox_id, uint32_t group, sbx_error **err);

/* The bridge's name, its gateway address (the bridge's own) and the sandboxes' resolvers
 * (space-separated), of an opened network (egress policies: sbx's resolver listens on the
 * gateway and forwards to the resolvers). */
struct sbx_net_info {
    char bridge[16];
    char gateway[16];
    char dns[256];
};
void sbx_net_info(const struct sbx_net *n, struct sbx_net_info *out);

/* Bring `lo` up in netns_fd (`--network none`). One netlink request. */
int sbx_net_loopback_up(int netns_fd, sbx_error **err);

/* Release the leases and veths of sandboxes for which alive() returns 0, and bridge ports of
 * ours that have no lease. alive() must return 1 for sandboxes being created. Returns the
 * number of leases released. */
int sbx_net_gc(struct sbx_net *n, int (*alive)(const char *sandbox_id, void *payload),
               void *payload, sbx_error **err);

/* Remove leaf bridges that hold no sandbox any more and their uplinks, and uplink veths or
 * leaves left half-made by a crash (under the setup lock, so no attach is between its lease
 * and its veth meanwhile). Returns the number of leaves removed. */
int sbx_net_gc_leaves(struct sbx_net *n, sbx_error **err);

/* The leaf bridge of a sandbox's host veth (for `sbx net ls` and tests): its name into
 * leaf[16]. SBX_ENOTFOUND: the address is not leased. */
int sbx_net_leaf_of(const struct sbx_net *n, const char *addr, char leaf[16], sbx_error **err);

/* gc without a list of live sandboxes (for `sbx net gc`): a lease is dead when its host veth
 * is gone (the kernel deletes the pair with the sandbox's netns) and it is older than
 * min_age_s seconds (an attach in progress holds a lease before its veth exists). */
int sbx_net_gc_stale(struct sbx_net *n, int min_age_s, sbx_error **err);

/* The bridge networks sbx made on this host, for gc of them all (`sbx net gc`, `sbx gc`;
 * docs/network.md "Crash cleanup"): the bridges named by the lease dirs under state_dir (NULL:
 * SBX_NET_DEFAULT_STATE_DIR) and those the links show by sbx's marks (a bridge with its
 * keep-alive port or one of its uplinks as a port; the bridge of a leaf `<bridge>.<k>` that has
 * that bridge's uplink as a port, even when the bridge itself is gone; only for the default
 * state dir, whose locks the host's attaches take). A bridge without such a mark is never
 * named. fn gets each name once and returns < 0 to stop (that value returned). */
int sbx_net_foreach_network(const char *state_dir, int (*fn)(const char *bridge, void *payload),
                            void *payload, sbx_error **err);

/* Remove the leaves no network names any more: a leaf `lsbx<hash>.<k>` (of a bridge name
 * longer than 10 bytes, which its name does not give back) whose bridge is gone, that holds
 * nothing but its uplink (docs/network.md "Crash cleanup"). Returns the number removed. */
int sbx_net_gc_orphan_leaves(sbx_error **err);

/* Visit the current leases (for `sbx net ls`). fn returns < 0 to stop. */
int sbx_net_foreach_lease(struct sbx_net *n,
                          int (*fn)(const struct sbx_net_lease *lease, const char *sandbox_id,
                                    void *payload),
                          void *payload, sbx_error **err);

/* Contents for a sandbox's /etc/resolv.conf, derived from the host's: the host's
 * nameservers that a sandbox can reach (loopback ones, e.g. systemd-resolved's 127.0.0.53,
 * are dropped; /run/systemd/resolve/resolv.conf supplies the upstream servers then), plus
 * search/options lines. *out is malloc'ed. SBX_ENOTFOUND: no usable nameserver. */
int sbx_net_resolv_conf(char **out, sbx_error **err);
/* The IPv4 nameservers of resolv.conf text (what sbx_net_resolv_conf made), space-separated,
 * into out. */
void sbx_net_resolv_servers(char *out, size_t n, const char *resolv_conf);

#endif
