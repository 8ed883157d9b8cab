#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "providers/launch.h"

static void
touch_exec(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    assert_true(fd >= 0);
    close(fd);
}

static void
test_installed_path(void **state)
{
    (void)state;
    char *p = sbx_launch_installed_execd("/usr/bin");
    assert_string_equal(p, "/usr/lib/sbx/sbx-execd");
    free(p);
    p = sbx_launch_installed_execd("/opt/sbx/bin");
    assert_string_equal(p, "/opt/sbx/lib/sbx/sbx-execd");
    free(p);
    p = sbx_launch_installed_execd("/");
    assert_string_equal(p, "/lib/sbx/sbx-execd");
    free(p);
}

/* A build tree's execd (next to sbx) wins; the installed layout (<prefix>/lib/sbx) is found
 * without configuration when nothing is next to sbx. */
static void
test_search_order(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/sbx-launch-XXXXXX";
    char *root = mkdtemp(tmpl);
    assert_non_null(root);
    char *bin = sbx_xasprintf("%s/bin", root);
    char *lib = sbx_xasprintf("%s/lib", root);
    char *libsbx = sbx_xasprintf("%s/lib/sbx", root);
    char *installed = sbx_xasprintf("%s/lib/sbx/sbx-execd", root);
    char *plain = sbx_xasprintf("%s/bin/sbx-execd", root);
    char *stat_ = sbx_xasprintf("%s/bin/sbx-execd-static", root);
    assert_int_equal(mkdir(bin, 0755), 0);
    assert_int_equal(mkdir(lib, 0755), 0);
    assert_int_equal(mkdir(libsbx, 0755), 0);

    char *p = sbx_launch_default_execd(bin); /* nothing anywhere: the name next to sbx */
    assert_string_equal(p, plain);
    free(p);
    touch_exec(installed);
    p = sbx_launch_default_execd(bin);
    assert_string_equal(p, installed);
    free(p);
    touch_exec(plain);
    p = sbx_launch_default_execd(bin);
    assert_string_equal(p, plain);
    free(p);
    touch_exec(stat_);
    p = sbx_launch_default_execd(bin);
    assert_string_equal(p, stat_);
    free(p);

    assert_int_equal(unlink(stat_), 0);
    assert_int_equal(unlink(plain), 0);
    assert_int_equal(unlink(installed), 0);
    assert_int_equal(rmdir(libsbx), 0);
    assert_int_equal(rmdir(lib), 0);
    assert_int_equal(rmdir(bin), 0);
    assert_int_equal(rmdir(root), 0);
    free(bin);
    free(lib);
    free(libsbx);
    free(installed);
    free(plain);
    free(stat_);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_installed_path),
        cmocka_unit_test(test_search_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
