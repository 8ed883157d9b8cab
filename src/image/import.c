/*
 * import.c - `sbx image import`: an OCI image layout tar (oci-layout, index.json, blobs/) or a
 * `docker save` tar (manifest.json, config JSON, layer tars). The tar is read once, as a
 * stream: every blob goes straight into the store through the verifying blob writer (blobs/
 * entries must match the digest in their name), the small JSON index files are kept in memory,
 * and the image is assembled at the end. Nothing is extracted to a temp dir.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define META_MAX         (4u << 20)
#define READ_BLOCK       (128u << 10)
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define MT_DOCKER_LAYER  "application/vnd.docker.image.rootfs.diff.tar"

struct importer {
    struct sbx_image_store *s;
    struct archive *a;
    json_t *files; /* archive name -> blob digest */
    json_t *links; /* archive name -> archive name it links to */
    char *index_json;
    char *manifest_json;
    bool oci_layout;
};

static int
read_small(struct archive *a, struct archive_entry *e, char **out, sbx_error **err)
{
    la_int64_t size = archive_entry_size(e);
    if (size < 0 || (uint64_t)size > META_MAX)
        return sbx_error_set(err, SBX_ELIMIT, 0, "`%s` in the archive is too large",
                             archive_entry_pathname(e));
    char *buf = sbx_xmalloc((size_t)size + 1);
    la_ssize_t n = archive_read_data(a, buf, (size_t)size);
    if (n != size) {
        free(buf);
        return sbx_error_set(err, SBX_EIO, 0, "read `%s`: %s", archive_entry_pathname(e),
                             archive_error_string(a));
    }
    buf[size] = '\0';
    free(*out);
    *out = buf;
    return 0;
}

static int
stream_blob(struct importer *im, const char *expect, char **out_digest, sbx_error **err)
{
    struct sbx_blob_writer w;
    int ret = sbx_blob_writer_open(&w, im->s, expect, err);
    char buf[64 * 1024];
    while (ret == 0) {
        la_ssize_t n = archive_read_data(im->a, buf, sizeof(buf));
        if (n == 0)
            break;
        if (n < 0)
            ret = sbx_error_set(err, SBX_EIO, 0, "read archive: %s", archive_error_string(im->a));
        else
            ret = sbx_blob_writer_write(&w, buf, (size_t)n, err);
    }
    if (ret == 0)
        ret = sbx_blob_writer_commit(&w, im->s, out_digest, err);
    sbx_blob_writer_abort(&w);
    return ret;
}

/* "dir/x" + "../y/z" -> "y/z" (links inside old `docker save` archives). */
static char *
join_link(const char *name, const char *target)
{
    if (target[0] == '/')
        return sbx_xstrdup(target + 1);
    const char *slash = strrchr(name, '/');
    sbx_autofree char *joined =
        slash ? sbx_xasprintf("%.*s/%s", (int)(slash - name), name, target) : sbx_xstrdup(target);
    /* Drop "d/../" pairs; anything still escaping simply names no file. */
    char *p;
    while ((p = strstr(joined, "/../")) != NULL) {
        char *start = p;
        while (start > joined && start[-1] != '/')
            start--;
        memmove(start, p + 4, strlen(p + 4) + 1);
    }
    return sbx_steal_ptr(&joined);
}

static int
import_file(struct importer *im, const char *name, struct archive_entry *e, sbx_error **err)
{
    if (strcmp(name, "oci-layout") == 0) {
        im->oci_layout = true;
        return 0;
    }
    if (strcmp(name, "index.json") == 0)
        return read_small(im->a, e, &im->index_json, err);
    if (strcmp(name, "manifest.json") == 0)
        return read_small(im->a, e, &im->manifest_json, err);
    sbx_autofree char *expect = NULL;
    if (sbx_str_starts(name, "blobs/sha256/")) {
        expect = sbx_xasprintf("sha256:%s", name + strlen("blobs/sha256/"));
        if (!sbx_image_digest_valid(expect))
            return sbx_error_set(err, SBX_EINVAL, 0, "bad blob name `%s` in the archive", name);
    } else if (!strstr(name, ".tar") && !strstr(name, ".json")) {
        return 0; /* docker save's VERSION, json, repositories: not needed */
    }
    sbx_autofree char *digest = NULL;
    int ret = stream_blob(im, expect, &digest, err);
    if (ret < 0)
        return sbx_error_wrap(err, "`%s` in the archive", name);
    (void)json_object_set_new(im->files, name, json_string(digest));
    return 0;
}

static int
import_entry(struct importer *im, struct archive_entry *e, sbx_error **err)
{
    const char *name = archive_entry_pathname(e);
    if (!name)
        return 0;
    while (sbx_str_starts(name, "./"))
        name += 2;
    const char *hard = archive_entry_hardlink(e);
    if (hard) {
        while (sbx_str_starts(hard, "./"))
            hard += 2;
        (void)json_object_set_new(im->links, name, json_string(hard));
        return 0;
    }
    if (archive_entry_filetype(e) == AE_IFLNK && archive_entry_symlink(e)) {
        sbx_autofree char *t = join_link(name, archive_entry_symlink(e));
        (void)json_object_set_new(im->links, name, json_string(t));
        return 0;
    }
    if (archive_entry_filetype(e) != AE_IFREG)
        return 0;
    return import_file(im, name, e, err);
}

static int
read_archive(struct importer *im, const char *path, sbx_error **err)
{
    (void)archive_read_support_format_tar(im->a);
    (void)archive_read_support_filter_gzip(im->a);
    (void)archive_read_support_filter_zstd(im->a);
    if (archive_read_open_filename(im->a, path, READ_BLOCK) != ARCHIVE_OK)
        return sbx_error_set(err, SBX_EINVAL, 0, "open `%s`: %s", path,
                             archive_error_string(im->a));
    for (;;) {
        struct archive_entry *e;
        int r = archive_read_next_header(im->a, &e);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return sbx_error_set(err, SBX_EIO, 0, "read `%s`: %s", path,
                                 archive_error_string(im->a));
        int ret = import_entry(im, e, err);
        if (ret < 0)
            return ret;
    }
}

/* The digest of an archive member, following links (a bounded number of hops). */
static const char *
member_digest(struct importer *im, const char *name)
{
    for (int hops = 0; name && hops < 8; hops++) {
        const char *d = json_string_value(json_object_get(im->files, name));
        if (d)
            return d;
        name = json_string_value(json_object_get(im->links, name));
    }
    return NULL;
}

/* ---- OCI layout ---- */

static int
oci_pick(json_t *index, json_t **out_desc, sbx_error **err)
{
    json_t *list = json_object_get(index, "manifests");
    if (!json_is_array(list) || json_array_size(list) == 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "index.json lists no manifests");
    size_t i;
    json_t *m;
    bool has_platform = false;
    json_array_foreach (list, i, m)
        has_platform |= json_object_get(m, "platform") != NULL;
    if (!has_platform) {
        *out_desc = json_array_get(list, 0);
        return 0;
    }
    sbx_autofree char *digest = NULL;
    int ret = sbx_image_index_select(index, NULL, &digest, err);
    if (ret < 0)
        return ret;
    json_array_foreach (list, i, m) {
        const char *d = json_string_value(json_object_get(m, "digest"));
        if (d && strcmp(d, digest) == 0) {
            *out_desc = m;
            return 0;
        }
    }
    return sbx_error_set(err, SBX_EINVAL, 0, "index.json: the selected manifest is not listed");
}

/* A manifest digest from a descriptor that may point at a nested index. */
static int
oci_manifest_digest(struct importer *im, const char *top, char **out, sbx_error **err)
{
    sbx_autofree char *digest = sbx_xstrdup(top);
    for (int depth = 0; depth < 4; depth++) {
        sbx_autofree char *data = NULL;
        size_t n = 0;
        int ret = sbx_image_blob_read(im->s, digest, &data, &n, err);
        if (ret < 0)
            return ret;
        json_t *doc = json_loadb(data, n, 0, NULL);
        if (!doc)
            return sbx_error_set(err, SBX_EINVAL, 0, "blob %s is not JSON", digest);
        if (!sbx_image_is_index(doc, NULL)) {
            json_decref(doc);
            *out = sbx_steal_ptr(&digest);
            return 0;
        }
        char *next = NULL;
        ret = sbx_image_index_select(doc, NULL, &next, err);
        json_decref(doc);
        if (ret < 0)
            return ret;
        free(digest);
        digest = next;
    }
    return sbx_error_set(err, SBX_EINVAL, 0, "image indexes nested too deeply");
}

static char *
oci_name(json_t *desc)
{
    json_t *ann = json_object_get(desc, "annotations");
    const char *full = json_string_value(json_object_get(ann, "io.containerd.image.name"));
    if (full)
        return sbx_xstrdup(full);
    const char *ref = json_string_value(json_object_get(ann, "org.opencontainers.image.ref.name"));
    /* A bare tag ("1", "latest") names no repository. */
    return ref && (strchr(ref, '/') || strchr(ref, ':')) ? sbx_xstrdup(ref) : NULL;
}

static int
import_oci(struct importer *im, char **out_name, char **out_digest, sbx_error **err)
{
    json_t *index = json_loads(im->index_json, 0, NULL);
    if (!index)
        return sbx_error_set(err, SBX_EINVAL, 0, "index.json is not JSON");
    json_t *desc = NULL;
    int ret = oci_pick(index, &desc, err);
    const char *digest = ret == 0 ? json_string_value(json_object_get(desc, "digest")) : NULL;
    if (ret == 0 && !sbx_image_digest_valid(digest))
        ret = sbx_error_set(err, SBX_EINVAL, 0, "index.json: bad manifest digest");
    if (ret == 0) {
        *out_name = oci_name(desc);
        ret = oci_manifest_digest(im, digest, out_digest, err);
    }
    json_decref(index);
    return ret;
}

/* ---- docker save ---- */

static int
blob_size(struct importer *im, const char *digest, uint64_t *out, sbx_error **err)
{
    sbx_autofree char *path = sbx_image_blob_path(im->s, digest);
    struct stat st;
    if (stat(path, &st) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "stat `%s`", path);
    *out = (uint64_t)st.st_size;
    return 0;
}

static json_t *
docker_desc(struct importer *im, const char *member, const char *media_type, sbx_error **err)
{
    const char *digest = member ? member_digest(im, member) : NULL;
    uint64_t size = 0;
    if (!digest) {
        (void)sbx_error_set(err, SBX_EINVAL, 0, "manifest.json names `%s`, not in the archive",
                            member ? member : "(null)");
        return NULL;
    }
    if (blob_size(im, digest, &size, err) < 0)
        return NULL;
    return json_pack("{s:s,s:s,s:I}", "mediaType", media_type, "digest", digest, "size",
                     (json_int_t)size);
}

/* Synthesise a Docker schema 2 manifest for the first image of manifest.json. */
static int
docker_manifest(struct importer *im, json_t *entry, json_t **out, sbx_error **err)
{
    json_t *config =
        docker_desc(im, json_string_value(json_object_get(entry, "Config")), MT_DOCKER_CONFIG, err);
    if (!config)
        return -sbx_error_code(*err);
    json_t *layers = json_array();
    json_t *doc = json_pack("{s:i,s:s,s:o,s:o}", "schemaVersion", 2, "mediaType",
                            SBX_MT_DOCKER_MANIFST, "config", config, "layers", layers);
    size_t i;
    json_t *l;
    json_array_foreach (json_object_get(entry, "Layers"), i, l) {
        json_t *d = docker_desc(im, json_string_value(l), MT_DOCKER_LAYER, err);
        if (!d) {
            json_decref(doc);
            return -sbx_error_code(*err);
        }
        (void)json_array_append_new(layers, d);
    }
    *out = doc;
    return 0;
}

static int
import_docker(struct importer *im, char **out_name, char **out_digest, sbx_error **err)
{
    json_t *list = json_loads(im->manifest_json, 0, NULL);
    json_t *entry = json_array_get(list, 0);
    if (!json_is_object(entry)) {
        json_decref(list);
        return sbx_error_set(err, SBX_EINVAL, 0, "manifest.json lists no image");
    }
    if (json_array_size(list) > 1)
        sbx_warn("import: the archive holds %zu images; importing the first",
                 json_array_size(list));
    const char *tag = json_string_value(json_array_get(json_object_get(entry, "RepoTags"), 0));
    *out_name = tag ? sbx_xstrdup(tag) : NULL;
    json_t *manifest = NULL;
    int ret = docker_manifest(im, entry, &manifest, err);
    json_decref(list);
    if (ret < 0)
        return ret;
    sbx_autofree char *text = json_dumps(manifest, JSON_COMPACT);
    json_decref(manifest);
    return sbx_image_blob_put(im->s, text, strlen(text), NULL, out_digest, err);
}

/* ---- entry point ---- */

static int
import_run(struct importer *im, const char *path, const char *tag, char **out_digest,
           sbx_error **err)
{
    int ret = read_archive(im, path, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *name = NULL;
    sbx_autofree char *digest = NULL;
    if (im->oci_layout && im->index_json)
        ret = import_oci(im, &name, &digest, err);
    else if (im->manifest_json)
        ret = import_docker(im, &name, &digest, err);
    else
        ret = sbx_error_set(err, SBX_EINVAL, 0,
                            "not an OCI layout (oci-layout + index.json) or docker save "
                            "(manifest.json) archive");
    if (ret < 0)
        return ret;
    const char *want = tag ? tag : name;
    if (!want)
        return sbx_error_set(err, SBX_EINVAL, 0, "the archive names no image: give --tag NAME");
    struct sbx_image_ref r;
    ret = sbx_image_ref_parse(&r, want, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *canon = sbx_image_ref_string(&r);
    sbx_image_ref_clear(&r);
    ret = sbx_image_store_commit(im->s, canon, digest, err);
    if (ret == 0 && out_digest)
        *out_digest = sbx_steal_ptr(&digest);
    return ret;
}

int
sbx_image_import(struct sbx_image_store *s, const char *path, const char *tag, char **out_digest,
                 sbx_error **err)
{
    sbx_autoclose int lock = sbx_image_store_lock(s, false, err);
    if (lock < 0)
        return lock;
    struct importer im = {.s = s, .files = json_object(), .links = json_object()};
    im.a = archive_read_new();
    int ret = import_run(&im, path, tag, out_digest, err);
    (void)archive_read_free(im.a);
    json_decref(im.files);
    json_decref(im.links);
    free(im.index_json);
    free(im.manifest_json);
    return ret < 0 ? sbx_error_wrap(err, "import `%s`", path) : 0;
}
