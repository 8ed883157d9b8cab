/*
 * networks.c - the bridge networks sbx made on this host, found for gc (`sbx net gc`, `sbx gc`;
 * docs/network.md "Crash cleanup").
 *
 * A server may run on a bridge of its own (providers.native.bridge), tests and benches make
 * theirs: their leases and leaf bridges outlive a crash as the default bridge's do. They are
 * found two ways: from the lease dirs under the state dir (every sbx_net_open makes
 * <state_dir>/<bridge>/leases), and from the links by the marks only sbx puts there (its name
 * scheme, leaf.c and net.c): a bridge whose ports include its own keep-alive port
 * `<bridge>-kp` or an uplink `usbx<hash of its name>r<k>`, and a leaf `<bridge>.<k>` (a bridge)
 * whose ports include the uplink end `usbx<hash of <bridge>>l<k>` (its bridge may be gone).
 * A bridge without such a mark is never named, so gc never touches a bridge sbx did not make.
 * The links are looked at only for the default state dir: another one (a test's) names its own
 * networks by its lease dirs alone. A leaf `lsbx<hash>.<k>` whose long-named bridge is gone
 * names no network (the hash does not give the name back): sbx_net_gc_orphan_leaves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "net/nl.h"

struct names {
    char (*v)[16];
    size_t n, cap;
};

static int
add_name(struct names *s, const char *name)
{
    if (sbx_net_check_bridge_name(name, NULL) < 0)
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->v[i], name) == 0)
            return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char(*v)[16] = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    (void)snprintf(s->v[s->n++], 16, "%s", name);
    return 0;
}

/* <dir>/<bridge>/leases: a network some sbx_net_open made. */
static int
names_from_state(struct names *s, const char *dir, sbx_error **err)
{
    sbx_autoclosedir DIR *d = opendir(dir);
    struct dirent *e;
    struct stat st;
    char sub[64];
    if (!d)
        return errno == ENOENT ? 0 : sbx_error_set(err, SBX_EGENERIC, errno, "open `%s`", dir);
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) > 15)
            continue;
        (void)snprintf(sub, sizeof sub, "%.15s/leases", e->d_name);
        if (fstatat(dirfd(d), sub, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (add_name(s, e->d_name) < 0)
            return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "bridge networks");
    }
    return 0;
}

/* A port of l[b] (a bridge) is named `name` (prefix: starts with it and is 15 bytes long). */
static bool
has_port(const struct sbx_nl_link *l, size_t n, size_t b, const char *name, bool prefix)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        if (l[i].master != l[b].index)
            continue;
        if (prefix ? strncmp(l[i].name, name, len) == 0 && strlen(l[i].name) == 15
                   : strcmp(l[i].name, name) == 0)
            return true;
    }
    return false;
}

/* l[b] is the bridge of an sbx network: its keep-alive port or an uplink of its own. */
static bool
is_root(const struct sbx_nl_link *l, size_t n, size_t b)
{
    char port[16];
    char peer[16];
    char pre[16];
    char up[24];
    sbx_net_keepalive_names(port, peer, l[b].name);
    sbx_net_uplink_prefix(pre, l[b].name);
    (void)snprintf(up, sizeof up, "%sr", pre); /* the bridge's end of an uplink */
    return has_port(l, n, b, port, false) || has_port(l, n, b, up, true);
}

/* l[b] is leaf k of bridge B (named `B.k`, B short enough for that form) with B's uplink end
 * as a port: B into root. */
static bool
leaf_of(const struct sbx_nl_link *l, size_t n, size_t b, char root[16])
{
    const char *dot = strrchr(l[b].name, '.');
    char *end = NULL;
    if (!dot || dot == l[b].name || dot - l[b].name > 10 || dot[1] < '1' || dot[1] > '9')
        return false;
    unsigned long k = strtoul(dot + 1, &end, 10);
    if (*end || k > SBX_NET_MAX_LEAVES)
        return false;
    (void)snprintf(root, 16, "%.*s", (int)(dot - l[b].name), l[b].name);
    struct sbx_net_leaf_names ln;
    sbx_net_leaf_names(&ln, root, (unsigned)k);
    return strcmp(ln.leaf, l[b].name) == 0 && has_port(l, n, b, ln.leaf_end, false);
}

static int
names_from_links(struct names *s, sbx_error **err)
{
    struct sbx_nl nl;
    struct sbx_nl_link *l = NULL;
    size_t n = 0;
    char root[16];
    int r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    r = sbx_nl_links(&nl, &l, &n);
    sbx_nl_close(&nl);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "list the links");
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (strcmp(l[i].kind, "bridge") != 0)
            continue;
        if (is_root(l, n, i))
            r = add_name(s, l[i].name);
        else if (leaf_of(l, n, i, root))
            r = add_name(s, root);
    }
    free(l);
    return r < 0 ? sbx_error_set(err, SBX_ENOMEM, ENOMEM, "bridge networks") : 0;
}

int
sbx_net_foreach_network(const char *state_dir, int (*fn)(const char *bridge, void *payload),
                        void *payload, sbx_error **err)
{
    struct names s = {0};
    const char *dir = state_dir ? state_dir : SBX_NET_DEFAULT_STATE_DIR;
    int r = names_from_state(&s, dir, err);
    /* The links are the host's, their leases and setup lock in the default dir (where every
     * server and `sbx run` keep them): gc of a network found there under another dir's lock
     * would not exclude the attaches that make its leaves. */
    if (r == 0 && strcmp(dir, SBX_NET_DEFAULT_STATE_DIR) == 0)
        r = names_from_links(&s, err);
    for (size_t i = 0; r == 0 && i < s.n; i++)
        r = fn(s.v[i], payload);
    free(s.v);
    return r;
}

/* ---- leaves of a long-named bridge that is gone ---- */

/* l[b] is a leaf `lsbx<hash>.<k>` (its bridge's name was longer than 10 bytes) whose only port
 * is its uplink end `usbx<hash>l<k>` (the same hash): that end's name into up_leaf. */
static bool
lone_long_leaf(const struct sbx_nl_link *l, size_t n, size_t b, char up_leaf[16])
{
    unsigned h6 = 0;
    unsigned k = 0;
    unsigned h7 = 0;
    unsigned k2 = 0;
    char side = 0;
    char again[32];
    size_t port = n;
    if (strcmp(l[b].kind, "bridge") != 0 || sscanf(l[b].name, "lsbx%6x.%u", &h6, &k) != 2)
        return false;
    (void)snprintf(again, sizeof again, "lsbx%06x.%u", h6, k);
    if (strcmp(again, l[b].name) != 0 || k == 0 || k > SBX_NET_MAX_LEAVES)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (l[i].master != l[b].index)
            continue;
        if (port < n)
            return false; /* a second port: a sandbox is on it */
        port = i;
    }
    if (port == n || strlen(l[port].name) != 15 ||
        sscanf(l[port].name, SBX_NET_UPLINK_PREFIX "%7x%c%3x", &h7, &side, &k2) != 3)
        return false;
    (void)snprintf(again, sizeof again, SBX_NET_UPLINK_PREFIX "%07xl%03x", h6 | (h7 & ~0xffffffU),
                   k);
    if (strcmp(again, l[port].name) != 0 || side != 'l' || k2 != k)
        return false;
    (void)snprintf(up_leaf, 16, "%s", l[port].name);
    return true;
}

/* The uplink's other end, when it is on a bridge: that bridge is there, and a network found by
 * its marks (sbx_net_foreach_network), whose gc holds its lock. */
static bool
root_end_on_bridge(const struct sbx_nl_link *l, size_t n, const char *up_leaf)
{
    char root_end[16];
    (void)snprintf(root_end, sizeof root_end, "%.11sr%s", up_leaf, up_leaf + 12);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(l[i].name, root_end) == 0)
            return l[i].master != 0;
    }
    return false;
}

static int
remove_long_leaf(struct sbx_nl *nl, const char *leaf, const char *up_leaf)
{
    int r = sbx_nl_link_del(nl, up_leaf); /* deletes both ends */
    if (r < 0 && r != -ENODEV)
        return r;
    r = sbx_nl_link_del(nl, leaf);
    return r < 0 && r != -ENODEV ? r : 1;
}

int
sbx_net_gc_orphan_leaves(sbx_error **err)
{
    struct sbx_nl nl;
    struct sbx_nl_link *l = NULL;
    size_t n = 0;
    char up_leaf[16];
    int removed = 0;
    int r = sbx_nl_open(&nl, -1);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "netlink socket");
    r = sbx_nl_links(&nl, &l, &n);
    /* No setup lock: the bridge's name, which names the lock, is not in the leaf's. Safe all
     * the same: an attach makes a leaf only under a bridge that exists, and puts the uplink's
     * other end on that bridge before anything else (leaf.c make_uplink), so a leaf being made
     * or used has either no uplink yet (not matched) or one whose other end is on a bridge
     * (skipped); a leaf with a sandbox has a second port (skipped). */
    for (size_t i = 0; r >= 0 && i < n; i++) {
        if (!lone_long_leaf(l, n, i, up_leaf) || root_end_on_bridge(l, n, up_leaf))
            continue;
        r = remove_long_leaf(&nl, l[i].name, up_leaf);
        removed += r > 0;
    }
    sbx_nl_close(&nl);
    free(l);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "remove leaf bridges whose bridge is gone");
    return removed;
}
