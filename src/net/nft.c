/*
 * nft.c - NAT and forwarding rules through libnftables (see nft.h).
 *
 * Why libnftables and not libnftnl: the rules are written in nft's own language (reviewable,
 * one atomic transaction per call), and libnftables emits exactly what `nft` would, which is
 * also what iptables-nft can parse back. libnftnl would need each expression built by hand.
 * The cost (~1 ms per command) is paid once per process: the check is two list commands.
 */
#include "net/nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "net/net_internal.h"

#define MAX_HANDLES 16
/* Our accept rules in `ip filter FORWARD` per comment: in and out of the bridge, and of its
 * leaves. */
#define FILTER_RULES 2

struct sbx_nft {
    pthread_mutex_t lock; /* an nft_ctx is not thread-safe */
    struct nft_ctx *ctx;
};

int
sbx_nft_new(struct sbx_nft **out, sbx_error **err)
{
    struct sbx_nft *nft = calloc(1, sizeof(*nft));
    if (!nft)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "nftables context");
    (void)pthread_mutex_init(&nft->lock, NULL);
    *out = nft;
    return 0;
}

/* The context is made on first use (~0.2 ms), which the cheap paths never reach. Caller holds
 * the lock. */
static int
ctx_ready(struct sbx_nft *nft, sbx_error **err)
{
    if (nft->ctx)
        return 0;
    nft->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!nft->ctx)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "nftables: cannot create a context");
    (void)nft_ctx_buffer_output(nft->ctx);
    (void)nft_ctx_buffer_error(nft->ctx);
    return 0;
}

void
sbx_nft_free(struct sbx_nft *nft)
{
    if (!nft)
        return;
    if (nft->ctx)
        nft_ctx_free(nft->ctx);
    (void)pthread_mutex_destroy(&nft->lock);
    free(nft);
}

/* Run cmd (caller holds the lock). json: list output as JSON into *out (parsed). */
static int
run(struct sbx_nft *nft, const char *cmd, json_t **out, sbx_error **err)
{
    int r = ctx_ready(nft, err);
    if (r < 0)
        return r;
    nft_ctx_output_set_flags(nft->ctx, out ? NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE : 0);
    if (nft_run_cmd_from_buffer(nft->ctx, cmd) != 0) {
        const char *msg = nft_ctx_get_error_buffer(nft->ctx);
        return sbx_error_set(err, SBX_EGENERIC, 0, "nftables: %.*s", (int)strcspn(msg, "\n"), msg);
    }
    if (!out)
        return 0;
    json_error_t jerr;
    *out = json_loads(nft_ctx_get_output_buffer(nft->ctx), 0, &jerr);
    if (!*out)
        return sbx_error_set(err, SBX_EIO, 0, "nftables: bad JSON output: %s", jerr.text);
    return 0;
}

/* Handles of the rules in a JSON listing whose comment is `comment` (at most max). */
static int
find_rules(const json_t *root, const char *comment, long long *handles, int max)
{
    const json_t *items = json_object_get(root, "nftables");
    const json_t *item;
    size_t i;
    int n = 0;
    json_array_foreach (items, i, item) {
        const json_t *rule = json_object_get(item, "rule");
        const char *c = json_string_value(json_object_get(rule, "comment"));
        if (c && strcmp(c, comment) == 0 && n < max)
            handles[n++] = json_integer_value(json_object_get(rule, "handle"));
    }
    return n;
}

/* Number of rules with `comment` in `list <what>`; -1 when <what> does not exist. */
static int
count_rules(struct sbx_nft *nft, const char *what, const char *comment, long long *handles)
{
    char cmd[128];
    json_t *root = NULL;
    (void)snprintf(cmd, sizeof(cmd), "list %s", what);
    if (run(nft, cmd, &root, NULL) < 0)
        return -1;
    long long dummy[MAX_HANDLES];
    int n = find_rules(root, comment, handles ? handles : dummy, MAX_HANDLES);
    json_decref(root);
    return n;
}

/* The structure's version: a table written by an older sbx (v1: NAT and the inbound forward
 * rules only; v2: no egress policy sets and chains; v3: no credential proxy redirect; v4: one
 * of the credential proxy or the leaf-bridge rules of two sbx versions of 2026-11-27, not both)
 * lacks rules of this one, so its check fails and setup rewrites it. */
#define RULES_VERSION "v5"
/* Marks the switched packets of a sandbox group (bridge_table says why). */
#define GROUP_MARK "0x53425801"
/* Marks of frames that left a sandbox's leaf bridge through its uplink (bridge_table):
 * LEAF_MARK | the sender's group (below SBX_NET_MAX_GROUP, 19 bits), plus LEAF_PASS once the
 * bridge between the leaves has seen a non-zero group. */
#define LEAF_MARK      0x5b100000U
#define LEAF_MARK_MASK "0xfff00000"
#define LEAF_PASS      0x00080000U
#define LEAF_GROUPS    "0x7ffff"
/* The comments on the last rules of the host-wide bridge table's chains: `forward` (as sbx
 * wrote it since the ip table's v3) and the leaf bridges' chains (bridge_table says why two). */
#define BRIDGE_MARKER "sbx:bridges:v3"
#define LEAVES_MARKER "sbx:leaves:v1"

static void
comments(char table_c[160], char fwd_c[32], const char *bridge, const char *subnet, const char *dns)
{
    (void)snprintf(table_c, 160, "sbx:%s:%s:%s dns=%s", bridge, subnet, RULES_VERSION,
                   dns && *dns ? dns : "-");
    (void)snprintf(fwd_c, 32, "sbx:%s", bridge);
}

/* The comment of the leaf chains' last rules and of the leaves' rules in `ip filter FORWARD`
 * (apart from the bridge's: an older sbx deletes and rewrites those). */
static void
leaves_comment(char out[48], const char *bridge)
{
    (void)snprintf(out, 48, "sbx:%s:leaves:v1", bridge);
}

int
sbx_nft_check(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns)
{
    char what[64];
    char table_c[160];
    char fwd_c[32];
    char leaves_c[48];
    comments(table_c, fwd_c, bridge, subnet, dns);
    leaves_comment(leaves_c, bridge);
    (void)pthread_mutex_lock(&nft->lock);
    /* The marker rule closes each table's rules: present means the whole transaction that
     * wrote it was applied (nftables transactions are atomic). */
    static const char *const families[] = {"ip", "ip6"};
    int ok = 1;
    for (size_t i = 0; ok && i < sizeof families / sizeof families[0]; i++) {
        (void)snprintf(what, sizeof(what), "table %s sbx_%s", families[i], bridge);
        ok = count_rules(nft, what, table_c, NULL) == 1 &&
             count_rules(nft, what, leaves_c, NULL) == 1;
    }
    if (ok)
        ok = count_rules(nft, "table bridge sbx", BRIDGE_MARKER, NULL) == 1 &&
             count_rules(nft, "table bridge sbx", LEAVES_MARKER, NULL) == 1;
    if (ok) {
        int n = count_rules(nft, "chain ip filter FORWARD", fwd_c, NULL);
        ok = n < 0 || (n == FILTER_RULES &&
                       count_rules(nft, "chain ip filter FORWARD", leaves_c, NULL) == FILTER_RULES);
    }
    (void)pthread_mutex_unlock(&nft->lock);
    return ok;
}

/* "a.b.c.d, e.f.g.h" from "a.b.c.d e.f.g.h" (the resolvers, space-separated). */
static void
element_list(char *out, size_t n, const char *dns)
{
    size_t len = 0;
    out[0] = '\0';
    for (const char *p = dns; p && *p;) {
        size_t w = strcspn(p, " ");
        if (w > 0 && len + w + 3 < n) {
            len += (size_t)snprintf(out + len, n - len, "%s%.*s", len ? ", " : "", (int)w, p);
        }
        p += w;
        p += strspn(p, " ");
    }
}

/* Addresses a sandbox must not reach unless the operator allows them (allow4): the private
 * networks of RFC 1918 (this host's LAN, a VPC, other tenants' services), carrier-grade NAT,
 * link-local (cloud metadata services live at 169.254.169.254), loopback, "this network",
 * multicast and reserved. (The host's own public addresses are the input chain's.) */
#define BLOCKED4                                                                         \
    "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, " \
    "192.168.0.0/16, 224.0.0.0/3"

/* The ip table: NAT; inbound only replies (and DNAT'ed traffic); from sandboxes to the host
 * (input) only DNS to the sandboxes' resolvers; to other hosts anything but the blocked ranges;
 * sandbox to sandbox routed through the gateway never. Sets: dns4 (rewritten here), allow4
 * (the operator's, sbx_nft_allow) and blocked4. `add` for table, sets and chains and `flush`
 * for chains keeps the elements of allow4 across a rewrite. TCP is refused with a reset and
 * the rest with ICMP admin-prohibited, so a sandbox's denied connection fails at once instead
 * of timing out. */
/* The gateway (the bridge's address, the first host of subnet) as text. */
static void
gateway_of(char out[INET_ADDRSTRLEN], const char *subnet)
{
    char net[INET_ADDRSTRLEN];
    struct in_addr a = {0};
    (void)snprintf(net, sizeof net, "%.*s", (int)strcspn(subnet, "/"), subnet);
    if (inet_pton(AF_INET, net, &a) != 1)
        a.s_addr = htonl(0x7f000001); /* never: the subnet was checked by sbx_ipam_open */
    a.s_addr = htonl(ntohl(a.s_addr) + 1);
    (void)inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

/* Egress policies (docs/network.md "Egress policy"): the sets the server fills and the chains
 * policed sandboxes jump to. egress_deny_mode4 / egress_allow_mode4: the addresses of sandboxes
 * with a deny-default / allow-default policy; egress_ok4: (sandbox . address) the sandbox's
 * resolver answered for an allowed name, with the answer's TTL as timeout; egress_block4:
 * (sandbox . address) of its exact deny targets. Both chains end in `return`, never `accept`:
 * what they let through still meets the base isolation after them (blocked4: an allowed name
 * that resolves to the metadata service or a private address stays refused). DNS and DNS over
 * TLS to anyone but the gateway (the input chain's) is refused in both modes: a policed
 * sandbox resolves through sbx's resolver only. */
static void
egress_part(FILE *f, const char *b)
{
    fprintf(f,
            "add set ip sbx_%1$s egress_deny_mode4 { type ipv4_addr; }\n"
            "add set ip sbx_%1$s egress_allow_mode4 { type ipv4_addr; }\n"
            "add set ip sbx_%1$s egress_ok4 { type ipv4_addr . ipv4_addr; flags timeout; }\n"
            "add set ip sbx_%1$s egress_block4 { type ipv4_addr . ipv4_addr; flags timeout; }\n"
            "add chain ip sbx_%1$s egress_reject\n"
            "flush chain ip sbx_%1$s egress_reject\n"
            "add rule ip sbx_%1$s egress_reject meta l4proto tcp reject with tcp reset\n"
            "add rule ip sbx_%1$s egress_reject reject with icmp type admin-prohibited\n"
            "add chain ip sbx_%1$s egress_deny\n"
            "flush chain ip sbx_%1$s egress_deny\n"
            "add rule ip sbx_%1$s egress_deny meta l4proto { tcp, udp } th dport { 53, 853 } "
            "goto egress_reject\n"
            "add rule ip sbx_%1$s egress_deny ip saddr . ip daddr @egress_ok4 return\n"
            "add rule ip sbx_%1$s egress_deny goto egress_reject\n"
            "add chain ip sbx_%1$s egress_allow\n"
            "flush chain ip sbx_%1$s egress_allow\n"
            "add rule ip sbx_%1$s egress_allow meta l4proto { tcp, udp } th dport { 53, 853 } "
            "goto egress_reject\n"
            "add rule ip sbx_%1$s egress_allow ip saddr . ip daddr @egress_block4 "
            "goto egress_reject\n"
            "add rule ip sbx_%1$s egress_allow return\n",
            b);
}

/* The credential proxy (docs/network.md "Credential proxy"): TCP to ports 80 and 443 of sandboxes
 * in credproxy4 (those with a Credential Vault) is DNAT'ed to the server's listener on the gateway
 * (gw:80), but only what the forward chain would have let through: a DNAT'ed packet goes to `input`
 * and never meets the egress chains or the base isolation, so credproxy_check repeats them (each
 * `return` leaves the packet untouched, and the forward chain then refuses it as before): the
 * host's own addresses (the input chain's, refused), other sandboxes, an address a deny-default
 * sandbox's resolver did not answer, a blocked address of an allow-default one, the blocked ranges
 * unless the operator allows them. The input chain accepts the DNAT'ed connections (ct status dnat)
 * to gw:80 from credproxy4 only; a sandbox connecting to gw:80 itself is refused as before. */
static void
credproxy_part(FILE *f, const char *b, const char *subnet, const char *gw)
{
    fprintf(f,
            "add set ip sbx_%1$s credproxy4 { type ipv4_addr; }\n"
            "add chain ip sbx_%1$s credproxy_check\n"
            "flush chain ip sbx_%1$s credproxy_check\n"
            "add rule ip sbx_%1$s credproxy_check fib daddr type local return\n"
            "add rule ip sbx_%1$s credproxy_check ip daddr %2$s return\n"
            "add rule ip sbx_%1$s credproxy_check ip saddr @egress_deny_mode4 "
            "ip saddr . ip daddr != @egress_ok4 return\n"
            "add rule ip sbx_%1$s credproxy_check ip saddr . ip daddr @egress_block4 return\n"
            "add rule ip sbx_%1$s credproxy_check ip daddr @blocked4 ip daddr != @allow4 "
            "return\n"
            "add rule ip sbx_%1$s credproxy_check dnat ip to %3$s\n"
            "add chain ip sbx_%1$s prerouting { type nat hook prerouting priority dstnat; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s prerouting\n"
            "add rule ip sbx_%1$s prerouting iifname \"%1$s\" ip saddr @credproxy4 "
            "tcp dport { 80, 443 } jump credproxy_check\n",
            b, subnet, gw);
}

/* Leaf bridges (leaf.c) are L2 only: nothing enters the host's IP stack through one (the
 * host answers no ARP there either, but a frame sent to a leaf's MAC would be routed with the
 * leaf as its in-device, which no rule on the bridge's name sees): dropped. With br_netfilter
 * the frames a leaf switches pass the ip family's hooks with the leaf as in and out device:
 * the bridge table decided about those, and they pass (no rule on the bridge's name matches
 * them). They are untracked: conntrack would otherwise make the connection there (leaf in,
 * leaf out, its NAT decided as none, or a masquerade to the leaf, which has no address) and
 * find it again when the packet enters the host through the bridge, where the masquerade rule
 * would never be asked (a NAT binding is made once per connection). Untracked packets are not
 * NATed at all. Routed traffic never has a leaf as its out-device (no route points there).
 * Chains of their own, so that an older sbx on the host rewriting the table's other chains
 * (its check looks for its own version there) leaves them in place. */
static void
ip_leaf_chains(FILE *f, const char *b, const char *marker)
{
    char lp[16];
    sbx_net_leaf_prefix(lp, b);
    fprintf(f,
            "add chain ip sbx_%1$s leaves_raw { type filter hook prerouting priority raw; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s leaves_raw\n"
            "add rule ip sbx_%1$s leaves_raw iifname \"%2$s*\" notrack\n"
            "add chain ip sbx_%1$s leaves_fwd { type filter hook forward priority filter; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s leaves_fwd\n"
            "add rule ip sbx_%1$s leaves_fwd iifname \"%2$s*\" oifname != \"%2$s*\" drop\n"
            "add rule ip sbx_%1$s leaves_fwd oifname \"%2$s*\" iifname != \"%2$s*\" drop\n"
            "add chain ip sbx_%1$s leaves_in { type filter hook input priority filter; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s leaves_in\n"
            "add rule ip sbx_%1$s leaves_in iifname \"%2$s*\" drop comment \"%3$s\"\n",
            b, lp, marker);
}

/* The same for IPv6 (sandboxes have none; a leaf has IPv6 off): nothing through a leaf. */
static void
ip6_leaf_chains(FILE *f, const char *b, const char *marker)
{
    char lp[16];
    sbx_net_leaf_prefix(lp, b);
    fprintf(f,
            "add chain ip6 sbx_%1$s leaves_fwd { type filter hook forward priority filter; "
            "policy accept; }\n"
            "flush chain ip6 sbx_%1$s leaves_fwd\n"
            "add rule ip6 sbx_%1$s leaves_fwd iifname \"%2$s*\" drop\n"
            "add rule ip6 sbx_%1$s leaves_fwd oifname \"%2$s*\" drop\n"
            "add chain ip6 sbx_%1$s leaves_in { type filter hook input priority filter; "
            "policy accept; }\n"
            "flush chain ip6 sbx_%1$s leaves_in\n"
            "add rule ip6 sbx_%1$s leaves_in iifname \"%2$s*\" drop comment \"%3$s\"\n",
            b, lp, marker);
}

static void
ip_table(FILE *f, const char *b, const char *subnet, const char *marker, const char *dns)
{
    char elems[512];
    char gw[INET_ADDRSTRLEN];
    char lp[16];
    element_list(elems, sizeof elems, dns);
    gateway_of(gw, subnet);
    sbx_net_leaf_prefix(lp, b);
    fprintf(f,
            "add table ip sbx_%1$s\n"
            "add set ip sbx_%1$s dns4 { type ipv4_addr; }\n"
            "add set ip sbx_%1$s allow4 { type ipv4_addr; flags interval; auto-merge; }\n"
            "add set ip sbx_%1$s blocked4 { type ipv4_addr; flags interval; }\n"
            "flush set ip sbx_%1$s blocked4\n"
            "add element ip sbx_%1$s blocked4 { " BLOCKED4 " }\n"
            "flush set ip sbx_%1$s dns4\n",
            b);
    if (elems[0])
        fprintf(f, "add element ip sbx_%s dns4 { %s }\n", b, elems);
    /* The chains jumped to must exist before the forward chain's rules name them. */
    egress_part(f, b);
    credproxy_part(f, b, subnet, gw);
    fprintf(f,
            "add chain ip sbx_%1$s postrouting { type nat hook postrouting priority srcnat; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s postrouting\n"
            "add rule ip sbx_%1$s postrouting ip saddr %2$s oifname != \"%1$s\" "
            "oifname != \"%3$s*\" masquerade\n"
            "add chain ip sbx_%1$s forward { type filter hook forward priority filter; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s forward\n",
            b, subnet, lp);
    fprintf(f,
            "add rule ip sbx_%1$s forward oifname \"%1$s\" iifname != \"%1$s\" "
            "ct state established,related accept\n"
            "add rule ip sbx_%1$s forward oifname \"%1$s\" iifname != \"%1$s\" "
            "ct status dnat accept\n"
            "add rule ip sbx_%1$s forward oifname \"%1$s\" iifname != \"%1$s\" drop\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ct state established,related "
            "accept\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" oifname \"%1$s\" "
            "meta mark " GROUP_MARK " accept\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" oifname \"%1$s\" "
            "meta mark & 0xfff80000 == %4$#x accept\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" oifname \"%1$s\" drop\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ip saddr @egress_deny_mode4 "
            "jump egress_deny\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ip saddr @egress_allow_mode4 "
            "jump egress_allow\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ip daddr @dns4 "
            "meta l4proto { tcp, udp } th dport 53 accept\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ip daddr @allow4 accept\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ip daddr @blocked4 "
            "meta l4proto tcp reject with tcp reset\n"
            "add rule ip sbx_%1$s forward iifname \"%1$s\" ip daddr @blocked4 "
            "reject with icmp type admin-prohibited\n"
            "add chain ip sbx_%1$s input { type filter hook input priority filter; "
            "policy accept; }\n"
            "flush chain ip sbx_%1$s input\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" ct state established,related accept\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" ip saddr @egress_deny_mode4 "
            "ip daddr %3$s meta l4proto { tcp, udp } th dport 53 accept\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" ip saddr @egress_allow_mode4 "
            "ip daddr %3$s meta l4proto { tcp, udp } th dport 53 accept\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" ip daddr @dns4 "
            "meta l4proto { tcp, udp } th dport 53 accept\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" ip daddr @allow4 accept\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" ip saddr @credproxy4 ip daddr %3$s "
            "tcp dport { 80, 443 } ct status dnat accept\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" meta l4proto tcp "
            "reject with tcp reset\n"
            "add rule ip sbx_%1$s input iifname \"%1$s\" reject with icmp type "
            "admin-prohibited comment \"%2$s\"\n",
            b, marker, gw, LEAF_MARK | LEAF_PASS);
}

/* IPv6: sandboxes have none (their eth0's link-local address is all they get), so nothing of
 * theirs may enter the host (services on `::`, reached through the bridge's link-local
 * address) or be forwarded anywhere (fd00:ec2::254, the IPv6 metadata service, included). */
static void
ip6_table(FILE *f, const char *b, const char *marker)
{
    fprintf(f,
            "add table ip6 sbx_%1$s\n"
            "add chain ip6 sbx_%1$s input { type filter hook input priority filter; "
            "policy accept; }\n"
            "flush chain ip6 sbx_%1$s input\n"
            "add rule ip6 sbx_%1$s input iifname \"%1$s\" drop\n"
            "add chain ip6 sbx_%1$s forward { type filter hook forward priority filter; "
            "policy accept; }\n"
            "flush chain ip6 sbx_%1$s forward\n"
            "add rule ip6 sbx_%1$s forward iifname \"%1$s\" drop\n"
            "add rule ip6 sbx_%1$s forward oifname \"%1$s\" drop comment \"%2$s\"\n",
            b, marker);
}

/* Sandbox to sandbox on a bridge is switched, not routed: the bridge family's forward hook
 * sees it (with or without br_netfilter). Ports of sandboxes are `vsbx...`; one port to another
 * is dropped (ARP included, so there is not even an answer) unless both ports carry the same
 * non-zero device group, put in `groups` on purpose (sbx_nft_group). The gateway is the bridge
 * itself (bridge input, not forward), so this never cuts a sandbox off the gateway. (Bridge
 * reject needs a module not every kernel has: drop.)
 * One table for every sbx bridge of the host (`bridge sbx`), not one per bridge: without the
 * bridge-meta module a rule cannot say which bridge a packet crosses, so one bridge's drop
 * rule would also drop another's groups. Group numbers are host-wide (sbx_net_group_id), so
 * one set serves all bridges. Rewritten identically by every bridge's setup.
 * With br_netfilter (dockerd loads it) the same switched IPv4 packet then also passes the ip
 * family's forward hook, with the bridge as both its in and out device, where the ip table
 * drops sandbox-to-sandbox traffic (the routed kind): the group's packets carry GROUP_MARK
 * from here so that they pass there. A sandbox cannot forge the mark: the kernel clears an
 * skb's mark when it leaves a network namespace. */
/* Across leaf bridges (leaf.c) both ports a frame crosses on the bridge between them are
 * uplinks (`usbx*`), and the receiving leaf sees it come from its uplink, so the frame carries
 * its sender along in its mark: on the sender's leaf, a frame from a sandbox's port to the
 * uplink gets LEAF_MARK | the port's group (`groupmark`; 0 when not in a group); on the
 * receiving leaf, a frame from the uplink to a sandbox's port with such a mark passes only when
 * that group is the port's and is a group (`markgroups` holds exactly those pairs), and is
 * dropped otherwise; an unmarked frame from the uplink comes from the gateway (or routed from
 * outside) and passes, as on one bridge. The mark survives the veth hop between two bridges
 * of one netns, and a sandbox cannot forge it: the kernel clears a packet's mark when it
 * leaves a network namespace, and the group comes from the port (IFLA_GROUP, the server's).
 * On the bridge between the leaves a marked frame of a group gets LEAF_PASS, which the ip
 * table accepts where br_netfilter shows it the switched frame (bridge in and out device) and
 * drops sandbox-to-sandbox traffic otherwise. A frame delivered to the host itself (bridge
 * input: the gateway) loses the mark, so routed traffic is judged by the ip table alone, as
 * before, and no host rule or route sees our bits. */
static void
bridge_leaf_rules(FILE *f)
{
    fprintf(f,
            "add map bridge sbx groupmark { type devgroup : mark; }\n"
            "add set bridge sbx markgroups { type mark . devgroup; }\n"
            "add chain bridge sbx leaves { type filter hook forward priority filter; "
            "policy accept; }\n"
            "flush chain bridge sbx leaves\n"
            "add rule bridge sbx leaves iifname \"vsbx*\" oifname \"" SBX_NET_UPLINK_PREFIX
            "*\" meta mark set meta iifgroup map @groupmark accept\n"
            "add rule bridge sbx leaves iifname \"vsbx*\" oifname \"" SBX_NET_UPLINK_PREFIX
            "*\" meta mark set %1$#x accept\n"
            "add rule bridge sbx leaves iifname \"" SBX_NET_UPLINK_PREFIX
            "*\" oifname \"" SBX_NET_UPLINK_PREFIX "*\" meta mark & " LEAF_MARK_MASK
            " == %1$#x meta mark & " LEAF_GROUPS " != 0 meta mark set meta mark | %2$#x accept\n"
            "add rule bridge sbx leaves iifname \"" SBX_NET_UPLINK_PREFIX
            "*\" oifname \"vsbx*\" meta mark . meta oifgroup @markgroups accept\n"
            "add rule bridge sbx leaves iifname \"" SBX_NET_UPLINK_PREFIX
            "*\" oifname \"vsbx*\" meta mark & " LEAF_MARK_MASK " == %1$#x drop\n"
            "add chain bridge sbx leaves_in { type filter hook input priority filter; "
            "policy accept; }\n"
            "flush chain bridge sbx leaves_in\n"
            "add rule bridge sbx leaves_in meta mark & " LEAF_MARK_MASK " == %1$#x "
            "meta mark set 0 comment \"" LEAVES_MARKER "\"\n",
            LEAF_MARK, LEAF_PASS);
}

/* The chain `forward` is exactly what sbx wrote before leaf bridges, and the leaves' rules
 * are chains of their own (their rules match frames to or from uplinks only, which `forward`
 * never matches): an older sbx on the same host that rewrites `forward` (its check looks for
 * its own marker there) leaves them alone, so two versions never rewrite each other's rules
 * in turn. */
static void
bridge_table(FILE *f)
{
    fprintf(f, "add table bridge sbx\n"
               "add set bridge sbx groups { type devgroup . devgroup; }\n"
               "add chain bridge sbx forward { type filter hook forward priority filter; "
               "policy accept; }\n"
               "flush chain bridge sbx forward\n"
               "add rule bridge sbx forward iifname \"vsbx*\" oifname \"vsbx*\" "
               "meta iifgroup . meta oifgroup @groups meta mark set " GROUP_MARK " accept\n"
               "add rule bridge sbx forward iifname \"vsbx*\" oifname \"vsbx*\" drop "
               "comment \"" BRIDGE_MARKER "\"\n");
    bridge_leaf_rules(f);
}

static int
setup_table(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns,
            sbx_error **err)
{
    char table_c[160];
    char fwd_c[32];
    comments(table_c, fwd_c, bridge, subnet, dns);
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    /* One command buffer is one transaction: all of it or nothing. */
    char leaves_c[48];
    leaves_comment(leaves_c, bridge);
    ip_table(f, bridge, subnet, table_c, dns);
    ip_leaf_chains(f, bridge, leaves_c);
    ip6_table(f, bridge, table_c);
    ip6_leaf_chains(f, bridge, leaves_c);
    bridge_table(f);
    if (fclose(f) != 0)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    return run(nft, cmd, NULL, err);
}

/* Delete our rules from `ip filter FORWARD` and, if insert, put them back at its top: two for
 * the bridge and two for its leaves (`-i sbx0.+`: what a leaf switches passes this hook with
 * br_netfilter), the leaves' with a comment of their own, which an older sbx does not delete. */
static int
fix_filter_forward(struct sbx_nft *nft, const char *bridge, int insert, sbx_error **err)
{
    char fwd_c[32];
    char table_c[160];
    char leaves_c[48];
    char lp[16];
    long long handles[2][MAX_HANDLES];
    comments(table_c, fwd_c, bridge, "", NULL);
    leaves_comment(leaves_c, bridge);
    sbx_net_leaf_prefix(lp, bridge);
    int n = count_rules(nft, "chain ip filter FORWARD", fwd_c, handles[0]);
    int nl = n < 0 ? 0 : count_rules(nft, "chain ip filter FORWARD", leaves_c, handles[1]);
    if (n < 0 || (insert && n == FILTER_RULES && nl == FILTER_RULES))
        return 0; /* no such chain (no iptables user), or already right */
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    for (int i = 0; i < n; i++)
        fprintf(f, "delete rule ip filter FORWARD handle %lld\n", handles[0][i]);
    for (int i = 0; i < nl; i++)
        fprintf(f, "delete rule ip filter FORWARD handle %lld\n", handles[1][i]);
    /* `counter` and a comment make these rules iptables-nft's own `-i B -j ACCEPT` form. */
    if (insert)
        fprintf(f,
                "insert rule ip filter FORWARD oifname \"%3$s*\" counter accept comment \"%4$s\"\n"
                "insert rule ip filter FORWARD iifname \"%3$s*\" counter accept comment \"%4$s\"\n"
                "insert rule ip filter FORWARD oifname \"%1$s\" counter accept comment \"%2$s\"\n"
                "insert rule ip filter FORWARD iifname \"%1$s\" counter accept comment \"%2$s\"\n",
                bridge, fwd_c, lp, leaves_c);
    if (fclose(f) != 0)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    return len ? run(nft, cmd, NULL, err) : 0;
}

int
sbx_nft_setup(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns,
              sbx_error **err)
{
    (void)pthread_mutex_lock(&nft->lock);
    int r = setup_table(nft, bridge, subnet, dns, err);
    if (r == 0)
        r = fix_filter_forward(nft, bridge, 1, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

int
sbx_nft_teardown(struct sbx_nft *nft, const char *bridge, sbx_error **err)
{
    char cmd[256];
    /* The host-wide `bridge sbx` table stays: other bridges may use it, and without ports of
     * ours on a bridge its rules match nothing. */
    (void)snprintf(cmd, sizeof(cmd),
                   "add table ip sbx_%1$s\ndelete table ip sbx_%1$s\n"
                   "add table ip6 sbx_%1$s\ndelete table ip6 sbx_%1$s\n",
                   bridge);
    (void)pthread_mutex_lock(&nft->lock);
    int r = run(nft, cmd, NULL, err);
    if (r == 0)
        r = fix_filter_forward(nft, bridge, 0, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

int
sbx_nft_allow(struct sbx_nft *nft, const char *bridge, const char *const *cidrs, size_t n,
              sbx_error **err)
{
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    fprintf(f, "flush set ip sbx_%s allow4\n", bridge);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "add element ip sbx_%s allow4 { %s }\n", bridge, cidrs[i]);
    if (fclose(f) != 0)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    (void)pthread_mutex_lock(&nft->lock);
    int r = run(nft, cmd, NULL, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

int
sbx_nft_group(struct sbx_nft *nft, const char *bridge, uint32_t group, sbx_error **err)
{
    char cmd[512];
    (void)bridge;
    if (group == 0 || group >= SBX_NET_MAX_GROUP)
        return sbx_error_set(err, SBX_EINVAL, 0, "network group %u: want 1..%u", group,
                             SBX_NET_MAX_GROUP - 1);
    /* The pair first, the leaves' marks after: one transaction anyway. */
    (void)snprintf(cmd, sizeof(cmd),
                   "add element bridge sbx groups { %1$u . %1$u }\n"
                   "add element bridge sbx groupmark { %1$u : %2$#x }\n"
                   "add element bridge sbx markgroups { %2$#x . %1$u, %3$#x . %1$u }\n",
                   group, LEAF_MARK | group, LEAF_MARK | LEAF_PASS | group);
    (void)pthread_mutex_lock(&nft->lock);
    int r = run(nft, cmd, NULL, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

/* ---- egress policies (the server's resolver and the native provider; docs/network.md) ---- */

/* Addresses go into nft's language: only what parses as an IPv4 address gets there. */
static bool
is_ipv4(const char *s)
{
    struct in_addr a;
    return s && inet_pton(AF_INET, s, &a) == 1;
}

static int
run_locked(struct sbx_nft *nft, const char *cmd, sbx_error **err)
{
    (void)pthread_mutex_lock(&nft->lock);
    int r = run(nft, cmd, NULL, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

int
sbx_nft_egress_mode(struct sbx_nft *nft, const char *bridge, const char *addr,
                    enum sbx_nft_egress_mode mode, sbx_error **err)
{
    static const char *const sets[] = {"egress_deny_mode4", "egress_allow_mode4"};
    if (!is_ipv4(addr))
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: `%s` is not an IPv4 address", addr);
    char cmd[1024];
    size_t len = 0;
    /* add + delete: an element that is not there cannot be deleted (the transaction would
     * fail), so each delete follows an add of the same element. One transaction: the sandbox
     * is never in neither set while it moves from one to the other. */
    for (size_t i = 0; i < 2; i++)
        len += (size_t)snprintf(cmd + len, sizeof cmd - len,
                                "add element ip sbx_%1$s %2$s { %3$s }\n"
                                "delete element ip sbx_%1$s %2$s { %3$s }\n",
                                bridge, sets[i], addr);
    if (mode != SBX_NFT_EGRESS_NONE)
        (void)snprintf(cmd + len, sizeof cmd - len, "add element ip sbx_%s %s { %s }\n", bridge,
                       sets[mode == SBX_NFT_EGRESS_DENY ? 0 : 1], addr);
    return run_locked(nft, cmd, err);
}

/* "delete element ..." for each element of set whose first address is addr, into f. */
static size_t
forget_elements(FILE *f, const json_t *root, const char *bridge, const char *set, const char *addr)
{
    const json_t *item;
    size_t i;
    size_t n = 0;
    json_array_foreach (json_object_get(root, "nftables"), i, item) {
        const json_t *elems = json_object_get(json_object_get(item, "set"), "elem");
        const json_t *e;
        size_t j;
        json_array_foreach (elems, j, e) {
            const json_t *val =
                json_object_get(e, "elem") ? json_object_get(json_object_get(e, "elem"), "val") : e;
            const json_t *cc = json_object_get(val, "concat");
            const char *s = json_string_value(json_array_get(cc, 0));
            const char *d = json_string_value(json_array_get(cc, 1));
            if (s && d && strcmp(s, addr) == 0 && is_ipv4(d)) {
                fprintf(f, "delete element ip sbx_%s %s { %s . %s }\n", bridge, set, s, d);
                n++;
            }
        }
    }
    return n;
}

static int
forget_once(struct sbx_nft *nft, const char *bridge, const char *addr, sbx_error **err)
{
    static const char *const sets[] = {"egress_ok4", "egress_block4"};
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    size_t n = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    int r = 0;
    for (size_t i = 0; r == 0 && i < 2; i++) {
        char what[96];
        json_t *root = NULL;
        (void)snprintf(what, sizeof what, "list set ip sbx_%s %s", bridge, sets[i]);
        r = run(nft, what, &root, err);
        if (r == 0)
            n += forget_elements(f, root, bridge, sets[i], addr);
        json_decref(root);
    }
    if (fclose(f) != 0 && r == 0)
        r = sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    return r < 0 || n == 0 ? r : run(nft, cmd, NULL, err);
}

int
sbx_nft_egress_forget(struct sbx_nft *nft, const char *bridge, const char *addr, sbx_error **err)
{
    if (!is_ipv4(addr))
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: `%s` is not an IPv4 address", addr);
    (void)pthread_mutex_lock(&nft->lock);
    /* An element may time out between the listing and the delete (which then fails as a
     * whole): list again. */
    int r = 0;
    for (int tries = 0; tries < 4; tries++) {
        sbx_error_clear(err);
        r = forget_once(nft, bridge, addr, err);
        if (r == 0)
            break;
    }
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

/* Add (prefix daddrs[i]) to set (the set named with its family and table) with the timeout. */
static int
add_elems(struct sbx_nft *nft, const char *set, const char *prefix,
          const struct sbx_nft_egress_elems *e, sbx_error **err)
{
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    for (size_t i = 0; i < e->n; i++) {
        if (!is_ipv4(e->daddrs[i]))
            continue;
        /* add, delete, add: the element ends up with this timeout whether it was there
         * (libnftables 1.0.6 has no `destroy`, and an `add` of an existing element keeps its
         * old timeout) or not. */
        fprintf(f,
                "add element %1$s { %2$s%3$s timeout %4$us }\n"
                "delete element %1$s { %2$s%3$s }\n"
                "add element %1$s { %2$s%3$s timeout %4$us }\n",
                set, prefix, e->daddrs[i], e->timeout_s);
    }
    if (fclose(f) != 0)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    return len ? run_locked(nft, cmd, err) : 0;
}

int
sbx_nft_egress_add(struct sbx_nft *nft, const char *bridge, const struct sbx_nft_egress_elems *e,
                   sbx_error **err)
{
    if (!is_ipv4(e->saddr))
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: `%s` is not an IPv4 address", e->saddr);
    char set[64];
    char prefix[32];
    (void)snprintf(set, sizeof set, "ip sbx_%s %s", bridge,
                   e->block ? "egress_block4" : "egress_ok4");
    (void)snprintf(prefix, sizeof prefix, "%s . ", e->saddr);
    return add_elems(nft, set, prefix, e, err);
}

int
sbx_nft_egress_flush(struct sbx_nft *nft, const char *bridge, sbx_error **err)
{
    char cmd[256];
    (void)snprintf(cmd, sizeof cmd,
                   "flush set ip sbx_%1$s egress_ok4\nflush set ip sbx_%1$s egress_block4\n"
                   "flush set ip sbx_%1$s credproxy4\n",
                   bridge);
    return run_locked(nft, cmd, err);
}

int
sbx_nft_credproxy(struct sbx_nft *nft, const char *bridge, const char *addr, bool on,
                  sbx_error **err)
{
    if (!is_ipv4(addr))
        return sbx_error_set(err, SBX_EINVAL, 0, "credential proxy: `%s` is not an IPv4 address",
                             addr);
    char cmd[256];
    /* add + delete: (as in sbx_nft_egress_mode) an absent element cannot be deleted */
    int n = snprintf(cmd, sizeof cmd,
                     "add element ip sbx_%1$s credproxy4 { %2$s }\n"
                     "delete element ip sbx_%1$s credproxy4 { %2$s }\n",
                     bridge, addr);
    if (on)
        (void)snprintf(cmd + n, sizeof cmd - (size_t)n, "add element ip sbx_%s credproxy4 { %s }\n",
                       bridge, addr);
    return run_locked(nft, cmd, err);
}

/* ---- egress inside a sandbox's own network namespace (the docker provider) ----
 *
 * The table `inet sbx_egress` of the namespace the context was made in. Its output chain sees
 * every packet the namespace's processes send, raw sockets included (AF_PACKET would not pass
 * it, and needs CAP_NET_RAW, which these sandboxes do not have), at priority -150: after
 * conntrack (-200, so `ct state` is known) and before any destination NAT (-100) an engine
 * may have put there, so the ports seen are the ones the process asked for. Loopback is the
 * sandbox's own business (sbx's resolver listens there); everything else: no IPv6, DNS (53)
 * and DNS over TLS (853) refused, then the policy. Accepts end the chain only for this table:
 * the bridge's base isolation still applies to what leaves. */

#define NS_TABLE "inet sbx_egress"

static void
ns_mode_rules(FILE *f, enum sbx_nft_egress_mode mode)
{
    fprintf(f,
            "add table " NS_TABLE "\n"
            "add set " NS_TABLE " ok4 { type ipv4_addr; flags timeout; }\n"
            "add set " NS_TABLE " block4 { type ipv4_addr; flags timeout; }\n"
            "add chain " NS_TABLE " refuse\n"
            "flush chain " NS_TABLE " refuse\n"
            "add rule " NS_TABLE " refuse meta l4proto tcp reject with tcp reset\n"
            "add rule " NS_TABLE " refuse reject with icmpx type admin-prohibited\n"
            "add chain " NS_TABLE " out { type filter hook output priority -150; policy accept; }\n"
            "flush chain " NS_TABLE " out\n"
            "add rule " NS_TABLE " out oifname \"lo\" accept\n"
            "add rule " NS_TABLE " out meta nfproto ipv6 goto refuse\n"
            "add rule " NS_TABLE " out meta l4proto { tcp, udp } th dport { 53, 853 } goto refuse\n"
            "add rule " NS_TABLE " out ct state established,related accept\n");
    if (mode == SBX_NFT_EGRESS_DENY)
        fprintf(f, "add rule " NS_TABLE " out ip daddr @ok4 accept\n"
                   "add rule " NS_TABLE " out goto refuse\n");
    else
        fprintf(f, "add rule " NS_TABLE " out ip daddr @block4 goto refuse\n");
    /* what the former policy let the sandbox learn (or a former server) goes with it */
    fprintf(f, "flush set " NS_TABLE " ok4\nflush set " NS_TABLE " block4\n");
}

int
sbx_nft_ns_egress(struct sbx_nft *nft, enum sbx_nft_egress_mode mode, sbx_error **err)
{
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    if (mode == SBX_NFT_EGRESS_NONE) /* add first: a delete of a missing table fails */
        fprintf(f, "add table " NS_TABLE "\ndelete table " NS_TABLE "\n");
    else
        ns_mode_rules(f, mode);
    if (fclose(f) != 0)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    return run_locked(nft, cmd, err);
}

int
sbx_nft_ns_egress_add(struct sbx_nft *nft, const struct sbx_nft_egress_elems *e, sbx_error **err)
{
    return add_elems(nft, e->block ? NS_TABLE " block4" : NS_TABLE " ok4", "", e, err);
}

/* The credential proxy's redirect (port 0: none). A nat output chain: at priority -100, after
 * the filter chain `out` (-150), so only a connection the policy let out is redirected (the
 * proxy reaches nothing the sandbox could not); loopback is the sandbox's own; the proxy's own
 * upstream connections (SBX_CREDPROXY_MARK, egress/credproxy.h; a mark needs CAP_NET_ADMIN or
 * CAP_NET_RAW, which the sandbox has not) pass. */
int
sbx_nft_ns_credproxy(struct sbx_nft *nft, unsigned port, unsigned tls_port, sbx_error **err)
{
    char cmd[1400];
    int n = snprintf(cmd, sizeof cmd,
                     "add chain " NS_TABLE " proxy { type nat hook output priority -100; "
                     "policy accept; }\n"
                     "flush chain " NS_TABLE " proxy\n");
    if (port == 0) {
        (void)snprintf(cmd + n, sizeof cmd - (size_t)n, "delete chain " NS_TABLE " proxy\n");
        return run_locked(nft, cmd, err);
    }
    n += snprintf(cmd + n, sizeof cmd - (size_t)n,
                  "add rule " NS_TABLE " proxy meta mark 0x%08x return\n"
                  "add rule " NS_TABLE " proxy oifname \"lo\" return\n"
                  "add rule " NS_TABLE " proxy meta nfproto ipv4 ip daddr != 127.0.0.0/8 "
                  "tcp dport 80 redirect to :%u\n",
                  SBX_NFT_CREDPROXY_MARK, port);
    if (tls_port)
        (void)snprintf(cmd + n, sizeof cmd - (size_t)n,
                       "add rule " NS_TABLE " proxy meta nfproto ipv4 ip daddr != 127.0.0.0/8 "
                       "tcp dport 443 redirect to :%u\n",
                       tls_port);
    return run_locked(nft, cmd, err);
}
