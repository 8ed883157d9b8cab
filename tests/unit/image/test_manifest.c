#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "image/internal.h"

#define DA "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DB "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define DC "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define DD "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"

/* A Docker Hub style manifest list: an attestation first, arm64/v8, amd64, arm/v7. */
static const char index_json[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" SBX_MT_OCI_INDEX "\",\"manifests\":["
    "{\"mediaType\":\"" SBX_MT_OCI_MANIFEST "\",\"digest\":\"" DD "\",\"size\":1,"
    "\"platform\":{\"architecture\":\"unknown\",\"os\":\"unknown\"},"
    "\"annotations\":{\"vnd.docker.reference.type\":\"attestation-manifest\"}},"
    "{\"mediaType\":\"" SBX_MT_OCI_MANIFEST "\",\"digest\":\"" DB "\",\"size\":1,"
    "\"platform\":{\"architecture\":\"arm64\",\"os\":\"linux\",\"variant\":\"v8\"}},"
    "{\"mediaType\":\"" SBX_MT_OCI_MANIFEST "\",\"digest\":\"" DA "\",\"size\":1,"
    "\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}},"
    "{\"mediaType\":\"" SBX_MT_OCI_MANIFEST "\",\"digest\":\"" DC "\",\"size\":1,"
    "\"platform\":{\"architecture\":\"arm\",\"os\":\"linux\",\"variant\":\"v7\"}}]}";

static char *
select_for(const char *platform, int want_ret)
{
    json_t *doc = json_loads(index_json, 0, NULL);
    assert_non_null(doc);
    char *digest = NULL;
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_image_index_select(doc, platform, &digest, &err), want_ret);
    json_decref(doc);
    return digest;
}

static void
test_index_select(void **state)
{
    (void)state;
    sbx_autofree char *amd = select_for("linux/amd64", 0);
    assert_string_equal(amd, DA);
    sbx_autofree char *arm = select_for("linux/arm64", 0);
    assert_string_equal(arm, DB);
    sbx_autofree char *v8 = select_for("linux/arm64/v8", 0);
    assert_string_equal(v8, DB);
    sbx_autofree char *v7 = select_for("linux/arm/v7", 0);
    assert_string_equal(v7, DC);
    assert_null(select_for("linux/arm/v6", -SBX_ENOTFOUND));
    assert_null(select_for("windows/amd64", -SBX_ENOTFOUND));
    assert_null(select_for("linux", -SBX_EINVAL));
    sbx_autofree char *host = select_for(NULL, 0);
    assert_string_equal(host, strcmp(sbx_image_host_arch(), "amd64") == 0 ? DA : DB);
}

static void
test_is_index(void **state)
{
    (void)state;
    json_t *idx = json_loads(index_json, 0, NULL);
    json_t *list = json_pack("{s:i,s:[]}", "schemaVersion", 2, "manifests");
    json_t *man = json_pack("{s:i,s:{},s:[]}", "schemaVersion", 2, "config", "layers");
    assert_true(sbx_image_is_index(idx, NULL));
    assert_true(sbx_image_is_index(list, NULL)); /* OCI index without mediaType */
    assert_false(sbx_image_is_index(man, NULL));
    assert_true(sbx_image_is_index(man, SBX_MT_DOCKER_LIST));
    assert_false(sbx_image_is_index(man, SBX_MT_DOCKER_MANIFST));
    json_decref(idx);
    json_decref(list);
    json_decref(man);
}

static const char manifest_fmt[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" SBX_MT_DOCKER_MANIFST "\","
    "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
    "\"digest\":\"" DA "\",\"size\":10},"
    "\"layers\":[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":20},"
    "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"" DC
    "\",\"size\":30}]}";

static int
parse_with(const char *layer_type, const char *layer_digest, struct sbx_image_manifest *m)
{
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), manifest_fmt, layer_type, layer_digest);
    sbx_autoerror sbx_error *err = NULL;
    return sbx_image_manifest_parse(m, buf, (size_t)n, &err);
}

static void
test_manifest_parse(void **state)
{
    (void)state;
    struct sbx_image_manifest m;
    assert_int_equal(parse_with("application/vnd.docker.image.rootfs.diff.tar.gzip", DB, &m), 0);
    assert_string_equal(m.config.digest, DA);
    assert_int_equal(m.config.size, 10);
    assert_int_equal(m.n_layers, 2);
    assert_string_equal(m.layers[0].digest, DB);
    assert_string_equal(m.layers[1].digest, DC);
    assert_int_equal(m.layers[1].size, 30);
    sbx_image_manifest_clear(&m);
    assert_int_equal(parse_with("application/vnd.oci.image.layer.v1.tar+lz4", DB, &m), -SBX_EINVAL);
    assert_int_equal(parse_with("application/vnd.oci.image.layer.v1.tar", "sha256:../../etc", &m),
                     -SBX_EINVAL);
    assert_int_equal(sbx_image_manifest_parse(&m, index_json, strlen(index_json), NULL),
                     -SBX_EINVAL);
    assert_int_equal(sbx_image_manifest_parse(&m, "{", 1, NULL), -SBX_EINVAL);
}

static void
test_config_apply(void **state)
{
    (void)state;
    static const char cfg[] =
        "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{"
        "\"Env\":[\"PATH=/bin\",\"A=b c\"],\"Entrypoint\":[\"/bin/sh\",\"-c\"],"
        "\"Cmd\":null,\"WorkingDir\":\"/w\",\"User\":\"\"}}";
    struct sbx_image img = {0};
    assert_int_equal(sbx_image_config_apply(&img, cfg, strlen(cfg), NULL), 0);
    assert_string_equal(img.env[0], "PATH=/bin");
    assert_string_equal(img.env[1], "A=b c");
    assert_null(img.env[2]);
    assert_string_equal(img.entrypoint[1], "-c");
    assert_null(img.cmd);
    assert_string_equal(img.workdir, "/w");
    assert_null(img.user);
    img.digest = NULL;
    struct sbx_image *heap = malloc(sizeof(*heap));
    *heap = img;
    sbx_image_free(heap);

    struct sbx_image empty = {0};
    assert_int_equal(sbx_image_config_apply(&empty, "{}", 2, NULL), 0);
    assert_non_null(empty.env);
    assert_null(empty.env[0]);
    free(empty.env);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_select),
        cmocka_unit_test(test_is_index),
        cmocka_unit_test(test_manifest_parse),
        cmocka_unit_test(test_config_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
