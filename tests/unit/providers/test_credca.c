/*
 * test_credca.c - a credentialProxy sandbox's CA and CA bundle (src/providers/credca.c): the
 * image's bundle is read from its layers, top first, and a symlink anywhere on the way is
 * refused (an image is untrusted: it must not make the server copy a host file into a file
 * the sandbox reads); the CA is made once and kept (its certificate in the bundle, never its
 * key); remove forgets both.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "providers/credca.h"
#include "server/credvault.h"

static char root[64];

static void
put(const char *rel, const char *text)
{
    char *p = sbx_xasprintf("%s/%s", root, rel);
    FILE *f = fopen(p, "we");
    assert_non_null(f);
    (void)fputs(text, f);
    (void)fclose(f);
    free(p);
}

static void
mk(const char *rel)
{
    char *p = sbx_xasprintf("%s/%s", root, rel);
    assert_int_equal(mkdir(p, 0755), 0);
    free(p);
}

static void
link_to(const char *target, const char *rel)
{
    char *p = sbx_xasprintf("%s/%s", root, rel);
    assert_int_equal(symlink(target, p), 0);
    free(p);
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = sbx_xcalloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    (void)fclose(f);
    return buf;
}

/* prepare for an image of the given layer dirs (under root) */
static int
prepare(struct sbx_credvault *v, const char *const *layers, size_t n, char bundle[4096])
{
    const char *full[4];
    for (size_t i = 0; i < n; i++)
        full[i] = sbx_xasprintf("%s/%s", root, layers[i]);
    struct sbx_rt_spec spec = {.layers = full, .n_layers = n};
    char *state = sbx_xasprintf("%s/state", root);
    sbx_error *err = NULL;
    int r = sbx_credca_prepare(v, state, "sb1", &spec, bundle, &err);
    sbx_error_clear(&err);
    free(state);
    for (size_t i = 0; i < n; i++)
        free((char *)full[i]);
    return r;
}

static void
test_symlinks_refused(void **state)
{
    (void)state;
    struct sbx_credvault *v = *(struct sbx_credvault **)state;
    put("host-secret", "HOST-SECRET\n");
    char *secret = sbx_xasprintf("%s/host-secret", root);
    /* the file itself a symlink to a host file */
    mk("l1");
    mk("l1/etc");
    mk("l1/etc/ssl");
    mk("l1/etc/ssl/certs");
    link_to(secret, "l1/etc/ssl/certs/ca-certificates.crt");
    /* a directory on the way a symlink */
    mk("l2");
    mk("l2/etc");
    mk("hostdir");
    mk("hostdir/certs");
    put("hostdir/certs/ca-certificates.crt", "HOST-SECRET\n");
    char *hostdir = sbx_xasprintf("%s/hostdir", root);
    link_to(hostdir, "l2/etc/ssl");
    char bundle[4096];
    for (int i = 0; i < 2; i++) {
        const char *layer[] = {i ? "l2" : "l1"};
        assert_int_equal(prepare(v, layer, 1, bundle), 0);
        assert_string_equal(bundle, ""); /* no bundle: nothing bound, nothing copied */
    }
    char *path = sbx_xasprintf("%s/state/credproxy/sb1.pem", root);
    assert_int_equal(access(path, F_OK), -1);
    free(path);
    free(secret);
    free(hostdir);
}

static void
test_bundle_and_ca(void **state)
{
    struct sbx_credvault *v = *(struct sbx_credvault **)state;
    mk("state");
    mk("base");
    mk("base/etc");
    mk("base/etc/ssl");
    mk("base/etc/ssl/certs");
    put("base/etc/ssl/certs/ca-certificates.crt", "BASE-BUNDLE");
    mk("top");
    const char *layers[] = {"base", "top"}; /* bottom first: top has none, base has it */
    char bundle[4096];
    assert_int_equal(prepare(v, layers, 2, bundle), 0);
    assert_string_not_equal(bundle, "");
    char *b = slurp(bundle);
    assert_non_null(b);
    assert_true(strncmp(b, "BASE-BUNDLE\n-----BEGIN CERTIFICATE-----", 39) == 0);
    assert_null(strstr(b, "PRIVATE KEY"));
    char *key = NULL;
    char *cert = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_credca_get(v, "sb1", &key, &cert, &err), 0);
    assert_non_null(strstr(key, "PRIVATE KEY"));
    assert_non_null(strstr(b, cert));
    /* a second start keeps the CA */
    assert_int_equal(prepare(v, layers, 2, bundle), 0);
    char *b2 = slurp(bundle);
    assert_string_equal(b, b2);
    char *st = sbx_xasprintf("%s/state", root);
    sbx_credca_remove(v, st, "sb1");
    assert_int_equal(access(bundle, F_OK), -1);
    char *k2 = NULL;
    char *c2 = NULL;
    assert_true(sbx_credca_get(v, "sb1", &k2, &c2, &err) < 0);
    sbx_error_clear(&err);
    free(st);
    free(key);
    free(cert);
    free(b);
    free(b2);
}

static int
setup(void **state)
{
    (void)snprintf(root, sizeof root, "/tmp/sbx-credca-XXXXXX");
    assert_non_null(mkdtemp(root));
    char *vd = sbx_xasprintf("%s/credvault", root);
    *state = sbx_credvault_new(vd);
    free(vd);
    return 0;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int
teardown(void **state)
{
    sbx_credvault_free(*state);
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): a test of one thread */
    int r = nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    assert_int_equal(r, 0);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symlinks_refused),
        cmocka_unit_test(test_bundle_and_ca),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
