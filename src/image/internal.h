/*
 * internal.h - shared pieces of the image module (not for other modules).
 */
#ifndef SBX_IMAGE_INTERNAL_H
#define SBX_IMAGE_INTERNAL_H

#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "image/image.h"

/* ---- references (ref.c) ---- */

#define SBX_IMAGE_DEFAULT_REGISTRY "docker.io"

struct sbx_image_ref {
    char *registry; /* "docker.io", "127.0.0.1:5000", ... */
    char *repo;     /* "library/busybox" */
    char *tag;      /* NULL when only a digest was given */
    char *digest;   /* "sha256:<64 hex>" or NULL */
};

/* Parse with Docker's normalisation (no registry: docker.io; docker.io single name: library/;
 * no tag and no digest: latest). */
int sbx_image_ref_parse(struct sbx_image_ref *out, const char *s, sbx_error **err);
void sbx_image_ref_clear(struct sbx_image_ref *r);
/* "registry/repo:tag", "registry/repo@digest" (a digest wins over a tag). Caller frees. */
char *sbx_image_ref_string(const struct sbx_image_ref *r);
/* True when registry ("host[:port]") is a loopback host, reached over plain HTTP. */
bool sbx_image_registry_is_loopback(const char *registry);
/* True for "sha256:" followed by exactly 64 lowercase hex digits. */
bool sbx_image_digest_valid(const char *d);

/* ---- blobs (blob.c) ---- */

struct sbx_image_store {
    char *root;
    char *blobs;  /* root/blobs/sha256 */
    char *layers; /* root/layers/sha256 */
    char *tmp;    /* root/tmp */
    char *index;  /* root/index.json */
    char *lock;   /* root/lock */
    char *pins;   /* root/pins */
};

/* A blob being written: temp file + running sha256. */
struct sbx_blob_writer {
    int fd;
    char *tmp_path;
    crypto_hash_sha256_state sha;
    uint64_t size;
    char *expect; /* expected digest or NULL (computed) */
    uint64_t next_log;
};

char *sbx_image_blob_path(const struct sbx_image_store *s, const char *digest);
bool sbx_image_blob_exists(const struct sbx_image_store *s, const char *digest);
int sbx_blob_writer_open(struct sbx_blob_writer *w, const struct sbx_image_store *s,
                         const char *expect, sbx_error **err);
int sbx_blob_writer_write(struct sbx_blob_writer *w, const void *data, size_t n, sbx_error **err);
/* Verify (EIO on mismatch), fsync and rename into place. *out_digest optional. */
int sbx_blob_writer_commit(struct sbx_blob_writer *w, const struct sbx_image_store *s,
                           char **out_digest, sbx_error **err);
/* Drop the temp file (safe after commit and on a zeroed/failed writer). */
void sbx_blob_writer_abort(struct sbx_blob_writer *w);
/* Store an in-memory blob (manifests); *out_digest optional. */
int sbx_image_blob_put(const struct sbx_image_store *s, const void *data, size_t n,
                       const char *expect, char **out_digest, sbx_error **err);
/* Read a small blob (JSON) into memory, re-verifying its digest. */
int sbx_image_blob_read(const struct sbx_image_store *s, const char *digest, char **out,
                        size_t *len, sbx_error **err);
/* "sha256:<hex>" of data. Caller frees. */
char *sbx_image_sha256(const void *data, size_t n);

/* ---- layers (unpack.c) ---- */

/* Unpack the layer tar (gzip, zstd or plain) read from tar_fd into the empty directory dir,
 * converting OCI whiteouts to overlayfs ones. Never writes outside dir (see unpack.c). */
int sbx_image_unpack(const char *dir, int tar_fd, sbx_error **err);
/* The layer dir for a blob digest. Caller frees. */
char *sbx_image_layer_path(const struct sbx_image_store *s, const char *digest);
/* Unpack the stored blob once (temp dir + rename: first unpacker wins). */
int sbx_image_layer_ensure(const struct sbx_image_store *s, const char *digest, sbx_error **err);

/* ---- manifests (manifest.c) ---- */

#define SBX_MT_OCI_INDEX      "application/vnd.oci.image.index.v1+json"
#define SBX_MT_OCI_MANIFEST   "application/vnd.oci.image.manifest.v1+json"
#define SBX_MT_DOCKER_LIST    "application/vnd.docker.distribution.manifest.list.v2+json"
#define SBX_MT_DOCKER_MANIFST "application/vnd.docker.distribution.manifest.v2+json"
#define SBX_MT_OCI_CONFIG     "application/vnd.oci.image.config.v1+json"

struct sbx_image_desc {
    char *media_type;
    char *digest;
    uint64_t size;
};

struct sbx_image_manifest {
    struct sbx_image_desc config;
    struct sbx_image_desc *layers;
    size_t n_layers;
};

/* True when the JSON document (with an optional Content-Type) is an index / manifest list. */
bool sbx_image_is_index(json_t *doc, const char *content_type);
/* Choose the manifest for platform ("os/arch[/variant]", NULL: linux/<host arch>). */
int sbx_image_index_select(json_t *index, const char *platform, char **out_digest, sbx_error **err);
int sbx_image_manifest_parse(struct sbx_image_manifest *out, const char *json, size_t len,
                             sbx_error **err);
void sbx_image_manifest_clear(struct sbx_image_manifest *m);
/* Known layer media types (tar, tar+gzip, tar+zstd, Docker's rootfs.diff.tar.gzip). */
bool sbx_image_layer_type_ok(const char *media_type);
/* Fill the process parts of img (env, entrypoint, cmd, workdir, user) from config JSON. */
int sbx_image_config_apply(struct sbx_image *img, const char *json, size_t len, sbx_error **err);
/* "linux/amd64"-style default for this machine. */
const char *sbx_image_host_arch(void);

/* ---- store (store.c) ---- */

/* Hold the store lock (shared for pull/import, exclusive for gc). Returns the fd. */
int sbx_image_store_lock(const struct sbx_image_store *s, bool exclusive, sbx_error **err);
/* index.json as JSON ({"version": 1, "images": {NAME: DIGEST}}); an empty one when absent. */
int sbx_image_index_load(json_t **out, const struct sbx_image_store *s, sbx_error **err);
/* Read-modify-write of the index under index.lock: name -> digest, or remove name when digest
 * is NULL. */
int sbx_image_index_update(const struct sbx_image_store *s, const char *name, const char *digest,
                           sbx_error **err);
/* The manifest digest for ref (a normalised name or a unique digest prefix) in the index's
 * "images" object; *out_name (optional) is set only when ref matched a name. */
int sbx_image_index_lookup(char **out_digest, char **out_name, json_t *images, const char *ref,
                           sbx_error **err);
/* Read and parse a stored manifest. */
int sbx_image_manifest_load(struct sbx_image_manifest *m, const struct sbx_image_store *s,
                            const char *digest, sbx_error **err);
/* The manifest (already stored) becomes image `name`: unpack its layers, then record it. */
int sbx_image_store_commit(struct sbx_image_store *s, const char *name, const char *manifest_digest,
                           sbx_error **err);

#endif
