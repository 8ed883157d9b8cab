/*
 * commit.c - a sandbox's writable layer as a new image: the overlayfs upper dir written as an OCI
 * layer tar, stacked on the sandbox's image, and an image written out as an archive that both
 * `sbx image import` / `docker load` (manifest.json) and OCI tools (oci-layout) read.
 *
 * The upper dir belongs to a sandbox, so everything in it is attacker-made: names, symlinks,
 * xattrs, hard links. It is read without following any symlink (libarchive's physical mode,
 * no mount crossing), only user.* and security.capability xattrs are carried (trusted.overlay.*
 * is overlayfs' own bookkeeping and would redirect lookups of whoever unpacks it), and only
 * overlay whiteouts (char 0/0) among device nodes are written, as OCI `.wh.` entries. The caller
 * freezes the sandbox for the walk, so nothing changes under it.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define XATTR_OPQ       "trusted.overlay.opaque"
#define MT_OCI_LAYER_GZ "application/vnd.oci.image.layer.v1.tar+gzip"
#define COPY_BUF        (256u << 10)

/* ---- the upper dir -> an uncompressed layer tar ---- */

struct tar_out {
    int fd;
    crypto_hash_sha256_state sha;
    uint64_t size;
    int error; /* errno of a failed write */
};

static la_ssize_t
tar_write_cb(struct archive *a, void *ud, const void *buf, size_t n)
{
    (void)a;
    struct tar_out *o = ud;
    if (sbx_write_all(o->fd, buf, n) < 0) {
        o->error = errno;
        return -1;
    }
    crypto_hash_sha256_update(&o->sha, buf, n);
    o->size += n;
    return (la_ssize_t)n;
}

static int
ar_fail(struct archive *a, sbx_error **err, const char *what, const char *path)
{
    return sbx_error_set(err, SBX_EIO, archive_errno(a), "%s `%s`: %s", what, path,
                         archive_error_string(a) ? archive_error_string(a) : "failed");
}

/* Keep only the xattrs an unpack would set again (unpack.c: user.*, security.capability). */
static void
filter_xattrs(struct archive_entry *e)
{
    struct kept {
        char *name;
        void *val;
        size_t size;
    } kept[32];
    size_t n = 0;
    const char *name;
    const void *val;
    size_t size;
    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK && n < 32) {
        if (strncmp(name, "user.", 5) != 0 && strcmp(name, "security.capability") != 0)
            continue;
        kept[n].name = sbx_xstrdup(name);
        kept[n].val = sbx_xmalloc(size ? size : 1);
        memcpy(kept[n].val, val, size);
        kept[n++].size = size;
    }
    archive_entry_xattr_clear(e);
    for (size_t i = 0; i < n; i++) {
        archive_entry_xattr_add_entry(e, kept[i].name, kept[i].val, kept[i].size);
        free(kept[i].name);
        free(kept[i].val);
    }
}

struct walker {
    struct archive *disk, *out;
    struct archive_entry_linkresolver *links;
    const char *root; /* the upper dir, as given to archive_read_disk_open */
    size_t root_len;
    char *buf;
};

/* The entry's path relative to the layer root ("" for the root itself). */
static const char *
rel_path(const struct walker *w, struct archive_entry *e)
{
    const char *p = archive_entry_pathname(e);
    if (strncmp(p, w->root, w->root_len) != 0)
        return NULL;
    p += w->root_len;
    while (*p == '/')
        p++;
    return p;
}

static int
write_marker(struct walker *w, const char *path, const struct stat *st, sbx_error **err)
{
    struct archive_entry *m = archive_entry_new();
    archive_entry_set_pathname(m, path);
    archive_entry_set_filetype(m, AE_IFREG);
    archive_entry_set_perm(m, 0644);
    archive_entry_set_size(m, 0);
    archive_entry_set_mtime(m, st->st_mtime, 0);
    int r = archive_write_header(w->out, m);
    archive_entry_free(m);
    return r < ARCHIVE_WARN ? ar_fail(w->out, err, "write", path) : 0;
}

/* A char 0/0 whiteout hides a lower file: OCI says ".wh.NAME" in the same directory. */
static int
write_whiteout(struct walker *w, const char *rel, const struct stat *st, sbx_error **err)
{
    const char *slash = strrchr(rel, '/');
    sbx_autofree char *path = slash
                                  ? sbx_xasprintf("%.*s/.wh.%s", (int)(slash - rel), rel, slash + 1)
                                  : sbx_xasprintf(".wh.%s", rel);
    return write_marker(w, path, st, err);
}

/* overlayfs marks a directory that hides everything below it (read with the entry's xattrs,
 * before they are filtered: no second lookup of the path). */
static bool
is_opaque(struct archive_entry *e)
{
    const char *name;
    const void *val;
    size_t size;
    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK) {
        if (strcmp(name, XATTR_OPQ) == 0)
            return size == 1 && *(const char *)val == 'y';
    }
    return false;
}

static int
copy_data(struct walker *w, const char *rel, sbx_error **err)
{
    for (;;) {
        la_ssize_t n = archive_read_data(w->disk, w->buf, COPY_BUF);
        if (n == 0)
            return 0;
        if (n < 0)
            return ar_fail(w->disk, err, "read", rel);
        if (archive_write_data(w->out, w->buf, (size_t)n) != n)
            return ar_fail(w->out, err, "write", rel);
    }
}

static int
write_entry(struct walker *w, struct archive_entry *e, const char *rel, sbx_error **err)
{
    archive_entry_set_pathname(e, rel);
    filter_xattrs(e);
    struct archive_entry *sparse = NULL;
    archive_entry_linkify(w->links, &e, &sparse);
    if (!e)
        return 0;
    if (archive_write_header(w->out, e) < ARCHIVE_WARN)
        return ar_fail(w->out, err, "write", rel);
    if (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0 &&
        !archive_entry_hardlink(e))
        return copy_data(w, rel, err);
    return 0;
}

static int
walk_one(struct walker *w, struct archive_entry *e, sbx_error **err)
{
    const char *rel = rel_path(w, e);
    if (!rel)
        return sbx_error_set(err, SBX_EIO, 0, "unexpected path `%s`", archive_entry_pathname(e));
    const struct stat *st = archive_entry_stat(e);
    sbx_autofree char *relc = sbx_xstrdup(rel);
    if (archive_read_disk_can_descend(w->disk))
        (void)archive_read_disk_descend(w->disk);
    if (!*relc)
        return 0; /* the root: the image's own root directory stays as it is */
    if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0))
        return write_whiteout(w, relc, st, err);
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) || S_ISSOCK(st->st_mode)) {
        sbx_debug("layer: skipping special file `%s`", relc);
        return 0;
    }
    bool opaque = S_ISDIR(st->st_mode) && is_opaque(e);
    int r = write_entry(w, e, relc, err);
    if (r == 0 && opaque) {
        sbx_autofree char *opq = sbx_xasprintf("%s/.wh..wh..opq", relc);
        r = write_marker(w, opq, st, err);
    }
    return r;
}

static int
walk(struct walker *w, sbx_error **err)
{
    struct archive_entry *e = archive_entry_new();
    int ret = 0;
    for (;;) {
        int r = archive_read_next_header2(w->disk, e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            ret = ar_fail(w->disk, err, "read", w->root);
            break;
        }
        if ((ret = walk_one(w, e, err)) < 0)
            break;
    }
    archive_entry_free(e);
    return ret;
}

static int
open_disk(struct walker *w, sbx_error **err)
{
    w->disk = archive_read_disk_new();
    /* Physical: a symlink is archived as a symlink, never followed (the sandbox made it). No
     * uname/gname lookups: ids are numeric, and NSS is not for a server's threads. */
    if (archive_read_disk_set_symlink_physical(w->disk) != ARCHIVE_OK ||
        archive_read_disk_set_behavior(w->disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS |
                                                    ARCHIVE_READDISK_NO_ACL |
                                                    ARCHIVE_READDISK_NO_FFLAGS) != ARCHIVE_OK ||
        archive_read_disk_open(w->disk, w->root) != ARCHIVE_OK)
        return ar_fail(w->disk, err, "open", w->root);
    return 0;
}

static int
open_out(struct walker *w, struct tar_out *o, sbx_error **err)
{
    w->out = archive_write_new();
    if (archive_write_set_format_pax_restricted(w->out) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(w->out, 1) != ARCHIVE_OK ||
        archive_write_open2(w->out, o, NULL, tar_write_cb, NULL, NULL) != ARCHIVE_OK)
        return ar_fail(w->out, err, "create", "layer tar");
    w->links = archive_entry_linkresolver_new();
    archive_entry_linkresolver_set_strategy(w->links, archive_format(w->out));
    return 0;
}

int
sbx_image_layer_write(const char *dir, int out_fd, char **diff_id, uint64_t *size, sbx_error **err)
{
    struct tar_out o = {.fd = out_fd};
    crypto_hash_sha256_init(&o.sha);
    struct walker w = {.root = dir, .root_len = strlen(dir), .buf = sbx_xmalloc(COPY_BUF)};
    int ret = open_disk(&w, err);
    if (ret == 0)
        ret = open_out(&w, &o, err);
    if (ret == 0)
        ret = walk(&w, err);
    if (ret == 0 && archive_write_close(w.out) != ARCHIVE_OK)
        ret = o.error ? sbx_error_set(err, SBX_EIO, o.error, "write the layer tar")
                      : ar_fail(w.out, err, "finish", "layer tar");
    if (w.links)
        archive_entry_linkresolver_free(w.links);
    if (w.out)
        (void)archive_write_free(w.out);
    if (w.disk)
        (void)archive_read_free(w.disk);
    free(w.buf);
    if (ret < 0)
        return sbx_error_wrap(err, "layer of `%s`", dir);
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&o.sha, hash);
    char hex[crypto_hash_sha256_BYTES * 2 + 1];
    sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
    *diff_id = sbx_xasprintf("sha256:%s", hex);
    if (size)
        *size = o.size;
    return 0;
}

/* ---- the tar -> a gzip blob ---- */

static int
deflate_chunk(z_stream *z, struct sbx_blob_writer *bw, int flush, sbx_error **err)
{
    unsigned char out[64 << 10];
    do {
        z->next_out = out;
        z->avail_out = sizeof out;
        int r = deflate(z, flush);
        if (r == Z_STREAM_ERROR)
            return sbx_error_set(err, SBX_EIO, 0, "gzip: stream error");
        size_t have = sizeof out - z->avail_out;
        if (have && sbx_blob_writer_write(bw, out, have, err) < 0)
            return -sbx_error_code(*err);
    } while (z->avail_out == 0);
    return 0;
}

/* Compress the tar at fd (from its start) into a new blob; *digest is the blob's. */
static int
gzip_blob(const struct sbx_image_store *s, int fd, char **digest, uint64_t *size, sbx_error **err)
{
    struct sbx_blob_writer bw;
    int ret = sbx_blob_writer_open(&bw, s, NULL, err);
    if (ret < 0)
        return ret;
    z_stream z = {0};
    /* Level 1: a snapshot is made while an agent waits; the layer is written once and
     * mostly read locally. 31 = a gzip header (what OCI's tar+gzip means). */
    if (deflateInit2(&z, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        sbx_blob_writer_abort(&bw);
        return sbx_error_set(err, SBX_ENOMEM, 0, "gzip: init");
    }
    sbx_autofree unsigned char *in = sbx_xmalloc(COPY_BUF);
    if (lseek(fd, 0, SEEK_SET) < 0)
        ret = sbx_error_set(err, SBX_EIO, errno, "rewind the layer tar");
    for (ssize_t n = 1; ret == 0 && n > 0;) {
        n = read(fd, in, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ret = sbx_error_set(err, SBX_EIO, errno, "read the layer tar");
            break;
        }
        z.next_in = in;
        z.avail_in = (uInt)n;
        ret = deflate_chunk(&z, &bw, n ? Z_NO_FLUSH : Z_FINISH, err);
    }
    (void)deflateEnd(&z);
    if (ret == 0) {
        *size = bw.size;
        ret = sbx_blob_writer_commit(&bw, s, digest, err);
    }
    sbx_blob_writer_abort(&bw);
    return ret;
}

/* ---- base image + layer -> a new image ---- */

static char *
now_rfc3339(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    (void)gmtime_r(&ts.tv_sec, &tm);
    char buf[40];
    (void)strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return sbx_xstrdup(buf);
}

/* The base's config with the new layer's diff_id and a history line; a new blob. */
static int
new_config(const struct sbx_image_store *s, const char *base_config,
           const struct sbx_image_commit_opts *o, struct sbx_image_desc *out, sbx_error **err)
{
    sbx_autofree char *text = NULL;
    size_t len = 0;
    int ret = sbx_image_blob_read(s, base_config, &text, &len, err);
    if (ret < 0)
        return ret;
    json_t *cfg = json_loadb(text, len, 0, NULL);
    json_t *rootfs = json_object_get(cfg, "rootfs");
    json_t *ids = json_object_get(rootfs, "diff_ids");
    if (!json_is_array(ids)) {
        json_decref(cfg);
        return sbx_error_set(err, SBX_EIO, 0, "config %s has no rootfs.diff_ids", base_config);
    }
    sbx_autofree char *created = now_rfc3339();
    (void)json_array_append_new(ids, json_string(o->diff_id));
    (void)json_object_set_new(cfg, "created", json_string(created));
    json_t *hist = json_object_get(cfg, "history");
    if (!json_is_array(hist)) {
        hist = json_array();
        (void)json_object_set_new(cfg, "history", hist);
    }
    (void)json_array_append_new(hist, json_pack("{s:s,s:s}", "created", created, "created_by",
                                                o->comment ? o->comment : "sbx commit"));
    if (json_object_size(o->labels)) {
        json_t *c = json_object_get(cfg, "config");
        if (!json_is_object(c)) {
            c = json_object();
            (void)json_object_set_new(cfg, "config", c);
        }
        json_t *l = json_object_get(c, "Labels");
        if (!json_is_object(l)) {
            l = json_object();
            (void)json_object_set_new(c, "Labels", l);
        }
        (void)json_object_update(l, o->labels);
    }
    sbx_autofree char *doc = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    out->media_type = sbx_xstrdup(SBX_MT_OCI_CONFIG);
    out->size = strlen(doc);
    return sbx_image_blob_put(s, doc, strlen(doc), NULL, &out->digest, err);
}

static json_t *
desc_json(const struct sbx_image_desc *d)
{
    return json_pack("{s:s,s:s,s:I}", "mediaType", d->media_type, "digest", d->digest, "size",
                     (json_int_t)d->size);
}

static int
new_manifest(const struct sbx_image_store *s, const struct sbx_image_manifest *base,
             const struct sbx_image_desc *config, const struct sbx_image_desc *layer,
             char **out_digest, sbx_error **err)
{
    json_t *layers = json_array();
    for (size_t i = 0; i < base->n_layers; i++)
        (void)json_array_append_new(layers, desc_json(&base->layers[i]));
    (void)json_array_append_new(layers, desc_json(layer));
    json_t *doc = json_pack("{s:i,s:s,s:o,s:o}", "schemaVersion", 2, "mediaType",
                            SBX_MT_OCI_MANIFEST, "config", desc_json(config), "layers", layers);
    sbx_autofree char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return sbx_image_blob_put(s, text, strlen(text), NULL, out_digest, err);
}

static void
desc_clear(struct sbx_image_desc *d)
{
    free(d->media_type);
    free(d->digest);
}

int
sbx_image_commit(struct sbx_image_store *s, const struct sbx_image_commit_opts *o,
                 char **out_digest, sbx_error **err)
{
    sbx_autoclose int lock = sbx_image_store_lock(s, false, err);
    if (lock < 0)
        return lock;
    struct sbx_image_manifest base;
    int ret = sbx_image_manifest_load(&base, s, o->base, err);
    if (ret < 0)
        return sbx_error_wrap(err, "base image %s", o->base);
    struct sbx_image_desc config = {0};
    struct sbx_image_desc layer = {.media_type = sbx_xstrdup(MT_OCI_LAYER_GZ)};
    ret = gzip_blob(s, o->layer_fd, &layer.digest, &layer.size, err);
    if (ret == 0)
        ret = new_config(s, base.config.digest, o, &config, err);
    sbx_autofree char *digest = NULL;
    if (ret == 0)
        ret = new_manifest(s, &base, &config, &layer, &digest, err);
    struct sbx_image_ref r = {0};
    if (ret == 0)
        ret = sbx_image_ref_parse(&r, o->name, err);
    sbx_autofree char *canon = ret == 0 ? sbx_image_ref_string(&r) : NULL;
    sbx_image_ref_clear(&r);
    if (ret == 0)
        ret = sbx_image_store_commit(s, canon, digest, err);
    sbx_image_manifest_clear(&base);
    desc_clear(&config);
    desc_clear(&layer);
    if (ret == 0 && out_digest)
        *out_digest = sbx_steal_ptr(&digest);
    return ret < 0 ? sbx_error_wrap(err, "commit image `%s`", o->name) : 0;
}

/* ---- an image -> an archive for `docker load`, `sbx image import` and OCI tools ---- */

struct exporter {
    struct archive *a;
    const struct sbx_image_store *s;
};

static int
add_bytes(struct exporter *x, const char *path, const void *data, size_t n, sbx_error **err)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)n);
    int r = archive_write_header(x->a, e);
    archive_entry_free(e);
    if (r < ARCHIVE_WARN || (n && archive_write_data(x->a, data, n) != (la_ssize_t)n))
        return ar_fail(x->a, err, "write", path);
    return 0;
}

static int
add_blob(struct exporter *x, const char *digest, sbx_error **err)
{
    sbx_autofree char *src = sbx_image_blob_path(x->s, digest);
    sbx_autoclose int fd = open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return sbx_error_set(err, SBX_ENOTFOUND, errno, "blob %s", digest);
    sbx_autofree char *path = sbx_xasprintf("blobs/sha256/%s", digest + strlen("sha256:"));
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, st.st_size);
    int r = archive_write_header(x->a, e);
    archive_entry_free(e);
    if (r < ARCHIVE_WARN)
        return ar_fail(x->a, err, "write", path);
    sbx_autofree char *buf = sbx_xmalloc(COPY_BUF);
    for (;;) {
        ssize_t n = read(fd, buf, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sbx_error_set(err, SBX_EIO, errno, "read blob %s", digest);
        if (n == 0)
            return 0;
        if (archive_write_data(x->a, buf, (size_t)n) != n)
            return ar_fail(x->a, err, "write", path);
    }
}

static char *
blob_name(const char *digest)
{
    return sbx_xasprintf("blobs/sha256/%s", digest + strlen("sha256:"));
}

/* oci-layout + index.json (OCI), manifest.json (docker load), then the blobs. */
static int
export_docs(struct exporter *x, const char *name, const char *digest,
            const struct sbx_image_manifest *m, sbx_error **err)
{
    static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
    sbx_autofree char *mtext = NULL;
    size_t mlen = 0;
    int ret = sbx_image_blob_read(x->s, digest, &mtext, &mlen, err);
    if (ret < 0)
        return ret;
    json_t *mdoc = json_loadb(mtext, mlen, 0, NULL);
    const char *mt = json_string_value(json_object_get(mdoc, "mediaType"));
    json_t *index = json_pack("{s:i,s:[{s:s,s:s,s:I,s:{s:s}}]}", "schemaVersion", 2, "manifests",
                              "mediaType", mt ? mt : SBX_MT_OCI_MANIFEST, "digest", digest, "size",
                              (json_int_t)mlen, "annotations", "io.containerd.image.name", name);
    json_decref(mdoc);
    json_t *layers = json_array();
    for (size_t i = 0; i < m->n_layers; i++) {
        sbx_autofree char *l = blob_name(m->layers[i].digest);
        (void)json_array_append_new(layers, json_string(l));
    }
    sbx_autofree char *cfg = blob_name(m->config.digest);
    json_t *docker =
        json_pack("[{s:s,s:[s],s:o}]", "Config", cfg, "RepoTags", name, "Layers", layers);
    sbx_autofree char *itext = json_dumps(index, JSON_COMPACT);
    sbx_autofree char *dtext = json_dumps(docker, JSON_COMPACT);
    json_decref(index);
    json_decref(docker);
    ret = add_bytes(x, "oci-layout", layout, strlen(layout), err);
    if (ret == 0)
        ret = add_bytes(x, "index.json", itext, strlen(itext), err);
    if (ret == 0)
        ret = add_bytes(x, "manifest.json", dtext, strlen(dtext), err);
    return ret;
}

static int
export_run(struct exporter *x, const char *name, const char *digest, sbx_error **err)
{
    struct sbx_image_manifest m;
    int ret = sbx_image_manifest_load(&m, x->s, digest, err);
    if (ret < 0)
        return ret;
    ret = export_docs(x, name, digest, &m, err);
    if (ret == 0)
        ret = add_blob(x, digest, err);
    if (ret == 0)
        ret = add_blob(x, m.config.digest, err);
    for (size_t i = 0; ret == 0 && i < m.n_layers; i++)
        ret = add_blob(x, m.layers[i].digest, err);
    sbx_image_manifest_clear(&m);
    return ret;
}

int
sbx_image_export(struct sbx_image_store *s, const char *ref, int out_fd, sbx_error **err)
{
    sbx_autoclose int lock = sbx_image_store_lock(s, false, err);
    if (lock < 0)
        return lock;
    json_t *index = NULL;
    int ret = sbx_image_index_load(&index, s, err);
    sbx_autofree char *digest = NULL;
    sbx_autofree char *name = NULL;
    if (ret == 0)
        ret = sbx_image_index_lookup(&digest, &name, json_object_get(index, "images"), ref, err);
    json_decref(index);
    if (ret < 0)
        return sbx_error_wrap(err, "export `%s`", ref);
    struct exporter x = {.a = archive_write_new(), .s = s};
    if (archive_write_set_format_pax_restricted(x.a) != ARCHIVE_OK ||
        archive_write_open_fd(x.a, out_fd) != ARCHIVE_OK)
        ret = ar_fail(x.a, err, "create", "archive");
    if (ret == 0)
        ret = export_run(&x, name ? name : ref, digest, err);
    if (ret == 0 && archive_write_close(x.a) != ARCHIVE_OK)
        ret = ar_fail(x.a, err, "finish", "archive");
    (void)archive_write_free(x.a);
    return ret < 0 ? sbx_error_wrap(err, "export `%s`", ref) : 0;
}

int
sbx_image_labels(struct sbx_image_store *s, const char *ref, json_t **out, sbx_error **err)
{
    struct sbx_image *img = NULL;
    int ret = sbx_image_resolve(&img, s, ref, err);
    if (ret < 0)
        return ret;
    struct sbx_image_manifest m;
    ret = sbx_image_manifest_load(&m, s, img->digest, err);
    sbx_image_free(img);
    if (ret < 0)
        return ret;
    sbx_autofree char *text = NULL;
    size_t len = 0;
    ret = sbx_image_blob_read(s, m.config.digest, &text, &len, err);
    sbx_image_manifest_clear(&m);
    if (ret < 0)
        return ret;
    json_t *cfg = json_loadb(text, len, 0, NULL);
    json_t *l = json_object_get(json_object_get(cfg, "config"), "Labels");
    *out = json_is_object(l) ? json_incref(l) : json_object();
    json_decref(cfg);
    return 0;
}
