#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "secrets/secrets.h"

static const char value[] = "sk-live-0123456789abcdef-THE-SECRET";

struct fixture {
    char *dir;
    struct sbx_secret_store *store;
};

static int
setup(void **state)
{
    struct fixture *f = sbx_xcalloc(1, sizeof *f);
    char tmpl[] = "/tmp/sbx-test-secrets-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    f->dir = sbx_xasprintf("%s/secrets", tmpl);
    assert_int_equal(sbx_secret_store_open(&f->store, f->dir, NULL, NULL), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    sbx_secret_store_close(f->store);
    char *parent = sbx_xstrdup(f->dir);
    *strrchr(parent, '/') = '\0';
    assert_int_equal(sbx_rm_rf(parent, NULL), 0);
    free(parent);
    free(f->dir);
    free(f);
    return 0;
}

static char *
file_of(const struct fixture *f, const char *name)
{
    return sbx_xasprintf("%s/%s.secret", f->dir, name);
}

static void
test_roundtrip_and_encrypted_on_disk(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(sbx_secret_set(f->store, "DAYTONA_API_KEY", value, strlen(value), NULL), 0);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(sbx_secret_get(f->store, "DAYTONA_API_KEY", &got, &len, NULL), 0);
    assert_int_equal(len, strlen(value));
    assert_string_equal(got, value);
    sbx_secret_value_free(got);

    sbx_autofree char *path = file_of(f, "DAYTONA_API_KEY");
    sbx_autofree char *raw = NULL;
    size_t rawlen = 0;
    assert_int_equal(sbx_read_file(path, 1 << 20, &raw, &rawlen, NULL), 0);
    assert_null(memmem(raw, rawlen, "THE-SECRET", 10));
    assert_null(memmem(raw, rawlen, "sk-live", 7));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    sbx_autofree char *key = sbx_xasprintf("%s/master.key", f->dir);
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, 32);
    assert_int_equal(stat(f->dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
}

static void
test_replace_keeps_one_file_and_created(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(sbx_secret_set(f->store, "A", "one", 3, NULL), 0);
    struct sbx_secret_info *items = NULL;
    size_t n = 0;
    assert_int_equal(sbx_secret_list(f->store, &items, &n, NULL), 0);
    assert_int_equal(n, 1);
    int64_t created = items[0].created_ms;
    free(items);
    usleep(5000);
    assert_int_equal(sbx_secret_set(f->store, "A", "two", 3, NULL), 0);
    assert_int_equal(sbx_secret_set(f->store, "B", "", 0, NULL), 0);
    assert_int_equal(sbx_secret_list(f->store, &items, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_string_equal(items[0].name, "A");
    assert_string_equal(items[1].name, "B");
    assert_true(items[0].created_ms == created);
    assert_true(items[0].updated_ms > created);
    free(items);
    char *got = NULL;
    assert_int_equal(sbx_secret_get(f->store, "A", &got, NULL, NULL), 0);
    assert_string_equal(got, "two");
    sbx_secret_value_free(got);
    assert_int_equal(sbx_secret_get(f->store, "B", &got, NULL, NULL), 0);
    assert_string_equal(got, "");
    sbx_secret_value_free(got);
}

static void
test_missing_and_remove(void **state)
{
    struct fixture *f = *state;
    sbx_autoerror sbx_error *err = NULL;
    char *got = NULL;
    assert_int_equal(sbx_secret_get(f->store, "NOPE", &got, NULL, &err), -SBX_ENOTFOUND);
    assert_non_null(strstr(err->msg, "sbx secret set NOPE"));
    assert_int_equal(sbx_secret_set(f->store, "GONE", "x", 1, NULL), 0);
    assert_int_equal(sbx_secret_remove(f->store, "GONE", NULL), 0);
    assert_int_equal(sbx_secret_remove(f->store, "GONE", NULL), -SBX_ENOTFOUND);
    assert_int_equal(sbx_secret_get(f->store, "GONE", &got, NULL, NULL), -SBX_ENOTFOUND);
}

static void
test_names_are_checked(void **state)
{
    struct fixture *f = *state;
    static const char *const bad[] = {"", "../x", "a/b", "1abc", "-x", ".hidden", "a b", "é"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        sbx_autoerror sbx_error *err = NULL;
        assert_int_equal(sbx_secret_set(f->store, bad[i], "v", 1, &err), -SBX_EINVAL);
        assert_null(strstr(err->msg, "v\""));
    }
    char longname[SBX_SECRET_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_false(sbx_secret_name_valid(longname));
    assert_true(sbx_secret_name_valid("_ok.name-2"));
    char *big = sbx_xcalloc(1, SBX_SECRET_VALUE_MAX + 1);
    assert_int_equal(sbx_secret_set(f->store, "BIG", big, SBX_SECRET_VALUE_MAX + 1, NULL),
                     -SBX_ELIMIT);
    assert_int_equal(sbx_secret_set(f->store, "BIG", big, SBX_SECRET_VALUE_MAX, NULL), 0);
    free(big);
}

static void
flip_byte(const char *path, long from_end)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    off_t off = lseek(fd, -from_end, SEEK_END);
    unsigned char b = 0;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= 0x01;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static void
test_tampering_is_detected(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(sbx_secret_set(f->store, "T", value, strlen(value), NULL), 0);
    sbx_autofree char *path = file_of(f, "T");
    flip_byte(path, 3); /* inside the ciphertext/tag */
    char *got = NULL;
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_secret_get(f->store, "T", &got, NULL, &err), -SBX_EIO);
    assert_null(got);
    assert_null(strstr(err->msg, "SECRET"));

    /* A valid file copied under another name does not decrypt as that name. */
    assert_int_equal(sbx_secret_set(f->store, "SRC", value, strlen(value), NULL), 0);
    sbx_autofree char *src = file_of(f, "SRC");
    sbx_autofree char *dst = file_of(f, "DST");
    assert_int_equal(rename(src, dst), 0);
    assert_int_equal(sbx_secret_get(f->store, "DST", &got, NULL, NULL), -SBX_EIO);
}

static void
test_other_key_cannot_read(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(sbx_secret_set(f->store, "K", value, strlen(value), NULL), 0);
    sbx_autofree char *keyfile = sbx_xasprintf("%s/../other.key", f->dir);
    int fd = open(keyfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    unsigned char key[32];
    memset(key, 7, sizeof key);
    assert_int_equal(write(fd, key, sizeof key), 32);
    close(fd);
    struct sbx_secret_store *other = NULL;
    assert_int_equal(sbx_secret_store_open(&other, f->dir, keyfile, NULL), 0);
    char *got = NULL;
    assert_int_equal(sbx_secret_get(other, "K", &got, NULL, NULL), -SBX_EIO);
    sbx_secret_store_close(other);

    /* A key file others can read is refused; so is one of the wrong size. */
    assert_int_equal(chmod(keyfile, 0644), 0);
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_secret_store_open(&other, f->dir, keyfile, &err), -SBX_EPERM);
    assert_non_null(strstr(err->msg, "chmod 600"));
    assert_int_equal(chmod(keyfile, 0600), 0);
    assert_int_equal(truncate(keyfile, 16), 0);
    assert_int_equal(sbx_secret_store_open(&other, f->dir, keyfile, NULL), -SBX_EINVAL);
    /* The store's own key survives reopening. */
    assert_int_equal(sbx_secret_store_open(&other, f->dir, NULL, NULL), 0);
    assert_int_equal(sbx_secret_get(other, "K", &got, NULL, NULL), 0);
    assert_string_equal(got, value);
    sbx_secret_value_free(got);
    sbx_secret_store_close(other);
}

struct writer {
    struct sbx_secret_store *store;
    int id;
};

static void *
write_many(void *arg)
{
    struct writer *w = arg;
    char v[32];
    for (int i = 0; i < 50; i++) {
        int n = snprintf(v, sizeof v, "writer-%d-%d", w->id, i);
        if (sbx_secret_set(w->store, "SHARED", v, (size_t)n, NULL) < 0)
            return (void *)1;
    }
    return NULL;
}

static void
test_concurrent_writers_leave_a_whole_value(void **state)
{
    struct fixture *f = *state;
    pthread_t t[4];
    struct writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){f->store, i};
        assert_int_equal(pthread_create(&t[i], NULL, write_many, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
    char *got = NULL;
    assert_int_equal(sbx_secret_get(f->store, "SHARED", &got, NULL, NULL), 0);
    assert_true(strncmp(got, "writer-", 7) == 0);
    assert_non_null(strstr(got, "-49"));
    sbx_secret_value_free(got);
    /* No temp files are left behind. */
    struct sbx_secret_info *items = NULL;
    size_t n = 0;
    assert_int_equal(sbx_secret_list(f->store, &items, &n, NULL), 0);
    assert_int_equal(n, 1);
    free(items);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_and_encrypted_on_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_keeps_one_file_and_created, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_are_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tampering_is_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_key_cannot_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers_leave_a_whole_value, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
