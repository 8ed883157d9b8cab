/*
 * A create's fields that need a provider capability: refused with 400 API_NOT_SUPPORTED
 * naming the field and the provider unless the provider's factory declares the capability.
 * A provider that declares nothing gets every such field refused (fail closed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/api_fields.h"

static const struct sbx_provider_factory bare = {.name = "bare"};
static const struct sbx_provider_factory full = {
    .name = "full",
    .caps = SBX_CAP_PAUSE | SBX_CAP_SNAPSHOT | SBX_CAP_VOLUMES | SBX_CAP_NETWORK_POLICY |
            SBX_CAP_POOLS | SBX_CAP_RESOURCE_REQUESTS | SBX_CAP_CREDENTIAL_PROXY,
};

/* 0 when accepted; else the status, with the message checked for `needle`. */
static int
check(const struct sbx_provider_factory *f, const char *body_json, const char *needle)
{
    json_t *body = json_loads(body_json, 0, NULL);
    assert_non_null(body);
    struct sbx_reply rep = {0};
    int r = sbx_api_check_fields(f, body, &rep);
    json_decref(body);
    int status = r < 0 ? rep.status : 0;
    if (r < 0 && (!rep.message || !strstr(rep.message, needle) || !strstr(rep.message, f->name)))
        fail_msg("want `%s` and `%s` in: %s", needle, f->name, rep.message ? rep.message : "");
    if (r < 0)
        assert_string_equal(rep.code, "SANDBOX::API_NOT_SUPPORTED");
    free(rep.message);
    json_decref(rep.body);
    return status;
}

static void
test_bare_provider_fails_closed(void **state)
{
    (void)state;
    assert_int_equal(
        check(&bare, "{\"networkPolicy\":{\"defaultAction\":\"deny\"}}", "networkPolicy"), 400);
    assert_int_equal(check(&bare, "{\"volumes\":[{\"name\":\"v\"}]}", "volumes"), 400);
    assert_int_equal(check(&bare, "{\"extensions\":{\"poolRef\":\"p\"}}", "poolRef"), 400);
    assert_int_equal(check(&bare, "{\"resourceRequests\":{\"cpu\":\"1\"}}", "resourceRequests"),
                     400);
    assert_int_equal(check(&bare,
                           "{\"credentialProxy\":{\"enabled\":true},"
                           "\"networkPolicy\":{\"defaultAction\":\"allow\"}}",
                           "credentialProxy"),
                     400);
    /* what needs no capability passes */
    assert_int_equal(check(&bare, "{\"networkPolicy\":null,\"volumes\":[]}", ""), 0);
    assert_int_equal(check(&bare, "{\"resourceRequests\":{}}", ""), 0);
}

static void
test_declared_capabilities_pass(void **state)
{
    (void)state;
    assert_int_equal(check(&full, "{\"networkPolicy\":{\"defaultAction\":\"deny\"}}", ""), 0);
    assert_int_equal(check(&full, "{\"volumes\":[{\"name\":\"v\"}]}", ""), 0);
    assert_int_equal(check(&full, "{\"extensions\":{\"poolRef\":\"p\"}}", ""), 0);
    assert_int_equal(check(&full, "{\"resourceRequests\":{\"cpu\":\"1\"}}", ""), 0);
    assert_int_equal(check(&full,
                           "{\"credentialProxy\":{\"enabled\":true},"
                           "\"networkPolicy\":{\"defaultAction\":\"allow\"}}",
                           ""),
                     0);
    assert_int_equal(check(&full, "{\"credentialProxy\":{\"enabled\":false}}", ""), 0);
}

/* credentialProxy: only where the provider declares it (even with a network policy), and
 * never without a networkPolicy (COMPAT.md: it requires one). */
static void
test_credential_proxy(void **state)
{
    (void)state;
    static const struct sbx_provider_factory np = {.name = "np", .caps = SBX_CAP_NETWORK_POLICY};
    assert_int_equal(check(&np,
                           "{\"credentialProxy\":{\"enabled\":true},"
                           "\"networkPolicy\":{\"defaultAction\":\"deny\"}}",
                           "credentialProxy"),
                     400);
    static const char *const bad[] = {
        "{\"credentialProxy\":{\"enabled\":true}}",
        "{\"credentialProxy\":{\"enabled\":true},\"networkPolicy\":null}",
        "{\"credentialProxy\":{\"enabled\":\"yes\"},\"networkPolicy\":{}}",
        "{\"credentialProxy\":true,\"networkPolicy\":{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *body = json_loads(bad[i], 0, NULL);
        struct sbx_reply rep = {0};
        assert_int_equal(sbx_api_check_fields(&full, body, &rep), -1);
        assert_int_equal(rep.status, 400);
        assert_non_null(strstr(rep.message, "credentialProxy"));
        free(rep.message);
        json_decref(body);
    }
}

static void
test_platform_follows_the_declared_arch(void **state)
{
    (void)state;
    static const struct sbx_provider_factory arm = {.name = "arm", .arch = "arm64"};
    assert_int_equal(check(&arm, "{\"platform\":{\"os\":\"linux\",\"arch\":\"arm64\"}}", ""), 0);
    assert_int_equal(
        check(&arm, "{\"platform\":{\"os\":\"linux\",\"arch\":\"amd64\"}}", "linux/arm64"), 400);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bare_provider_fails_closed),
        cmocka_unit_test(test_declared_capabilities_pass),
        cmocka_unit_test(test_platform_follows_the_declared_arch),
        cmocka_unit_test(test_credential_proxy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
