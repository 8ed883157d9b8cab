#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "server/publish.h"

static void
test_parse_ok(void **state)
{
    (void)state;
    struct sbx_publish_spec s;
    sbx_error *err = NULL;
    assert_int_equal(sbx_publish_parse("5000", &s, &err), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.port[0], 5000);
    assert_int_equal(s.host_port[0], 0);
    assert_int_equal(sbx_publish_parse("5000:15000,44772,1:65535", &s, &err), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.port[0], 5000);
    assert_int_equal(s.host_port[0], 15000);
    assert_int_equal(s.port[1], 44772);
    assert_int_equal(s.host_port[1], 0);
    assert_int_equal(s.port[2], 1);
    assert_int_equal(s.host_port[2], 65535);
    assert_int_equal(sbx_publish_parse("1,2,3,4,5,6,7,8", &s, &err), 0);
    assert_int_equal(s.n, 8);
}

static void
test_parse_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {
        NULL,      "",          ",",       "0",      "65536",    "5000:",
        ":5000",   "5000:0",    "50 00",   "5000,",  ",5000",    "5000,5000",
        "1:9,2:9", "-1",        "+5",      "0x10",   "5000:1:2", "1,2,3,4,5,6,7,8,9",
        "123456",  "5000;6000", "5000,,6", "5000: 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sbx_publish_spec s;
        sbx_error *err = NULL;
        assert_int_equal(sbx_publish_parse(bad[i], &s, &err), -SBX_EINVAL);
        assert_non_null(err);
        sbx_error_clear(&err);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
