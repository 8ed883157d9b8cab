/*
 * leaf.c - the tree of bridges (docs/network.md "More than 1022 bridged sandboxes").
 *
 * A Linux bridge takes at most 1024 ports. The bridge (`sbx0`) keeps the gateway address and
 * the keep-alive port; sandboxes go onto leaf bridges `sbx0.1`, `sbx0.2`, ..., each joined to
 * the bridge by an uplink veth pair, made under the setup lock when the first address of their
 * window is leased. The leaves are plain L2: no address, no ARP answers, nothing of them enters
 * the host's IP stack (the ip table drops what would), so every rule on the bridge's name still
 * sees all routed sandbox traffic. Isolation across leaves is the bridge table's (nft.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "net/ipam.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "net/nl.h"

/* FNV-1a of the bridge's name: the part of leaf and uplink names that tells bridges apart
 * when the name itself does not fit into 15 bytes. */
static uint32_t
name_hash(const char *s)
{
    uint32_t h = 2166136261U;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619U;
    return h;
}

void
sbx_net_leaf_prefix(char out[16], const char *bridge)
{
    /* "<bridge>." plus up to 4 digits must fit IFNAMSIZ - 1. */
    if (strlen(bridge) <= 10)
        (void)snprintf(out, 16, "%s.", bridge);
    else
        (void)snprintf(out, 16, "lsbx%06x.", name_hash(bridge) & 0xffffffU);
}

void
sbx_net_uplink_prefix(char out[16], const char *bridge)
{
    (void)snprintf(out, 16, SBX_NET_UPLINK_PREFIX "%07x", name_hash(bridge) & 0xfffffffU);
}

void
sbx_net_leaf_names(struct sbx_net_leaf_names *out, const char *bridge, unsigned k)
{
    char prefix[16];
    uint32_t h = name_hash(bridge) & 0xfffffffU;
    sbx_net_leaf_prefix(prefix, bridge);
    (void)snprintf(out->leaf, sizeof out->leaf, "%.11s%u", prefix, k & 0x3ffU);
    (void)snprintf(out->root_end, sizeof out->root_end, SBX_NET_UPLINK_PREFIX "%07xr%03x", h,
                   k & 0x3ffU);
    (void)snprintf(out->leaf_end, sizeof out->leaf_end, SBX_NET_UPLINK_PREFIX "%07xl%03x", h,
                   k & 0x3ffU);
}

unsigned
sbx_net_leaf_index(const struct sbx_net *n, uint32_t addr)
{
    return (addr - n->ipam.network - 2) / n->leaf_size + 1;
}

int
sbx_net_lock(int *fd, const struct sbx_net *n, int how, sbx_error **err)
{
    sbx_autofree char *path = NULL;
    if (asprintf(&path, "%s/setup.lock", n->dir) < 0)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "lock path");
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (*fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", path);
    if (flock(*fd, how) < 0) {
        int e = errno;
        sbx_closep(fd);
        *fd = -1;
        return sbx_error_set(err, SBX_EGENERIC, e, "lock `%s`", path);
    }
    return 0;
}

static int
nl_fail(sbx_error **err, int r, const char *what, const char *name)
{
    return sbx_error_set(err, r == -EPERM ? SBX_EPERM : SBX_EGENERIC, -r, "%s `%s`", what, name);
}

static int
write_sysctl(const char *path, const char *value)
{
    sbx_autoclose int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return sbx_write_all(fd, value, strlen(value)) < 0 ? -errno : 0;
}

/* A leaf must never be an IP endpoint. Every device gets IPv4 state, and with arp_ignore 0 the
 * host answers an ARP request for the gateway on every device that sees it, the leaf too
 * (broadcasts are delivered to the bridge device itself): a sandbox would then send its
 * traffic to the leaf's MAC and it would enter the host through the leaf, where no rule on the
 * bridge's name sees it. arp_ignore 8: answer nothing there. (The ip table drops whatever
 * enters through a leaf all the same.) No IPv6 on it either. */
static int
quiet_leaf(const char *leaf, sbx_error **err)
{
    char path[128];
    (void)snprintf(path, sizeof path, "/proc/sys/net/ipv4/conf/%s/arp_ignore", leaf);
    int r = write_sysctl(path, "8\n");
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "set arp_ignore of leaf bridge `%s`", leaf);
    (void)snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", leaf);
    r = write_sysctl(path, "1\n");
    if (r < 0 && r != -ENOENT)
        return sbx_error_set(err, SBX_EGENERIC, -r, "disable IPv6 on leaf bridge `%s`", leaf);
    return 0;
}

/* The uplink pair of a leaf: one end a port of the bridge, the other of the leaf, both up. */
static int
make_uplink(struct sbx_nl *nl, const struct sbx_net_leaf_names *ln, int root, int mtu,
            sbx_error **err)
{
    int leaf = 0;
    int r = sbx_nl_link_get(nl, ln->leaf, &leaf, NULL, NULL);
    if (r < 0)
        return nl_fail(err, r, "look up leaf bridge", ln->leaf);
    struct sbx_nl_veth v = {.name = ln->root_end,
                            .master = root,
                            .peer_name = ln->leaf_end,
                            .peer_netns_fd = -1,
                            .mtu = mtu};
    r = sbx_nl_veth_create(nl, &v);
    if (r < 0 && r != -EEXIST)
        return nl_fail(err, r, "create uplink", ln->root_end);
    if ((r = sbx_nl_link_set_master(nl, ln->root_end, root)) < 0)
        return nl_fail(err, r, "put on the bridge", ln->root_end);
    if ((r = sbx_nl_link_set_master(nl, ln->leaf_end, leaf)) < 0)
        return nl_fail(err, r, "put on its leaf", ln->leaf_end);
    /* The first sandbox's first ARP request must not meet a port still coming up. */
    sbx_net_wait_ready(nl, ln->root_end);
    sbx_net_wait_ready(nl, ln->leaf_end);
    return 0;
}

/* Leaf k and its uplink; the caller holds the setup lock exclusively. */
static int
make_leaf(struct sbx_net *n, struct sbx_nl *nl, unsigned k, sbx_error **err)
{
    struct sbx_net_leaf_names ln;
    unsigned char mac[6];
    int root = 0;
    int mtu = 0;
    sbx_net_leaf_names(&ln, n->bridge, k);
    int r = sbx_nl_link_mtu(nl, n->bridge, &root, &mtu);
    if (r < 0)
        return sbx_error_set(err, SBX_EUNAVAIL, -r, "bridge `%s` (run sbx_net_open again)",
                             n->bridge);
    /* A fixed MAC, as the bridge's: one taken from the lowest port would change with them. */
    if (getrandom(mac, sizeof mac, 0) != sizeof mac)
        return sbx_error_set(err, SBX_EGENERIC, errno, "random MAC");
    mac[0] = (unsigned char)((mac[0] & 0xfe) | 0x02);
    r = sbx_nl_bridge_create(nl, ln.leaf, mac, mtu);
    if (r < 0 && r != -EEXIST)
        return nl_fail(err, r, "create leaf bridge", ln.leaf);
    if ((r = quiet_leaf(ln.leaf, err)) < 0)
        return r;
    return make_uplink(nl, &ln, root, mtu, err);
}

int
sbx_net_leaf_ready(struct sbx_net *n, struct sbx_nl *nl, uint32_t addr, int lock_fd,
                   struct sbx_net_port *out, sbx_error **err)
{
    struct sbx_net_leaf_names ln;
    unsigned k = sbx_net_leaf_index(n, addr);
    sbx_net_leaf_names(&ln, n->bridge, k);
    if (sbx_nl_link_mtu(nl, ln.leaf, &out->master, &out->mtu) == 0)
        return 0;
    /* Shared to exclusive: no gc runs, no other process makes this leaf meanwhile. */
    if (flock(lock_fd, LOCK_EX) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "lock the setup of `%s`", n->bridge);
    if (sbx_nl_link_mtu(nl, ln.leaf, &out->master, &out->mtu) == 0)
        return 0;
    int r = make_leaf(n, nl, k, err);
    if (r == 0 && (r = sbx_nl_link_mtu(nl, ln.leaf, &out->master, &out->mtu)) < 0)
        r = nl_fail(err, r, "look up leaf bridge", ln.leaf);
    if (r == 0)
        sbx_info("made leaf bridge `%s` of `%s`", ln.leaf, n->bridge);
    return r < 0 ? sbx_error_wrap(err, "leaf bridge %u of `%s`", k, n->bridge) : 0;
}

/* ---- gc ---- */

struct leaf_gc {
    struct sbx_net *n;
    struct sbx_nl *nl;
    bool all;        /* teardown: every leaf, empty or not */
    char prefix[16]; /* of the leaves' names */
    char uplink[16]; /* "usbx<hash>": of the uplinks' names */
    int removed;
    int ports;     /* of the leaf being looked at, its uplink excepted */
    char keep[16]; /* that uplink's leaf end */
};

static int
count_port(const char *name, int index, void *payload)
{
    struct leaf_gc *g = payload;
    (void)index;
    g->ports += strcmp(name, g->keep) != 0;
    return 0;
}

/* k of a leaf's name, or 0. */
static unsigned
leaf_number(const struct leaf_gc *g, const char *name)
{
    size_t len = strlen(g->prefix);
    char *end = NULL;
    if (strncmp(name, g->prefix, len) != 0 || name[len] < '1' || name[len] > '9')
        return 0;
    unsigned long k = strtoul(name + len, &end, 10);
    return *end || k > SBX_NET_MAX_LEAVES ? 0 : (unsigned)k;
}

static int
gc_leaf(struct leaf_gc *g, const char *name, int index, unsigned k)
{
    struct sbx_net_leaf_names ln;
    char kind[16] = "";
    int r = sbx_nl_link_get(g->nl, name, &index, NULL, kind);
    /* Only a bridge of that name is a leaf of ours (not, say, a VLAN `sbx0.5` of the host's). */
    if (r < 0 || strcmp(kind, "bridge") != 0)
        return r == -ENODEV ? 0 : r;
    sbx_net_leaf_names(&ln, g->n->bridge, k);
    g->ports = 0;
    (void)snprintf(g->keep, sizeof g->keep, "%s", ln.leaf_end);
    r = g->all ? 0 : sbx_nl_link_foreach(g->nl, index, count_port, g);
    if (r < 0 || g->ports > 0)
        return r;
    r = sbx_nl_link_del(g->nl, ln.root_end); /* deletes both ends */
    if (r < 0 && r != -ENODEV)
        return r;
    r = sbx_nl_link_del(g->nl, name);
    if (r < 0 && r != -ENODEV)
        return r;
    g->removed++;
    return 0;
}

/* An uplink end of ours whose leaf is gone (a crash between the two). */
static int
gc_uplink(struct leaf_gc *g, const char *name)
{
    unsigned k = 0;
    char side = 0;
    size_t len = strlen(g->uplink);
    if (strncmp(name, g->uplink, len) != 0 || sscanf(name + len, "%c%3x", &side, &k) != 2 ||
        (side != 'r' && side != 'l'))
        return 0;
    struct sbx_net_leaf_names ln;
    int index = 0;
    sbx_net_leaf_names(&ln, g->n->bridge, k);
    if (!g->all && k > 0 && sbx_nl_link_get(g->nl, ln.leaf, &index, NULL, NULL) == 0)
        return 0;
    int r = sbx_nl_link_del(g->nl, name);
    return r == -ENODEV ? 0 : r;
}

static int
visit_link(const char *name, int index, void *payload)
{
    struct leaf_gc *g = payload;
    unsigned k = leaf_number(g, name);
    return k > 0 ? gc_leaf(g, name, index, k) : gc_uplink(g, name);
}

int
sbx_net_remove_leaves(struct sbx_net *n, struct sbx_nl *nl, bool all, sbx_error **err)
{
    struct leaf_gc g = {.n = n, .nl = nl, .all = all};
    sbx_net_leaf_prefix(g.prefix, n->bridge);
    sbx_net_uplink_prefix(g.uplink, n->bridge);
    int r = sbx_nl_link_foreach(nl, 0, visit_link, &g);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "remove leaf bridges of `%s`", n->bridge);
    return g.removed;
}

int
sbx_net_gc_leaves(struct sbx_net *n, sbx_error **err)
{
    sbx_autoclose int lock = -1;
    struct sbx_nl nl;
    /* Exclusive: an attach holds the lock shared from its lease to its veth, so a leaf with
     * no port here has no sandbox on its way either. */
    int r = sbx_net_lock(&lock, n, LOCK_EX, err);
    if (r < 0)
        return r;
    if ((r = sbx_nl_open(&nl, -1)) < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    r = sbx_net_remove_leaves(n, &nl, false, err);
    sbx_nl_close(&nl);
    return r;
}

int
sbx_net_leaf_of(const struct sbx_net *n, const char *addr, char leaf[16], sbx_error **err)
{
    struct in_addr in;
    if (inet_pton(AF_INET, addr, &in) != 1)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an IPv4 address", addr);
    uint32_t a = ntohl(in.s_addr);
    if (a < n->ipam.network + 2 || a - n->ipam.network - 2 >= sbx_ipam_count(&n->ipam))
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an address of %s", addr, n->subnet);
    struct sbx_net_leaf_names ln;
    sbx_net_leaf_names(&ln, n->bridge, sbx_net_leaf_index(n, a));
    (void)snprintf(leaf, 16, "%s", ln.leaf);
    return 0;
}
