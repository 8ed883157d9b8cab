/*
 * nl.h - the few netlink requests sbx needs, over plain sockets. Functions return 0 or -errno
 * (the kernel's answer), so callers can tell EEXIST/ENODEV from real failures.
 */
#ifndef SBX_NET_NL_H
#define SBX_NET_NL_H

#include <stddef.h>
#include <stdint.h>

struct sbx_nl {
    int fd;
    uint32_t portid;
    uint32_t seq;
};

/* A NETLINK_ROUTE socket in the calling thread's netns, or in netns_fd (>= 0): then a
 * short-lived thread setns()es there and opens it, so the caller's netns never changes (a
 * netlink socket stays in the netns it was created in). */
int sbx_nl_open(struct sbx_nl *nl, int netns_fd);
void sbx_nl_close(struct sbx_nl *nl);
/* A NETLINK_NETFILTER socket in the calling thread's netns. */
int sbx_nl_open_netfilter(struct sbx_nl *nl);

/* Send one request (its seq is set here) and read until its ack or the end of a dump; each
 * reply goes to cb (NULL: none expected), which returns 0, or < 0 to fail the request. */
struct nlmsghdr;
typedef int (*sbx_nl_cb)(const struct nlmsghdr *nlh, void *data);
int sbx_nl_talk(struct sbx_nl *nl, struct nlmsghdr *nlh, sbx_nl_cb cb, void *data);

/* The generation of the netns's whole nftables ruleset: it changes with every committed
 * change by anyone (one NETLINK_NETFILTER round trip). */
int sbx_nl_nft_genid(uint32_t *out);

struct sbx_nl_veth {
    const char *name;              /* host end */
    int master;                    /* ifindex of the bridge for the host end, or 0 */
    const char *peer_name;         /* created in peer_netns_fd */
    int peer_netns_fd;             /* -1: the caller's netns */
    const unsigned char *peer_mac; /* 6 bytes or NULL */
    int mtu;                       /* both ends; 0: the kernel's default (1500) */
};

/* Create a veth pair; the host end is up, the peer is not (bring it up in its netns). */
int sbx_nl_veth_create(struct sbx_nl *nl, const struct sbx_nl_veth *veth);
/* Create a bridge (up, with a fixed MAC so that ports never change it). */
int sbx_nl_bridge_create(struct sbx_nl *nl, const char *name, const unsigned char mac[6], int mtu);
/* ifindex of name, or -ENODEV. Also reports whether it is up and its kind ("bridge"...). */
int sbx_nl_link_get(struct sbx_nl *nl, const char *name, int *index, int *up, char kind[16]);
int sbx_nl_link_up(struct sbx_nl *nl, const char *name);
/* Set the device group of name (nftables matches it as iifgroup/oifgroup). */
int sbx_nl_link_set_group(struct sbx_nl *nl, const char *name, uint32_t group);
/* Make name a port of the bridge `master` (ifindex) and bring it up. */
int sbx_nl_link_set_master(struct sbx_nl *nl, const char *name, int master);
/* ifindex and MTU of name. */
int sbx_nl_link_mtu(struct sbx_nl *nl, const char *name, int *index, int *mtu);
/* MTU of the device of the main table's IPv4 default route; -ENOENT when there is none. */
int sbx_nl_uplink_mtu(struct sbx_nl *nl, int *mtu);
/* 1 when name is up and passes traffic, 0 when not yet, -errno. A device brought up gets its
 * qdisc (before that it drops all it sends) and, as a bridge port, the forwarding state only
 * when the kernel's linkwatch work has handled its carrier: asynchronously, after the request
 * that brought it up has returned. */
int sbx_nl_link_ready(struct sbx_nl *nl, const char *name);
int sbx_nl_link_del(struct sbx_nl *nl, const char *name);
/* Add addr/prefix (host byte order) on ifindex; -EEXIST when present. */
int sbx_nl_addr_add(struct sbx_nl *nl, int ifindex, uint32_t addr, int prefix);
/* 1 when ifindex holds addr/prefix, 0 when not. */
int sbx_nl_addr_has(struct sbx_nl *nl, int ifindex, uint32_t addr, int prefix);
int sbx_nl_route_add_default(struct sbx_nl *nl, int ifindex, uint32_t gateway);

/* Visit every link whose master is master_index (0: every link). */
typedef int (*sbx_nl_link_fn)(const char *name, int index, void *payload);
int sbx_nl_link_foreach(struct sbx_nl *nl, int master_index, sbx_nl_link_fn fn, void *payload);
/* Every link of the netns, with its kind and master: *out malloc'ed (free() it), *n links. */
struct sbx_nl_link {
    char name[16];
    char kind[16];
    int index;
    int master; /* 0: none */
};
int sbx_nl_links(struct sbx_nl *nl, struct sbx_nl_link **out, size_t *n);

#endif
