/*
 * native.h - what a native-sandbox user (`sbx run`, the server's native provider) plugs into
 * the runtime: bridge networking from src/net and OCI images from src/image.
 *
 * The runtime core (runtime.h) knows neither module; it takes lower layer dirs and a
 * struct sbx_rt_net_ops. This file builds both from the real modules.
 */
#ifndef SBX_RUNTIME_NATIVE_H
#define SBX_RUNTIME_NATIVE_H

#include "common/error.h"
#include "image/image.h"
#include "net/net.h"
#include "runtime/runtime.h"

/* Bridge networking, opened lazily: the host is only touched (bridge, NAT) on the first
 * attach, and detach/gc of an old lease works without setting anything up. Thread-safe. */
struct sbx_native_bridge;

int sbx_native_bridge_new(struct sbx_native_bridge **out, const char *state_dir,
                          sbx_error **err); /* state_dir: reserved (leases are host-wide) */
void sbx_native_bridge_free(struct sbx_native_bridge *b);
/* Another bridge or subnet than the defaults, and the operator's allow-list of addresses
 * sandboxes may reach although isolation blocks them (net.h: sbx_net_allow). Before use. */
int sbx_native_bridge_configure(struct sbx_native_bridge *b, const char *bridge, const char *subnet,
                                const char *const *allow, size_t n_allow, sbx_error **err);
/* Sandboxes per leaf bridge (net.h: sbx_net_config.leaf_size; 0: the default). Before use. */
void sbx_native_bridge_set_leaf_size(struct sbx_native_bridge *b, unsigned leaf_size);
/* The device group number of a named network group (net.h: sbx_net_group_id). */
int sbx_native_bridge_group(struct sbx_native_bridge *b, const char *name, uint32_t *group,
                            sbx_error **err);
/* Set the host up (as the first attach would) and say what the bridge is (egress policies). */
int sbx_native_bridge_host(struct sbx_native_bridge *b, struct sbx_net_info *out, sbx_error **err);
/* Fill ops so the runtime calls into b (b must outlive every runtime that uses ops). */
void sbx_native_bridge_ops(struct sbx_rt_net_ops *ops, struct sbx_native_bridge *b);

/* An image resolved for one sandbox: the layers stay pinned (safe from `sbx image rm` and
 * gc) until sbx_native_image_release. */
struct sbx_native_image {
    struct sbx_image_store *store;
    struct sbx_image *img;
    char *owner;             /* pin owner (the sandbox id) */
    const char **layers;     /* borrowed from img, for spec.layers */
    const char *passwd_root; /* the top layer that has etc/passwd, for --user names, or NULL */
};

/* Resolve `ref` in the store under state_dir, pin it for `owner`, and fill spec->layers,
 * image_env and image_workdir (the caller's own settings win). Nothing to do for "host". */
int sbx_native_image_apply(struct sbx_native_image *out, struct sbx_rt_spec *spec,
                           const char *state_dir, const char *ref, const char *owner,
                           sbx_error **err);
/* Drop the pin of `owner` in the store under state_dir (the sandbox is gone). Best effort. */
void sbx_native_image_unpin(const char *state_dir, const char *owner);
/* Unpin (when unpin is true: the sandbox is gone) and free. Safe on a zeroed struct. */
void sbx_native_image_release(struct sbx_native_image *ni, bool unpin);

#endif
