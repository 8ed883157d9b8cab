/*
 * layer.c - unpacking layers into the store and committing pulled or imported images.
 *
 * Kept apart from store.c so that resolving an image (what `sbx run` and the native provider
 * do) does not pull libarchive into a binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

static int
unpack_to_temp(const struct sbx_image_store *s, const char *digest, const char *tmp,
               sbx_error **err)
{
    sbx_autofree char *blob = sbx_image_blob_path(s, digest);
    sbx_autoclose int fd = open(blob, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_ENOTFOUND, errno, "layer blob %s", digest);
    if (chmod(tmp, 0755) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "chmod `%s`", tmp);
    int ret = sbx_image_unpack(tmp, fd, err);
    if (ret < 0)
        return ret;
    /* The rename that follows must not reach the disk before the files do. */
    sbx_autoclose int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || syncfs(dfd) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "sync `%s`", tmp);
    return 0;
}

/* Layers are keyed by their (verified) blob digest, not by the config's diff_id: a diff_id is
 * only a claim of the image config, and trusting it would let one image plant content under
 * a key another image uses. */
int
sbx_image_layer_ensure(const struct sbx_image_store *s, const char *digest, sbx_error **err)
{
    sbx_autofree char *dst = sbx_image_layer_path(s, digest);
    struct stat st;
    if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    sbx_autofree char *tmp = sbx_xasprintf("%s/layer-XXXXXX", s->tmp);
    if (!mkdtemp(tmp))
        return sbx_error_set(err, SBX_EGENERIC, errno, "create temp dir in `%s`", s->tmp);
    uint64_t t0 = sbx_now_ms();
    int ret = unpack_to_temp(s, digest, tmp, err);
    /* The rename publishes a complete layer; if another pull got there first, its copy wins. */
    if (ret == 0 && rename(tmp, dst) < 0 && errno != EEXIST && errno != ENOTEMPTY)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "rename layer to `%s`", dst);
    sbx_autoerror sbx_error *rm_err = NULL;
    if (sbx_rm_rf(tmp, &rm_err) < 0)
        sbx_warn("%s", sbx_error_msg(rm_err));
    if (ret < 0)
        return sbx_error_wrap(err, "unpack layer %s", digest);
    sbx_debug("layer %s unpacked in %llu ms", digest, (unsigned long long)(sbx_now_ms() - t0));
    return 0;
}

int
sbx_image_store_commit(struct sbx_image_store *s, const char *name, const char *manifest_digest,
                       sbx_error **err)
{
    struct sbx_image_manifest m;
    int ret = sbx_image_manifest_load(&m, s, manifest_digest, err);
    if (ret < 0)
        return ret;
    if (!sbx_image_blob_exists(s, m.config.digest))
        ret = sbx_error_set(err, SBX_ENOTFOUND, 0, "config blob %s missing", m.config.digest);
    for (size_t i = 0; ret == 0 && i < m.n_layers; i++) {
        if (!sbx_image_blob_exists(s, m.layers[i].digest))
            ret = sbx_error_set(err, SBX_ENOTFOUND, 0, "layer blob %s missing", m.layers[i].digest);
        else
            ret = sbx_image_layer_ensure(s, m.layers[i].digest, err);
    }
    sbx_image_manifest_clear(&m);
    if (ret == 0)
        ret = sbx_image_index_update(s, name, manifest_digest, err);
    if (ret == 0)
        sbx_debug("image %s: %s", name, manifest_digest);
    return ret;
}
