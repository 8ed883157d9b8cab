#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "server/route.h"

static void
test_routes(void **state)
{
    (void)state;
    static const struct {
        const char *method, *path;
        enum sbx_route_id want;
    } cases[] = {
        {"GET", "/health", SBX_ROUTE_HEALTH},
        {"GET", "/v1/health", SBX_ROUTE_HEALTH},
        {"POST", "/health", SBX_ROUTE_BAD_METHOD},
        {"GET", "/sandboxes", SBX_ROUTE_LIST},
        {"GET", "/v1/sandboxes", SBX_ROUTE_LIST},
        {"POST", "/v1/sandboxes", SBX_ROUTE_CREATE},
        {"PUT", "/v1/sandboxes", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/sandboxes/abc", SBX_ROUTE_GET},
        {"DELETE", "/sandboxes/abc", SBX_ROUTE_DELETE},
        {"PATCH", "/v1/sandboxes/abc/metadata", SBX_ROUTE_PATCH_METADATA},
        {"POST", "/v1/sandboxes/abc/pause", SBX_ROUTE_PAUSE},
        {"POST", "/v1/sandboxes/abc/resume", SBX_ROUTE_RESUME},
        {"GET", "/v1/sandboxes/abc/resume", SBX_ROUTE_BAD_METHOD},
        {"POST", "/v1/sandboxes/abc/renew-expiration", SBX_ROUTE_RENEW},
        {"GET", "/v1/sandboxes/abc/endpoints/44772", SBX_ROUTE_ENDPOINT},
        {"POST", "/v1/sandboxes/abc/stop", SBX_ROUTE_STOP},
        {"POST", "/sandboxes/abc/start", SBX_ROUTE_START},
        {"GET", "/v1/sandboxes/abc/start", SBX_ROUTE_BAD_METHOD},
        {"POST", "/v1/sandboxes/abc/desktop/view", SBX_ROUTE_DESKTOP_VIEW},
        {"GET", "/v1/sandboxes/abc/desktop/view", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/sandboxes/abc/desktop/vnc", SBX_ROUTE_DESKTOP_VNC},
        {"GET", "/v1/sandboxes/abc/desktop/other", SBX_ROUTE_NOT_FOUND},
        {"GET", "/desktop/view/abc", SBX_ROUTE_DESKTOP_PAGE},
        {"GET", "/desktop/view/", SBX_ROUTE_NOT_FOUND},
        {"GET", "/desktop/view/abc/x", SBX_ROUTE_NOT_FOUND},
        {"POST", "/desktop/view/abc", SBX_ROUTE_BAD_METHOD},
        {"GET", "/desktop/static/view.js", SBX_ROUTE_DESKTOP_STATIC},
        {"GET", "/desktop/novnc/core/rfb.js", SBX_ROUTE_NOVNC},
        {"GET", "/desktop/other", SBX_ROUTE_NOT_FOUND},
        {"GET", "/console", SBX_ROUTE_CONSOLE_PAGE},
        {"GET", "/console/", SBX_ROUTE_CONSOLE_PAGE},
        {"GET", "/v1/console/", SBX_ROUTE_CONSOLE_PAGE},
        {"POST", "/console/", SBX_ROUTE_BAD_METHOD},
        {"GET", "/console/static/console.js", SBX_ROUTE_CONSOLE_STATIC},
        {"GET", "/console/other", SBX_ROUTE_NOT_FOUND},
        {"GET", "/consoleX", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/admin/server", SBX_ROUTE_SERVER_INFO},
        {"POST", "/v1/admin/server", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/admin/secrets", SBX_ROUTE_SECRET_LIST},
        {"POST", "/v1/admin/secrets", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/admin/secrets/A", SBX_ROUTE_SECRET_GET},
        {"PUT", "/admin/secrets/A", SBX_ROUTE_SECRET_SET},
        {"DELETE", "/v1/admin/secrets/A", SBX_ROUTE_SECRET_DELETE},
        {"PATCH", "/v1/admin/secrets/A", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/admin/secrets/", SBX_ROUTE_NOT_FOUND},
        {"PUT", "/v1/admin/secrets/a/b", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/admin/secretsX", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/sandboxes/abc/proxy/8080", SBX_ROUTE_PROXY},
        {"POST", "/sandboxes/abc/proxy/8080/a/b/c/d", SBX_ROUTE_PROXY},
        {"OPTIONS", "/sandboxes/abc/proxy/8080/x", SBX_ROUTE_PROXY},
        {"OPTIONS", "/v1/sandboxes", SBX_ROUTE_PREFLIGHT},
        {"POST", "/v1/metrics/events", SBX_ROUTE_METRICS_EVENTS},
        {"GET", "/v1/snapshots", SBX_ROUTE_SNAPSHOT_LIST},
        {"POST", "/v1/snapshots", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/snapshots/s1", SBX_ROUTE_SNAPSHOT_GET},
        {"DELETE", "/snapshots/s1", SBX_ROUTE_SNAPSHOT_DELETE},
        {"PUT", "/snapshots/s1", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/snapshots/s1/export", SBX_ROUTE_SNAPSHOT_EXPORT},
        {"GET", "/v1/snapshots/s1/x", SBX_ROUTE_NOT_FOUND},
        {"POST", "/v1/snapshots/import", SBX_ROUTE_SNAPSHOT_IMPORT},
        {"GET", "/v1/snapshots/import", SBX_ROUTE_SNAPSHOT_GET},
        {"GET", "/v1/snapshots/s1/export/x", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/snapshots/", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/pools", SBX_ROUTE_POOL_LIST},
        {"POST", "/pools", SBX_ROUTE_POOL_CREATE},
        {"DELETE", "/pools", SBX_ROUTE_BAD_METHOD},
        {"GET", "/v1/pools/p1", SBX_ROUTE_POOL_GET},
        {"PUT", "/v1/pools/p1", SBX_ROUTE_POOL_UPDATE},
        {"DELETE", "/pools/p1", SBX_ROUTE_POOL_DELETE},
        {"POST", "/pools/p1", SBX_ROUTE_BAD_METHOD},
        {"GET", "/pools/p1/x", SBX_ROUTE_NOT_FOUND},
        {"GET", "/pools/", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/warmpools", SBX_ROUTE_POOL_LIST},
        {"PUT", "/warmpools/p1", SBX_ROUTE_POOL_UPDATE},
        {"GET", "/poolsX", SBX_ROUTE_NOT_FOUND},
        {"POST", "/v1/sandboxes/abc/snapshots", SBX_ROUTE_SNAPSHOT_CREATE},
        {"GET", "/v1/sandboxes/abc/snapshots", SBX_ROUTE_BAD_METHOD},
        {"GET", "/", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v2/sandboxes", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/sandboxes/", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/sandboxes//pause", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/sandboxes/a/b/c/d/e", SBX_ROUTE_NOT_FOUND},
        {"GET", "/v1/sandboxesX", SBX_ROUTE_NOT_FOUND},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
        struct sbx_route_match m;
        sbx_route_match(cases[i].method, cases[i].path, &m);
        if (m.id != cases[i].want)
            fail_msg("%s %s: got %d want %d", cases[i].method, cases[i].path, m.id, cases[i].want);
    }
}

static void
test_captures(void **state)
{
    (void)state;
    struct sbx_route_match m;
    sbx_route_match("GET", "/v1/sandboxes/abc/proxy/44772/files/x?y", &m);
    assert_string_equal(m.sandbox_id, "abc");
    assert_string_equal(m.port, "44772");
    assert_string_equal(m.rest, "/files/x?y");
    sbx_route_match("GET", "/sandboxes/abc/proxy/80", &m);
    assert_string_equal(m.rest, "");
    char long_path[300];
    (void)snprintf(long_path, sizeof long_path, "/v1/sandboxes/%0200d", 0);
    sbx_route_match("GET", long_path, &m);
    assert_int_equal(m.id, SBX_ROUTE_GET);
    assert_string_equal(m.sandbox_id, ""); /* too long: never matches a sandbox */
    sbx_route_match("PUT", "/v1/admin/secrets/DAYTONA_API_KEY", &m);
    assert_string_equal(m.secret, "DAYTONA_API_KEY");
    (void)snprintf(long_path, sizeof long_path, "/v1/admin/secrets/%0200d", 0);
    sbx_route_match("PUT", long_path, &m);
    assert_int_equal(m.id, SBX_ROUTE_SECRET_SET);
    assert_string_equal(m.secret, ""); /* too long: an invalid name, never truncated */
    assert_true(sbx_route_needs_auth(SBX_ROUTE_SECRET_LIST));
    assert_true(sbx_route_needs_auth(SBX_ROUTE_SECRET_SET));
}

static void
test_port(void **state)
{
    (void)state;
    assert_int_equal(sbx_route_port("1"), 1);
    assert_int_equal(sbx_route_port("65535"), 65535);
    assert_int_equal(sbx_route_port("0"), -1);
    assert_int_equal(sbx_route_port("65536"), -1);
    assert_int_equal(sbx_route_port("080a"), -1);
    assert_int_equal(sbx_route_port(""), -1);
    assert_int_equal(sbx_route_port("-1"), -1);
    assert_int_equal(sbx_route_port("999999"), -1);
}

static void
test_auth(void **state)
{
    (void)state;
    assert_false(sbx_route_needs_auth(SBX_ROUTE_HEALTH));
    assert_false(sbx_route_needs_auth(SBX_ROUTE_PREFLIGHT));
    assert_true(sbx_route_needs_auth(SBX_ROUTE_PROXY));
    assert_true(sbx_route_needs_auth(SBX_ROUTE_NOT_FOUND));
    assert_true(sbx_route_needs_auth(SBX_ROUTE_LIST));
    /* the view token mint needs the key; the VNC socket checks key or token itself */
    assert_true(sbx_route_needs_auth(SBX_ROUTE_DESKTOP_VIEW));
    assert_false(sbx_route_needs_auth(SBX_ROUTE_DESKTOP_VNC));
    assert_false(sbx_route_needs_auth(SBX_ROUTE_NOVNC));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_captures),
        cmocka_unit_test(test_port),
        cmocka_unit_test(test_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
