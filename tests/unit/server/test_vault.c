/*
 * The Credential Vault's schema checks (api_vault.c): a Credential's name and write-only
 * value (never a CR, LF or other control character: it becomes a header value), a
 * CredentialBinding normalized with the spec's defaults, unknown fields refused
 * (additionalProperties: false), header names that would frame or redirect a request refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/api_vault.h"

static int
cred(const char *js)
{
    json_t *c = json_loads(js, JSON_ALLOW_NUL, NULL);
    assert_non_null(c);
    const char *name = NULL;
    const char *value = NULL;
    char msg[512] = "";
    int r = sbx_vault_credential_check(c, &name, &value, msg, sizeof msg);
    if (r == 0) {
        assert_string_equal(name, "k");
        assert_string_equal(value, "s3cret value");
    } else {
        assert_true(msg[0]);
        assert_null(strstr(msg, "s3cret")); /* a message never holds a value */
    }
    json_decref(c);
    return r;
}

static void
test_credentials(void **state)
{
    (void)state;
    assert_int_equal(cred("{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret "
                          "value\"}}"),
                     0);
    static const char *const bad[] = {
        "[]",
        "{\"name\":\"k\"}",
        "{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\\r\\nX: y\"}}",
        "{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\\u0000\"}}",
        "{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":\"\"}}",
        "{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":7}}",
        "{\"name\":\"k\",\"source\":{\"type\":\"env\",\"value\":\"s3cret\"}}",
        "{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\",\"x\":1}}",
        "{\"name\":\"k\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\"},\"x\":1}",
        "{\"name\":\"a/b\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\"}}",
        "{\"name\":\".k\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\"}}",
        "{\"name\":\"\",\"source\":{\"type\":\"inline\",\"value\":\"s3cret\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(cred(bad[i]), -1);
}

static json_t *
binding(const char *js)
{
    json_t *b = json_loads(js, 0, NULL);
    assert_non_null(b);
    char msg[512] = "";
    json_t *out = sbx_vault_binding_check(b, msg, sizeof msg);
    if (!out)
        assert_true(msg[0]);
    json_decref(b);
    return out;
}

static void
test_binding_defaults(void **state)
{
    (void)state;
    json_t *b = binding("{\"name\":\"b\",\"match\":{\"hosts\":[\"API.Example.com.\"]},"
                        "\"auth\":{\"type\":\"apiKey\",\"name\":\"X-Api-Key\","
                        "\"credential\":\"k\"}}");
    assert_non_null(b);
    json_t *want = json_loads(
        "{\"name\":\"b\",\"match\":{\"schemes\":[\"https\"],\"ports\":[443],"
        "\"hosts\":[\"api.example.com\"],\"methods\":[\"GET\",\"POST\",\"PUT\",\"PATCH\","
        "\"DELETE\"],\"paths\":[\"/*\"]},\"auth\":{\"type\":\"apiKey\",\"name\":\"X-Api-Key\","
        "\"credential\":\"k\"}}",
        0, NULL);
    assert_true(json_equal(b, want));
    json_decref(b);
    json_decref(want);
    b = binding("{\"name\":\"c\",\"match\":{\"hosts\":[\"*.x.test\"],\"schemes\":[\"http\"],"
                "\"ports\":[80,8080],\"methods\":[\"GET\"],\"paths\":[\"/v1/*\"]},"
                "\"auth\":{\"type\":\"customHeaders\",\"headers\":[{\"name\":\"X-A\","
                "\"credential\":\"k\"},{\"name\":\"X-B\",\"credential\":\"j\"}]}}");
    assert_non_null(b);
    assert_int_equal(json_array_size(json_object_get(json_object_get(b, "auth"), "headers")), 2);
    json_decref(b);
}

static void
test_bad_bindings(void **state)
{
    (void)state;
#define M "\"match\":{\"hosts\":[\"a.test\"]}"
#define A "\"auth\":{\"type\":\"bearer\",\"credential\":\"k\"}"
    static const char *const bad[] = {
        "{\"name\":\"b\"," M "}",
        "{\"name\":\"b\"," A "}",
        "{\"name\":\"b\"," M "," A ",\"x\":1}",
        "{\"name\":\"b b\"," M "," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[]}," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[\"10.0.0.1\"]}," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[\"a.test\"],\"x\":1}," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[\"a.test\"],\"schemes\":[\"ftp\"]}," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[\"a.test\"],\"ports\":[70000]}," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[\"a.test\"],\"methods\":[\"get\"]}," A "}",
        "{\"name\":\"b\",\"match\":{\"hosts\":[\"a.test\"],\"paths\":[\"v1\"]}," A "}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"bearer\",\"credential\":\"k\",\"x\":1}}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"oauth\",\"credential\":\"k\"}}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"apiKey\",\"name\":\"Host\","
        "\"credential\":\"k\"}}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"apiKey\",\"name\":\"transfer-encoding\","
        "\"credential\":\"k\"}}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"apiKey\",\"name\":\"X:Y\","
        "\"credential\":\"k\"}}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"customHeaders\",\"headers\":[]}}",
        "{\"name\":\"b\"," M ",\"auth\":{\"type\":\"customHeaders\",\"headers\":[{\"name\":"
        "\"Content-Length\",\"credential\":\"k\"}]}}",
    };
#undef M
#undef A
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *b = binding(bad[i]);
        if (b)
            fail_msg("accepted: %s", bad[i]);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credentials),
        cmocka_unit_test(test_binding_defaults),
        cmocka_unit_test(test_bad_bindings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
