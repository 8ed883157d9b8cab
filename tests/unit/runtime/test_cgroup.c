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

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/cgroup.h"

/* Both backends run here on a fake tree (plain dirs and files): this machine kind has no v2
 * controllers, so this is where the v2 backend's logic is tested. */

static const char *self_text = "9:name=systemd:/\n"
                               "8:pids:/\n"
                               "4:memory:/process_api/abc\n"
                               "2:cpu,cpuacct:/grp\n"
                               "0::/unified/me\n";

static char *
slurp(const char *dir, const char *file)
{
    sbx_autofree char *path = sbx_xasprintf("%s/%s", dir, file);
    char *text = NULL;
    if (sbx_read_file(path, 4096, &text, NULL, NULL) < 0)
        return sbx_xstrdup("<missing>");
    return text;
}

static void
put(const char *dir, const char *file, const char *text)
{
    sbx_autofree char *path = sbx_xasprintf("%s/%s", dir, file);
    assert_int_equal(sbx_write_file_atomic(path, text, strlen(text), 0644, NULL), 0);
}

static char *
make_tmp(void)
{
    char tmpl[] = "/tmp/sbx-unit-cgroup.XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return sbx_xstrdup(tmpl);
}

static void
test_self_path(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"memory", "/process_api/abc"},
        {"pids", "/"},
        {"cpu", "/grp"},
        {"cpuacct", "/grp"},
        {"freezer", "/"},
        {NULL, "/unified/me"},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
        sbx_autofree char *p = sbx_cg_self_path(self_text, cases[i][0]);
        assert_string_equal(p, cases[i][1]);
    }
    sbx_autofree char *none = sbx_cg_self_path("", "memory");
    assert_string_equal(none, "/");
}

static void
test_v2_backend(void **state)
{
    (void)state;
    sbx_autofree char *root = make_tmp();
    sbx_autofree char *own = sbx_xasprintf("%s/unified/me", root);
    assert_int_equal(sbx_mkdir_p(own, 0755, NULL), 0);
    put(own, "cgroup.controllers", "cpuset cpu io memory pids\n");

    struct sbx_cg cg = {.ops = &sbx_cg_v2_ops, .roles = SBX_CG_ALL, .fake = true};
    assert_int_equal(cg.ops->plan(&cg, root, self_text, "sbx", "t1", NULL), 0);
    sbx_autofree char *want = sbx_xasprintf("%s/unified/me/sbx/t1", root);
    for (int r = 0; r < SBX_CG_NROLES; r++)
        assert_string_equal(cg.dir[r], want);
    const char *dirs[SBX_CG_NROLES];
    assert_int_equal(sbx_cg_unique_dirs(&cg, dirs, SBX_CG_NROLES), 1);

    struct sbx_cg_limits lim = {.memory_bytes = 256 << 20, .pids_max = 64, .cpu_millis = 1500};
    assert_int_equal(cg.ops->create(&cg, &lim, NULL), 0);
    const char *expect[][2] = {
        {"memory.max", "268435456"},
        {"memory.swap.max", "0"},
        {"pids.max", "64"},
        {"cpu.max", "150000 100000"},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(expect); i++) {
        sbx_autofree char *v = slurp(want, expect[i][0]);
        assert_string_equal(v, expect[i][1]);
    }
    /* Controllers enabled from the caller's own cgroup down (the fake keeps the last one). */
    sbx_autofree char *sub = slurp(own, "cgroup.subtree_control");
    assert_string_equal(sub, "+cpu");

    int fd = cg.ops->clone_fd(&cg); /* CLONE_INTO_CGROUP */
    assert_true(fd >= 0);
    close(fd);
    int jfd = -1;
    assert_int_equal(cg.ops->open_join(&cg, &jfd, 1, NULL), 0); /* v2 clones into it */
    assert_int_equal(cg.ops->attach(&cg, 1234, NULL), 0);
    sbx_autofree char *procs = slurp(want, "cgroup.procs");
    assert_string_equal(procs, "1234");
    assert_int_equal(cg.ops->freeze(&cg, true, NULL), 0);
    sbx_autofree char *frz = slurp(want, "cgroup.freeze");
    assert_string_equal(frz, "1");

    uint64_t kills = 9;
    put(want, "memory.events", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n");
    assert_int_equal(cg.ops->oom_kills(&cg, &kills, NULL), 0);
    assert_int_equal(kills, 2);
    assert_int_equal(cg.ops->destroy(&cg, NULL), 0);
    assert_int_equal(access(want, F_OK), -1);
    sbx_cg_release(&cg);
    assert_int_equal(sbx_rm_rf(root, NULL), 0);
}

static void
test_v1_backend(void **state)
{
    (void)state;
    sbx_autofree char *root = make_tmp();
    static const char *const ctl[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ctl); i++) {
        sbx_autofree char *d = sbx_xasprintf("%s/%s", root, ctl[i]);
        assert_int_equal(mkdir(d, 0755), 0);
    }
    struct sbx_cg cg = {.ops = &sbx_cg_v1_ops, .roles = SBX_CG_ALL, .fake = true};
    assert_int_equal(cg.ops->plan(&cg, root, self_text, "sbx", "t2", NULL), 0);
    sbx_autofree char *mem = sbx_xasprintf("%s/memory/process_api/abc/sbx/t2", root);
    sbx_autofree char *cpu = sbx_xasprintf("%s/cpu/grp/sbx/t2", root);
    sbx_autofree char *frz = sbx_xasprintf("%s/freezer/sbx/t2", root);
    assert_string_equal(cg.dir[SBX_CG_MEMORY], mem);
    assert_string_equal(cg.dir[SBX_CG_CPU], cpu);
    assert_string_equal(cg.dir[SBX_CG_FREEZER], frz);
    const char *dirs[SBX_CG_NROLES];
    assert_int_equal(sbx_cg_unique_dirs(&cg, dirs, SBX_CG_NROLES), 5);
    assert_int_equal(cg.ops->clone_fd(&cg), -1); /* v1: the child joins itself */

    struct sbx_cg_limits lim = {.memory_bytes = 64 << 20, .pids_max = 10, .cpu_millis = 200};
    assert_int_equal(cg.ops->create(&cg, &lim, NULL), 0);
    sbx_autofree char *limit = slurp(mem, "memory.limit_in_bytes");
    assert_string_equal(limit, "67108864");
    sbx_autofree char *quota = slurp(cpu, "cpu.cfs_quota_us");
    assert_string_equal(quota, "20000");
    /* The period is left at the kernel's default: each write walks every cpu cgroup. */
    sbx_autofree char *period = sbx_xasprintf("%s/cpu.cfs_period_us", cpu);
    assert_int_equal(access(period, F_OK), -1);
    /* The child joins by writing "0" to each dir's `tasks` (no pid: no global rwsem). */
    int fds[SBX_CG_NROLES];
    assert_int_equal(cg.ops->open_join(&cg, fds, 4, NULL), -SBX_EGENERIC); /* too many */
    assert_int_equal(cg.ops->open_join(&cg, fds, SBX_CG_NROLES, NULL), 5);
    assert_int_equal(sbx_cg_join_self(fds, 5), 0);
    for (size_t i = 0; i < 5; i++) {
        sbx_autofree char *t = slurp(dirs[i], "tasks");
        assert_string_equal(t, "0");
        assert_int_equal(fcntl(fds[i], F_GETFD), -1); /* closed */
    }
    assert_int_equal(cg.ops->freeze(&cg, true, NULL), 0);
    sbx_autofree char *st = slurp(frz, "freezer.state");
    assert_string_equal(st, "FROZEN");
    put(mem, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
    uint64_t kills = 0;
    assert_int_equal(cg.ops->oom_kills(&cg, &kills, NULL), 0);
    assert_int_equal(kills, 3);
    assert_int_equal(cg.ops->destroy(&cg, NULL), 0);
    assert_int_equal(access(mem, F_OK), -1);
    sbx_cg_release(&cg);
    assert_int_equal(sbx_rm_rf(root, NULL), 0);
}

/* Only the controllers a sandbox needs are planned; the rest stay NULL and cost nothing. */
static void
test_partial_roles(void **state)
{
    (void)state;
    sbx_autofree char *root = make_tmp();
    struct sbx_cg cg = {.ops = &sbx_cg_v1_ops, .roles = SBX_CG_ROLE(SBX_CG_MEMORY), .fake = true};
    sbx_autofree char *memroot = sbx_xasprintf("%s/memory", root);
    assert_int_equal(mkdir(memroot, 0755), 0);
    assert_int_equal(cg.ops->plan(&cg, root, self_text, "sbx", "t3", NULL), 0);
    assert_non_null(cg.dir[SBX_CG_MEMORY]);
    assert_null(cg.dir[SBX_CG_PIDS]);
    assert_null(cg.dir[SBX_CG_FREEZER]);
    const char *dirs[SBX_CG_NROLES];
    assert_int_equal(sbx_cg_unique_dirs(&cg, dirs, SBX_CG_NROLES), 1);
    struct sbx_cg_limits lim = {.memory_bytes = 1 << 20, .pids_max = 5, .cpu_millis = 100};
    assert_int_equal(cg.ops->create(&cg, &lim, NULL), 0);
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(cg.ops->freeze(&cg, true, &err), -SBX_EUNAVAIL);
    assert_int_equal(cg.ops->destroy(&cg, NULL), 0);
    sbx_cg_release(&cg);

    struct sbx_cg none = {.ops = &sbx_cg_v2_ops, .roles = 0, .fake = true};
    assert_int_equal(none.ops->plan(&none, root, self_text, "sbx", "t4", NULL), 0);
    assert_null(sbx_cg_any_dir(&none));
    assert_int_equal(none.ops->create(&none, &lim, NULL), 0);
    uint64_t kills = 7;
    assert_int_equal(none.ops->oom_kills(&none, &kills, NULL), 0);
    assert_int_equal(kills, 0);
    assert_int_equal(none.ops->destroy(&none, NULL), 0);
    assert_int_equal(sbx_rm_rf(root, NULL), 0);
}

/* A systemd service with Delegate=yes starts in the root of its subtree: alone there, the
 * server moves into a leaf so that the root can enable controllers for the sandboxes. */
static void
test_v2_leave_own(void **state)
{
    (void)state;
    sbx_autofree char *root = make_tmp();
    sbx_autofree char *own = sbx_xasprintf("%s/unified/me", root);
    sbx_autofree char *leaf = sbx_xasprintf("%s/unified/me/server", root);
    assert_int_equal(sbx_mkdir_p(own, 0755, NULL), 0);
    put(own, "cgroup.procs", "4242\n");
    assert_int_equal(sbx_cg_v2_leave_own(root, self_text, "server", 4242, true, NULL), 1);
    sbx_autofree char *moved = slurp(leaf, "cgroup.procs");
    assert_string_equal(moved, "4242");
    /* a restarted server: the leaf is there already */
    assert_int_equal(sbx_cg_v2_leave_own(root, self_text, "server", 4242, true, NULL), 1);
    /* not alone (a shell's session): stays */
    put(own, "cgroup.procs", "4242\n77\n");
    assert_int_equal(sbx_cg_v2_leave_own(root, self_text, "server", 4242, true, NULL), 0);
    put(own, "cgroup.procs", "");
    assert_int_equal(sbx_cg_v2_leave_own(root, self_text, "server", 4242, true, NULL), 0);
    /* the root cgroup may hold processes and still delegate */
    assert_int_equal(sbx_cg_v2_leave_own(root, "0::/\n", "server", 4242, true, NULL), 0);
    /* no such cgroup: an error, not a move */
    sbx_autoerror sbx_error *err = NULL;
    assert_true(sbx_cg_v2_leave_own(root, "0::/gone\n", "server", 4242, true, &err) < 0);
    assert_int_equal(sbx_rm_rf(root, NULL), 0);
}

static void
test_detect(void **state)
{
    (void)state;
    const struct sbx_cg_ops *ops = NULL;
    sbx_autofree char *root = make_tmp();
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_cg_detect(&ops, root, &err), -SBX_EUNAVAIL);
    sbx_autofree char *mem = sbx_xasprintf("%s/memory", root);
    assert_int_equal(mkdir(mem, 0755), 0);
    assert_int_equal(sbx_cg_detect(&ops, root, NULL), 0);
    assert_ptr_equal(ops, &sbx_cg_v1_ops);
    assert_int_equal(sbx_rm_rf(root, NULL), 0);
    /* The real hierarchy: a hybrid host (cgroup2 mount without controllers) is v1. */
    if (sbx_cg_detect(&ops, "/sys/fs/cgroup", NULL) == 0)
        assert_true(ops == &sbx_cg_v1_ops || ops == &sbx_cg_v2_ops);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_path),  cmocka_unit_test(test_v2_backend),
        cmocka_unit_test(test_v1_backend), cmocka_unit_test(test_partial_roles),
        cmocka_unit_test(test_detect),     cmocka_unit_test(test_v2_leave_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
