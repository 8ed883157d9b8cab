/*
 * net.c - bridge networking of native sandboxes (see net.h and docs/network.md).
 */
#include "net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "net/ipam.h"
#include "net/net_internal.h"
#include "net/nft.h"
#include "net/nl.h"

#define IP_FORWARD "/proc/sys/net/ipv4/ip_forward"

static int
nl_error(sbx_error **err, int r, const char *what, const char *name)
{
    return sbx_error_set(err, r == -EPERM ? SBX_EPERM : SBX_EGENERIC, -r, "%s `%s`", what, name);
}

int
sbx_net_check_bridge_name(const char *name, sbx_error **err)
{
    size_t n = strlen(name);
    if (n == 0 || n >= 16 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-.") != n)
        return sbx_error_set(err, SBX_EINVAL, 0, "bad bridge name `%s` (1-15 of A-Za-z0-9_.-)",
                             name);
    return 0;
}

/* Some lease is held in a bridge's dir under top (or top cannot be read). */
static bool
holds_leases(const char *top)
{
    sbx_autoclosedir DIR *d = opendir(top);
    struct dirent *e;
    if (!d)
        return errno != ENOENT;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        sbx_autofree char *leases = NULL;
        if (asprintf(&leases, "%s/%s/leases", top, e->d_name) < 0)
            return true;
        sbx_autoclosedir DIR *l = opendir(leases);
        struct dirent *x;
        /* NOLINTNEXTLINE(concurrency-mt-unsafe): likewise */
        while (l && (x = readdir(l))) {
            if (x->d_name[0] != '.')
                return true;
        }
    }
    return false;
}

/* Leases describe veths, which die at reboot, so they belong on a tmpfs; /run is one on most
 * hosts. Where it is not, the default lease dir gets a tmpfs of its own (each lease is a
 * symlink: on a disk file system every sandbox's create and delete would allocate and free
 * inodes in the one block group of the lease dirs, which on an ext4 without a journal gets
 * slower with every inode freed in the last minutes). Decided once per boot under a lock:
 * never over leases on disk (the processes holding them keep using that dir, and a second
 * pool would hand out their addresses again), which is remembered in `.on-disk` (the boot id)
 * so that no later process of this boot mounts over a dir others use. */
/* Not in PID 1's mount namespace (e.g. under `unshare -m`): a tmpfs mounted there would hide
 * the leases from every other process. Where PID 1's namespace cannot be looked at (some
 * sandboxes of our own host deny it), the caller is taken to share it. */
static bool
in_private_mount_ns(void)
{
    struct stat self;
    struct stat init;
    return stat("/proc/self/ns/mnt", &self) == 0 && stat("/proc/1/ns/mnt", &init) == 0 &&
           (self.st_ino != init.st_ino || self.st_dev != init.st_dev);
}

static void
ensure_lease_tmpfs(const char *top)
{
    if (sbx_on_tmpfs(top) || in_private_mount_ns() || sbx_mkdir_p(top, 0700, NULL) < 0)
        return;
    sbx_autofree char *lock = NULL;
    sbx_autofree char *marker = NULL;
    if (asprintf(&lock, "%s.lock", top) < 0 || asprintf(&marker, "%s/.on-disk", top) < 0)
        return;
    sbx_autoclose int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0 || sbx_on_tmpfs(top))
        return;
    char boot[SBX_BOOT_ID_SIZE];
    if (sbx_boot_id(boot) < 0 || sbx_file_is(marker, boot))
        return;
    if (!holds_leases(top) &&
        mount("sbx-net", top, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=16m") == 0)
        return;
    (void)sbx_write_file_atomic(marker, boot, strlen(boot), 0600, NULL);
}

static int
init_handle(struct sbx_net *n, const struct sbx_net_config *cfg, sbx_error **err)
{
    const char *bridge = cfg && cfg->bridge ? cfg->bridge : SBX_NET_DEFAULT_BRIDGE;
    const char *subnet = cfg && cfg->subnet ? cfg->subnet : SBX_NET_DEFAULT_SUBNET;
    const char *dir = cfg && cfg->state_dir ? cfg->state_dir : SBX_NET_DEFAULT_STATE_DIR;
    int r = sbx_net_check_bridge_name(bridge, err);
    if (r < 0)
        return r;
    if (strcmp(dir, SBX_NET_DEFAULT_STATE_DIR) == 0)
        ensure_lease_tmpfs(dir);
    (void)snprintf(n->bridge, sizeof(n->bridge), "%s", bridge);
    if (asprintf(&n->dir, "%s/%s", dir, bridge) < 0) {
        n->dir = NULL;
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "net state dir");
    }
    r = sbx_ipam_open(&n->ipam, subnet, n->dir, err);
    if (r < 0)
        return r;
    n->leaf_size = cfg && cfg->leaf_size ? cfg->leaf_size : SBX_NET_DEFAULT_LEAF_SIZE;
    if (n->leaf_size > SBX_NET_LEAF_MAX_SIZE)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "leaf_size %u: at most %d (a leaf bridge's "
                             "ports but its uplink)",
                             n->leaf_size, SBX_NET_LEAF_MAX_SIZE);
    n->ipam.window = n->leaf_size;
    n->ipam.max_windows = SBX_NET_MAX_LEAVES;
    char net[16];
    sbx_net_addr_str(net, n->ipam.network);
    (void)snprintf(n->subnet, sizeof(n->subnet), "%s/%d", net, n->ipam.prefix);
    if (cfg && cfg->dns) {
        (void)snprintf(n->dns, sizeof(n->dns), "%s", cfg->dns);
    } else {
        /* No usable resolver is not an error here: sandboxes then get no DNS (attach says). */
        sbx_autofree char *conf = NULL;
        if (sbx_net_resolv_conf(&conf, NULL) == 0)
            sbx_net_resolv_servers(n->dns, sizeof(n->dns), conf);
    }
    return sbx_nft_new(&n->nft, err);
}

static int
ip_forward_on(void)
{
    char c = 0;
    sbx_autoclose int fd = open(IP_FORWARD, O_RDONLY | O_CLOEXEC);
    return fd >= 0 && read(fd, &c, 1) == 1 && c == '1';
}

/* "<boot id> <generation of the nftables ruleset>": when it has not changed since our rules
 * were last verified, nobody has touched any rule since (the boot id guards against a
 * generation that restarted from zero after a reboot). */
static int
nft_stamp(const struct sbx_net *n, char stamp[384])
{
    char boot[SBX_BOOT_ID_SIZE];
    uint32_t gen = 0;
    if (sbx_boot_id(boot) < 0 || sbx_nl_nft_genid(&gen) < 0)
        return -1;
    /* The resolvers are part of the rules (dns4): a changed resolv.conf means a check. */
    (void)snprintf(stamp, 384, "%s %u %s\n", boot, gen, n->dns);
    return 0;
}

static char *
stamp_path(const struct sbx_net *n)
{
    char *path = NULL;
    return asprintf(&path, "%s/nft.verified", n->dir) < 0 ? NULL : path;
}

/* Remember stamp in memory and for the next process (best effort: a torn or missing file only
 * costs a full check). */
static void
save_stamp(struct sbx_net *n, const char *stamp)
{
    sbx_autofree char *path = stamp_path(n);
    (void)snprintf(n->nft_stamp, sizeof(n->nft_stamp), "%s", stamp);
    if (path)
        (void)sbx_write_file_atomic(path, stamp, strlen(stamp), 0600, NULL);
}

/* Our nftables rules are in place: ~20 µs when the ruleset has not changed since they were
 * last verified, else a check with libnftables (~0.5 ms). */
static int
nft_ready(struct sbx_net *n)
{
    char stamp[384];
    sbx_autofree char *path = stamp_path(n);
    sbx_autofree char *saved = NULL;
    if (nft_stamp(n, stamp) < 0)
        return sbx_nft_check(n->nft, n->bridge, n->subnet, n->dns) == 1;
    if (strcmp(stamp, n->nft_stamp) == 0)
        return 1;
    if (path && sbx_read_file(path, 256, &saved, NULL, NULL) == 0 && strcmp(saved, stamp) == 0) {
        (void)snprintf(n->nft_stamp, sizeof(n->nft_stamp), "%s", stamp);
        return 1;
    }
    if (sbx_nft_check(n->nft, n->bridge, n->subnet, n->dns) != 1)
        return 0;
    save_stamp(n, stamp);
    return 1;
}

/* The cheap path: a few netlink round trips, no changes. */
static int
host_ready(struct sbx_net *n)
{
    struct sbx_nl nl;
    int index = 0;
    int up = 0;
    char kind[16] = "";
    if (sbx_nl_open(&nl, -1) < 0)
        return 0;
    char port[16];
    char peer[16];
    sbx_net_keepalive_names(port, peer, n->bridge);
    int ok = sbx_nl_link_get(&nl, n->bridge, &index, &up, kind) == 0 && up &&
             strcmp(kind, "bridge") == 0 &&
             sbx_nl_addr_has(&nl, index, n->ipam.gateway, n->ipam.prefix) == 1 &&
             sbx_nl_link_get(&nl, peer, &index, &up, NULL) == 0 && up;
    sbx_nl_close(&nl);
    return ok && ip_forward_on() && nft_ready(n);
}

void
sbx_net_keepalive_names(char port[16], char peer[16], const char *bridge)
{
    (void)snprintf(port, 16, "%.12s-kp", bridge);
    (void)snprintf(peer, 16, "%.12s-kx", bridge);
}

/* A bridge without a forwarding port has no carrier, and the kernel detaches its qdisc, which
 * drops everything the host sends into the bridge. Carrier changes of a bridge are handled by
 * the kernel's linkwatch at most once a second, so the first sandbox after an idle period would
 * lose its first replies (TCP retries after 1 s). A veth pair with one end on the bridge and both
 * ends up keeps the carrier on. (A `dummy` device would do, but is a module not every kernel
 * has.) */
static int
ensure_keepalive(struct sbx_net *n, struct sbx_nl *nl, int master, int mtu, sbx_error **err)
{
    char port[16];
    char peer[16];
    int index = 0;
    sbx_net_keepalive_names(port, peer, n->bridge);
    struct sbx_nl_veth v = {
        .name = port, .master = master, .peer_name = peer, .peer_netns_fd = -1, .mtu = mtu};
    int r = 0;
    if (sbx_nl_link_get(nl, port, &index, NULL, NULL) < 0)
        r = sbx_nl_veth_create(nl, &v);
    else /* left from a bridge deleted and made again: a port of nothing until put back */
        r = sbx_nl_link_set_master(nl, port, master);
    if (r < 0 && r != -EEXIST)
        return nl_error(err, r, "create keep-alive port", port);
    r = sbx_nl_link_up(nl, peer);
    return r < 0 ? nl_error(err, r, "bring up", peer) : 0;
}

static int
ensure_bridge(struct sbx_net *n, struct sbx_nl *nl, sbx_error **err)
{
    unsigned char mac[6];
    char kind[16] = "";
    int index = 0;
    if (getrandom(mac, sizeof(mac), 0) != sizeof(mac))
        return sbx_error_set(err, SBX_EGENERIC, errno, "random MAC");
    mac[0] = (unsigned char)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
    /* Sandboxes get the MTU of the host's uplink: with a bigger one they rely on path MTU
     * discovery (ICMP) for every connection leaving through it. */
    int mtu = 0;
    if (sbx_nl_uplink_mtu(nl, &mtu) < 0 || mtu < 1280)
        mtu = 0;
    int r = sbx_nl_bridge_create(nl, n->bridge, mac, mtu);
    if (r < 0 && r != -EEXIST)
        return nl_error(err, r, "create bridge", n->bridge);
    /* A bridge made just now has no leaves: any found are left from one deleted before
     * (by hand, or a test's cleanup), their uplinks joined to nothing. An attach trusts a
     * leaf that exists, so they go first (we hold the setup lock exclusively). */
    int stale = r == 0 ? sbx_net_remove_leaves(n, nl, true, NULL) : 0;
    if (stale > 0)
        sbx_warn("bridge `%s` was gone: removed %d leaf bridge(s) left from it", n->bridge, stale);
    r = sbx_nl_link_get(nl, n->bridge, &index, NULL, kind);
    if (r < 0)
        return nl_error(err, r, "look up bridge", n->bridge);
    if (strcmp(kind, "bridge") != 0)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "`%s` exists and is not a bridge (kind `%s`)",
                             n->bridge, kind);
    r = sbx_nl_link_up(nl, n->bridge);
    if (r < 0)
        return nl_error(err, r, "bring up bridge", n->bridge);
    r = sbx_nl_addr_add(nl, index, n->ipam.gateway, n->ipam.prefix);
    if (r < 0 && r != -EEXIST)
        return nl_error(err, r, "add the gateway address to", n->bridge);
    r = sbx_nl_link_mtu(nl, n->bridge, &index, &mtu);
    if (r < 0)
        return nl_error(err, r, "look up bridge", n->bridge);
    return ensure_keepalive(n, nl, index, mtu, err);
}

static int
enable_forwarding(sbx_error **err)
{
    if (ip_forward_on())
        return 0;
    sbx_autoclose int fd = open(IP_FORWARD, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || sbx_write_all(fd, "1\n", 2) < 0)
        return sbx_error_set(err, SBX_EPERM, errno, "enable %s", IP_FORWARD);
    return 0;
}

/* dockerd on a host with legacy (x_tables) iptables sets *that* FORWARD policy to drop, which
 * nftables rules cannot override, and x_tables has no library API we could use. Say so. */
static void
warn_legacy_iptables(const struct sbx_net *n)
{
    sbx_autofree char *names = NULL;
    if (sbx_read_file("/proc/net/ip_tables_names", 4096, &names, NULL, NULL) < 0 ||
        !strstr(names, "filter"))
        return;
    sbx_warn("legacy iptables has a filter table: if its FORWARD policy is DROP (dockerd), "
             "sandboxes on `%s` cannot reach the network until you run `iptables-legacy -I "
             "FORWARD -i %s -j ACCEPT` and `iptables-legacy -I FORWARD -o %s -j ACCEPT`",
             n->bridge, n->bridge, n->bridge);
}

static int
host_setup(struct sbx_net *n, sbx_error **err)
{
    sbx_autoclose int lock = -1;
    struct sbx_nl nl;
    int r = sbx_net_lock(&lock, n, LOCK_EX, err);
    if (r < 0)
        return r;
    r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    r = ensure_bridge(n, &nl, err);
    sbx_nl_close(&nl);
    if (r == 0)
        r = enable_forwarding(err);
    if (r == 0)
        r = sbx_nft_setup(n->nft, n->bridge, n->subnet, n->dns, err);
    char stamp[384];
    if (r == 0 && nft_stamp(n, stamp) == 0)
        save_stamp(n, stamp);
    if (r == 0)
        warn_legacy_iptables(n);
    return r;
}

static int
open_handle(struct sbx_net **out, const struct sbx_net_config *cfg, int setup, sbx_error **err)
{
    struct sbx_net *n = calloc(1, sizeof(*n));
    if (!n)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "net handle");
    n->ipam.leases_fd = n->ipam.ids_fd = -1;
    int r = init_handle(n, cfg, err);
    if (r == 0 && setup && !host_ready(n))
        r = host_setup(n, err);
    if (r < 0) {
        sbx_net_close(n);
        return sbx_error_wrap(err, "set up bridge network");
    }
    *out = n;
    return 0;
}

int
sbx_net_open(struct sbx_net **out, const struct sbx_net_config *cfg, sbx_error **err)
{
    return open_handle(out, cfg, 1, err);
}

int
sbx_net_ensure(struct sbx_net *n, sbx_error **err)
{
    if (host_ready(n))
        return 0;
    int r = host_setup(n, err);
    return r < 0 ? sbx_error_wrap(err, "set up bridge network") : 1;
}

int
sbx_net_open_state(struct sbx_net **out, const struct sbx_net_config *cfg, sbx_error **err)
{
    return open_handle(out, cfg, 0, err);
}

void
sbx_net_close(struct sbx_net *n)
{
    if (!n)
        return;
    sbx_ipam_close(&n->ipam);
    sbx_nft_free(n->nft);
    free(n->dir);
    free(n);
}

int
sbx_net_teardown(struct sbx_net *n, sbx_error **err)
{
    struct sbx_nl nl;
    int r = sbx_nft_teardown(n->nft, n->bridge, err);
    if (r < 0)
        return r;
    r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    char port[16];
    char peer[16];
    sbx_net_keepalive_names(port, peer, n->bridge);
    (void)sbx_nl_link_del(&nl, port);
    (void)sbx_net_remove_leaves(n, &nl, true, NULL);
    r = sbx_nl_link_del(&nl, n->bridge);
    sbx_nl_close(&nl);
    if (r < 0 && r != -ENODEV)
        return nl_error(err, r, "delete bridge", n->bridge);
    return 0;
}

/* An IPv4 address or CIDR, canonical enough for nft ("a.b.c.d" or "a.b.c.d/n", host bits
 * zero): bad entries are refused here with a message, not by nft with a parse error. */
int
sbx_net_check_cidr(const char *s, sbx_error **err)
{
    char addr[32];
    int prefix = 32;
    size_t len = strcspn(s, "/");
    if (len == 0 || len >= sizeof(addr))
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an IPv4 address or CIDR", s);
    memcpy(addr, s, len);
    addr[len] = '\0';
    struct in_addr in;
    char *end = NULL;
    if (s[len] == '/') {
        long p = strtol(s + len + 1, &end, 10);
        if (!end || *end || end == s + len + 1 || p < 0 || p > 32)
            return sbx_error_set(err, SBX_EINVAL, 0, "`%s`: bad prefix length", s);
        prefix = (int)p;
    }
    if (inet_pton(AF_INET, addr, &in) != 1)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an IPv4 address or CIDR", s);
    uint32_t a = ntohl(in.s_addr);
    uint32_t mask = prefix ? ~0U << (32 - prefix) : 0;
    if (a & ~mask)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s`: host bits are set (want %u.%u.%u.%u/%d)", s,
                             (a & mask) >> 24, ((a & mask) >> 16) & 255, ((a & mask) >> 8) & 255,
                             (a & mask) & 255, prefix);
    return 0;
}

int
sbx_net_allow(struct sbx_net *n, const char *const *cidrs, size_t count, sbx_error **err)
{
    for (size_t i = 0; i < count; i++) {
        if (sbx_net_check_cidr(cidrs[i], err) < 0)
            return sbx_error_wrap(err, "network allow-list");
    }
    int r = sbx_nft_allow(n->nft, n->bridge, cidrs, count, err);
    return r < 0 ? sbx_error_wrap(err, "network allow-list") : 0;
}

static bool
valid_group_name(const char *s)
{
    size_t len = strlen(s);
    return len > 0 && len < 64 && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

/* <state dir>/groups/<name> holds the number; numbers are taken exclusively as
 * <state dir>/groups/.n<number> (O_EXCL), so two processes naming two groups at once never
 * share one: two groups with one number would be one group. Host-wide, not per bridge: the
 * nftables set of groups is (nft.c: bridge_table). */
int
sbx_net_group_id(struct sbx_net *n, const char *name, uint32_t *group, sbx_error **err)
{
    if (!valid_group_name(name))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "network group `%s`: want 1-63 of [A-Za-z0-9._-], no leading dot",
                             name);
    sbx_autofree char *dir = NULL;
    sbx_autofree char *path = NULL;
    sbx_autofree char *lockp = NULL;
    const char *slash = strrchr(n->dir, '/');
    if (asprintf(&dir, "%.*s/groups", slash ? (int)(slash - n->dir) : 1, slash ? n->dir : ".") <
            0 ||
        asprintf(&path, "%s/%s", dir, name) < 0 || asprintf(&lockp, "%s/.lock", dir) < 0)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "group path");
    if (sbx_mkdir_p(dir, 0700, err) < 0)
        return sbx_error_wrap(err, "network group `%s`", name);
    sbx_autoclose int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "lock `%s`", lockp);
    sbx_autofree char *text = NULL;
    if (sbx_read_file(path, 32, &text, NULL, NULL) == 0) {
        *group = (uint32_t)strtoul(text, NULL, 10);
        return *group > 0 ? 0 : sbx_error_set(err, SBX_EIO, 0, "`%s` is corrupt", path);
    }
    /* Below 2^19: a group number travels in the low bits of a packet mark across leaf
     * bridges (nft.c). */
    for (uint32_t g = 1; g < SBX_NET_MAX_GROUP; g++) {
        sbx_autofree char *slot = NULL;
        if (asprintf(&slot, "%s/.n%u", dir, g) < 0)
            return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "group path");
        int fd = open(slot, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return sbx_error_set(err, SBX_EIO, errno, "create `%s`", slot);
        (void)close(fd);
        char num[16];
        int len = snprintf(num, sizeof(num), "%u", g);
        if (sbx_write_file_atomic(path, num, (size_t)len, 0600, err) < 0)
            return sbx_error_wrap(err, "network group `%s`", name);
        *group = g;
        return 0;
    }
    return sbx_error_set(err, SBX_ELIMIT, 0, "no network group number left");
}

int
sbx_net_set_group(struct sbx_net *n, const char *sandbox_id, uint32_t group, sbx_error **err)
{
    uint32_t addr = 0;
    if (sbx_ipam_find(&addr, &n->ipam, sandbox_id, err) < 0)
        return sbx_error_wrap(err, "network group of `%s`", sandbox_id);
    /* The set first: ports are isolated until their group is in it, never the other way. */
    if (group > 0 && sbx_nft_group(n->nft, n->bridge, group, err) < 0)
        return sbx_error_wrap(err, "network group %u", group);
    char ifname[16];
    sbx_net_host_ifname(ifname, addr);
    struct sbx_nl nl;
    int r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    r = sbx_nl_link_set_group(&nl, ifname, group);
    sbx_nl_close(&nl);
    return r < 0 ? nl_error(err, r, "set the network group of", ifname) : 0;
}
