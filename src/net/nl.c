/*
 * nl.c - rtnetlink requests over plain netlink sockets (see nl.h; messages: nlmsg.h).
 */
#include "net/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/nlmsg.h"

#define NL_BUF 32768

struct open_args {
    int netns_fd;
    int fd;
    int err;
};

static int
socket_open(int proto)
{
    return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
}

/* Runs in its own thread: setns() only affects this thread, which exits right after. */
static void *
open_in_netns(void *p)
{
    struct open_args *a = p;
    if (setns(a->netns_fd, CLONE_NEWNET) < 0) {
        a->err = errno;
        return NULL;
    }
    a->fd = socket_open(NETLINK_ROUTE);
    if (a->fd < 0)
        a->err = errno;
    return NULL;
}

static int
open_socket(int *out, int netns_fd)
{
    if (netns_fd < 0) {
        *out = socket_open(NETLINK_ROUTE);
        return *out >= 0 ? 0 : -errno;
    }
    struct open_args a = {.netns_fd = netns_fd, .fd = -1};
    pthread_t t;
    int r = pthread_create(&t, NULL, open_in_netns, &a);
    if (r != 0)
        return -r;
    (void)pthread_join(t, NULL);
    *out = a.fd;
    return a.fd >= 0 ? 0 : -a.err;
}

/* Bind with a kernel-assigned port id and remember it (replies are checked against it). */
static int
bind_socket(struct sbx_nl *nl)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    socklen_t len = sizeof sa;
    if (bind(nl->fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(nl->fd, (struct sockaddr *)&sa, &len) < 0) {
        int r = -errno;
        sbx_nl_close(nl);
        return r;
    }
    nl->portid = sa.nl_pid;
    nl->seq = (uint32_t)time(NULL);
    return 0;
}

int
sbx_nl_open_netfilter(struct sbx_nl *nl)
{
    *nl = (struct sbx_nl){.fd = socket_open(NETLINK_NETFILTER)};
    return nl->fd < 0 ? -errno : bind_socket(nl);
}

int
sbx_nl_open(struct sbx_nl *nl, int netns_fd)
{
    *nl = (struct sbx_nl){.fd = -1};
    int r = open_socket(&nl->fd, netns_fd);
    return r < 0 ? r : bind_socket(nl);
}

void
sbx_nl_close(struct sbx_nl *nl)
{
    if (nl->fd >= 0)
        (void)close(nl->fd);
    nl->fd = -1;
}

/* Handle the messages of one datagram. Returns 1 to read on, 0 when the answer is complete
 * (ack or end of dump), -errno on an error reply or a message that is not ours. */
static int
run_callbacks(const char *buf, size_t len, uint32_t seq, uint32_t portid, sbx_nl_cb cb, void *data)
{
    const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
    while (NLMSG_OK(nlh, len)) {
        if (nlh->nlmsg_seq != seq || (nlh->nlmsg_pid && nlh->nlmsg_pid != portid))
            return -ESRCH;
        if (nlh->nlmsg_type == NLMSG_DONE)
            return 0;
        if (nlh->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = NLMSG_DATA(nlh);
            if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof *e))
                return -EBADMSG;
            return e->error; /* 0: the ack */
        }
        if (nlh->nlmsg_type >= NLMSG_MIN_TYPE && cb && cb(nlh, data) < 0)
            return -EINVAL;
        nlh = NLMSG_NEXT(nlh, len);
    }
    return 1;
}

int
sbx_nl_talk(struct sbx_nl *nl, struct nlmsghdr *nlh, sbx_nl_cb cb, void *data)
{
    char *buf = malloc(NL_BUF);
    if (!buf)
        return -ENOMEM;
    nlh->nlmsg_seq = ++nl->seq;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int r = 1;
    if (sendto(nl->fd, nlh, nlh->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        r = -errno;
    while (r == 1) {
        ssize_t n = recv(nl->fd, buf, NL_BUF, 0);
        if (n < 0 && errno == EINTR)
            continue;
        r = n < 0 ? -errno : run_callbacks(buf, (size_t)n, nlh->nlmsg_seq, nl->portid, cb, data);
    }
    free(buf);
    return r;
}

static struct nlmsghdr *
put_link_msg(char *buf, uint16_t type, uint16_t flags, unsigned up)
{
    struct nlmsghdr *nlh = sbx_nlmsg_put_header(buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    struct ifinfomsg *ifm = sbx_nlmsg_put_extra(nlh, sizeof(*ifm));
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
    struct nlattr *peer = sbx_nlattr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifm = sbx_nlmsg_tail(nlh);
    memset(pifm, 0, sizeof(*pifm));
    pifm->ifi_family = AF_UNSPEC;
    nlh->nlmsg_len += NLMSG_ALIGN(sizeof(*pifm));
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, veth->peer_name);
    /* Created directly in the sandbox's netns: moving a device later costs 15-35 ms. */
    if (veth->peer_netns_fd >= 0)
        sbx_nlattr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)veth->peer_netns_fd);
    if (veth->peer_mac)
        sbx_nlattr_put(nlh, IFLA_ADDRESS, 6, veth->peer_mac);
    if (veth->mtu > 0)
        sbx_nlattr_put_u32(nlh, IFLA_MTU, (uint32_t)veth->mtu);
    sbx_nlattr_nest_end(nlh, peer);
}

int
sbx_nl_veth_create(struct sbx_nl *nl, const struct sbx_nl_veth *veth)
{
    char buf[1024];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 1);
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, veth->name);
    if (veth->master > 0)
        sbx_nlattr_put_u32(nlh, IFLA_MASTER, (uint32_t)veth->master);
    if (veth->mtu > 0)
        sbx_nlattr_put_u32(nlh, IFLA_MTU, (uint32_t)veth->mtu);
    struct nlattr *linkinfo = sbx_nlattr_nest_start(nlh, IFLA_LINKINFO);
    sbx_nlattr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = sbx_nlattr_nest_start(nlh, IFLA_INFO_DATA);
    put_veth_peer(nlh, veth);
    sbx_nlattr_nest_end(nlh, data);
    sbx_nlattr_nest_end(nlh, linkinfo);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_bridge_create(struct sbx_nl *nl, const char *name, const unsigned char mac[6], int mtu)
{
    char buf[512];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 1);
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
    sbx_nlattr_put(nlh, IFLA_ADDRESS, 6, mac);
    if (mtu > 0)
        sbx_nlattr_put_u32(nlh, IFLA_MTU, (uint32_t)mtu);
    struct nlattr *linkinfo = sbx_nlattr_nest_start(nlh, IFLA_LINKINFO);
    sbx_nlattr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
    sbx_nlattr_nest_end(nlh, linkinfo);
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

static void
copy_str(char *dst, size_t size, const struct nlattr *attr)
{
    const char *v = sbx_nlattr_str(attr);
    if (v)
        (void)snprintf(dst, size, "%s", v);
}

/* IFLA_LINKINFO: the kind, and a bridge port's STP state in the slave data. */
static void
parse_linkinfo(struct link_info *li, const struct nlattr *info)
{
    const struct nlattr *a;
    const struct nlattr *b;
    size_t rest;
    size_t rest2;
    sbx_nlattr_for_each(a, sbx_nlattr_data(info), sbx_nlattr_len(info), rest)
    {
        if (sbx_nlattr_type(a) == IFLA_INFO_KIND)
            copy_str(li->kind, sizeof(li->kind), a);
        if (sbx_nlattr_type(a) != IFLA_INFO_SLAVE_DATA)
            continue;
        sbx_nlattr_for_each(b, sbx_nlattr_data(a), sbx_nlattr_len(a), rest2)
        {
            uint8_t state;
            if (sbx_nlattr_type(b) == IFLA_BRPORT_STATE && sbx_nlattr_u8(b, &state))
                li->brport_state = state;
        }
    }
}

static void
link_attr(struct link_info *li, const struct nlattr *attr)
{
    uint32_t v;
    const char *q;
    switch (sbx_nlattr_type(attr)) {
    case IFLA_IFNAME:
        copy_str(li->name, sizeof(li->name), attr);
        break;
    case IFLA_MASTER:
        if (sbx_nlattr_u32(attr, &v))
            li->master = (int)v;
        break;
    case IFLA_MTU:
        if (sbx_nlattr_u32(attr, &v))
            li->mtu = (int)v;
        break;
    case IFLA_LINKINFO:
        parse_linkinfo(li, attr);
        break;
    case IFLA_QDISC:
        q = sbx_nlattr_str(attr);
        li->qdisc_noop = q && strcmp(q, "noop") == 0;
        break;
    default:
        break;
    }
}

static void
parse_link(struct link_info *li, const struct nlmsghdr *nlh)
{
    const struct ifinfomsg *ifm = sbx_nlmsg_payload(nlh);
    *li = (struct link_info){.brport_state = -1};
    if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifm)))
        return;
    li->index = ifm->ifi_index;
    li->up = !!(ifm->ifi_flags & IFF_UP);
    size_t len;
    size_t rest;
    const struct nlattr *a;
    const void *attrs = sbx_nlmsg_attrs(nlh, sizeof(*ifm), &len);
    sbx_nlattr_for_each(a, attrs, len, rest) link_attr(li, a);
}

static int
link_get_cb(const struct nlmsghdr *nlh, void *data)
{
    if (nlh->nlmsg_type == RTM_NEWLINK)
        parse_link(data, nlh);
    return 0;
}

int
sbx_nl_link_get(struct sbx_nl *nl, const char *name, int *index, int *up, char kind[16])
{
    char buf[256];
    struct link_info li = {0};
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, 0, 0);
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
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
    struct ifinfomsg *ifm = sbx_nlmsg_payload(nlh);
    if (name)
        sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
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
    const struct rtmsg *rtm = sbx_nlmsg_payload(nlh);
    const struct nlattr *attr;
    size_t len;
    size_t rest;
    uint32_t oif;
    if (nlh->nlmsg_type != RTM_NEWROUTE || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(*rtm)) ||
        rtm->rtm_dst_len != 0 || rtm->rtm_table != RT_TABLE_MAIN || rtm->rtm_type != RTN_UNICAST ||
        d->oif > 0)
        return 0;
    const void *attrs = sbx_nlmsg_attrs(nlh, sizeof(*rtm), &len);
    sbx_nlattr_for_each(attr, attrs, len, rest)
    {
        if (sbx_nlattr_type(attr) == RTA_OIF && sbx_nlattr_len(attr) == 4 &&
            sbx_nlattr_u32(attr, &oif))
            d->oif = (int)oif;
    }
    return 0;
}

int
sbx_nl_uplink_mtu(struct sbx_nl *nl, int *mtu)
{
    char buf[256];
    struct default_route d = {0};
    struct link_info li;
    struct nlmsghdr *nlh = sbx_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct rtmsg *rtm = sbx_nlmsg_put_extra(nlh, sizeof(*rtm));
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
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
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
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_link_set_group(struct sbx_nl *nl, const char *name, uint32_t group)
{
    char buf[256];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, 0, 0);
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
    sbx_nlattr_put_u32(nlh, IFLA_GROUP, group);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_link_set_master(struct sbx_nl *nl, const char *name, int master)
{
    char buf[256];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_NEWLINK, 0, 1);
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
    sbx_nlattr_put_u32(nlh, IFLA_MASTER, (uint32_t)master);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_link_del(struct sbx_nl *nl, const char *name)
{
    char buf[256];
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_DELLINK, 0, 0);
    sbx_nlattr_put_strz(nlh, IFLA_IFNAME, name);
    return sbx_nl_talk(nl, nlh, NULL, NULL);
}

int
sbx_nl_addr_add(struct sbx_nl *nl, int ifindex, uint32_t addr, int prefix)
{
    char buf[256];
    uint32_t a = htonl(addr);
    uint32_t brd = htonl(addr | ~(~0U << (32 - prefix)));
    struct nlmsghdr *nlh = sbx_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    struct ifaddrmsg *ifa = sbx_nlmsg_put_extra(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)prefix;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = (unsigned)ifindex;
    sbx_nlattr_put_u32(nlh, IFA_LOCAL, a);
    sbx_nlattr_put_u32(nlh, IFA_ADDRESS, a);
    sbx_nlattr_put_u32(nlh, IFA_BROADCAST, brd);
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
    const struct ifaddrmsg *ifa = sbx_nlmsg_payload(nlh);
    const struct nlattr *attr;
    size_t len;
    size_t rest;
    uint32_t addr;
    if (nlh->nlmsg_type != RTM_NEWADDR || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)) ||
        (int)ifa->ifa_index != q->ifindex || ifa->ifa_prefixlen != q->prefix)
        return 0;
    const void *attrs = sbx_nlmsg_attrs(nlh, sizeof(*ifa), &len);
    sbx_nlattr_for_each(attr, attrs, len, rest)
    {
        if (sbx_nlattr_type(attr) == IFA_LOCAL && sbx_nlattr_len(attr) == 4 &&
            sbx_nlattr_u32(attr, &addr) && addr == q->addr)
            q->found = 1;
    }
    return 0;
}

int
sbx_nl_addr_has(struct sbx_nl *nl, int ifindex, uint32_t addr, int prefix)
{
    char buf[256];
    struct addr_query q = {.ifindex = ifindex, .addr = htonl(addr), .prefix = prefix};
    struct nlmsghdr *nlh = sbx_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETADDR;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    struct ifaddrmsg *ifa = sbx_nlmsg_put_extra(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    /* The kernel dumps one device's addresses, not every device's (a dump walks all the
     * host's devices, one veth per sandbox), when the request is strictly checked
     * (Linux >= 4.20; an older kernel ignores the option and the index, and addr_cb filters). */
    int one = 1;
    if (setsockopt(nl->fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one) == 0)
        ifa->ifa_index = (uint32_t)ifindex;
    int r = sbx_nl_talk(nl, nlh, addr_cb, &q);
    if (ifa->ifa_index) {
        int zero = 0;
        (void)setsockopt(nl->fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &zero, sizeof zero);
    }
    return r < 0 ? r : q.found;
}

int
sbx_nl_route_add_default(struct sbx_nl *nl, int ifindex, uint32_t gateway)
{
    char buf[256];
    struct nlmsghdr *nlh = sbx_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    struct rtmsg *rtm = sbx_nlmsg_put_extra(nlh, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_STATIC;
    rtm->rtm_scope = RT_SCOPE_UNIVERSE;
    rtm->rtm_type = RTN_UNICAST;
    sbx_nlattr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
    sbx_nlattr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
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
        return 0;
    parse_link(&li, nlh);
    if (l->master > 0 && li.master != l->master)
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct link_info *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = 1;
            return 0;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = li;
    return 0;
}

int
sbx_nl_link_foreach(struct sbx_nl *nl, int master_index, sbx_nl_link_fn fn, void *payload)
{
    char buf[256];
    struct link_list l = {.master = master_index};
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, NLM_F_DUMP, 0);
    nlh->nlmsg_flags &= (uint16_t)~NLM_F_ACK;
    if (master_index > 0)
        sbx_nlattr_put_u32(nlh, IFLA_MASTER, (uint32_t)master_index); /* kernel-side filter */
    int r = sbx_nl_talk(nl, nlh, link_dump_cb, &l);
    if (r == 0 && l.oom)
        r = -ENOMEM;
    /* Callbacks run after the dump so that they may use the socket themselves. */
    for (size_t i = 0; r == 0 && i < l.n; i++)
        r = fn(l.v[i].name, l.v[i].index, payload);
    free(l.v);
    return r;
}

int
sbx_nl_links(struct sbx_nl *nl, struct sbx_nl_link **out, size_t *n)
{
    char buf[256];
    struct link_list l = {0};
    struct nlmsghdr *nlh = put_link_msg(buf, RTM_GETLINK, NLM_F_DUMP, 0);
    nlh->nlmsg_flags &= (uint16_t)~NLM_F_ACK;
    int r = sbx_nl_talk(nl, nlh, link_dump_cb, &l);
    struct sbx_nl_link *v = r == 0 && !l.oom ? calloc(l.n + 1, sizeof *v) : NULL;
    for (size_t i = 0; v && i < l.n; i++) {
        (void)snprintf(v[i].name, sizeof v[i].name, "%s", l.v[i].name);
        (void)snprintf(v[i].kind, sizeof v[i].kind, "%s", l.v[i].kind);
        v[i].index = l.v[i].index;
        v[i].master = l.v[i].master;
    }
    free(l.v);
    if (!v)
        return r < 0 ? r : -ENOMEM;
    *out = v;
    *n = l.n;
    return 0;
}

static int
gen_cb(const struct nlmsghdr *nlh, void *data)
{
    const struct nlattr *attr;
    size_t len;
    size_t rest;
    uint32_t v;
    const void *attrs = sbx_nlmsg_attrs(nlh, sizeof(struct nfgenmsg), &len);
    if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nfgenmsg)))
        return 0;
    sbx_nlattr_for_each(attr, attrs, len, rest)
    {
        if (sbx_nlattr_type(attr) == NFTA_GEN_ID && sbx_nlattr_len(attr) == 4 &&
            sbx_nlattr_u32(attr, &v))
            *(uint32_t *)data = ntohl(v);
    }
    return 0;
}

int
sbx_nl_nft_genid(uint32_t *out)
{
    char buf[64];
    struct sbx_nl nl;
    int r = sbx_nl_open_netfilter(&nl);
    if (r < 0)
        return r;
    struct nlmsghdr *nlh = sbx_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    struct nfgenmsg *nfg = sbx_nlmsg_put_extra(nlh, sizeof(*nfg));
    nfg->nfgen_family = AF_UNSPEC;
    nfg->version = NFNETLINK_V0;
    *out = 0;
    r = sbx_nl_talk(&nl, nlh, gen_cb, out);
    sbx_nl_close(&nl);
    return r;
}
