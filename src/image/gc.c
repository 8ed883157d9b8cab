/*
 * gc.c - removing names, pinning images in use, and garbage collection.
 *
 * Live = every blob reachable from a named image (index.json) or a pinned one (pins/<owner>):
 * the manifest, its config and its layers. Everything else under blobs/ and layers/, and all of
 * tmp/, is removed. GC holds the store lock exclusive, so no pull or import is between
 * "blob stored" and "name recorded", and no pin is being written.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define OWNER_MAX 128
#define PIN_MAX   256

static void
mark_image(json_t *live, struct sbx_image_store *s, const char *what, const char *digest)
{
    struct sbx_image_manifest m;
    sbx_autoerror sbx_error *err = NULL;
    (void)json_object_set_new(live, digest, json_true());
    if (sbx_image_manifest_load(&m, s, digest, &err) < 0) {
        sbx_warn("gc: %s: %s", what, sbx_error_msg(err));
        return;
    }
    (void)json_object_set_new(live, m.config.digest, json_true());
    for (size_t i = 0; i < m.n_layers; i++)
        (void)json_object_set_new(live, m.layers[i].digest, json_true());
    sbx_image_manifest_clear(&m);
}

static void
mark_pins(json_t *live, struct sbx_image_store *s)
{
    sbx_autoclosedir DIR *d = opendir(s->pins);
    if (!d)
        return;
    struct dirent *de;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        sbx_autofree char *path = sbx_xasprintf("%s/%s", s->pins, de->d_name);
        sbx_autofree char *digest = NULL;
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_read_file(path, PIN_MAX, &digest, NULL, &err) < 0 ||
            !sbx_image_digest_valid(digest)) {
            sbx_warn("gc: ignoring pin `%s`", path);
            continue;
        }
        mark_image(live, s, de->d_name, digest);
    }
}

/* Remove the entries of dir whose "sha256:<name>" is not in live (NULL: remove all). */
static void
sweep(const char *dir, json_t *live, const char *prefix)
{
    sbx_autoclosedir DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): this DIR stream is private to this call */
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        sbx_autofree char *digest = sbx_xasprintf("%s%s", prefix, de->d_name);
        if (live && json_object_get(live, digest))
            continue;
        sbx_autofree char *path = sbx_xasprintf("%s/%s", dir, de->d_name);
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_rm_rf(path, &err) < 0)
            sbx_warn("gc: %s", sbx_error_msg(err));
        else
            sbx_debug("gc: removed %s", path);
    }
}

static int
gc_locked(struct sbx_image_store *s, sbx_error **err)
{
    json_t *doc = NULL;
    int ret = sbx_image_index_load(&doc, s, err);
    if (ret < 0)
        return ret;
    json_t *live = json_object();
    const char *name;
    json_t *val;
    json_object_foreach (json_object_get(doc, "images"), name, val) {
        if (json_string_value(val))
            mark_image(live, s, name, json_string_value(val));
    }
    mark_pins(live, s);
    sweep(s->layers, live, "sha256:");
    sweep(s->blobs, live, "sha256:");
    sweep(s->tmp, NULL, ""); /* no pull or import is running: we hold the lock exclusive */
    json_decref(live);
    json_decref(doc);
    return 0;
}

int
sbx_image_gc(struct sbx_image_store *s, sbx_error **err)
{
    sbx_autoclose int lock = sbx_image_store_lock(s, true, err);
    if (lock < 0)
        return lock;
    return gc_locked(s, err);
}

int
sbx_image_remove(struct sbx_image_store *s, const char *ref, sbx_error **err)
{
    sbx_autoclose int lock = sbx_image_store_lock(s, true, err);
    if (lock < 0)
        return lock;
    json_t *doc = NULL;
    int ret = sbx_image_index_load(&doc, s, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *digest = NULL;
    sbx_autofree char *name = NULL;
    ret = sbx_image_index_lookup(&digest, &name, json_object_get(doc, "images"), ref, err);
    json_decref(doc);
    if (ret < 0)
        return ret;
    if (!name)
        return sbx_error_set(err, SBX_EINVAL, 0, "remove images by name, not by digest (`%s`)",
                             ref);
    ret = sbx_image_index_update(s, name, NULL, err);
    if (ret == 0)
        ret = gc_locked(s, err);
    if (ret == 0)
        sbx_debug("removed image %s", name);
    return ret;
}

/* The owner names a file in pins/: keep it a plain, short file name. */
static int
check_owner(const char *owner, sbx_error **err)
{
    size_t n = owner ? strlen(owner) : 0;
    if (n == 0 || n > OWNER_MAX || owner[0] == '.' ||
        strspn(owner, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n)
        return sbx_error_set(err, SBX_EINVAL, 0, "bad pin owner `%s`", owner ? owner : "");
    return 0;
}

int
sbx_image_pin(struct sbx_image_store *s, const char *owner, const char *digest, sbx_error **err)
{
    int ret = check_owner(owner, err);
    if (ret < 0)
        return ret;
    if (!sbx_image_digest_valid(digest))
        return sbx_error_set(err, SBX_EINVAL, 0, "bad digest `%s`", digest ? digest : "");
    /* Shared: GC (exclusive) cannot run between the check below and the pin being written. */
    sbx_autoclose int lock = sbx_image_store_lock(s, false, err);
    if (lock < 0)
        return lock;
    struct sbx_image_manifest m;
    ret = sbx_image_manifest_load(&m, s, digest, err);
    for (size_t i = 0; ret == 0 && i < m.n_layers; i++) {
        sbx_autofree char *dir = sbx_image_layer_path(s, m.layers[i].digest);
        if (access(dir, F_OK) < 0)
            ret = sbx_error_set(err, SBX_ENOTFOUND, errno, "layer `%s`", dir);
    }
    sbx_image_manifest_clear(&m);
    if (ret < 0)
        return sbx_error_wrap(err, "pin image %s", digest);
    sbx_autofree char *path = sbx_xasprintf("%s/%s", s->pins, owner);
    return sbx_write_file_atomic(path, digest, strlen(digest), 0600, err);
}

int
sbx_image_unpin(struct sbx_image_store *s, const char *owner, sbx_error **err)
{
    int ret = check_owner(owner, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *path = sbx_xasprintf("%s/%s", s->pins, owner);
    if (unlink(path) < 0 && errno != ENOENT)
        return sbx_error_set(err, SBX_EGENERIC, errno, "unpin `%s`", path);
    return 0;
}
