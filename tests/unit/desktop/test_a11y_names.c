/* Unit tests for a11y_names.c: OSWorld's names and Python's float formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "desktop/a11y_int.h"

static void
test_pyfloat(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {1.0, "1.0"},
        {100.0, "100.0"},
        {0.25, "0.25"},
        {0.1, "0.1"},
        {1e-05, "1e-05"},
        {0.0001, "0.0001"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {123456789.5, "123456789.5"},
        {-2.5, "-2.5"},
        {1.5e300, "1.5e+300"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {1.0 / 3, "0.3333333333333333"},
        {__builtin_inf(), "inf"},
        {-__builtin_inf(), "-inf"},
        {__builtin_nan(""), "nan"},
    };
    char buf[48];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        a11y_pyfloat(cases[i].v, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].want);
    }
}

static void
name_is(const char *in, const char *want)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 1024);
    a11y_xml_name(in, &b, NULL);
    assert_string_equal(sbx_buf_str(&b), want);
    sbx_buf_dispose(&b);
}

static void
test_xml_name(void **state)
{
    (void)state;
    name_is("text-align", "text-align");
    name_is("jump to", "jump-to");
    name_is("a b:c", "a-b_c");
    name_is("9lives", "_9lives");
    name_is("-x", "_-x");
    name_is("\xc3\xa9t\xc3\xa9", "___t__"); /* non-ASCII: not trusted as a name character */
    name_is("", "");
}

static void
test_tables(void **state)
{
    (void)state;
    assert_string_equal(a11y_role_tag(43), "push-button");
    assert_string_equal(a11y_role_tag(95), "document-web");
    assert_string_equal(a11y_role_tag(A11Y_ROLE_DOCUMENT_SPREADSHEET), "document-spreadsheet");
    assert_string_equal(a11y_role_tag(A11Y_ROLE_TABLE), "table");
    assert_string_equal(a11y_role_tag(129), "push-button-menu");
    assert_null(a11y_role_tag(A11Y_ROLE_EXTENDED));
    assert_null(a11y_role_tag(130));
    assert_string_equal(a11y_state_name(A11Y_STATE_SHOWING), "showing");
    assert_string_equal(a11y_state_name(A11Y_STATE_VISIBLE), "visible");
    assert_string_equal(a11y_state_name(17), "multi_line");
    assert_string_equal(a11y_state_name(43), "read_only");
    assert_null(a11y_state_name(44));
    assert_int_equal(a11y_iface_bit("org.a11y.atspi.Text"), A11Y_IF_TEXT);
    assert_int_equal(a11y_iface_bit("org.a11y.atspi.Hyperlink"), 0);
    assert_int_equal(a11y_iface_bit("Text"), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pyfloat),
        cmocka_unit_test(test_xml_name),
        cmocka_unit_test(test_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
