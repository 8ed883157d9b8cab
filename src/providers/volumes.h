/*
 * volumes.h - the native provider's volumes (COMPAT §1.4 `Volume`):
 *
 *   host  a host directory or file, bound into the sandbox; only below a prefix of the
 *         provider's allow-list (providers.native.allowed_host_paths; empty = none), resolved
 *         without following symlinks
 *   pvc   a named volume that sbx manages under <state>/volumes/<claimName>: made on first use
 *         (createIfNotExists), shared by every sandbox that names it, removed with the sandbox
 *         that made it when it asked for deleteOnSandboxTermination (once no live sandbox
 *         uses it)
 *   ossfs not supported here (400 VOLUME::UNSUPPORTED_BACKEND)
 *
 * The shape of each Volume is checked by the API (api.c); this module checks what may be
 * mounted on this host and opens the sources for sbx_rt_create. Thread-safe.
 */
#ifndef SBX_PROVIDERS_VOLUMES_H
#define SBX_PROVIDERS_VOLUMES_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"
#include "runtime/runtime.h"

struct sbx_vols;

/* state_dir: pvcs live in <state_dir>/volumes, live sandboxes have <state_dir>/run/<id>.
 * allowed: the allow-list (array of absolute paths; NULL or empty = no host volume); each
 * prefix must exist (it is resolved once, here). */
int sbx_vols_open(struct sbx_vols **out, const char *state_dir, const json_t *allowed,
                  sbx_error **err);
void sbx_vols_free(struct sbx_vols *v);

/* Check a create request's volumes (shape already checked): <0 with *code the API error code
 * (VOLUME::...) and err saying why. Nothing is created. */
int sbx_vols_check(struct sbx_vols *v, const json_t *volumes, const char **code, sbx_error **err);

/* The mounts of one sandbox, for spec.volumes. */
struct sbx_vols_mounts {
    struct sbx_rt_volume *vols;
    size_t n;
    char **strs; /* owned src/dst strings */
    size_t n_strs;
};

/* Resolve the volumes of sandbox `id` for sbx_rt_create: pvcs made as asked, the sandbox
 * registered as their user, every source opened (O_PATH) without following symlinks. The
 * sandbox counts as a live user from here on (sbx_vols_started hands that over to its runtime
 * record). On failure nothing is left open. */
int sbx_vols_attach(struct sbx_vols *v, const char *id, const json_t *volumes,
                    struct sbx_vols_mounts *out, sbx_error **err);
/* sbx_rt_create has returned (either way): close the sources. */
void sbx_vols_started(struct sbx_vols *v, const char *id, struct sbx_vols_mounts *m);
/* Sandbox `id` is gone: drop its registrations and remove the pvcs it made with
 * deleteOnSandboxTermination, now or (when another live sandbox uses one) when the last
 * user goes. Idempotent. */
void sbx_vols_detach(struct sbx_vols *v, const char *id, const json_t *volumes);

#endif
