#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"

static void
test_parse_size(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        uint64_t want;
    } ok[] = {
        {"0", 0},
        {"512", 512},
        {"1k", 1024},
        {"256m", 256ULL << 20},
        {"256M", 256ULL << 20},
        {"1g", 1ULL << 30},
        {"512Mi", 512ULL << 20},
        {"2Gi", 2ULL << 30},
        {"1.5g", 3ULL << 29},
        {"64KB", 64ULL << 10},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ok); i++) {
        uint64_t v = 1;
        assert_int_equal(sbx_parse_size(ok[i].in, &v, NULL), 0);
        assert_int_equal(v, ok[i].want);
    }
    static const char *const bad[] = {"", "-1", "m", "12x", "1 g", "1e400", "abc", "1gg"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        uint64_t v = 7;
        sbx_autoerror sbx_error *err = NULL;
        assert_int_equal(sbx_parse_size(bad[i], &v, &err), -SBX_EINVAL);
        assert_non_null(err);
        assert_int_equal(v, 7);
    }
    uint64_t v;
    assert_int_equal(sbx_parse_size(NULL, &v, NULL), -SBX_EINVAL);
}

static void
test_parse_numbers(void **state)
{
    (void)state;
    uint64_t u = 0;
    int64_t i = 0;
    assert_int_equal(sbx_parse_u64("18446744073709551615", &u, NULL), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(sbx_parse_u64("18446744073709551616", &u, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_parse_u64("-1", &u, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_parse_u64("12a", &u, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_parse_u64(" 1", &u, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_parse_i64("-42", &i, NULL), 0);
    assert_int_equal(i, -42);
    assert_int_equal(sbx_parse_i64("", &i, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_parse_i64("4x", &i, NULL), -SBX_EINVAL);
}

static char *
make_tmpdir(void)
{
    char tmpl[] = "/tmp/sbx-test-util-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return sbx_xstrdup(tmpl);
}

static void
test_files_roundtrip(void **state)
{
    (void)state;
    sbx_autofree char *dir = make_tmpdir();
    sbx_autofree char *deep = sbx_xasprintf("%s/a/b/c", dir);
    assert_int_equal(sbx_mkdir_p(deep, 0755, NULL), 0);
    assert_int_equal(sbx_mkdir_p(deep, 0755, NULL), 0);
    sbx_autofree char *file = sbx_xasprintf("%s/f.txt", deep);
    assert_int_equal(sbx_write_file_atomic(file, "payload", 7, 0600, NULL), 0);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    sbx_autofree char *data = NULL;
    size_t len = 0;
    assert_int_equal(sbx_read_file(file, 100, &data, &len, NULL), 0);
    assert_int_equal(len, 7);
    assert_string_equal(data, "payload");
    sbx_autofree char *small = NULL;
    assert_int_equal(sbx_read_file(file, 3, &small, NULL, NULL), -SBX_ELIMIT);
    sbx_autofree char *none = NULL;
    sbx_autofree char *missing = sbx_xasprintf("%s/missing", dir);
    assert_int_equal(sbx_read_file(missing, 3, &none, NULL, NULL), -SBX_ENOTFOUND);
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
}

static void
test_rm_rf_does_not_follow_symlinks(void **state)
{
    (void)state;
    sbx_autofree char *victim = make_tmpdir();
    sbx_autofree char *keep = sbx_xasprintf("%s/keep", victim);
    assert_int_equal(sbx_write_file_atomic(keep, "k", 1, 0644, NULL), 0);
    sbx_autofree char *dir = make_tmpdir();
    sbx_autofree char *link = sbx_xasprintf("%s/link", dir);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
    /* The symlink went; what it pointed at did not. */
    assert_int_equal(access(keep, F_OK), 0);
    assert_int_equal(sbx_rm_rf(victim, NULL), 0);
}

static void
test_io_helpers(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(sbx_write_all(p[1], "abcdef", 6), 0);
    close(p[1]);
    char buf[16];
    assert_int_equal(sbx_read_full(p[0], buf, sizeof buf), 6);
    assert_memory_equal(buf, "abcdef", 6);
    close(p[0]);
    uint64_t a = sbx_now_ns();
    uint64_t b = sbx_now_ns();
    assert_true(b >= a);
    assert_true(sbx_wall_ms() > 1700000000000LL);
    assert_true(sbx_str_starts("overlay:x", "overlay:"));
    assert_false(sbx_str_starts("over", "overlay:"));
}

/* The timed waits of the server's threads run on CLOCK_MONOTONIC: a deadline from
 * sbx_monotonic_in is a real wait on such a cv (on a CLOCK_REALTIME one that deadline, seconds
 * after boot, lies in 1970 and the wait would return at once), so a wall-clock step cannot
 * stall or cut it. */
static void
test_monotonic_cond(void **state)
{
    (void)state;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    sbx_cond_init_monotonic(&cv);
    uint64_t t0 = sbx_now_ms();
    struct timespec until = sbx_monotonic_in(150);
    assert_true(until.tv_nsec >= 0 && until.tv_nsec < 1000000000L);
    pthread_mutex_lock(&mu);
    int r = 0;
    while ((r = pthread_cond_timedwait(&cv, &mu, &until)) == 0)
        ;
    pthread_mutex_unlock(&mu);
    assert_int_equal(r, ETIMEDOUT);
    assert_true(sbx_now_ms() - t0 >= 150);
    pthread_cond_destroy(&cv);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_monotonic_cond),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_files_roundtrip),
        cmocka_unit_test(test_rm_rf_does_not_follow_symlinks),
        cmocka_unit_test(test_io_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
