#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/ipam.h"

#define N_PROCS  8
#define PER_PROC 6

static char dir[64];

static int
setup(void **state)
{
    (void)state;
    (void)snprintf(dir, sizeof(dir), "/tmp/sbx-ipam-test-%d-XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    assert_int_equal(sbx_rm_rf(dir, NULL), 0);
    return 0;
}

static void
test_parse_subnet(void **state)
{
    (void)state;
    uint32_t net = 0;
    int prefix = 0;
    assert_int_equal(sbx_net_parse_subnet("10.88.0.0/16", &net, &prefix, NULL), 0);
    assert_int_equal(net, 0x0a580000);
    assert_int_equal(prefix, 16);
    assert_int_equal(sbx_net_parse_subnet("192.168.7.252/30", &net, &prefix, NULL), 0);
    assert_int_equal(net, 0xc0a807fc);
    assert_int_equal(prefix, 30);
    static const char *bad[] = {"10.88.0.0",    "10.88.0.0/",   "10.88.0.0/31",
                                "10.88.0.0/7",  "10.88.0.0/x",  "10.88.0/16",
                                "300.1.1.1/8",  "10.88.0.1/16", "",
                                "10.88.0.0/16x"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        sbx_autoerror sbx_error *err = NULL;
        assert_int_equal(sbx_net_parse_subnet(bad[i], &net, &prefix, &err), -SBX_EINVAL);
        assert_non_null(strstr(sbx_error_msg(err), "subnet"));
    }
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_net_parse_subnet("10.88.0.1/16", &net, &prefix, &err), -SBX_EINVAL);
    assert_non_null(strstr(sbx_error_msg(err), "10.88.0.0/16"));
}

static void
test_ids(void **state)
{
    (void)state;
    assert_int_equal(sbx_net_check_id("sb-1_a.b", NULL), 0);
    static const char *bad[] = {"", ".hidden", "a/b", "..", "a b", "a\nb"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++)
        assert_int_equal(sbx_net_check_id(bad[i], NULL), -SBX_EINVAL);
    char longid[200];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    assert_int_equal(sbx_net_check_id(longid, NULL), -SBX_EINVAL);
}

/* A /29 has 8 addresses: network, gateway, 5 sandboxes, broadcast. */
static void
test_alloc_exhaust_release(void **state)
{
    (void)state;
    struct sbx_ipam ipam;
    uint32_t got[5];
    uint32_t addr = 0;
    char id[16];
    assert_int_equal(sbx_ipam_open(&ipam, "10.1.2.8/29", dir, NULL), 0);
    assert_int_equal(ipam.gateway, 0x0a010209);
    for (int i = 0; i < 5; i++) {
        (void)snprintf(id, sizeof(id), "sb%d", i);
        assert_int_equal(sbx_ipam_alloc(&got[i], &ipam, id, NULL), 0);
        assert_true(got[i] >= 0x0a01020a && got[i] <= 0x0a01020e); /* .10 .. .14 */
        for (int j = 0; j < i; j++)
            assert_int_not_equal(got[i], got[j]);
        assert_int_equal(sbx_ipam_find(&addr, &ipam, id, NULL), 0);
        assert_int_equal(addr, got[i]);
    }
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "sb5", &err), -SBX_ELIMIT);
    assert_non_null(strstr(sbx_error_msg(err), "10.1.2.8/29 is exhausted"));
    assert_int_equal(sbx_ipam_find(&addr, &ipam, "sb5", NULL), -SBX_ENOTFOUND);
    sbx_error_clear(&err);
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "sb0", &err), -SBX_EEXISTS);

    assert_int_equal(sbx_ipam_release(&ipam, got[2], "sb2", NULL), 0);
    assert_int_equal(sbx_ipam_find(&addr, &ipam, "sb2", NULL), -SBX_ENOTFOUND);
    assert_int_equal(sbx_ipam_release(&ipam, got[2], "sb2", NULL), 0); /* idempotent */
    assert_int_equal(sbx_ipam_release(&ipam, got[3], "not-owner", NULL), 0);
    assert_int_equal(sbx_ipam_find(&addr, &ipam, "sb3", NULL), 0); /* untouched */
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "sb5", NULL), 0);
    assert_int_equal(addr, got[2]); /* the only free one */
    sbx_ipam_close(&ipam);
}

/* Windows (leaf bridges): a lease goes into the lowest window with room, so windows fill in
 * order; freed room in a full window is used again once the later ones are full; with fewer
 * windows than the pool needs, the limit is the windows' (its message says so). A /28 has 13
 * addresses, .2 .. .14; windows of 3: [.2 .. .4] [.5 .. .7] ... */
static void
test_windows(void **state)
{
    (void)state;
    struct sbx_ipam ipam;
    uint32_t got[7];
    uint32_t addr = 0;
    char id[16];
    assert_int_equal(sbx_ipam_open(&ipam, "10.1.5.0/28", dir, NULL), 0);
    assert_int_equal(sbx_ipam_count(&ipam), 13);
    ipam.window = 3;
    ipam.max_windows = 2;
    for (int i = 0; i < 6; i++) {
        (void)snprintf(id, sizeof(id), "w%d", i);
        assert_int_equal(sbx_ipam_alloc(&got[i], &ipam, id, NULL), 0);
        uint32_t w = (got[i] - 0x0a010502) / 3;
        assert_int_equal(w, (uint32_t)(i / 3)); /* the first three in window 0 */
    }
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "w6", &err), -SBX_ELIMIT);
    assert_non_null(strstr(sbx_error_msg(err), "all 2 leaf bridges of 3 sandboxes"));
    assert_non_null(strstr(sbx_error_msg(err), "leaf_size"));
    /* room again in window 0: used (the hint wraps around) */
    assert_int_equal(sbx_ipam_release(&ipam, got[1], "w1", NULL), 0);
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "w6", NULL), 0);
    assert_int_equal(addr, got[1]);
    /* every window the pool needs: the limit is the pool's */
    ipam.max_windows = 0;
    for (int i = 7; i < 14; i++) {
        (void)snprintf(id, sizeof(id), "w%d", i);
        assert_int_equal(sbx_ipam_alloc(&addr, &ipam, id, NULL), 0);
        assert_true(addr >= 0x0a010508 && addr <= 0x0a01050e); /* windows 2, 3 and 4 (.14) */
    }
    sbx_error_clear(&err);
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "w14", &err), -SBX_ELIMIT);
    assert_non_null(strstr(sbx_error_msg(err), "all 13 addresses are leased"));
    sbx_ipam_close(&ipam);
}

static int
count(uint32_t addr, const char *id, void *payload)
{
    (void)addr;
    (void)id;
    (*(int *)payload)++;
    return 0;
}

static void
test_prune_stale_index(void **state)
{
    (void)state;
    struct sbx_ipam ipam;
    uint32_t addr = 0;
    int n = 0;
    assert_int_equal(sbx_ipam_open(&ipam, "10.1.3.0/24", dir, NULL), 0);
    assert_int_equal(sbx_ipam_alloc(&addr, &ipam, "kept", NULL), 0);
    assert_int_equal(symlinkat("10.1.3.77", ipam.ids_fd, "stale"), 0);
    assert_int_equal(sbx_ipam_find(&addr, &ipam, "stale", NULL), -SBX_ENOTFOUND);
    assert_int_equal(sbx_ipam_prune_ids(&ipam, NULL), 0);
    char buf[32];
    assert_true(readlinkat(ipam.ids_fd, "stale", buf, sizeof(buf)) < 0);
    assert_int_equal(sbx_ipam_find(&addr, &ipam, "kept", NULL), 0);
    assert_int_equal(sbx_ipam_foreach(&ipam, count, &n, NULL), 0);
    assert_int_equal(n, 1);
    sbx_ipam_close(&ipam);
}

/* Processes racing for a pool with exactly enough addresses: every one gets a distinct one. */
static void
child_alloc(int k)
{
    struct sbx_ipam ipam;
    char id[32];
    if (sbx_ipam_open(&ipam, "10.1.4.0/26", dir, NULL) < 0)
        _exit(1);
    for (int i = 0; i < PER_PROC; i++) {
        uint32_t addr = 0;
        (void)snprintf(id, sizeof(id), "p%d-%d", k, i);
        if (sbx_ipam_alloc(&addr, &ipam, id, NULL) < 0)
            _exit(2);
    }
    sbx_ipam_close(&ipam);
    _exit(0);
}

static void
test_concurrent_processes(void **state)
{
    (void)state;
    pid_t pids[N_PROCS];
    for (int k = 0; k < N_PROCS; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0)
            child_alloc(k);
    }
    for (int k = 0; k < N_PROCS; k++) {
        int st = 0;
        assert_int_equal(waitpid(pids[k], &st, 0), pids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    struct sbx_ipam ipam;
    int n = 0;
    assert_int_equal(sbx_ipam_open(&ipam, "10.1.4.0/26", dir, NULL), 0);
    assert_int_equal(sbx_ipam_foreach(&ipam, count, &n, NULL), 0);
    assert_int_equal(n, N_PROCS * PER_PROC); /* one lease file per address: no two shared */
    for (int k = 0; k < N_PROCS; k++) {
        for (int i = 0; i < PER_PROC; i++) {
            char id[32];
            uint32_t addr = 0;
            (void)snprintf(id, sizeof(id), "p%d-%d", k, i);
            assert_int_equal(sbx_ipam_find(&addr, &ipam, id, NULL), 0);
        }
    }
    sbx_ipam_close(&ipam);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_subnet),
        cmocka_unit_test(test_ids),
        cmocka_unit_test_setup_teardown(test_alloc_exhaust_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_stale_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_processes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
