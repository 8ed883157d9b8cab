#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"
#include "providers/providers.h"
#include "server/provider.h"

static int
parse(const char *text, struct sbx_server_config *cfg, char **msg)
{
    sbx_server_config_defaults(cfg, sbx_providers_builtin);
    sbx_error *err = NULL;
    int r = sbx_server_config_parse(cfg, text, &err);
    *msg = err ? strdup(sbx_error_msg(err)) : NULL;
    sbx_error_clear(&err);
    return r;
}

static void
expect_error(const char *text, const char *needle)
{
    struct sbx_server_config cfg;
    char *msg = NULL;
    int r = parse(text, &cfg, &msg);
    char copy[512];
    (void)snprintf(copy, sizeof copy, "%s", msg ? msg : "(none)");
    free(msg);
    sbx_server_config_dispose(&cfg);
    if (r >= 0 || !strstr(copy, needle))
        fail_msg("config %s: want an error with `%s`, got %d %s", text, needle, r, copy);
}

static void
test_defaults(void **state)
{
    (void)state;
    struct sbx_server_config cfg;
    sbx_server_config_defaults(&cfg, sbx_providers_builtin);
    assert_string_equal(cfg.listen, "127.0.0.1:8080");
    assert_string_equal(cfg.state_dir, "/var/lib/sbx");
    assert_int_equal(cfg.n_providers, 1);
#ifdef SBX_HAVE_RUNTIME
    assert_string_equal(cfg.default_provider, "native");
#else
    assert_string_equal(cfg.default_provider, "process");
#endif
    assert_int_equal(cfg.max_body_bytes, 1 << 20);
    sbx_server_config_dispose(&cfg);
}

static void
test_full(void **state)
{
    (void)state;
    struct sbx_server_config cfg;
    char *msg = NULL;
    const char *text = "# comment\n"
                       "server = { listen = \"0.0.0.0:9000\"; state_dir = \"/tmp/x\";\n"
                       "           public_addr = \"sbx.example:9000\"; };\n"
                       "providers = { supported = [\"process\"]; default = \"process\";\n"
                       "  process = { execd = \"/opt/sbx-execd\"; ping_timeout_ms = 5000; }; };\n"
                       "limits = { max_timeout_seconds = 3600; max_sandboxes = 10;\n"
                       "           max_body_bytes = 65536; create_workers = 2; };\n";
    assert_int_equal(parse(text, &cfg, &msg), 0);
    free(msg);
    assert_string_equal(cfg.listen, "0.0.0.0:9000");
    assert_string_equal(cfg.state_dir, "/tmp/x");
    assert_string_equal(cfg.public_addr, "sbx.example:9000");
    assert_int_equal(cfg.max_timeout_s, 3600);
    assert_int_equal(cfg.max_sandboxes, 10);
    assert_int_equal(cfg.max_body_bytes, 65536);
    assert_int_equal(cfg.create_workers, 2);
    json_t *pp = json_object_get(cfg.provider_settings, "process");
    assert_string_equal(json_string_value(json_object_get(pp, "execd")), "/opt/sbx-execd");
    assert_int_equal(json_integer_value(json_object_get(pp, "ping_timeout_ms")), 5000);
    sbx_server_config_dispose(&cfg);
}

static void
test_errors(void **state)
{
    (void)state;
    expect_error("bogus = 1;", "unknown key `bogus`");
    expect_error("server = { lisen = \"x\"; };", "unknown key `server.lisen`");
    expect_error("limits = { max_sandboxs = 1; };", "`limits.max_sandboxs`");
    expect_error("limits = { max_sandboxes = \"1\"; };", "must be an integer");
    expect_error("limits = { max_timeout_seconds = 10; };", ">= 60");
    expect_error("providers = { supported = [\"process\", \"process\"]; };", "listed twice");
    expect_error("providers = { supported = []; };", "non-empty list");
    expect_error("providers = { nosuch = { x = 1; }; };", "`providers.nosuch`");
    expect_error("providers = { docker = { x = 1; }; };", "`providers.docker.x`");
    expect_error("providers = { process = { exec = \"/x\"; }; };", "`providers.process.exec`");
    expect_error("server = { listen = 5; };", "non-empty string");
    expect_error("server = { listen = \"a\"; ", "line");
    expect_error("server = { listen = \"a\"; }; server = { listen = \"b\"; };", "duplicate");
}

static void
registry_case(const char *text, const char *needle)
{
    struct sbx_server_config cfg;
    char *msg = NULL;
    assert_int_equal(parse(text, &cfg, &msg), 0);
    free(msg);
    struct sbx_provider_env env = {.state_dir = "/nonexistent", .exe_dir = "/nonexistent"};
    struct sbx_registry *reg = NULL;
    sbx_error *err = NULL;
    int r = sbx_registry_build(&cfg, &env, &reg, &err);
    if (needle) {
        assert_true(r < 0);
        if (!strstr(sbx_error_msg(err), needle))
            fail_msg("registry: want , got %s", needle, sbx_error_msg(err));
    } else {
        assert_int_equal(r, 0);
        assert_string_equal(sbx_registry_resolve(reg, NULL), "process");
        assert_non_null(sbx_registry_peek(reg, "process"));
        assert_null(sbx_registry_resolve(reg, "nosuch"));
        assert_string_equal(sbx_registry_names(reg), "process");
    }
    sbx_error_clear(&err);
    sbx_registry_free(reg);
    sbx_server_config_dispose(&cfg);
}

static void
test_registry(void **state)
{
    (void)state;
    registry_case("providers = { supported = [\"process\"]; default = \"process\"; };", NULL);
    registry_case("providers = { supported = [\"nosuch\"]; };", "unknown provider `nosuch`");
    registry_case("providers = { supported = [\"process\"]; default = \"nosuch\"; };",
                  "not in the supported set");
    registry_case("providers = { supported = [\"process\"]; default = \"docker\"; };",
                  "not in the supported set");
    registry_case("providers = { supported = [\"docker\"]; docker = { reach = \"x\"; }; };",
                  "`providers.docker.reach` cannot be `x`");
    registry_case("providers = { supported = [\"docker\"]; docker = { network = \"host\"; }; };",
                  "cannot be \"host\"");
    registry_case("providers = { supported = [\"docker\"]; docker = { pids_limit = 1; }; };",
                  "`providers.docker.pids_limit` must be an integer >= 16");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
