/*
 * gc.c - crash cleanup and listing of the leases of a bridge network.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/ipam.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "net/nl.h"

struct dead {
    uint32_t addr;
    char id[130];
};

struct gc_scan {
    int (*alive)(const char *sandbox_id, void *payload);
    void *payload;
    struct dead *v;
    size_t n, cap;
};

static int
collect_dead(uint32_t addr, const char *id, void *payload)
{
    struct gc_scan *s = payload;
    if (s->alive(id, s->payload))
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct dead *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -SBX_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].addr = addr;
    (void)snprintf(s->v[s->n].id, sizeof(s->v[s->n].id), "%s", id);
    s->n++;
    return 0;
}

/* A bridge port named like one of our veths whose address has no lease: left by a crash. */
static int
drop_orphan_port(const char *name, int index, void *payload)
{
    struct sbx_nl *nl = ((void **)payload)[0];
    struct sbx_net *n = ((void **)payload)[1];
    unsigned addr = 0;
    char expect[16];
    char leased[16];
    char owner[160];
    (void)index;
    if (sscanf(name, "vsbx%8x", &addr) != 1)
        return 0;
    sbx_net_host_ifname(expect, addr);
    sbx_net_addr_str(leased, addr);
    if (strcmp(expect, name) != 0 ||
        readlinkat(n->ipam.leases_fd, leased, owner, sizeof(owner)) >= 0)
        return 0;
    int r = sbx_nl_link_del(nl, name);
    return r == -ENODEV ? 0 : r;
}

static int
release_dead(struct sbx_net *n, struct sbx_nl *nl, const struct gc_scan *s, sbx_error **err)
{
    for (size_t i = 0; i < s->n; i++) {
        int r = sbx_net_release_addr(n, nl, s->v[i].addr, s->v[i].id, err);
        if (r < 0)
            return r;
    }
    return 0;
}

struct our_bridges {
    char prefix[16]; /* of our leaves' names */
    int index[SBX_NET_MAX_LEAVES + 1];
    size_t n;
};

static int
collect_leaf(const char *name, int index, void *payload)
{
    struct our_bridges *b = payload;
    size_t len = strlen(b->prefix);
    if (strncmp(name, b->prefix, len) == 0 && name[len] >= '1' && name[len] <= '9' &&
        b->n < SBX_NET_MAX_LEAVES + 1)
        b->index[b->n++] = index;
    return 0;
}

/* Ports named like our veths on the bridge or one of its leaves, whose address has no lease. */
static int
gc_ports(struct sbx_net *n, struct sbx_nl *nl, sbx_error **err)
{
    int master = 0;
    void *ctx[2] = {nl, n};
    struct our_bridges *b = calloc(1, sizeof *b);
    if (!b)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "gc");
    sbx_net_leaf_prefix(b->prefix, n->bridge);
    int r = sbx_nl_link_get(nl, n->bridge, &master, NULL, NULL);
    if (r == 0) {
        b->index[b->n++] = master;
        r = sbx_nl_link_foreach(nl, 0, collect_leaf, b);
    }
    for (size_t i = 0; r == 0 && i < b->n; i++)
        r = sbx_nl_link_foreach(nl, b->index[i], drop_orphan_port, ctx);
    free(b);
    if (r == -ENODEV)
        return 0;
    return r < 0 ? sbx_error_set(err, SBX_EGENERIC, -r, "remove orphaned veths") : 0;
}

int
sbx_net_gc(struct sbx_net *n, int (*alive)(const char *sandbox_id, void *payload), void *payload,
           sbx_error **err)
{
    struct gc_scan s = {.alive = alive, .payload = payload};
    struct sbx_nl nl;
    int r = sbx_ipam_foreach(&n->ipam, collect_dead, &s, err);
    if (r == -SBX_ENOMEM)
        r = sbx_error_set(err, SBX_ENOMEM, ENOMEM, "gc");
    if (r == 0 && (r = sbx_nl_open(&nl, -1)) < 0)
        r = sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    else if (r == 0) {
        r = release_dead(n, &nl, &s, err);
        if (r == 0)
            r = gc_ports(n, &nl, err);
        sbx_nl_close(&nl);
    }
    if (r == 0)
        r = sbx_ipam_prune_ids(&n->ipam, err);
    if (r == 0 && (r = sbx_net_gc_leaves(n, err)) > 0)
        r = 0;
    free(s.v);
    return r < 0 ? sbx_error_wrap(err, "gc of bridge network `%s`", n->bridge) : (int)s.n;
}

struct list_ctx {
    const struct sbx_net *n;
    int (*fn)(const struct sbx_net_lease *lease, const char *sandbox_id, void *payload);
    void *payload;
};

static int
visit_lease(uint32_t addr, const char *id, void *payload)
{
    const struct list_ctx *c = payload;
    struct sbx_net_lease l;
    sbx_net_fill_lease(&l, c->n, addr);
    return c->fn(&l, id, c->payload);
}

int
sbx_net_foreach_lease(struct sbx_net *n,
                      int (*fn)(const struct sbx_net_lease *lease, const char *sandbox_id,
                                void *payload),
                      void *payload, sbx_error **err)
{
    struct list_ctx c = {.n = n, .fn = fn, .payload = payload};
    return sbx_ipam_foreach(&n->ipam, visit_lease, &c, err);
}

struct stale_scan {
    struct sbx_net *n;
    struct sbx_nl *nl;
    time_t cutoff;
    struct gc_scan dead;
};

static int
always_dead(const char *id, void *payload)
{
    (void)id;
    (void)payload;
    return 0;
}

static int
collect_stale(uint32_t addr, const char *id, void *payload)
{
    struct stale_scan *s = payload;
    char lease[16];
    char veth[16];
    struct stat st;
    int index = 0;
    sbx_net_addr_str(lease, addr);
    sbx_net_host_ifname(veth, addr);
    if (fstatat(s->n->ipam.leases_fd, lease, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        st.st_mtime > s->cutoff || sbx_nl_link_get(s->nl, veth, &index, NULL, NULL) != -ENODEV)
        return 0;
    return collect_dead(addr, id, &s->dead);
}

int
sbx_net_gc_stale(struct sbx_net *n, int min_age_s, sbx_error **err)
{
    struct sbx_nl nl;
    int r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    struct stale_scan s = {.n = n, .nl = &nl, .cutoff = time(NULL) - min_age_s};
    s.dead.alive = always_dead;
    r = sbx_ipam_foreach(&n->ipam, collect_stale, &s, err);
    if (r == -SBX_ENOMEM)
        r = sbx_error_set(err, SBX_ENOMEM, ENOMEM, "gc");
    if (r == 0)
        r = release_dead(n, &nl, &s.dead, err);
    if (r == 0)
        r = gc_ports(n, &nl, err);
    sbx_nl_close(&nl);
    if (r == 0)
        r = sbx_ipam_prune_ids(&n->ipam, err);
    if (r == 0 && (r = sbx_net_gc_leaves(n, err)) > 0)
        r = 0;
    free(s.dead.v);
    return r < 0 ? sbx_error_wrap(err, "gc of bridge network `%s`", n->bridge) : (int)s.dead.n;
}
