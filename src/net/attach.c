/*
 * attach.c - per-sandbox networking: lease, veth into the sandbox's netns, addresses, routes.
 * Pure netlink: this runs for every sandbox and must stay in the low milliseconds.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "net/ipam.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "net/nl.h"

#define PEER_IFNAME   "eth0"
#define READY_WAIT_NS (500ULL * 1000 * 1000)
#define READY_POLL_US 50

void
sbx_net_host_ifname(char buf[16], uint32_t addr)
{
    (void)snprintf(buf, 16, "vsbx%08x", addr);
}

/* 02:5b + the address: stable per address, locally administered, never multicast. */
static void
sandbox_mac(unsigned char mac[6], uint32_t addr)
{
    mac[0] = 0x02;
    mac[1] = 0x5b;
    for (int i = 0; i < 4; i++)
        mac[2 + i] = (unsigned char)(addr >> (24 - 8 * i));
}

void
sbx_net_fill_lease(struct sbx_net_lease *out, const struct sbx_net *n, uint32_t addr)
{
    unsigned char mac[6];
    sandbox_mac(mac, addr);
    *out = (struct sbx_net_lease){.prefix = n->ipam.prefix};
    sbx_net_addr_str(out->addr, addr);
    sbx_net_addr_str(out->gateway, n->ipam.gateway);
    sbx_net_host_ifname(out->host_ifname, addr);
    (void)snprintf(out->mac, sizeof(out->mac), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1],
                   mac[2], mac[3], mac[4], mac[5]);
}

void
sbx_net_info(const struct sbx_net *n, struct sbx_net_info *out)
{
    (void)snprintf(out->bridge, sizeof out->bridge, "%s", n->bridge);
    sbx_net_addr_str(out->gateway, n->ipam.gateway);
    (void)snprintf(out->dns, sizeof out->dns, "%s", n->dns);
}

static int
nl_fail(sbx_error **err, int r, const char *what)
{
    return sbx_error_set(err, r == -EPERM ? SBX_EPERM : SBX_EGENERIC, -r, "%s", what);
}

/* The veth of addr, its host end on the leaf of addr (made if need be, under lock_fd). */
static int
create_veth(struct sbx_nl *host, struct sbx_net *n, uint32_t addr, int netns_fd, int lock_fd,
            sbx_error **err)
{
    char name[16];
    unsigned char mac[6];
    struct sbx_net_port leaf = {0};
    int r = sbx_net_leaf_ready(n, host, addr, lock_fd, &leaf, err);
    if (r < 0)
        return r;
    sbx_net_host_ifname(name, addr);
    sandbox_mac(mac, addr);
    struct sbx_nl_veth veth = {.name = name,
                               .master = leaf.master,
                               .peer_name = PEER_IFNAME,
                               .peer_netns_fd = netns_fd,
                               .peer_mac = mac,
                               .mtu = leaf.mtu};
    r = sbx_nl_veth_create(host, &veth);
    if (r == -EEXIST) {
        /* We hold the lease of addr, so a veth with its name is a leftover of a crash. */
        (void)sbx_nl_link_del(host, name);
        r = sbx_nl_veth_create(host, &veth);
    }
    if (r == -EXFULL) { /* br_add_if: the leaf has BR_MAX_PORTS ports (leaf sizes differ) */
        char leaf_name[16];
        char a[16];
        sbx_net_addr_str(a, addr);
        (void)sbx_net_leaf_of(n, a, leaf_name, NULL);
        return sbx_error_set(err, SBX_ELIMIT, EXFULL,
                             "leaf bridge `%s` of `%s` is full: a Linux bridge takes at most %d "
                             "ports (the kernel's BR_MAX_PORTS); do all users of the bridge have "
                             "the same leaf_size (now %u)?",
                             leaf_name, n->bridge, SBX_NET_BRIDGE_MAX_PORTS, n->leaf_size);
    }
    return r < 0 ? nl_fail(err, r, "create veth pair") : 0;
}

/* Until the kernel has finished bringing name up (see sbx_nl_link_ready): otherwise the
 * sandbox's first packets (its first ARP request: retried only after 1 s) may be dropped.
 * Typically a few tens of microseconds; bounded, and not an error when it takes longer. */
void
sbx_net_wait_ready(struct sbx_nl *nl, const char *name)
{
    uint64_t deadline = sbx_now_ns() + READY_WAIT_NS;
    while (sbx_nl_link_ready(nl, name) == 0) {
        if (sbx_now_ns() > deadline) {
            sbx_warn("network device `%s` not ready after %d ms", name,
                     (int)(READY_WAIT_NS / 1000000));
            return;
        }
        (void)usleep(READY_POLL_US);
    }
}

/* Inside the sandbox's netns, through a socket opened there. */
static int
configure_sandbox(const struct sbx_net *n, uint32_t addr, int netns_fd, sbx_error **err)
{
    struct sbx_nl nl;
    int index = 0;
    int r = sbx_nl_open(&nl, netns_fd);
    if (r < 0)
        return nl_fail(err, r, "netlink socket in the sandbox's netns");
    if ((r = sbx_nl_link_up(&nl, "lo")) < 0)
        r = nl_fail(err, r, "bring up lo");
    else if ((r = sbx_nl_link_up(&nl, PEER_IFNAME)) < 0)
        r = nl_fail(err, r, "bring up " PEER_IFNAME);
    else if ((r = sbx_nl_link_get(&nl, PEER_IFNAME, &index, NULL, NULL)) < 0)
        r = nl_fail(err, r, "look up " PEER_IFNAME);
    else if ((r = sbx_nl_addr_add(&nl, index, addr, n->ipam.prefix)) < 0)
        r = nl_fail(err, r, "add address to " PEER_IFNAME);
    else if ((r = sbx_nl_route_add_default(&nl, index, n->ipam.gateway)) < 0)
        r = nl_fail(err, r, "add default route");
    if (r == 0)
        sbx_net_wait_ready(&nl, PEER_IFNAME);
    sbx_nl_close(&nl);
    return r;
}

static int
setup_link(struct sbx_net *n, uint32_t addr, int netns_fd, int lock_fd, sbx_error **err)
{
    struct sbx_nl host;
    int r = sbx_nl_open(&host, -1);
    if (r < 0)
        return nl_fail(err, r, "netlink socket");
    r = create_veth(&host, n, addr, netns_fd, lock_fd, err);
    if (r == 0) {
        r = configure_sandbox(n, addr, netns_fd, err);
        if (r == 0) {
            char name[16];
            sbx_net_host_ifname(name, addr);
            sbx_net_wait_ready(&host, name);
        }
        if (r < 0) {
            char name[16];
            sbx_net_host_ifname(name, addr);
            (void)sbx_nl_link_del(&host, name);
        }
    }
    sbx_nl_close(&host);
    return r;
}

/* netns_fd must be a network namespace other than ours: attaching the host's own would put
 * `eth0` and a default route into the host's namespace. */
static int
check_netns(int netns_fd, sbx_error **err)
{
    struct stat target;
    struct stat self;
    if (fstat(netns_fd, &target) < 0)
        return sbx_error_set(err, SBX_EINVAL, errno, "netns fd %d", netns_fd);
    if (stat("/proc/thread-self/ns/net", &self) == 0 && target.st_dev == self.st_dev &&
        target.st_ino == self.st_ino)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "netns fd %d is the caller's own network namespace", netns_fd);
    return 0;
}

int
sbx_net_attach(struct sbx_net_lease *out, struct sbx_net *n, const char *sandbox_id, int netns_fd,
               sbx_error **err)
{
    uint32_t addr = 0;
    sbx_autoclose int lock = -1;
    if (check_netns(netns_fd, err) < 0)
        return sbx_error_wrap(err, "attach sandbox `%s` to `%s`", sandbox_id, n->bridge);
    /* Shared from the lease to the veth: sbx_net_gc_leaves (exclusive) never removes a leaf
     * that a sandbox is being put on. */
    int r = sbx_net_lock(&lock, n, LOCK_SH, err);
    if (r < 0)
        return sbx_error_wrap(err, "attach sandbox `%s` to `%s`", sandbox_id, n->bridge);
    /* The lease (naming sandbox_id) exists before the veth: a crash from here on leaves
     * nothing that sbx_net_gc cannot find. */
    r = sbx_ipam_alloc(&addr, &n->ipam, sandbox_id, err);
    if (r < 0)
        return sbx_error_wrap(err, "attach sandbox `%s` to `%s`", sandbox_id, n->bridge);
    r = setup_link(n, addr, netns_fd, lock, err);
    if (r < 0) {
        (void)sbx_ipam_release(&n->ipam, addr, sandbox_id, NULL);
        return sbx_error_wrap(err, "attach sandbox `%s` to `%s`", sandbox_id, n->bridge);
    }
    sbx_net_fill_lease(out, n, addr);
    return 0;
}

int
sbx_net_release_addr(struct sbx_net *n, struct sbx_nl *nl, uint32_t addr, const char *id,
                     sbx_error **err)
{
    char name[16];
    sbx_net_host_ifname(name, addr);
    /* Deleting one end of a veth pair deletes both. ENODEV: the kernel already removed the pair
     * with the sandbox's netns. */
    int r = sbx_nl_link_del(nl, name);
    if (r < 0 && r != -ENODEV)
        return sbx_error_set(err, SBX_EGENERIC, -r, "delete veth `%s`", name);
    return sbx_ipam_release(&n->ipam, addr, id, err);
}

int
sbx_net_detach(struct sbx_net *n, const char *sandbox_id, sbx_error **err)
{
    uint32_t addr = 0;
    struct sbx_nl nl;
    int r = sbx_net_check_id(sandbox_id, err);
    if (r < 0)
        return sbx_error_wrap(err, "detach sandbox");
    if (sbx_ipam_find(&addr, &n->ipam, sandbox_id, NULL) < 0)
        return 0; /* not attached (any more) */
    r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return nl_fail(err, r, "netlink socket");
    r = sbx_net_release_addr(n, &nl, addr, sandbox_id, err);
    sbx_nl_close(&nl);
    return r < 0 ? sbx_error_wrap(err, "detach sandbox `%s`", sandbox_id) : 0;
}

int
sbx_net_release(struct sbx_net *n, const char *sandbox_id, sbx_error **err)
{
    uint32_t addr = 0;
    int r = sbx_net_check_id(sandbox_id, err);
    if (r < 0)
        return sbx_error_wrap(err, "release sandbox address");
    if (sbx_ipam_find(&addr, &n->ipam, sandbox_id, NULL) < 0)
        return 0;
    r = sbx_ipam_release(&n->ipam, addr, sandbox_id, err);
    return r < 0 ? sbx_error_wrap(err, "release address of sandbox `%s`", sandbox_id) : 0;
}

int
sbx_net_transfer(struct sbx_net *n, const char *from_id, const char *to_id, sbx_error **err)
{
    uint32_t addr = 0;
    int r = sbx_ipam_find(&addr, &n->ipam, from_id, err);
    if (r == 0)
        r = sbx_ipam_transfer(&n->ipam, addr, from_id, to_id, err);
    return r < 0 ? sbx_error_wrap(err, "hand the address of `%s` to `%s`", from_id, to_id) : 0;
}

int
sbx_net_loopback_up(int netns_fd, sbx_error **err)
{
    struct sbx_nl nl;
    int r = sbx_nl_open(&nl, netns_fd);
    if (r < 0)
        return nl_fail(err, r, "netlink socket in the sandbox's netns");
    r = sbx_nl_link_up(&nl, "lo");
    sbx_nl_close(&nl);
    return r < 0 ? nl_fail(err, r, "bring up lo") : 0;
}
