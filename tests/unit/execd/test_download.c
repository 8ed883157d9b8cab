#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "execd/download.h"

static void
check_range(const char *h, uint64_t size, uint64_t start, uint64_t len)
{
    uint64_t s = 0;
    uint64_t l = 0;
    assert_int_equal(execd_range_parse(h, size, &s, &l), 0);
    assert_int_equal(s, start);
    assert_int_equal(l, len);
}

static void
test_ranges(void **state)
{
    (void)state;
    check_range("bytes=0-9", 100, 0, 10);
    check_range("bytes=90-", 100, 90, 10);
    check_range("bytes=-5", 100, 95, 5);
    check_range("bytes=-500", 100, 0, 100);
    check_range("bytes=50-1000", 100, 50, 50);
    check_range("bytes=1-2,5-6", 100, 1, 2);
    check_range("bytes= 3-4", 100, 3, 2);
}

static void
test_unsatisfiable(void **state)
{
    (void)state;
    uint64_t s = 0;
    uint64_t l = 0;
    const char *bad[] = {"bytes=100-", "bytes=5-1", "bytes=x",    "items=0-1",
                         "bytes=-0",   "bytes=",    "bytes=1-2x", "bytes=99999999999999999999999-"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(execd_range_parse(bad[i], 100, &s, &l), -1);
    assert_int_equal(execd_range_parse("bytes=0-", 0, &s, &l), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_unsatisfiable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
