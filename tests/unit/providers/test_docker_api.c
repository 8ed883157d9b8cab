#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "providers/docker_api.h"

static void
test_ref_ok(void **state)
{
    (void)state;
    assert_true(sbx_docker_ref_ok("busybox"));
    assert_true(sbx_docker_ref_ok("127.0.0.1:5000/sbx-test/busybox:1"));
    assert_true(sbx_docker_ref_ok("ghcr.io/a/b@sha256:0123abcdef"));
    assert_true(sbx_docker_ref_ok("python:3.11-slim"));
    /* nothing that could change the URL the request goes to */
    assert_false(sbx_docker_ref_ok(""));
    assert_false(sbx_docker_ref_ok("bad image"));
    assert_false(sbx_docker_ref_ok("x?fromImage=evil"));
    assert_false(sbx_docker_ref_ok("x#frag"));
    assert_false(sbx_docker_ref_ok("a%2fb"));
    assert_false(sbx_docker_ref_ok("/containers/x"));
    assert_false(sbx_docker_ref_ok("-x"));
    assert_false(sbx_docker_ref_ok("a\nb"));
}

static void
test_pull_ref(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"busybox", "busybox:latest"},
        {"user/app", "user/app:latest"},
        {"user/app:1", "user/app:1"},
        {"127.0.0.1:5000/x", "127.0.0.1:5000/x:latest"},
        {"127.0.0.1:5000/x:2", "127.0.0.1:5000/x:2"},
        {"x@sha256:abc", "x@sha256:abc"},
        {"localhost:5000/a/b@sha256:abc", "localhost:5000/a/b@sha256:abc"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = sbx_docker_pull_ref(cases[i][0]);
        assert_string_equal(got, cases[i][1]);
        free(got);
    }
}

static void
test_ref_registry(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"busybox:latest", "docker.io"}, {"user/app:1", "docker.io"},
        {"localhost/x:1", "localhost"},  {"127.0.0.1:5000/x:1", "127.0.0.1:5000"},
        {"ghcr.io/a/b:1", "ghcr.io"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = sbx_docker_ref_registry(cases[i][0]);
        assert_string_equal(got, cases[i][1]);
        free(got);
    }
}

static void
test_auth_header(void **state)
{
    (void)state;
    assert_null(sbx_docker_auth_header(NULL, "docker.io"));
    json_t *empty = json_object();
    assert_null(sbx_docker_auth_header(empty, "docker.io"));
    json_decref(empty);
    json_t *auth = json_pack("{s:s, s:s}", "username", "alice", "password", "p?ss/w+rd>>");
    char *h = sbx_docker_auth_header(auth, "127.0.0.1:5000");
    json_decref(auth);
    assert_non_null(h);
    /* base64url: no '+' or '/' (the header value must survive as is) */
    assert_null(strpbrk(h, "+/"));
    unsigned char raw[512];
    size_t len = 0;
    assert_int_equal(sodium_base642bin(raw, sizeof raw, h, strlen(h), NULL, &len, NULL,
                                       sodium_base64_VARIANT_URLSAFE),
                     0);
    json_t *j = json_loadb((const char *)raw, len, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "username")), "alice");
    assert_string_equal(json_string_value(json_object_get(j, "password")), "p?ss/w+rd>>");
    assert_string_equal(json_string_value(json_object_get(j, "serveraddress")), "127.0.0.1:5000");
    json_decref(j);
    free(h);
}

static void
test_state_map(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        bool stopped;
        enum sbx_state_class cls;
        const char *reason;
    } cases[] = {
        {"{\"Status\":\"running\"}", false, SBX_CLASS_USABLE, "CONTAINER_RUNNING"},
        {"{\"Status\":\"paused\"}", false, SBX_CLASS_STARTABLE, "CONTAINER_PAUSED"},
        {"{\"Status\":\"restarting\"}", false, SBX_CLASS_TRANSIENT, "CONTAINER_RESTARTING"},
        {"{\"Status\":\"created\"}", false, SBX_CLASS_TRANSIENT, "CONTAINER_STARTING"},
        {"{\"Status\":\"exited\",\"ExitCode\":0}", true, SBX_CLASS_STARTABLE, "CONTAINER_STOPPED"},
        {"{\"Status\":\"exited\",\"ExitCode\":0}", false, SBX_CLASS_TERMINAL, "CONTAINER_EXITED"},
        {"{\"Status\":\"exited\",\"ExitCode\":137}", false, SBX_CLASS_TERMINAL,
         "CONTAINER_EXITED_ERROR"},
        {"{\"Status\":\"exited\",\"ExitCode\":137,\"OOMKilled\":true}", false, SBX_CLASS_TERMINAL,
         "CONTAINER_OOM_KILLED"},
        {"{\"Status\":\"stopped\",\"ExitCode\":137}", false, SBX_CLASS_TERMINAL,
         "CONTAINER_EXITED_ERROR"},
        {"{\"Status\":\"stopped\",\"ExitCode\":0}", true, SBX_CLASS_STARTABLE, "CONTAINER_STOPPED"},
        {"{\"Status\":\"stopping\"}", false, SBX_CLASS_TRANSIENT, "CONTAINER_STOPPING"},
        {"{\"Status\":\"dead\"}", false, SBX_CLASS_TERMINAL, "CONTAINER_DEAD"},
        {"{\"Status\":\"removing\"}", true, SBX_CLASS_TERMINAL, "CONTAINER_DEAD"},
        {"{\"Status\":\"weird\"}", false, SBX_CLASS_TERMINAL, "CONTAINER_STATE_UNKNOWN"},
        {"{}", false, SBX_CLASS_TERMINAL, "CONTAINER_STATE_UNKNOWN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *st = json_loads(cases[i].json, 0, NULL);
        struct sbx_provider_status out = {0};
        sbx_docker_state_map(st, cases[i].stopped, &out);
        assert_int_equal(out.cls, cases[i].cls);
        assert_string_equal(out.reason, cases[i].reason);
        json_decref(st);
    }
}

static void
test_parse_cpu(void **state)
{
    (void)state;
    uint64_t m = 0;
    assert_int_equal(sbx_docker_parse_cpu("500m", &m), 0);
    assert_int_equal(m, 500);
    assert_int_equal(sbx_docker_parse_cpu("2", &m), 0);
    assert_int_equal(m, 2000);
    assert_int_equal(sbx_docker_parse_cpu("1.5", &m), 0);
    assert_int_equal(m, 1500);
    static const char *const bad[] = {"", "lots", "0", "-1", "1x", "0.0001", "nan", "1e9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(sbx_docker_parse_cpu(bad[i], &m), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_ok),       cmocka_unit_test(test_pull_ref),
        cmocka_unit_test(test_ref_registry), cmocka_unit_test(test_auth_header),
        cmocka_unit_test(test_state_map),    cmocka_unit_test(test_parse_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
