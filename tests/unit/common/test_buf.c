#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

static void
test_append_and_steal(void **state)
{
    (void)state;
    sbx_autobuf struct sbx_buf b;
    sbx_buf_init(&b, 1024);
    assert_string_equal(sbx_buf_str(&b), "");
    assert_int_equal(sbx_buf_append_str(&b, "hello", NULL), 0);
    assert_int_equal(sbx_buf_printf(&b, NULL, ", %s %d", "world", 42), 0);
    assert_int_equal(b.len, strlen("hello, world 42"));
    assert_string_equal(sbx_buf_str(&b), "hello, world 42");
    char *s = sbx_buf_steal(&b);
    assert_string_equal(s, "hello, world 42");
    free(s);
    assert_int_equal(b.len, 0);
    assert_null(b.data);
    s = sbx_buf_steal(&b);
    assert_string_equal(s, "");
    free(s);
}

static void
test_limit_is_enforced(void **state)
{
    (void)state;
    sbx_autoerror sbx_error *err = NULL;
    sbx_autobuf struct sbx_buf b;
    sbx_buf_init(&b, 8);
    assert_int_equal(sbx_buf_append(&b, "12345678", 8, &err), 0);
    assert_int_equal(sbx_buf_append(&b, "9", 1, &err), -SBX_ELIMIT);
    assert_non_null(err);
    assert_int_equal(err->code, SBX_ELIMIT);
    /* The contents are dropped on overflow so nothing half-built is used. */
    assert_int_equal(b.len, 0);
    /* Huge sizes must not wrap around the size arithmetic. */
    assert_int_equal(sbx_buf_append(&b, "x", SIZE_MAX, NULL), -SBX_ELIMIT);
}

static void
test_binary_and_reset(void **state)
{
    (void)state;
    sbx_autobuf struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    char bin[300];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (char)i;
    for (int i = 0; i < 100; i++)
        assert_int_equal(sbx_buf_append(&b, bin, sizeof bin, NULL), 0);
    assert_int_equal(b.len, 30000);
    assert_memory_equal(b.data + (size_t)300 * 50, bin, sizeof bin);
    assert_int_equal(b.data[b.len], '\0');
    sbx_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(sbx_buf_str(&b), "");
}

static void
test_shell_quoted(void **state)
{
    (void)state;
    struct sbx_buf b;
    sbx_buf_init(&b, 64);
    assert_int_equal(sbx_buf_append_shell_quoted(&b, "it's a $x", NULL), 0);
    assert_string_equal(sbx_buf_str(&b), "'it'\\''s a $x'");
    sbx_buf_reset(&b);
    assert_int_equal(sbx_buf_append_shell_quoted(&b, "", NULL), 0);
    assert_string_equal(sbx_buf_str(&b), "''");
    sbx_buf_dispose(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_steal),
        cmocka_unit_test(test_limit_is_enforced),
        cmocka_unit_test(test_binary_and_reset),
        cmocka_unit_test(test_shell_quoted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
