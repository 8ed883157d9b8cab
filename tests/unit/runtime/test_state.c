#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

static void
test_round_trip(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/sbx-unit-state.XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    struct sbx_state st = {.owner = 41,
                           .pid = 42,
                           .start_time = 123456789012ULL,
                           .lease = true,
                           .upper = true,
                           .net = SBX_RT_NET_BRIDGE,
                           .memory_limit = 1ULL << 33};
    snprintf(st.id, sizeof st.id, "sbx-abc");
    st.cgroup_backend = "v1";
    st.cgroups[SBX_CG_MEMORY] = "/sys/fs/cgroup/memory/sbx/sbx-abc";
    st.cgroups[SBX_CG_FREEZER] = "/sys/fs/cgroup/freezer/sbx/sbx-abc";
    assert_int_equal(sbx_state_write(tmpl, &st, NULL), 0);

    struct sbx_state back;
    assert_int_equal(sbx_state_read(&back, tmpl, NULL), 0);
    assert_string_equal(back.id, "sbx-abc");
    assert_int_equal(back.owner, 41);
    assert_int_equal(back.pid, 42);
    assert_int_equal(back.start_time, 123456789012ULL);
    assert_true(back.lease);
    assert_true(back.upper);
    assert_int_equal(back.net, SBX_RT_NET_BRIDGE);
    assert_int_equal(back.memory_limit, 1ULL << 33);
    assert_string_equal(back.cgroup_backend, "v1");
    assert_string_equal(back.cgroups[SBX_CG_MEMORY], st.cgroups[SBX_CG_MEMORY]);
    assert_string_equal(back.cgroups[SBX_CG_FREEZER], st.cgroups[SBX_CG_FREEZER]);
    assert_null(back.cgroups[SBX_CG_PIDS]);
    sbx_state_release(&back);

    /* A record written before disk-backed layers existed has no `upper`: tmpfs. */
    sbx_autofree char *old = sbx_xasprintf("%s/state.json", tmpl);
    static const char legacy[] = "{\"id\":\"x\",\"pid\":1,\"start_time\":2,\"cgroups\":{},"
                                 "\"lease\":false,\"net\":0}";
    assert_int_equal(sbx_write_file_atomic(old, legacy, sizeof legacy - 1, 0600, NULL), 0);
    assert_int_equal(sbx_state_read(&back, tmpl, NULL), 0);
    assert_false(back.upper);
    sbx_state_release(&back);

    /* A torn or foreign file is an error, not a crash. */
    sbx_autofree char *path = sbx_xasprintf("%s/state.json", tmpl);
    assert_int_equal(sbx_write_file_atomic(path, "{\"id\":1}", 8, 0600, NULL), 0);
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_state_read(&back, tmpl, &err), -SBX_EINVAL);
    sbx_state_release(&back);
    assert_int_equal(sbx_rm_rf(tmpl, NULL), 0);
}

static void
test_start_time(void **state)
{
    (void)state;
    assert_true(sbx_proc_start_time(getpid()) > 0);
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    /* A zombie counts as gone (its pid may be recycled once reaped). */
    for (int i = 0; i < 1000 && sbx_proc_start_time(p) != 0; i++)
        usleep(1000);
    assert_int_equal(sbx_proc_start_time(p), 0);
    assert_int_equal(waitpid(p, NULL, 0), p);
    assert_int_equal(sbx_proc_start_time(p), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_start_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
