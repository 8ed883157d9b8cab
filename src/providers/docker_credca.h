/*
 * docker_credca.h - the credential proxy's HTTPS on the docker provider: the image's CA bundle,
 * read through the engine's API, plus the sandbox's CA (credca.h), to bind into its container
 * (docker_credca.c).
 */
#ifndef SBX_PROVIDERS_DOCKER_CREDCA_H
#define SBX_PROVIDERS_DOCKER_CREDCA_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "providers/docker_api.h"

struct sbx_credvault;

struct sbx_docker_credca {
    struct sbx_docker *api;
    struct sbx_credvault *vault;
    const char *state_dir;
    const char *id;    /* the sandbox */
    const char *image; /* its image reference (present in the engine) */
};

/* Read the image's SBX_CREDCA_BUNDLE (symlinks resolved by the engine, inside the image), make
 * the sandbox's CA if it has none and write the bundle to bind (credca.h): its host path in
 * bundle, or "" when the image has no bundle (then no CA is made and its HTTPS is spliced). */
int sbx_docker_credca_prepare(const struct sbx_docker_credca *c, char bundle[4096],
                              sbx_error **err);

/* ---- pure helpers (unit tested) ---- */

/* The first entry of an archive the engine answered, read by libarchive (ustar, pax, GNU). */
struct sbx_docker_tar_entry {
    char type;  /* '0': a regular file, '2': a symlink, anything else: not taken */
    char *data; /* a regular file's bytes (size of them) */
    size_t size;
    char link[1024]; /* a symlink's target */
};
/* false: no entry, one cut short (its size beyond the archive), a regular file larger than
 * SBX_CREDCA_BUNDLE_MAX or a link target of 1 KiB or more. Free with
 * sbx_docker_tar_entry_free (also after false). */
bool sbx_docker_tar_first(const char *buf, size_t len, struct sbx_docker_tar_entry *e);
void sbx_docker_tar_entry_free(struct sbx_docker_tar_entry *e);
/* The path a symlink at from with target link names (lexically; the engine resolves it inside
 * the image); NULL when it is not one to follow (characters beyond [A-Za-z0-9._/+_-], longer
 * than 1 KiB). New string. */
char *sbx_docker_link_next(const char *from, const char *link);

#endif
