#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "common/error.h"

static int
inner(sbx_error **err)
{
    return sbx_error_set(err, SBX_ENOTFOUND, ENOENT, "open `%s`", "/x");
}

static int
outer(sbx_error **err)
{
    int ret = inner(err);
    if (ret < 0)
        return sbx_error_wrap(err, "load image `%s`", "alpine");
    return 0;
}

static void
test_set_and_wrap(void **state)
{
    (void)state;
    sbx_autoerror sbx_error *err = NULL;
    int ret = outer(&err);
    assert_int_equal(ret, -SBX_ENOTFOUND);
    assert_non_null(err);
    assert_int_equal(sbx_error_code(err), SBX_ENOTFOUND);
    assert_int_equal(err->sys_errno, ENOENT);
    assert_string_equal(sbx_error_msg(err),
                        "load image `alpine`: open `/x`: No such file or directory");
}

static void
test_set_replaces_previous(void **state)
{
    (void)state;
    sbx_autoerror sbx_error *err = NULL;
    (void)sbx_error_set(&err, SBX_EINVAL, 0, "first");
    int ret = sbx_error_set(&err, SBX_ELIMIT, 0, "second %d", 2);
    assert_int_equal(ret, -SBX_ELIMIT);
    assert_string_equal(err->msg, "second 2");
    assert_int_equal(err->sys_errno, 0);
}

static void
test_null_err_still_returns_code(void **state)
{
    (void)state;
    assert_int_equal(sbx_error_set(NULL, SBX_EPERM, EPERM, "x"), -SBX_EPERM);
    assert_int_equal(sbx_error_wrap(NULL, "ctx"), -SBX_EGENERIC);
    /* A non-positive code is a bug in the caller; it becomes generic rather than "success". */
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_error_set(&err, 0, 0, "zero"), -SBX_EGENERIC);
}

static void
test_wrap_unset_is_generic(void **state)
{
    (void)state;
    sbx_autoerror sbx_error *err = NULL;
    int ret = sbx_error_wrap(&err, "context");
    assert_int_equal(ret, -SBX_EGENERIC);
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "bug"));
}

static void
test_move_and_clear(void **state)
{
    (void)state;
    sbx_autoerror sbx_error *a = NULL;
    sbx_autoerror sbx_error *b = NULL;
    (void)sbx_error_set(&a, SBX_EEXISTS, 0, "a");
    (void)sbx_error_set(&b, SBX_EINVAL, 0, "b");
    sbx_error_move(&b, &a);
    assert_null(a);
    assert_string_equal(b->msg, "a");
    sbx_error_clear(&b);
    assert_null(b);
    sbx_error_clear(&b);
    sbx_error_clear(NULL);
    assert_string_equal(sbx_error_msg(NULL), "unknown error");
    assert_int_equal(sbx_error_code(NULL), SBX_EGENERIC);
}

static void
test_strerror_covers_codes(void **state)
{
    (void)state;
    for (int c = SBX_OK; c <= SBX_EIO; c++) {
        assert_non_null(sbx_strerror(c));
        assert_string_not_equal(sbx_strerror(c), "unknown error");
        assert_string_equal(sbx_strerror(-c), sbx_strerror(c));
    }
    assert_string_equal(sbx_strerror(9999), "unknown error");
    assert_string_equal(sbx_strerror(SBX_ENOTFOUND), "not found");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_and_wrap),
        cmocka_unit_test(test_set_replaces_previous),
        cmocka_unit_test(test_null_err_still_returns_code),
        cmocka_unit_test(test_wrap_unset_is_generic),
        cmocka_unit_test(test_move_and_clear),
        cmocka_unit_test(test_strerror_covers_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
