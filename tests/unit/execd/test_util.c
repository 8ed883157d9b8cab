#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "execd/execd.h"

static void
check_quote(const char *in, size_t n, const char *want)
{
    struct evbuffer *b = evbuffer_new();
    execd_json_quote(b, in, n);
    size_t len = evbuffer_get_length(b);
    char *s = calloc(1, len + 1);
    evbuffer_remove(b, s, len);
    assert_string_equal(s, want);
    free(s);
    evbuffer_free(b);
}

static void
test_json_quote(void **state)
{
    (void)state;
    check_quote("plain", 5, "\"plain\"");
    check_quote("a\"b\\c\n\t\x01", 8, "\"a\\\"b\\\\c\\n\\t\\u0001\"");
    check_quote("caf\xc3\xa9 \xe2\x82\xac", 9, "\"caf\xc3\xa9 \xe2\x82\xac\"");
    check_quote("\xff\xc3", 2, "\"\\ufffd\\ufffd\"");
    check_quote("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate is invalid */
    check_quote("a\0b", 3, "\"a\\u0000b\"");
}

static void
test_token_and_ids(void **state)
{
    (void)state;
    assert_true(execd_token_equal("secret", "secret"));
    assert_false(execd_token_equal("secreT", "secret"));
    assert_false(execd_token_equal("secret-longer", "secret"));
    assert_false(execd_token_equal("", "secret"));
    char a[40];
    char b[40];
    execd_uuid4(a, false);
    execd_uuid4(b, true);
    assert_int_equal(strlen(a), 32);
    assert_int_equal(strlen(b), 36);
    assert_int_equal(b[14], '4');
    char ts[40];
    execd_rfc3339(ts, sizeof(ts), 1700000000123);
    assert_string_equal(ts, "2023-11-14T22:13:20.123Z");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_quote),
        cmocka_unit_test(test_token_and_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
