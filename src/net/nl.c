/*
 * nl.c - rtnetlink requests over libmnl (see nl.h).
 */
#include "net/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NL_BUF 32768

struct open_args {
    int netns_fd;
    struct mnl_socket *sock;
    int err;
};

/* Runs in its own thread: setns() only affects this thread, which exits right after. */
static void *
open_in_netns(void *p)
{
    struct open_args *a = p;
    if (setns(a->netns_fd, CLONE_NEWNET) < 0) {
        a->err = errno;
        return NULL;
    }
    a->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!a->sock)
        a->err = errno;
    return NULL;
}

int
sbx_nl_open_netfilter(struct sbx_nl *nl)
{
    *nl = (struct sbx_nl){0};
    nl->sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (!nl->sock)
        return -errno;
    if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
        int r = -errno;
        sbx_nl_close(nl);
        return r;
    }
    nl->portid = mnl_socket_get_portid(nl->sock);
    nl->seq = (uint32_t)time(NULL);
    return 0;
}

static int
open_socket(struct mnl_socket **out, int netns_fd)
{
    if (netns_fd < 0) {
        *out = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        return *out ? 0 : -errno;
    }
    struct open_args a = {.netns_fd = netns_fd};
    pthread_t t;
    int r = pthread_create(&t, NULL, open_in_netns, &a);
    if (r != 0)
        return -r;
    (void)pthread_join(t, NULL);
    *out = a.sock;
    return a.sock ? 0 : -a.err;
}

int
sbx_nl_open(struct sbx_nl *nl, int netns_fd)
{
    *nl = (struct sbx_nl){0};
    int r = open_socket(&nl->sock, netns_fd);
    if (r < 0)
        return r;
    if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
        r = -errno;
        sbx_nl_close(nl);
        return r;
    }
    nl->portid = mnl_socket_get_portid(nl->sock);
    nl->seq = (uint32_t)time(NULL);
    return 0;
}

void
sbx_nl_close(struct sbx_nl *nl)
{
    if (nl->sock)
        (void)mnl_socket_close(nl->sock);
    nl->sock = NULL;
}

int
sbx_nl_talk(struct sbx_nl *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
    char *buf = malloc(NL_BUF);
    int r = 0;
    if (!buf)
        return -ENOMEM;
    nlh->nlmsg_seq = ++nl->seq;
    if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0) {
        r = -errno;
        goto out;
    }
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl->sock, buf, NL_BUF);
        if (n < 0) {
            r = -errno;
            break;
        }
        r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, nl->portid, cb, data);
        if (r <= MNL_CB_STOP) {
            r = r < 0 ? -errno : 0;
            break;
        }
    }
out:
    free(buf);
    return r;
}

static struct nlmsghdr *
put_link_msg(char *buf, uint16_t type, uint16_t flags, unsigned up)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_flags = up ? IFF_UP : 0;
    ifm->ifi_change = up ? IFF_UP : 0;
    return nlh;
}

/* The peer's own ifinfomsg and attributes. The peer cannot be created up: veth_newlink
 * configures it before linking the pair, and veth_open of an unpaired end fails (ENOTCONN). */
static void
put_veth_peer(struct nlmsghdr *nlh, const struct sbx_nl_veth *veth)
{
    struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifm = mnl_nlmsg_get_payload_tail(nlh);
    memset(pifm, 0, sizeof(*pifm));
    pifm->ifi_family = AF_UNSPEC;
    nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifm));
    mnl_attr_put_strz(nlh, IFLA_IFNAME, veth->peer_name);
    /* Created directly in the sandbox's netns: moving a device later costs 15-35 ms. */
    if (veth->peer_netns_fd >= 0)
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)veth->peer_netns_fd);
    if (veth->peer_mac)
        mnl_attr_put(nlh, IFLA_ADDRESS, 6, veth->peer_mac);
    if (veth->mtu > 0)
        mnl_attr_put_u32(nlh, IFLA_MTU, (uint32_t)veth->mtu);
    mnl_attr_nest_end(nlh, peer);
}

int
sbx_nl_veth_create(struct sbx_nl *nl, const struct sbx_nl_veth *veth)
{
    char buf[1024];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 1);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, veth->name);
    if (veth->master > 0)
        mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)veth->master);
    if (veth->mtu > 0)
        mnl_attr_put_u32(nlh, IFLA_MTU, (uint32_t)veth->mtu);
    struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    put_veth_peer(nlh, veth);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, linkinfo);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_bridge_create(struct sbx_nl *nl, const char *name, const unsigned char mac[6], int mtu)
{
    char buf[512];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 1);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
    if (mtu > 0)
        mnl_attr_put_u32(nlh, IFLA_MTU, (uint32_t)mtu);
    struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
    mnl_attr_nest_end(nlh, linkinfo);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

struct link_info {
    int index;
    int up;
    int master;
    int mtu;
    char name[IFNAMSIZ];
    char kind[16];
    int qdisc_noop;   /* qdisc not attached yet: the device drops what it sends */
    int brport_state; /* bridge port STP state, -1 when not a bridge port */
};

static int
slave_attr_cb(const struct nlattr *attr, void *data)
{
    struct link_info *li = data;
    if (mnl_attr_get_type(attr) == IFLA_BRPORT_STATE && mnl_attr_validate(attr, MNL_TYPE_U8) >= 0)
        li->brport_state = mnl_attr_get_u8(attr);
    return MNL_CB_OK;
}

static int
linkinfo_attr_cb(const struct nlattr *attr, void *data)
{
    struct link_info *li = data;
    if (mnl_attr_get_type(attr) == IFLA_INFO_KIND && mnl_attr_validate(attr, MNL_TYPE_STRING) >= 0)
        (void)snprintf(li->kind, sizeof(li->kind), "%s", mnl_attr_get_str(attr));
    if (mnl_attr_get_type(attr) == IFLA_INFO_SLAVE_DATA)
        (void)mnl_attr_parse_nested(attr, slave_attr_cb, li);
    return MNL_CB_OK;
}

static int
link_attr_cb(const struct nlattr *attr, void *data)
{
    struct link_info *li = data;
    switch (mnl_attr_get_type(attr)) {
    case IFLA_IFNAME:
        if (mnl_attr_validate(attr, MNL_TYPE_STRING) >= 0)
            (void)snprintf(li->name, sizeof(li->name), "%s", mnl_attr_get_str(attr));
        break;
    case IFLA_MASTER:
        if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
            li->master = (int)mnl_attr_get_u32(attr);
        break;
    case IFLA_MTU:
        if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
            li->mtu = (int)mnl_attr_get_u32(attr);
        break;
    case IFLA_LINKINFO:
        (void)mnl_attr_parse_nested(attr, linkinfo_attr_cb, li);
        break;
    case IFLA_QDISC:
        li->qdisc_noop = mnl_attr_validate(attr, MNL_TYPE_STRING) >= 0 &&
                         strcmp(mnl_attr_get_str(attr), "noop") == 0;
        break;
    default:
        break;
    }
    return MNL_CB_OK;
}

static void
parse_link(struct link_info *li, const struct nlmsghdr *nlh)
{
    const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
    *li = (struct link_info){
        .index = ifm->ifi_index, .up = !!(ifm->ifi_flags & IFF_UP), .brport_state = -1};
    (void)mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, li);
}

static int
link_get_cb(const struct nlmsghdr *nlh, void *data)
{
    if (nlh->nlmsg_type == RTM_NEWLINK)
        parse_link(data, nlh);
    return MNL_CB_OK;
}

int
sbx_nl_link_get(struct sbx_nl *nl, const char *name, int *index, int *up, char kind[16])
{
    char buf[256];
    struct link_info li = {0};
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, 0, 0);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    int r = sbx_nl_talk(nl, nlh, link_get_cb, &li);
    if (r < 0)
        return r;
    if (li.index <= 0)
        return -ENODEV;
    *index = li.index;
    if (up)
        *up = li.up;
    if (kind)
        memcpy(kind, li.kind, sizeof(li.kind));
    return 0;
}

/* RTM_GETLINK of name, or of index when name is NULL. */
static int
link_query(struct sbx_nl *nl, const char *name, int index, struct link_info *li)
{
    char buf[256];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, 0, 0);
    struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
    if (name)
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    else
        ifm->ifi_index = index;
    *li = (struct link_info){0};
    int r = sbx_nl_talk(nl, nlh, link_get_cb, li);
    return r < 0 ? r : li->index > 0 ? 0 : -ENODEV;
}

int
sbx_nl_link_mtu(struct sbx_nl *nl, const char *name, int *index, int *mtu)
{
    struct link_info li;
    int r = link_query(nl, name, 0, &li);
    if (r == 0) {
        *index = li.index;
        *mtu = li.mtu;
    }
    return r;
}

struct default_route {
    int oif;
};

static int
route_cb(const struct nlmsghdr *nlh, void *data)
{
    struct default_route *d = data;
    const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
    const struct nlattr *attr;
    if (nlh->nlmsg_type != RTM_NEWROUTE || rtm->rtm_dst_len != 0 ||
        rtm->rtm_table != RT_TABLE_MAIN || rtm->rtm_type != RTN_UNICAST || d->oif > 0)
        return MNL_CB_OK;
    mnl_attr_for_each(attr, nlh, sizeof(*rtm))
    {
        if (mnl_attr_get_type(attr) == RTA_OIF && mnl_attr_get_payload_len(attr) == 4)
            d->oif = (int)mnl_attr_get_u32(attr);
    }
    return MNL_CB_OK;
}

int
sbx_nl_uplink_mtu(struct sbx_nl *nl, int *mtu)
{
    char buf[256];
    struct default_route d = {0};
    struct link_info li;
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    int r = sbx_nl_talk(nl, nlh, route_cb, &d);
    if (r < 0)
        return r;
    if (d.oif <= 0)
        return -ENOENT;
    r = link_query(nl, NULL, d.oif, &li);
    if (r == 0)
        *mtu = li.mtu;
    return r;
}

int
sbx_nl_link_ready(struct sbx_nl *nl, const char *name)
{
    char buf[256];
    struct link_info li = {0};
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, 0, 0);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    int r = sbx_nl_talk(nl, nlh, link_get_cb, &li);
    if (r < 0)
        return r;
    if (li.index <= 0)
        return -ENODEV;
    return li.up && !li.qdisc_noop &&
           (li.brport_state < 0 || li.brport_state == BR_STATE_FORWARDING);
}

int
sbx_nl_link_up(struct sbx_nl *nl, const char *name)
{
    char buf[256];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, 0, 1);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_link_del(struct sbx_nl *nl, const char *name)
{
    char buf[256];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_DELLINK, 0, 0);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_addr_add(struct sbx_nl *nl, int ifindex, uint32_t addr, int prefix)
{
    char buf[256];
    uint32_t a = htonl(addr);
    uint32_t brd = htonl(addr | ~(~0U << (32 - prefix)));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)prefix;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = (unsigned)ifindex;
    mnl_attr_put_u32(nlh, IFA_LOCAL, a);
    mnl_attr_put_u32(nlh, IFA_ADDRESS, a);
    mnl_attr_put_u32(nlh, IFA_BROADCAST, brd);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

struct addr_query {
    int ifindex;
    uint32_t addr; /* network order */
    int prefix;
    int found;
};

static int
addr_cb(const struct nlmsghdr *nlh, void *data)
{
    struct addr_query *q = data;
    const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
    const struct nlattr *attr;
    if (nlh->nlmsg_type != RTM_NEWADDR || (int)ifa->ifa_index != q->ifindex ||
        ifa->ifa_prefixlen != q->prefix)
        return MNL_CB_OK;
    mnl_attr_for_each(attr, nlh, sizeof(*ifa))
    {
        if (mnl_attr_get_type(attr) == IFA_LOCAL && mnl_attr_get_payload_len(attr) == 4 &&
            mnl_attr_get_u32(attr) == q->addr)
            q->found = 1;
    }
    return MNL_CB_OK;
}

int
sbx_nl_addr_has(struct sbx_nl *nl, int ifindex, uint32_t addr, int prefix)
{
    char buf[256];
    struct addr_query q = {.ifindex = ifindex, .addr = htonl(addr), .prefix = prefix};
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETADDR;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    int r = sbx_nl_talk(nl, nlh, addr_cb, &q);
    return r < 0 ? r : q.found;
}

int
sbx_nl_route_add_default(struct sbx_nl *nl, int ifindex, uint32_t gateway)
{
    char buf[256];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_STATIC;
    rtm->rtm_scope = RT_SCOPE_UNIVERSE;
    rtm->rtm_type = RTN_UNICAST;
    mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
    mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

struct link_list {
    int master;
    size_t n, cap;
    struct link_info *v;
    int oom;
};

static int
link_dump_cb(const struct nlmsghdr *nlh, void *data)
{
    struct link_list *l = data;
    struct link_info li;
    if (nlh->nlmsg_type != RTM_NEWLINK)
        return MNL_CB_OK;
    parse_link(&li, nlh);
    if (l->master > 0 && li.master != l->master)
        return MNL_CB_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct link_info *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = 1;
            return MNL_CB_OK;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = li;
    return MNL_CB_OK;
}

int
sbx_nl_link_foreach(struct sbx_nl *nl, int master_index, sbx_nl_link_fn fn, void *payload)
{
    char buf[256];
    struct link_list l = {.master = master_index};
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, NLM_F_DUMP, 0);
    nlh->nlmsg_flags &= (uint16_t)~NLM_F_ACK;
    if (master_index > 0)
        mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)master_index); /* kernel-side filter */
    int r = sbx_nl_talk(nl, nlh, link_dump_cb, &l);
    if (r == 0 && l.oom)
        r = -ENOMEM;
    /* Callbacks run after the dump so that they may use the socket themselves. */
    for (size_t i = 0; r == 0 && i < l.n; i++)
        r = fn(l.v[i].name, l.v[i].index, payload);
    free(l.v);
    return r;
}
