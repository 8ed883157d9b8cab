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

#define D64 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void
test_ref_normalisation(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *registry;
        const char *repo;
        const char *tag;
        const char *digest;
        const char *canon;
    } ok[] = {
        {"busybox", "docker.io", "library/busybox", "latest", NULL,
         "docker.io/library/busybox:latest"},
        {"busybox:1.36", "docker.io", "library/busybox", "1.36", NULL,
         "docker.io/library/busybox:1.36"},
        {"user/app", "docker.io", "user/app", "latest", NULL, "docker.io/user/app:latest"},
        {"docker.io/busybox", "docker.io", "library/busybox", "latest", NULL,
         "docker.io/library/busybox:latest"},
        {"index.docker.io/library/alpine:3", "docker.io", "library/alpine", "3", NULL,
         "docker.io/library/alpine:3"},
        {"127.0.0.1:5000/test/bb:1", "127.0.0.1:5000", "test/bb", "1", NULL,
         "127.0.0.1:5000/test/bb:1"},
        {"localhost/a", "localhost", "a", "latest", NULL, "localhost/a:latest"},
        {"localhost:5000/a/b/c:v1.2-rc_3", "localhost:5000", "a/b/c", "v1.2-rc_3", NULL,
         "localhost:5000/a/b/c:v1.2-rc_3"},
        {"ghcr.io/o/r@" D64, "ghcr.io", "o/r", NULL, D64, "ghcr.io/o/r@" D64},
        {"alpine:3@" D64, "docker.io", "library/alpine", "3", D64, "docker.io/library/alpine@" D64},
        {"[::1]:5000/x", "[::1]:5000", "x", "latest", NULL, "[::1]:5000/x:latest"},
        {"my-reg.example.com/a.b/c__d/e-f", "my-reg.example.com", "a.b/c__d/e-f", "latest", NULL,
         "my-reg.example.com/a.b/c__d/e-f:latest"},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ok); i++) {
        struct sbx_image_ref r;
        sbx_autoerror sbx_error *err = NULL;
        int ret = sbx_image_ref_parse(&r, ok[i].in, &err);
        if (ret != 0)
            fail_msg("%s: %s", ok[i].in, sbx_error_msg(err));
        assert_string_equal(r.registry, ok[i].registry);
        assert_string_equal(r.repo, ok[i].repo);
        if (ok[i].tag)
            assert_string_equal(r.tag, ok[i].tag);
        else
            assert_null(r.tag);
        if (ok[i].digest)
            assert_string_equal(r.digest, ok[i].digest);
        else
            assert_null(r.digest);
        sbx_autofree char *canon = sbx_image_ref_string(&r);
        assert_string_equal(canon, ok[i].canon);
        sbx_image_ref_clear(&r);
    }
}

static void
test_ref_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "Busybox",            /* uppercase repo */
        "busybox:",           /* empty tag */
        "busybox:-x",         /* tag must start with a word character */
        "busybox@sha256:abc", /* short digest */
        "busybox@md5:0123",   /* unsupported algorithm */
        "a//b",               /* empty component */
        "a/../b",             /* dots are separators, not components */
        "127.0.0.1:99999/x",  /* port out of range */
        "host:port/x",        /* port not numeric */
        "/abs",               /* empty first component */
        "busybox:tag:extra",  /* colon in tag */
        "a/b:sha256:0123x",   /* a digest is not a tag */
        "x_/y",               /* separator at the end of a component */
        "reg.io/a b",         /* space */
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        struct sbx_image_ref r;
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_image_ref_parse(&r, bad[i], &err) != -SBX_EINVAL)
            fail_msg("`%s` was accepted", bad[i]);
        assert_non_null(err);
        assert_null(r.repo);
    }
}

static void
test_digest_valid(void **state)
{
    (void)state;
    assert_true(sbx_image_digest_valid(D64));
    assert_false(sbx_image_digest_valid("sha256:0123"));
    assert_false(sbx_image_digest_valid(
        "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
    assert_false(sbx_image_digest_valid(
        "sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    assert_false(sbx_image_digest_valid(NULL));
}

static void
test_loopback(void **state)
{
    (void)state;
    static const char *const yes[] = {"localhost",    "localhost:5000", "127.0.0.1",
                                      "127.1.2.3:80", "[::1]",          "[::1]:5000"};
    static const char *const no[] = {"localhost.example.com",
                                     "127.evil.com",
                                     "127.0.0.1.nip.io",
                                     "128.0.0.1",
                                     "docker.io",
                                     "[::1].x",
                                     "[::2]:5000",
                                     "localhostx:5000"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(yes); i++) {
        if (!sbx_image_registry_is_loopback(yes[i]))
            fail_msg("%s is loopback", yes[i]);
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(no); i++) {
        if (sbx_image_registry_is_loopback(no[i]))
            fail_msg("%s is not loopback", no[i]);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_normalisation),
        cmocka_unit_test(test_ref_rejects),
        cmocka_unit_test(test_digest_valid),
        cmocka_unit_test(test_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
