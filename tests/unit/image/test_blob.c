#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

/* sha256("hello\n") */
#define HELLO "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"

static int
setup(void **state)
{
    char *dir = sbx_xasprintf("/tmp/sbx-blob-test.%d.XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(dir));
    struct sbx_image_store *s = NULL;
    assert_int_equal(sbx_image_store_open(&s, dir, NULL), 0);
    free(dir);
    *state = s;
    return 0;
}

static int
teardown(void **state)
{
    struct sbx_image_store *s = *state;
    assert_int_equal(sbx_rm_rf(s->root, NULL), 0);
    sbx_image_store_close(s);
    return 0;
}

static int
count_entries(const char *dir)
{
    sbx_autoclosedir DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded test */
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += de->d_name[0] != '.';
    return n;
}

static void
test_put_verifies_digest(void **state)
{
    struct sbx_image_store *s = *state;
    sbx_autoerror sbx_error *err = NULL;
    const char *wrong = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(sbx_image_blob_put(s, "hello\n", 6, wrong, NULL, &err), -SBX_EIO);
    assert_non_null(strstr(sbx_error_msg(err), "digest mismatch"));
    assert_false(sbx_image_blob_exists(s, wrong));
    assert_false(sbx_image_blob_exists(s, HELLO));
    assert_int_equal(count_entries(s->tmp), 0);
    assert_int_equal(count_entries(s->blobs), 0);

    sbx_autofree char *digest = NULL;
    assert_int_equal(sbx_image_blob_put(s, "hello\n", 6, HELLO, &digest, NULL), 0);
    assert_string_equal(digest, HELLO);
    assert_true(sbx_image_blob_exists(s, HELLO));
    assert_int_equal(count_entries(s->tmp), 0);
}

static void
test_streamed_writer_computes_digest(void **state)
{
    struct sbx_image_store *s = *state;
    struct sbx_blob_writer w;
    assert_int_equal(sbx_blob_writer_open(&w, s, NULL, NULL), 0);
    assert_int_equal(sbx_blob_writer_write(&w, "hel", 3, NULL), 0);
    assert_int_equal(sbx_blob_writer_write(&w, "lo\n", 3, NULL), 0);
    sbx_autofree char *digest = NULL;
    assert_int_equal(sbx_blob_writer_commit(&w, s, &digest, NULL), 0);
    sbx_blob_writer_abort(&w);
    assert_string_equal(digest, HELLO);

    /* An abandoned writer leaves nothing behind. */
    assert_int_equal(sbx_blob_writer_open(&w, s, HELLO, NULL), 0);
    assert_int_equal(sbx_blob_writer_write(&w, "partial", 7, NULL), 0);
    sbx_blob_writer_abort(&w);
    assert_int_equal(count_entries(s->tmp), 0);
}

static void
test_read_detects_corruption(void **state)
{
    struct sbx_image_store *s = *state;
    assert_int_equal(sbx_image_blob_put(s, "hello\n", 6, HELLO, NULL, NULL), 0);
    sbx_autofree char *data = NULL;
    size_t n = 0;
    assert_int_equal(sbx_image_blob_read(s, HELLO, &data, &n, NULL), 0);
    assert_int_equal(n, 6);
    sbx_autofree char *path = sbx_image_blob_path(s, HELLO);
    assert_int_equal(sbx_write_file_atomic(path, "HELLO\n", 6, 0644, NULL), 0);
    sbx_autofree char *bad = NULL;
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_image_blob_read(s, HELLO, &bad, NULL, &err), -SBX_EIO);
    assert_null(bad);
    sbx_autoerror sbx_error *err2 = NULL;
    const char *absent = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    assert_int_equal(sbx_image_blob_read(s, absent, &bad, NULL, &err2), -SBX_ENOTFOUND);
    assert_int_equal(sbx_image_blob_read(s, "sha256:../../x", &bad, NULL, NULL), -SBX_EINVAL);
}

static void
test_resolve_host_is_reserved(void **state)
{
    struct sbx_image_store *s = *state;
    struct sbx_image *img = NULL;
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_image_resolve(&img, s, "host", &err), -SBX_ENOTFOUND);
    assert_non_null(strstr(sbx_error_msg(err), "built-in"));
    sbx_autoerror sbx_error *err2 = NULL;
    assert_int_equal(sbx_image_resolve(&img, s, "busybox", &err2), -SBX_ENOTFOUND);
    assert_null(img);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_verifies_digest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_writer_computes_digest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_detects_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve_host_is_reserved, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
