/*
 * native.c - bridge networking and OCI images plugged into the runtime (see native.h).
 */
#include "runtime/native.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "net/net.h"

struct sbx_native_bridge {
    pthread_mutex_t lock;
    char *net_dir;
    char *bridge;       /* NULL: the default */
    char *subnet;       /* NULL: the default */
    unsigned leaf_size; /* 0: the default */
    char **allow;       /* the operator's allow-list, applied once the host is set up */
    size_t n_allow;
    struct sbx_net *full;  /* after the first attach: host set up */
    struct sbx_net *state; /* lease state only (detach before any attach) */
};

int
sbx_native_bridge_new(struct sbx_native_bridge **out, const char *state_dir, sbx_error **err)
{
    (void)err;
    (void)state_dir;
    struct sbx_native_bridge *b = sbx_xcalloc(1, sizeof *b);
    pthread_mutex_init(&b->lock, NULL);
    /* Addresses are a machine-wide resource of the bridge, not of one state dir: every sbx on
     * this host shares one lease dir. On /run, because leases die with the veths at reboot. */
    b->net_dir = sbx_xstrdup(SBX_NET_DEFAULT_STATE_DIR);
    *out = b;
    return 0;
}

void
sbx_native_bridge_free(struct sbx_native_bridge *b)
{
    if (!b)
        return;
    sbx_net_close(b->full);
    sbx_net_close(b->state);
    pthread_mutex_destroy(&b->lock);
    free(b->net_dir);
    free(b->bridge);
    free(b->subnet);
    for (size_t i = 0; i < b->n_allow; i++)
        free(b->allow[i]);
    free(b->allow);
    free(b);
}

int
sbx_native_bridge_configure(struct sbx_native_bridge *b, const char *bridge, const char *subnet,
                            const char *const *allow, size_t n_allow, sbx_error **err)
{
    for (size_t i = 0; i < n_allow; i++) {
        if (sbx_net_check_cidr(allow[i], err) < 0)
            return sbx_error_wrap(err, "network allow-list");
    }
    free(b->bridge);
    free(b->subnet);
    b->bridge = bridge ? sbx_xstrdup(bridge) : NULL;
    b->subnet = subnet ? sbx_xstrdup(subnet) : NULL;
    b->allow = sbx_xcalloc(n_allow + 1, sizeof *b->allow);
    for (size_t i = 0; i < n_allow; i++)
        b->allow[i] = sbx_xstrdup(allow[i]);
    b->n_allow = n_allow;
    return 0;
}

void
sbx_native_bridge_set_leaf_size(struct sbx_native_bridge *b, unsigned leaf_size)
{
    b->leaf_size = leaf_size;
}

/* The net handle to use; full=true sets up the host (bridge, NAT) if not done yet (*opened:
 * just now, so the host was checked by this call). */
static struct sbx_net *
bridge_net(struct sbx_native_bridge *b, bool full, bool *opened, sbx_error **err)
{
    struct sbx_net_config cfg = {.state_dir = b->net_dir,
                                 .bridge = b->bridge,
                                 .subnet = b->subnet,
                                 .leaf_size = b->leaf_size};
    pthread_mutex_lock(&b->lock);
    int ret = 0;
    *opened = full && !b->full;
    if (full && !b->full)
        ret = sbx_net_open(&b->full, &cfg, err);
    else if (!full && !b->full && !b->state)
        ret = sbx_net_open_state(&b->state, &cfg, err);
    struct sbx_net *n = b->full ? b->full : b->state;
    pthread_mutex_unlock(&b->lock);
    return ret < 0 ? NULL : n;
}

static int
bridge_attach(void *arg, struct sbx_rt_lease *out, const char *id, int netns_fd, sbx_error **err)
{
    struct sbx_native_bridge *b = arg;
    bool opened = false;
    struct sbx_net *n = bridge_net(b, true, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    /* Cheap (~0.1 ms) re-check: dockerd may have changed the host's rules since the handle was
     * opened (opening it just now checked them: `sbx run` does not pay twice). */
    struct sbx_net_lease l = {0};
    int ret = opened ? 1 : sbx_net_ensure(n, err);
    /* The allow-list lives in the rules: set when they were (re)made. (A setup keeps a set's
     * elements, so this is only the first attach, or one after someone removed our table.) */
    if (ret == 1 && b->n_allow)
        ret = sbx_net_allow(n, (const char *const *)b->allow, b->n_allow, err);
    if (ret >= 0)
        ret = sbx_net_attach(&l, n, id, netns_fd, err);
    if (ret < 0)
        return ret;
    (void)snprintf(out->address, sizeof out->address, "%s/%d", l.addr, l.prefix);
    (void)snprintf(out->gateway, sizeof out->gateway, "%s", l.gateway);
    return 0;
}

/* The runtime detaches a sandbox only once everything in it is dead, so its network namespace
 * is on its way out and the kernel deletes the veth pair with it. Deleting the veth here would
 * wait ~30 ms for the kernel; releasing the lease is enough. Safe because a later attach that
 * gets the same address finds the old veth (same name, from the address) and deletes it first;
 * addresses are picked from a random start, so that is rare anyway. */
static int
bridge_detach(void *arg, const char *id, sbx_error **err)
{
    struct sbx_native_bridge *b = arg;
    bool opened = false;
    struct sbx_net *n = bridge_net(b, false, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    return sbx_net_release(n, id, err);
}

static int
bridge_transfer(void *arg, const char *from_id, const char *to_id, sbx_error **err)
{
    struct sbx_native_bridge *b = arg;
    bool opened = false;
    struct sbx_net *n = bridge_net(b, false, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    return sbx_net_transfer(n, from_id, to_id, err);
}

static int
bridge_set_group(void *arg, const char *id, uint32_t group, sbx_error **err)
{
    struct sbx_native_bridge *b = arg;
    bool opened = false;
    struct sbx_net *n = bridge_net(b, true, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    return sbx_net_set_group(n, id, group, err);
}

int
sbx_native_bridge_group(struct sbx_native_bridge *b, const char *name, uint32_t *group,
                        sbx_error **err)
{
    bool opened = false;
    struct sbx_net *n = bridge_net(b, false, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    return sbx_net_group_id(n, name, group, err);
}

struct lease_visit {
    int (*fn)(const char *sandbox_id, void *payload);
    void *payload;
};

static int
visit_lease(const struct sbx_net_lease *lease, const char *sandbox_id, void *payload)
{
    (void)lease;
    struct lease_visit *v = payload;
    return v->fn(sandbox_id, v->payload);
}

static int
bridge_foreach_lease(void *arg, int (*fn)(const char *sandbox_id, void *payload), void *payload,
                     sbx_error **err)
{
    struct sbx_native_bridge *b = arg;
    bool opened = false;
    struct sbx_net *n = bridge_net(b, false, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    struct lease_visit v = {.fn = fn, .payload = payload};
    return sbx_net_foreach_lease(n, visit_lease, &v, err);
}

/* After the runtime's gc: leaves no sandbox uses any more go, with their uplinks. */
static int
bridge_gc(void *arg, sbx_error **err)
{
    struct sbx_native_bridge *b = arg;
    bool opened = false;
    struct sbx_net *n = bridge_net(b, false, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    int r = sbx_net_gc_leaves(n, err);
    return r < 0 ? sbx_error_wrap(err, "bridge network") : 0;
}

int
sbx_native_bridge_host(struct sbx_native_bridge *b, struct sbx_net_info *out, sbx_error **err)
{
    bool opened = false;
    struct sbx_net *n = bridge_net(b, true, &opened, err);
    if (!n)
        return sbx_error_wrap(err, "bridge network");
    /* as bridge_attach: the allow-list goes in with the rules this open made */
    if (opened && b->n_allow &&
        sbx_net_allow(n, (const char *const *)b->allow, b->n_allow, err) < 0)
        return sbx_error_wrap(err, "bridge network");
    sbx_net_info(n, out);
    return 0;
}

void
sbx_native_bridge_ops(struct sbx_rt_net_ops *ops, struct sbx_native_bridge *b)
{
    ops->net = b;
    ops->attach = bridge_attach;
    ops->detach = bridge_detach;
    ops->transfer = bridge_transfer;
    ops->set_group = bridge_set_group;
    ops->foreach_lease = bridge_foreach_lease;
    ops->gc = bridge_gc;
}

static const char *
find_passwd_root(const struct sbx_image *img)
{
    for (size_t i = img->n_layers; i-- > 0;) {
        sbx_autofree char *p = sbx_xasprintf("%s/etc/passwd", img->layers[i]);
        if (access(p, R_OK) == 0)
            return img->layers[i];
    }
    return NULL;
}

static int
resolve_pinned(struct sbx_native_image *out, const char *state_dir, const char *ref,
               sbx_error **err)
{
    sbx_autofree char *root = sbx_image_default_root(state_dir);
    int ret = sbx_image_store_open(&out->store, root, err);
    if (ret == 0)
        ret = sbx_image_resolve(&out->img, out->store, ref, err); /* names ref when it fails */
    if (ret == 0 && (ret = sbx_image_pin(out->store, out->owner, out->img->digest, err)) < 0)
        (void)sbx_error_wrap(err, "image `%s`", ref);
    return ret;
}

int
sbx_native_image_apply(struct sbx_native_image *out, struct sbx_rt_spec *spec,
                       const char *state_dir, const char *ref, const char *owner, sbx_error **err)
{
    memset(out, 0, sizeof *out);
    if (!ref || strcmp(ref, "host") == 0)
        return 0;
    out->owner = sbx_xstrdup(owner);
    int ret = resolve_pinned(out, state_dir, ref, err);
    if (ret < 0) {
        sbx_native_image_release(out, false);
        return ret;
    }
    out->layers = sbx_xcalloc(out->img->n_layers + 1, sizeof *out->layers);
    for (size_t i = 0; i < out->img->n_layers; i++)
        out->layers[i] = out->img->layers[i];
    spec->layers = out->layers;
    spec->n_layers = out->img->n_layers;
    spec->image_env = out->img->env;
    if (!spec->image_workdir)
        spec->image_workdir = out->img->workdir;
    out->passwd_root = find_passwd_root(out->img);
    return 0;
}

void
sbx_native_image_release(struct sbx_native_image *ni, bool unpin)
{
    if (unpin && ni->store && ni->owner) {
        sbx_autoerror sbx_error *err = NULL;
        (void)sbx_image_unpin(ni->store, ni->owner, &err);
    }
    sbx_image_free(ni->img);
    sbx_image_store_close(ni->store);
    free((void *)ni->layers);
    free(ni->owner);
    memset(ni, 0, sizeof *ni);
}

void
sbx_native_image_unpin(const char *state_dir, const char *owner)
{
    sbx_autofree char *root = sbx_image_default_root(state_dir);
    struct sbx_image_store *store = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (access(root, F_OK) == 0 && sbx_image_store_open(&store, root, &err) == 0)
        (void)sbx_image_unpin(store, owner, &err);
    sbx_image_store_close(store);
}
