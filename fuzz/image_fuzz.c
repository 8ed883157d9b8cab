/*
 * image_fuzz.c - what a registry (or an image tar) sends sbx: the input is tried as an image
 * manifest, an index (platform selection), an image config and an image reference. A parsed
 * manifest holds only valid digests and known layer types; a parsed reference prints to a
 * string that parses to the same string.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/xalloc.h"
#include "fuzz/fuzz.h"
#include "image/image.h"
#include "image/internal.h"

static void
manifest(const char *s, size_t n)
{
    struct sbx_image_manifest m = {0};
    sbx_error *err = NULL;
    if (sbx_image_manifest_parse(&m, s, n, &err) == 0) {
        if (!sbx_image_digest_valid(m.config.digest))
            __builtin_trap();
        for (size_t i = 0; i < m.n_layers; i++) {
            if (!sbx_image_digest_valid(m.layers[i].digest) ||
                !sbx_image_layer_type_ok(m.layers[i].media_type))
                __builtin_trap();
        }
    }
    sbx_error_clear(&err);
    sbx_image_manifest_clear(&m);
}

static void
index_and_config(const char *s, size_t n)
{
    json_t *doc = json_loadb(s, n, 0, NULL);
    if (doc && sbx_image_is_index(doc, NULL)) {
        char *digest = NULL;
        sbx_error *err = NULL;
        if (sbx_image_index_select(doc, "linux/amd64", &digest, &err) == 0 &&
            !sbx_image_digest_valid(digest))
            __builtin_trap();
        free(digest);
        sbx_error_clear(&err);
    }
    json_decref(doc);
    struct sbx_image *img = sbx_xcalloc(1, sizeof *img);
    sbx_error *err = NULL;
    (void)sbx_image_config_apply(img, s, n, &err);
    sbx_error_clear(&err);
    sbx_image_free(img);
}

static void
reference(const char *s, size_t n)
{
    if (n > 512 || memchr(s, '\0', n))
        return;
    char *str = sbx_xstrndup(s, n);
    struct sbx_image_ref r = {0};
    sbx_error *err = NULL;
    if (sbx_image_ref_parse(&r, str, &err) == 0) {
        char *once = sbx_image_ref_string(&r);
        struct sbx_image_ref r2 = {0};
        if (sbx_image_ref_parse(&r2, once, &err) < 0)
            __builtin_trap();
        char *twice = sbx_image_ref_string(&r2);
        if (strcmp(once, twice) != 0)
            __builtin_trap();
        free(once);
        free(twice);
        sbx_image_ref_clear(&r2);
    }
    sbx_error_clear(&err);
    sbx_image_ref_clear(&r);
    free(str);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    manifest(s, size);
    index_and_config(s, size);
    reference(s, size);
    return 0;
}
