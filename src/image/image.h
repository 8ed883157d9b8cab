/*
 * image.h - the local OCI image store: pull from a registry, import archives, list, remove, and
 * resolve a name to the unpacked layers and config the runtime needs.
 *
 * Store layout under root (default /var/lib/sbx/images):
 *   blobs/sha256/<hex>     digest-verified blobs (manifests, configs, compressed layers)
 *   layers/sha256/<hex>/   each layer unpacked once (overlayfs form), keyed by its blob digest
 *   index.json             image names -> manifest digest (written atomically)
 *   pins/<owner>           manifest digests in use by sandboxes (kept by garbage collection)
 *   lock                   flock: pulls/imports/pins shared, rm + garbage collection exclusive
 *   tmp/                   partial downloads and unpacks (never look complete)
 *
 * All functions are thread-safe for distinct stores; one store may be used by several threads
 * (the on-disk state is protected by file locks, the struct is read-only after open).
 */
#ifndef SBX_IMAGE_IMAGE_H
#define SBX_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"

struct sbx_image_store;

/* The name of the runtime's built-in image; never stored here. */
#define SBX_IMAGE_HOST "host"

/* Where a pull is, for a progress display: one blob (the config, then each layer) at a time. */
enum sbx_image_blob_phase {
    SBX_IMAGE_BLOB_CACHED,      /* already in the store: not fetched */
    SBX_IMAGE_BLOB_DOWNLOADING, /* done of total bytes so far (called as bytes arrive) */
    SBX_IMAGE_BLOB_DONE,        /* fetched and verified */
};

struct sbx_image_progress {
    const char *digest; /* "sha256:..." */
    bool is_config;     /* the image config (index -1), not a layer */
    int index;          /* layer index, 0 = bottom */
    int n_layers;
    enum sbx_image_blob_phase phase;
    uint64_t done;
    uint64_t total;
};

struct sbx_image_pull_opts {
    const char *username; /* NULL: anonymous (a Bearer token is still fetched when asked) */
    const char *password;
    bool insecure;        /* plain HTTP (always for localhost / 127.0.0.1 / ::1) */
    const char *platform; /* "os/arch[/variant]"; NULL: linux/<host arch> */
    /* Optional: told about every blob as the pull goes (no I/O of its own expected). */
    void (*progress)(const struct sbx_image_progress *p, void *arg);
    void *progress_arg;
};

/* A resolved image: what the runtime needs to build a rootfs and the first process. */
struct sbx_image {
    char *digest;  /* manifest digest "sha256:..." */
    char **layers; /* absolute unpacked layer dirs, bottom layer first */
    size_t n_layers;
    char **env;        /* "K=V", NULL-terminated (never NULL itself) */
    char **entrypoint; /* NULL-terminated, or NULL when unset */
    char **cmd;        /* NULL-terminated, or NULL when unset */
    char *workdir;     /* NULL when unset */
    char *user;        /* NULL when unset */
};

/* One line of `sbx image ls`. */
struct sbx_image_info {
    char *name;    /* canonical reference ("registry/repo:tag" or "registry/repo@sha256:...") */
    char *digest;  /* manifest digest */
    uint64_t size; /* config + layer blob sizes (compressed, as stored) */
    char *created; /* config "created" (RFC 3339) or NULL */
};

/* Open (creating the directories if needed) the store at root. */
int sbx_image_store_open(struct sbx_image_store **out, const char *root, sbx_error **err);
void sbx_image_store_close(struct sbx_image_store *s);

/* Pull ref from its registry, unpack its layers and name it. *out_digest (optional, caller
 * frees) is the stored manifest digest. Blobs already in the store are not downloaded. */
int sbx_image_pull(struct sbx_image_store *s, const char *ref,
                   const struct sbx_image_pull_opts *opts, char **out_digest, sbx_error **err);

/* Import an OCI image layout tar or a `docker save` tar. tag (optional) names the image;
 * without it the name recorded in the archive is used. */
int sbx_image_import(struct sbx_image_store *s, const char *path, const char *tag,
                     char **out_digest, sbx_error **err);

/* All named images, sorted by name. Free with sbx_image_info_free. */
int sbx_image_list(struct sbx_image_info **out, size_t *n_out, struct sbx_image_store *s,
                   sbx_error **err);
void sbx_image_info_free(struct sbx_image_info *v, size_t n);

/* Remove the name ref, then garbage-collect blobs and layers no image uses any more. */
int sbx_image_remove(struct sbx_image_store *s, const char *ref, sbx_error **err);

/* Garbage-collect blobs and layers that no named or pinned image uses (waits for running
 * pulls and imports). sbx_image_remove does this itself. */
int sbx_image_gc(struct sbx_image_store *s, sbx_error **err);

/* Pin the image with manifest digest for owner (a sandbox id: [A-Za-z0-9_.-], at most 128):
 * garbage collection keeps its blobs and layers even after its name is removed or re-pointed.
 * Fails with SBX_ENOTFOUND when the image is no longer in the store (then do not mount it).
 * One pin per owner (a new one replaces it); the pin is a file, so it survives restarts. */
int sbx_image_pin(struct sbx_image_store *s, const char *owner, const char *digest,
                  sbx_error **err);
/* Drop owner's pin (missing is fine). The space is reclaimed by the next gc or rm. */
int sbx_image_unpin(struct sbx_image_store *s, const char *owner, sbx_error **err);

/* Look ref up locally (never the network): a name as given to pull (normalised the same way)
 * or a manifest digest (full, or a unique prefix of at least 6 hex digits). */
int sbx_image_resolve(struct sbx_image **out, struct sbx_image_store *s, const char *ref,
                      sbx_error **err);
void sbx_image_free(struct sbx_image *img);

/* ---- commit and export (commit.c) ---- */

/* Write dir, an overlayfs upper dir (a sandbox's writable layer: the caller keeps it from
 * changing meanwhile), to out_fd as an uncompressed OCI layer tar: overlay whiteouts become
 * `.wh.` entries, opaque directories get `.wh..wh..opq`, only user.* and security.capability
 * xattrs are kept, symlinks are never followed. *diff_id (caller frees): the tar's sha256. */
int sbx_image_layer_write(const char *dir, int out_fd, char **diff_id, uint64_t *size,
                          sbx_error **err);

struct sbx_image_commit_opts {
    const char *base;    /* manifest digest of the image the layer goes on */
    int layer_fd;        /* the layer tar (sbx_image_layer_write), read from its start */
    const char *diff_id; /* its sha256 */
    const char *name;    /* the new image's name */
    const char *comment; /* its history line (created_by) */
    json_t *labels;      /* added to the config's Labels (string values), or NULL */
};

/* A new image `name`: base's layers plus the layer (stored gzip-compressed), base's config
 * with the layer added. *out_digest (optional): the new manifest's digest. */
int sbx_image_commit(struct sbx_image_store *s, const struct sbx_image_commit_opts *o,
                     char **out_digest, sbx_error **err);

/* Write image ref to out_fd as a tar that is an OCI image layout (oci-layout, index.json,
 * blobs/) and a `docker save` archive (manifest.json) at once: `docker load`, podman, skopeo
 * and sbx_image_import all read it. */
int sbx_image_export(struct sbx_image_store *s, const char *ref, int out_fd, sbx_error **err);

/* The config's Labels of image ref (an object, maybe empty; caller owns it). */
int sbx_image_labels(struct sbx_image_store *s, const char *ref, json_t **out, sbx_error **err);

/* "<state_dir>/images", or the default root when state_dir is NULL. Caller frees. */
char *sbx_image_default_root(const char *state_dir);

#endif
