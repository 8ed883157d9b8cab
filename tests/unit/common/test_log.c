#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "common/xalloc.h"

static char *last_line;
static int lines;

static void
capture(enum sbx_log_level level, const char *line, void *payload)
{
    (void)level;
    (void)payload;
    free(last_line);
    last_line = sbx_xstrdup(line);
    lines++;
}

static int
setup(void **state)
{
    (void)state;
    lines = 0;
    sbx_log_set_sink(capture, NULL);
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    sbx_log_set_sink(NULL, NULL);
    free(last_line);
    last_line = NULL;
    return 0;
}

static int formatted;

static const char *
count_format(void)
{
    formatted++;
    return "x";
}

static void
test_level_filters_before_formatting(void **state)
{
    (void)state;
    sbx_log_init("t", SBX_LOG_WARN, SBX_LOG_TEXT);
    formatted = 0;
    sbx_debug("hidden %s", count_format());
    assert_int_equal(formatted, 0);
    assert_int_equal(lines, 0);
    sbx_warn("shown %s", count_format());
    assert_int_equal(formatted, 1);
    assert_int_equal(lines, 1);
    assert_string_equal(last_line, "t: warn: shown x");
    sbx_info("also hidden");
    assert_int_equal(lines, 1);
}

static void
test_errno_suffix(void **state)
{
    (void)state;
    sbx_log_init("t", SBX_LOG_INFO, SBX_LOG_TEXT);
    errno = ENOENT;
    sbx_log_errno(SBX_LOG_ERROR, "open %s", "/nope");
    assert_string_equal(last_line, "t: error: open /nope: No such file or directory");
    assert_int_equal(errno, ENOENT);
    sbx_info("plain");
    assert_string_equal(last_line, "t: plain");
}

static void
test_json_lines(void **state)
{
    (void)state;
    sbx_log_init("srv", SBX_LOG_INFO, SBX_LOG_JSON);
    sbx_info("quote \" and newline\n in %s", "msg");
    json_error_t jerr;
    json_t *o = json_loads(last_line, 0, &jerr);
    assert_non_null(o);
    assert_null(strchr(last_line, '\n'));
    assert_string_equal(json_string_value(json_object_get(o, "level")), "info");
    assert_string_equal(json_string_value(json_object_get(o, "prog")), "srv");
    assert_string_equal(json_string_value(json_object_get(o, "msg")),
                        "quote \" and newline\n in msg");
    const char *ts = json_string_value(json_object_get(o, "ts"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), strlen("2026-01-01T00:00:00.000Z"));
    json_decref(o);
    sbx_log_init("t", SBX_LOG_INFO, SBX_LOG_TEXT);
}

static void
test_parse_level(void **state)
{
    (void)state;
    enum sbx_log_level l = SBX_LOG_ERROR;
    assert_int_equal(sbx_log_parse_level("debug", &l), 0);
    assert_int_equal(l, SBX_LOG_DEBUG);
    assert_int_equal(sbx_log_parse_level("WARNING", &l), 0);
    assert_int_equal(l, SBX_LOG_WARN);
    assert_int_equal(sbx_log_parse_level("4", &l), 0);
    assert_int_equal(l, SBX_LOG_TRACE);
    assert_int_equal(sbx_log_parse_level("loud", &l), -SBX_EINVAL);
    assert_int_equal(sbx_log_parse_level("", &l), -SBX_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_level_filters_before_formatting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errno_suffix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_lines, setup, teardown),
        cmocka_unit_test(test_parse_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
