/*
 * test_docker_credca.c - the pure helpers of the docker provider's reading of an image's CA
 * bundle through the engine (src/providers/docker_credca.c): the archive's first entry (a
 * file, a symlink, pax headers skipped, an entry cut short or sized beyond the archive
 * refused) and the next path of a symlink (absolute, relative, names never put into a URL).
 * The engine side (real archives, symlinks resolved inside the image, an oversized bundle) is
 * tested in docker/credproxy-https-{dockerd,podman}.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/docker_credca.h"

/* n bytes of an archive's fields and data (not strings: no NUL after them). */
static void
put(char *dst, const char *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* One ustar header (type, size, link name, its checksum), into buf at *at. */
static void
header(char *buf, size_t *at, char type, size_t size, const char *link)
{
    char *h = buf + *at;
    memset(h, 0, 512);
    (void)snprintf(h, 100, "etc/ssl/certs/ca-certificates.crt");
    (void)snprintf(h + 124, 12, "%011zo", size);
    h[156] = type;
    if (link)
        (void)snprintf(h + 157, 100, "%s", link);
    (void)snprintf(h + 100, 8, "%07o", 0644);
    put(h + 257,
        "ustar\0"
        "00",
        8);
    /* the checksum: the header's bytes summed with its own field as spaces */
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    (void)snprintf(h + 148, 8, "%06o", sum);
    *at += 512;
}

static void
test_file(void **state)
{
    (void)state;
    static char buf[4096];
    size_t at = 0;
    header(buf, &at, '0', 5, NULL);
    put(buf + at, "HELLO", 5);
    at += 512;
    memset(buf + at, 0, 1024); /* the end */
    at += 1024;
    struct sbx_docker_tar_entry e;
    assert_true(sbx_docker_tar_first(buf, at, &e));
    assert_int_equal(e.type, '0');
    assert_int_equal(e.size, 5);
    assert_memory_equal(e.data, "HELLO", 5);
    sbx_docker_tar_entry_free(&e);
    /* cut short: the size runs beyond what came */
    assert_false(sbx_docker_tar_first(buf, 512 + 4, &e));
    assert_false(sbx_docker_tar_first(buf, 100, &e));
    /* a size beyond the archive (an engine's answer is never trusted for its sizes) */
    at = 0;
    header(buf, &at, '0', (size_t)1 << 30, NULL);
    assert_false(sbx_docker_tar_first(buf, sizeof buf, &e));
    /* an empty archive */
    memset(buf, 0, sizeof buf);
    assert_false(sbx_docker_tar_first(buf, sizeof buf, &e));
}

static void
test_pax_and_link(void **state)
{
    (void)state;
    static char buf[4096];
    size_t at = 0;
    header(buf, &at, 'x', 30, NULL); /* a pax header and its record: skipped */
    put(buf + at, "30 path=etc/ssl/certs/x.crt\n\n\n", 30);
    at += 512;
    header(buf, &at, '2', 0, "../cert.pem");
    struct sbx_docker_tar_entry e;
    assert_true(sbx_docker_tar_first(buf, at, &e));
    assert_int_equal(e.type, '2');
    assert_string_equal(e.link, "../cert.pem");
    sbx_docker_tar_entry_free(&e);
    /* a device, a fifo, a directory: its type says so (the caller takes none of them) */
    at = 0;
    header(buf, &at, '3', 0, NULL);
    assert_true(sbx_docker_tar_first(buf, at, &e));
    assert_int_not_equal(e.type, '0');
    assert_int_not_equal(e.type, '2');
    sbx_docker_tar_entry_free(&e);
}

static void
test_link_next(void **state)
{
    (void)state;
    const char *from = "/etc/ssl/certs/ca-certificates.crt";
    char *p = sbx_docker_link_next(from, "../cert.pem");
    assert_string_equal(p, "/etc/ssl/certs/../cert.pem"); /* resolved by the engine, inside */
    free(p);
    p = sbx_docker_link_next(from, "/etc/pki/tls/certs/ca-bundle.crt");
    assert_string_equal(p, "/etc/pki/tls/certs/ca-bundle.crt");
    free(p);
    p = sbx_docker_link_next(from, "/var/tmp/x_y-1.pem");
    assert_non_null(p);
    free(p);
    /* never into a URL: query or fragment characters, spaces, escapes, an empty target */
    const char *bad[] = {"/x?path=/etc/shadow", "/x&a=b", "/x#y", "a b",
                         "/%2e%2e/x",           "",       "/x\n", NULL};
    for (size_t i = 0; bad[i]; i++)
        assert_null(sbx_docker_link_next(from, bad[i]));
    char long_link[1100];
    memset(long_link, 'a', sizeof long_link - 1);
    long_link[0] = '/';
    long_link[sizeof long_link - 1] = '\0';
    assert_null(sbx_docker_link_next(from, long_link));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_pax_and_link),
        cmocka_unit_test(test_link_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
