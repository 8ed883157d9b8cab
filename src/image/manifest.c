/*
 * manifest.c - OCI / Docker schema 2 manifests, indexes (manifest lists) and image configs.
 */
#include <string.h>
#include <sys/utsname.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "image/internal.h"

static const char *const layer_types[] = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

bool
sbx_image_layer_type_ok(const char *media_type)
{
    for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++) {
        if (strcmp(media_type, layer_types[i]) == 0)
            return true;
    }
    return false;
}

const char *
sbx_image_host_arch(void)
{
    struct utsname u;
    if (uname(&u) < 0)
        return "amd64";
    if (strcmp(u.machine, "aarch64") == 0)
        return "arm64";
    if (strcmp(u.machine, "armv7l") == 0)
        return "arm";
    if (strcmp(u.machine, "x86_64") == 0)
        return "amd64";
    if (strcmp(u.machine, "i686") == 0)
        return "386";
    return "amd64";
}

static bool
type_is(const char *t, const char *want)
{
    return t && strncmp(t, want, strlen(want)) == 0;
}

bool
sbx_image_is_index(json_t *doc, const char *content_type)
{
    if (type_is(content_type, SBX_MT_OCI_INDEX) || type_is(content_type, SBX_MT_DOCKER_LIST))
        return true;
    const char *mt = json_string_value(json_object_get(doc, "mediaType"));
    if (type_is(mt, SBX_MT_OCI_INDEX) || type_is(mt, SBX_MT_DOCKER_LIST))
        return true;
    /* An OCI index may omit mediaType: it has "manifests" and no "layers". */
    return json_is_array(json_object_get(doc, "manifests")) && !json_object_get(doc, "layers");
}

struct platform {
    char os[32];
    char arch[32];
    char variant[32];
};

static int
parse_platform(struct platform *p, const char *s, sbx_error **err)
{
    *p = (struct platform){0};
    if (!s) {
        (void)snprintf(p->os, sizeof(p->os), "linux");
        (void)snprintf(p->arch, sizeof(p->arch), "%s", sbx_image_host_arch());
        return 0;
    }
    int n = sscanf(s, "%31[^/]/%31[^/]/%31s", p->os, p->arch, p->variant);
    if (n < 2)
        return sbx_error_set(err, SBX_EINVAL, 0, "bad platform `%s` (want os/arch[/variant])", s);
    return 0;
}

static bool
platform_matches(json_t *plat, const struct platform *want)
{
    const char *os = json_string_value(json_object_get(plat, "os"));
    const char *arch = json_string_value(json_object_get(plat, "architecture"));
    const char *variant = json_string_value(json_object_get(plat, "variant"));
    if (!os || !arch || strcmp(os, want->os) != 0 || strcmp(arch, want->arch) != 0)
        return false;
    return !want->variant[0] || (variant && strcmp(variant, want->variant) == 0);
}

int
sbx_image_index_select(json_t *index, const char *platform, char **out_digest, sbx_error **err)
{
    struct platform want;
    int ret = parse_platform(&want, platform, err);
    if (ret < 0)
        return ret;
    json_t *list = json_object_get(index, "manifests");
    if (!json_is_array(list))
        return sbx_error_set(err, SBX_EINVAL, 0, "image index has no `manifests` list");
    size_t i;
    json_t *m;
    json_array_foreach (list, i, m) {
        const char *digest = json_string_value(json_object_get(m, "digest"));
        json_t *plat = json_object_get(m, "platform");
        if (!digest || !json_is_object(plat) || !platform_matches(plat, &want))
            continue;
        if (!sbx_image_digest_valid(digest))
            return sbx_error_set(err, SBX_EINVAL, 0, "image index: bad digest `%s`", digest);
        *out_digest = sbx_xstrdup(digest);
        return 0;
    }
    return sbx_error_set(err, SBX_ENOTFOUND, 0, "no image for platform %s/%s%s%s in the index",
                         want.os, want.arch, want.variant[0] ? "/" : "", want.variant);
}

static int
parse_desc(struct sbx_image_desc *d, json_t *j, sbx_error **err)
{
    const char *mt = json_string_value(json_object_get(j, "mediaType"));
    const char *digest = json_string_value(json_object_get(j, "digest"));
    json_t *size = json_object_get(j, "size");
    if (!mt || !digest || !json_is_integer(size) || json_integer_value(size) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "manifest: descriptor without mediaType, "
                             "digest or size");
    if (!sbx_image_digest_valid(digest))
        return sbx_error_set(err, SBX_EINVAL, 0, "manifest: unsupported digest `%s`", digest);
    d->media_type = sbx_xstrdup(mt);
    d->digest = sbx_xstrdup(digest);
    d->size = (uint64_t)json_integer_value(size);
    return 0;
}

static int
parse_layers(struct sbx_image_manifest *m, json_t *layers, sbx_error **err)
{
    if (!json_is_array(layers))
        return sbx_error_set(err, SBX_EINVAL, 0, "manifest has no `layers` list");
    m->layers = sbx_xcalloc(json_array_size(layers) + 1, sizeof(*m->layers));
    size_t i;
    json_t *l;
    json_array_foreach (layers, i, l) {
        int ret = parse_desc(&m->layers[i], l, err);
        m->n_layers = i + 1;
        if (ret < 0)
            return ret;
        if (!sbx_image_layer_type_ok(m->layers[i].media_type))
            return sbx_error_set(err, SBX_EINVAL, 0, "unsupported layer type `%s`",
                                 m->layers[i].media_type);
    }
    return 0;
}

static int
manifest_from_json(struct sbx_image_manifest *m, json_t *doc, sbx_error **err)
{
    if (sbx_image_is_index(doc, NULL))
        return sbx_error_set(err, SBX_EINVAL, 0, "expected an image manifest, got an index");
    json_t *version = json_object_get(doc, "schemaVersion");
    if (json_integer_value(version) != 2)
        return sbx_error_set(err, SBX_EINVAL, 0, "unsupported manifest schemaVersion %lld",
                             (long long)json_integer_value(version));
    int ret = parse_desc(&m->config, json_object_get(doc, "config"), err);
    if (ret < 0)
        return ret;
    return parse_layers(m, json_object_get(doc, "layers"), err);
}

int
sbx_image_manifest_parse(struct sbx_image_manifest *out, const char *json, size_t len,
                         sbx_error **err)
{
    *out = (struct sbx_image_manifest){0};
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    if (!doc)
        return sbx_error_set(err, SBX_EINVAL, 0, "manifest is not JSON: %s", jerr.text);
    int ret = manifest_from_json(out, doc, err);
    json_decref(doc);
    if (ret < 0)
        sbx_image_manifest_clear(out);
    return ret;
}

static void
desc_clear(struct sbx_image_desc *d)
{
    free(d->media_type);
    free(d->digest);
}

void
sbx_image_manifest_clear(struct sbx_image_manifest *m)
{
    desc_clear(&m->config);
    for (size_t i = 0; i < m->n_layers; i++)
        desc_clear(&m->layers[i]);
    free(m->layers);
    *m = (struct sbx_image_manifest){0};
}

/* A JSON array of strings as a NULL-terminated vector (NULL when absent or null). */
static int
strv_from_json(char ***out, json_t *arr, const char *what, sbx_error **err)
{
    *out = NULL;
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return sbx_error_set(err, SBX_EINVAL, 0, "image config: %s is not a list", what);
    char **v = sbx_xcalloc(json_array_size(arr) + 1, sizeof(*v));
    size_t i;
    json_t *s;
    json_array_foreach (arr, i, s) {
        const char *str = json_string_value(s);
        v[i] = sbx_xstrdup(str ? str : "");
    }
    *out = v;
    return 0;
}

static char *
opt_string(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s && *s ? sbx_xstrdup(s) : NULL;
}

static int
config_from_json(struct sbx_image *img, json_t *doc, sbx_error **err)
{
    json_t *c = json_object_get(doc, "config");
    int ret = strv_from_json(&img->env, json_object_get(c, "Env"), "Env", err);
    if (ret == 0)
        ret = strv_from_json(&img->entrypoint, json_object_get(c, "Entrypoint"), "Entrypoint", err);
    if (ret == 0)
        ret = strv_from_json(&img->cmd, json_object_get(c, "Cmd"), "Cmd", err);
    if (ret < 0)
        return ret;
    if (!img->env)
        img->env = sbx_xcalloc(1, sizeof(char *));
    img->workdir = opt_string(c, "WorkingDir");
    img->user = opt_string(c, "User");
    return 0;
}

int
sbx_image_config_apply(struct sbx_image *img, const char *json, size_t len, sbx_error **err)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    if (!doc)
        return sbx_error_set(err, SBX_EINVAL, 0, "image config is not JSON: %s", jerr.text);
    int ret = config_from_json(img, doc, err);
    json_decref(doc);
    return ret;
}
