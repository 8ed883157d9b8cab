#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "execd/path.h"

static void
check_clean(const char *in, const char *want)
{
    char *out = NULL;
    const char *why = NULL;
    assert_int_equal(execd_path_clean(in, strlen(in), &out, &why), 0);
    assert_string_equal(out, want);
    free(out);
}

static void
check_reject(const char *in, size_t n)
{
    char *out = NULL;
    const char *why = NULL;
    assert_int_equal(execd_path_clean(in, n, &out, &why), -1);
    assert_null(out);
    assert_non_null(why);
}

static void
test_normalises(void **state)
{
    (void)state;
    check_clean("/", "/");
    check_clean("//", "/");
    check_clean("/a/b/", "/a/b");
    check_clean("/a//b/./c", "/a/b/c");
    check_clean("/a/b/../c", "/a/c");
    check_clean("/../../etc/passwd", "/etc/passwd");
    check_clean("/a/..", "/");
    check_clean("/a/...", "/a/...");
    check_clean("/.hidden/..x", "/.hidden/..x");
}

static void
test_rejects(void **state)
{
    (void)state;
    check_reject("", 0);
    check_reject("relative", 8);
    check_reject("./x", 3);
    check_reject("/a\0b", 4);
    char *longp = malloc(5000);
    memset(longp, 'a', 5000);
    longp[0] = '/';
    check_reject(longp, 5000);
    free(longp);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalises),
        cmocka_unit_test(test_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
