/*
 * store.c - the image store: directories, the name index, resolve and list (unpacking layers
 * and committing images are in layer.c, remove, pins and garbage collection in gc.c).
 *
 * Concurrency: pulls and imports hold the store lock shared for their whole run (so the garbage
 * collector never deletes the blobs they are about to name), rm holds it exclusive. Updates of
 * index.json are serialised by index.lock and written with write-temp + rename, so a reader
 * (resolve, ls) never sees a torn file.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define INDEX_MAX         (16u << 20)
#define DEFAULT_ROOT      "/var/lib/sbx/images"
#define MIN_DIGEST_PREFIX 6

char *
sbx_image_default_root(const char *state_dir)
{
    return state_dir && *state_dir ? sbx_xasprintf("%s/images", state_dir)
                                   : sbx_xstrdup(DEFAULT_ROOT);
}

int
sbx_image_store_open(struct sbx_image_store **out, const char *root, sbx_error **err)
{
    struct sbx_image_store *s = sbx_xcalloc(1, sizeof(*s));
    s->root = sbx_xstrdup(root);
    s->blobs = sbx_xasprintf("%s/blobs/sha256", root);
    s->layers = sbx_xasprintf("%s/layers/sha256", root);
    s->tmp = sbx_xasprintf("%s/tmp", root);
    s->index = sbx_xasprintf("%s/index.json", root);
    s->lock = sbx_xasprintf("%s/lock", root);
    s->pins = sbx_xasprintf("%s/pins", root);
    const char *dirs[] = {s->blobs, s->layers, s->tmp, s->pins};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(dirs); i++) {
        int ret = sbx_mkdir_p(dirs[i], 0700, err);
        if (ret < 0) {
            sbx_image_store_close(s);
            return sbx_error_wrap(err, "open image store `%s`", root);
        }
    }
    *out = s;
    return 0;
}

void
sbx_image_store_close(struct sbx_image_store *s)
{
    if (!s)
        return;
    free(s->root);
    free(s->blobs);
    free(s->layers);
    free(s->tmp);
    free(s->index);
    free(s->lock);
    free(s->pins);
    free(s);
}

static int
lock_file(const char *path, bool exclusive, sbx_error **err)
{
    sbx_autoclose int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open lock `%s`", path);
    int r;
    while ((r = flock(fd, exclusive ? LOCK_EX : LOCK_SH)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "lock `%s`", path);
    return sbx_steal_fd(&fd);
}

int
sbx_image_store_lock(const struct sbx_image_store *s, bool exclusive, sbx_error **err)
{
    return lock_file(s->lock, exclusive, err);
}

/* ---- index.json: {"version": 1, "images": {NAME: MANIFEST_DIGEST}} ---- */

int
sbx_image_index_load(json_t **out, const struct sbx_image_store *s, sbx_error **err)
{
    sbx_autofree char *data = NULL;
    size_t n = 0;
    int ret = sbx_read_file(s->index, INDEX_MAX, &data, &n, err);
    if (ret == -SBX_ENOTFOUND) {
        sbx_error_clear(err);
        *out = json_pack("{s:i,s:{}}", "version", 1, "images");
        return 0;
    }
    if (ret < 0)
        return ret;
    json_error_t jerr;
    json_t *doc = json_loadb(data, n, 0, &jerr);
    if (!doc || !json_is_object(json_object_get(doc, "images"))) {
        json_decref(doc);
        return sbx_error_set(err, SBX_EIO, 0, "image index `%s` is damaged", s->index);
    }
    *out = doc;
    return 0;
}

static int
index_save(const struct sbx_image_store *s, json_t *doc, sbx_error **err)
{
    sbx_autofree char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        return sbx_error_set(err, SBX_ENOMEM, 0, "serialise image index");
    return sbx_write_file_atomic(s->index, text, strlen(text), 0600, err);
}

/* Read-modify-write of the index under index.lock (see internal.h). */
int
sbx_image_index_update(const struct sbx_image_store *s, const char *name, const char *digest,
                       sbx_error **err)
{
    sbx_autofree char *lpath = sbx_xasprintf("%s/index.lock", s->root);
    sbx_autoclose int lock = lock_file(lpath, true, err);
    if (lock < 0)
        return lock;
    json_t *doc = NULL;
    int ret = sbx_image_index_load(&doc, s, err);
    if (ret < 0)
        return ret;
    json_t *images = json_object_get(doc, "images");
    if (digest)
        (void)json_object_set_new(images, name, json_string(digest));
    else
        (void)json_object_del(images, name);
    ret = index_save(s, doc, err);
    json_decref(doc);
    return ret;
}

/* ---- layers ---- */

char *
sbx_image_layer_path(const struct sbx_image_store *s, const char *digest)
{
    return sbx_xasprintf("%s/%s", s->layers, digest + strlen("sha256:"));
}

/* ---- manifests, resolve ---- */

int
sbx_image_manifest_load(struct sbx_image_manifest *m, const struct sbx_image_store *s,
                        const char *digest, sbx_error **err)
{
    *m = (struct sbx_image_manifest){0};
    sbx_autofree char *data = NULL;
    size_t n = 0;
    int ret = sbx_image_blob_read(s, digest, &data, &n, err);
    if (ret == 0)
        ret = sbx_image_manifest_parse(m, data, n, err);
    return ret < 0 ? sbx_error_wrap(err, "manifest %s", digest) : 0;
}

static bool
is_hex_prefix(const char *s)
{
    size_t n = strlen(s);
    if (n < MIN_DIGEST_PREFIX || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    }
    return true;
}

int
sbx_image_index_lookup(char **out_digest, char **out_name, json_t *images, const char *ref,
                       sbx_error **err)
{
    struct sbx_image_ref r;
    sbx_autoerror sbx_error *perr = NULL;
    if (sbx_image_ref_parse(&r, ref, &perr) == 0) {
        sbx_autofree char *name = sbx_image_ref_string(&r);
        sbx_image_ref_clear(&r);
        const char *d = json_string_value(json_object_get(images, name));
        if (d) {
            *out_digest = sbx_xstrdup(d);
            if (out_name)
                *out_name = sbx_steal_ptr(&name);
            return 0;
        }
    }
    const char *hex = sbx_str_starts(ref, "sha256:") ? ref + 7 : ref;
    if (!is_hex_prefix(hex))
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "image `%s` not found (pull or import it)",
                             ref);
    const char *key;
    json_t *val;
    const char *found = NULL;
    json_object_foreach (images, key, val) {
        const char *d = json_string_value(val);
        if (!d || strncmp(d + 7, hex, strlen(hex)) != 0)
            continue;
        if (found && strcmp(found, d) != 0)
            return sbx_error_set(err, SBX_EINVAL, 0, "digest prefix `%s` is ambiguous", ref);
        found = d;
    }
    if (!found)
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "image `%s` not found (pull or import it)",
                             ref);
    *out_digest = sbx_xstrdup(found);
    return 0;
}

static int
resolve_layers(struct sbx_image *img, struct sbx_image_store *s, const struct sbx_image_manifest *m,
               sbx_error **err)
{
    img->layers = sbx_xcalloc(m->n_layers + 1, sizeof(char *));
    for (size_t i = 0; i < m->n_layers; i++) {
        img->layers[i] = sbx_image_layer_path(s, m->layers[i].digest);
        img->n_layers = i + 1;
        struct stat st;
        if (stat(img->layers[i], &st) < 0 || !S_ISDIR(st.st_mode))
            return sbx_error_set(err, SBX_EIO, 0, "layer %s is not unpacked (pull again)",
                                 m->layers[i].digest);
    }
    return 0;
}

static int
resolve_digest(struct sbx_image *img, struct sbx_image_store *s, const char *digest,
               sbx_error **err)
{
    struct sbx_image_manifest m;
    int ret = sbx_image_manifest_load(&m, s, digest, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *config = NULL;
    size_t n = 0;
    ret = resolve_layers(img, s, &m, err);
    if (ret == 0)
        ret = sbx_image_blob_read(s, m.config.digest, &config, &n, err);
    if (ret == 0)
        ret = sbx_image_config_apply(img, config, n, err);
    sbx_image_manifest_clear(&m);
    return ret;
}

int
sbx_image_resolve(struct sbx_image **out, struct sbx_image_store *s, const char *ref,
                  sbx_error **err)
{
    if (strcmp(ref, SBX_IMAGE_HOST) == 0)
        return sbx_error_set(err, SBX_ENOTFOUND, 0,
                             "`host` is the runtime's built-in image, not a stored image");
    json_t *doc = NULL;
    int ret = sbx_image_index_load(&doc, s, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *digest = NULL;
    ret = sbx_image_index_lookup(&digest, NULL, json_object_get(doc, "images"), ref, err);
    json_decref(doc);
    if (ret < 0)
        return ret;
    struct sbx_image *img = sbx_xcalloc(1, sizeof(*img));
    img->digest = sbx_steal_ptr(&digest);
    ret = resolve_digest(img, s, img->digest, err);
    if (ret < 0) {
        sbx_image_free(img);
        return sbx_error_wrap(err, "image `%s`", ref);
    }
    *out = img;
    return 0;
}

static void
strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void
sbx_image_free(struct sbx_image *img)
{
    if (!img)
        return;
    free(img->digest);
    strv_free(img->layers);
    strv_free(img->env);
    strv_free(img->entrypoint);
    strv_free(img->cmd);
    free(img->workdir);
    free(img->user);
    free(img);
}

/* ---- list ---- */

static void
info_fill(struct sbx_image_info *info, struct sbx_image_store *s)
{
    struct sbx_image_manifest m;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_image_manifest_load(&m, s, info->digest, &err) < 0) {
        sbx_warn("%s: %s", info->name, sbx_error_msg(err));
        return;
    }
    info->size = m.config.size;
    for (size_t i = 0; i < m.n_layers; i++)
        info->size += m.layers[i].size;
    sbx_autofree char *config = NULL;
    size_t n = 0;
    if (sbx_image_blob_read(s, m.config.digest, &config, &n, &err) == 0) {
        json_t *doc = json_loadb(config, n, 0, NULL);
        const char *created = json_string_value(json_object_get(doc, "created"));
        info->created = created ? sbx_xstrdup(created) : NULL;
        json_decref(doc);
    }
    sbx_image_manifest_clear(&m);
}

static int
info_cmp(const void *a, const void *b)
{
    return strcmp(((const struct sbx_image_info *)a)->name,
                  ((const struct sbx_image_info *)b)->name);
}

int
sbx_image_list(struct sbx_image_info **out, size_t *n_out, struct sbx_image_store *s,
               sbx_error **err)
{
    json_t *doc = NULL;
    int ret = sbx_image_index_load(&doc, s, err);
    if (ret < 0)
        return ret;
    json_t *images = json_object_get(doc, "images");
    struct sbx_image_info *v = sbx_xcalloc(json_object_size(images) + 1, sizeof(*v));
    size_t n = 0;
    const char *key;
    json_t *val;
    json_object_foreach (images, key, val) {
        v[n].name = sbx_xstrdup(key);
        v[n].digest = sbx_xstrdup(json_string_value(val) ? json_string_value(val) : "");
        info_fill(&v[n], s);
        n++;
    }
    json_decref(doc);
    qsort(v, n, sizeof(*v), info_cmp);
    *out = v;
    *n_out = n;
    return 0;
}

void
sbx_image_info_free(struct sbx_image_info *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].name);
        free(v[i].digest);
        free(v[i].created);
    }
    free(v);
}
