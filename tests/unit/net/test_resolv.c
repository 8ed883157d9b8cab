#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net_internal.h"

static char dir[64];

static void
write_file(const char *name, const char *text, char path[128])
{
    (void)snprintf(path, 128, "%s/%s", dir, name);
    assert_int_equal(sbx_write_file_atomic(path, text, strlen(text), 0644, NULL), 0);
}

static int
setup(void **state)
{
    (void)state;
    (void)snprintf(dir, sizeof(dir), "/tmp/sbx-resolv-test-%d-XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    return sbx_rm_rf(dir, NULL);
}

static void
test_keeps_reachable_servers(void **state)
{
    (void)state;
    char host[128];
    sbx_autofree char *out = NULL;
    write_file("host",
               "# comment\nnameserver 10.255.255.53\nnameserver 127.0.0.1\n"
               "nameserver ::1\nnameserver 2001:db8::1\nsearch corp.example\n"
               "options edns0 trust-ad\nsortlist 1.2.3.4\n",
               host);
    assert_int_equal(sbx_net_resolv_conf_from(&out, host, NULL, NULL), 0);
    assert_non_null(strstr(out, "nameserver 10.255.255.53\n"));
    assert_null(strstr(out, "127.0.0.1"));
    assert_null(strstr(out, "::1"));
    assert_null(strstr(out, "2001:db8"));
    assert_null(strstr(out, "sortlist"));
    assert_non_null(strstr(out, "search corp.example\n"));
    assert_non_null(strstr(out, "options edns0 trust-ad\n"));
}

/* systemd-resolved: the host lists only its stub 127.0.0.53; the upstream file has the rest. */
static void
test_loopback_only_falls_back(void **state)
{
    (void)state;
    char host[128];
    char up[128];
    sbx_autofree char *out = NULL;
    write_file("host", "nameserver 127.0.0.53\noptions edns0\n", host);
    write_file("upstream", "nameserver 192.0.2.53\nsearch lan\n", up);
    assert_int_equal(sbx_net_resolv_conf_from(&out, host, up, NULL), 0);
    assert_non_null(strstr(out, "nameserver 192.0.2.53\n"));
    assert_null(strstr(out, "127.0.0.53"));

    sbx_autoerror sbx_error *err = NULL;
    char *none = NULL;
    assert_int_equal(sbx_net_resolv_conf_from(&none, host, "/nonexistent", &err), -SBX_ENOTFOUND);
    assert_non_null(strstr(sbx_error_msg(err), "loopback"));
    assert_null(none);
}

static void
test_host_resolv_conf(void **state)
{
    (void)state;
    sbx_autofree char *out = NULL;
    int r = sbx_net_resolv_conf(&out, NULL);
    if (r == -SBX_ENOTFOUND)
        skip(); /* this machine's resolver is loopback-only */
    assert_int_equal(r, 0);
    assert_non_null(strstr(out, "nameserver "));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keeps_reachable_servers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loopback_only_falls_back, setup, teardown),
        cmocka_unit_test(test_host_resolv_conf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
