#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/srvutil.h"

static void
test_time(void **state)
{
    (void)state;
    char ts[32];
    sbx_srv_format_time(1781233445123LL, ts);
    assert_string_equal(ts, "2026-06-12T03:04:05.123Z");
    int64_t ms = 0;
    assert_int_equal(sbx_srv_parse_time("2026-06-12T03:04:05.123456Z", &ms, NULL), 0);
    assert_int_equal(ms, 1781233445123LL);
    assert_int_equal(sbx_srv_parse_time("2026-06-12T03:04:05Z", &ms, NULL), 0);
    assert_int_equal(ms, 1781233445000LL);
    assert_int_equal(sbx_srv_parse_time("2026-06-12T05:04:05.5+02:00", &ms, NULL), 0);
    assert_int_equal(ms, 1781233445500LL);
    assert_int_equal(sbx_srv_parse_time("2026-06-12T03:04:05", &ms, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_srv_parse_time("tomorrow", &ms, NULL), -SBX_EINVAL);
    assert_int_equal(sbx_srv_parse_time("2026-06-12T03:04:05Zjunk", &ms, NULL), -SBX_EINVAL);
}

static void
test_decode(void **state)
{
    (void)state;
    char *s = sbx_srv_url_decode("a%20b+c%2F", 10, true);
    assert_string_equal(s, "a b c/");
    free(s);
    s = sbx_srv_url_decode("a+b", 3, false);
    assert_string_equal(s, "a+b");
    free(s);
    assert_null(sbx_srv_url_decode("%zz", 3, false));
    assert_null(sbx_srv_url_decode("%2", 2, false));
    assert_null(sbx_srv_url_decode("a%00", 4, false));
}

static void
test_ids(void **state)
{
    (void)state;
    char id[SBX_UUID_LEN + 1];
    char other[SBX_UUID_LEN + 1];
    sbx_srv_uuid4(id);
    sbx_srv_uuid4(other);
    assert_true(sbx_srv_is_uuid(id));
    assert_string_not_equal(id, other);
    assert_int_equal(id[14], '4');
    assert_true(strchr("89ab", id[19]) != NULL);
    assert_false(sbx_srv_is_uuid("not-a-uuid"));
    assert_false(sbx_srv_is_uuid("00000000-0000-4000-8000-00000000000g"));
    assert_false(sbx_srv_is_uuid("00000000000004000800000000000000000"));
    char hex[33];
    sbx_srv_uuid4_hex(hex);
    assert_int_equal(strlen(hex), 32);
}

static void
test_secret(void **state)
{
    (void)state;
    assert_true(sbx_srv_secret_equal("abc", "abc"));
    assert_false(sbx_srv_secret_equal("abc", "abd"));
    assert_false(sbx_srv_secret_equal("abc", "abcd"));
    assert_false(sbx_srv_secret_equal("", ""));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
