#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/internal.h"
#include "runtime/seccomp_profile.h"

static void
test_profile_lists(void **state)
{
    (void)state;
    static const char *const must[] = {
        "kexec_load",   "init_module",
        "finit_module", "bpf",
        "keyctl",       "mount",
        "umount2",      "pivot_root",
        "move_mount",   "open_tree",
        "fsopen",       "perf_event_open",
        "userfaultfd",  "setns",
        "ptrace",       "process_vm_readv",
        "reboot",       "open_by_handle_at",
        "clone3",
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(must); i++) {
        bool found = false;
        for (size_t j = 0; j < sbx_seccomp_n_denied; j++)
            found = found || strcmp(sbx_seccomp_denied[j].name, must[i]) == 0;
        assert_true(found);
        assert_true(seccomp_syscall_resolve_name(must[i]) != __NR_SCMP_ERROR);
    }
}

static bool
cap_in(const struct __user_cap_data_struct *d, int v, int which)
{
    const struct __user_cap_data_struct *w = &d[v / 32];
    uint32_t set = which == 0 ? w->effective : which == 1 ? w->permitted : w->inheritable;
    return (set >> (v % 32)) & 1U;
}

static void
test_caps_default(void **state)
{
    (void)state;
    struct sbx_caps c;
    sbx_caps_default(&c);
    static const int absent[] = {CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_PTRACE,
                                 CAP_NET_ADMIN, CAP_SYS_RAWIO,  CAP_SYS_TIME,
                                 CAP_MKNOD,     CAP_NET_RAW,    CAP_DAC_READ_SEARCH,
                                 CAP_BPF,       CAP_PERFMON,    CAP_SYS_RESOURCE};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(absent); i++) {
        for (int which = 0; which < 3; which++)
            assert_false(cap_in(c.data, absent[i], which));
    }
    /* Exactly the kept set, in all three. */
    int n = 0;
    for (int v = 0; v < 64; v++)
        n += cap_in(c.data, v, 0);
    assert_int_equal(n, (int)sbx_caps_n_keep);
    for (int which = 0; which < 3; which++) {
        assert_true(cap_in(c.data, CAP_CHOWN, which));
        assert_true(cap_in(c.data, CAP_NET_BIND_SERVICE, which));
    }
}

/* The BPF the runtime embeds (generated at build time) is what the profile compiles to now:
 * a profile edit without a rebuild of the generated header cannot go unnoticed. */
static void
test_embedded_matches_profile(void **state)
{
    (void)state;
    struct sock_fprog fresh = {0};
    struct sock_fprog embedded = {0};
    assert_int_equal(sbx_seccomp_profile_compile(&fresh), 0);
    assert_int_equal(sbx_seccomp_build(&embedded, NULL), 0);
    assert_int_equal(fresh.len, embedded.len);
    assert_memory_equal(fresh.filter, embedded.filter, fresh.len * sizeof(struct sock_filter));
    free(fresh.filter);
    sbx_seccomp_free(&embedded);
    assert_int_equal(sbx_seccomp_init_compile(&fresh), 0);
    assert_int_equal(sbx_seccomp_init_build(&embedded), 0);
    assert_int_equal(fresh.len, embedded.len);
    assert_memory_equal(fresh.filter, embedded.filter, fresh.len * sizeof(struct sock_filter));
    free(fresh.filter);
}

/* Load the real filter in a child and check what it does. Bit i of the exit code = check i
 * failed. */
static int
filtered_child(const struct sock_fprog *prog)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sbx_seccomp_apply(prog) < 0)
        return 0x80;
    int bad = 0;
    errno = 0;
    bad |= (mount("none", "/mnt", "tmpfs", 0, NULL) == 0 || errno != EPERM) << 0;
    struct clone_args ca = {.exit_signal = SIGCHLD};
    errno = 0;
    bad |= (syscall(SYS_clone3, &ca, sizeof ca) != -1 || errno != ENOSYS) << 1;
    errno = 0;
    bad |= (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) << 2;
    bad |= (getpid() <= 0) << 3;
    bad |= (personality(0xffffffff) == -1) << 4;
    errno = 0;
    bad |= (personality(ADDR_NO_RANDOMIZE) != -1 || errno != EPERM) << 5;
    pid_t p = fork(); /* plain fork (clone without namespace flags) still works */
    if (p == 0)
        _exit(0);
    bad |= (p < 0 || waitpid(p, NULL, 0) != p) << 6;
    return bad;
}

static void
test_filter_behaviour(void **state)
{
    (void)state;
    struct sock_fprog prog = {0};
    assert_int_equal(sbx_seccomp_build(&prog, NULL), 0);
    assert_true(prog.len > 10);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0)
        _exit(filtered_child(&prog));
    int st = 0;
    assert_int_equal(waitpid(p, &st, 0), p);
    sbx_seccomp_free(&prog);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The init's filter: what its loop needs works, anything else is EPERM. */
static int
init_filtered_child(const struct sock_fprog *prog)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sbx_seccomp_apply(prog) < 0)
        return 0x80;
    int bad = 0;
    errno = 0;
    bad |= (open("/dev/null", O_RDONLY | O_CLOEXEC) != -1 || errno != EPERM) << 0;
    errno = 0;
    bad |= (syscall(SYS_fork) != -1 || errno != EPERM) << 1;
    errno = 0;
    bad |= (syscall(SYS_write, 2, "", 0) != -1 || errno != EPERM) << 2;
    errno = 0;
    bad |= (syscall(SYS_mmap, NULL, 4096, 3, 0x22, -1, 0) != -1 || errno != EPERM) << 3;
    bad |= (kill(getpid(), 0) != 0) << 4; /* forwarding signals */
    errno = 0;
    bad |= (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) << 5; /* reaping */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    struct timespec zero = {0};
    errno = 0;
    bad |= (sigtimedwait(&s, NULL, &zero) != -1 || errno != EAGAIN) << 6; /* the wait loop */
    return bad;
}

static void
test_init_filter_behaviour(void **state)
{
    (void)state;
    struct sock_fprog prog = {0};
    assert_int_equal(sbx_seccomp_init_build(&prog), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0)
        syscall(SYS_exit_group, init_filtered_child(&prog));
    int st = 0;
    assert_int_equal(waitpid(p, &st, 0), p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_lists),
        cmocka_unit_test(test_caps_default),
        cmocka_unit_test(test_embedded_matches_profile),
        cmocka_unit_test(test_filter_behaviour),
        cmocka_unit_test(test_init_filter_behaviour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
