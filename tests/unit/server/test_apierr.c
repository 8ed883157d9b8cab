#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "server/apierr.h"
#include "sbx/error.h"

static void
test_table(void **state)
{
    (void)state;
    static const struct {
        int errc, status;
        const char *code;
    } cases[] = {
        {SBX_EINVAL, 400, "SANDBOX::INVALID_PARAMETER"},
        {-SBX_EINVAL, 400, "SANDBOX::INVALID_PARAMETER"},
        {SBX_ENOTFOUND, 404, "SANDBOX::SANDBOX_NOT_FOUND"},
        {SBX_ECONFLICT, 409, "SANDBOX::INVALID_STATE"},
        {SBX_ELIMIT, 429, "SANDBOX::LIMIT_EXCEEDED"},
        {SBX_EUNAVAIL, 503, "SANDBOX::UNAVAILABLE"},
        {SBX_EIO, 502, "SANDBOX::UPSTREAM_ERROR"},
        {SBX_EGENERIC, 500, "GENERAL::INTERNAL_ERROR"},
        {999, 500, "GENERAL::INTERNAL_ERROR"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 0;
        const char *code = NULL;
        sbx_apierr_lookup(cases[i].errc, &status, &code);
        assert_int_equal(status, cases[i].status);
        assert_string_equal(code, cases[i].code);
    }
}

static void
test_every_code_mapped(void **state)
{
    (void)state;
    for (int c = SBX_EGENERIC; c <= SBX_EIO; c++) {
        int status = 0;
        const char *code = NULL;
        sbx_apierr_lookup(c, &status, &code);
        assert_true(status >= 400 && status <= 599);
        assert_non_null(strstr(code, "::"));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_every_code_mapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
