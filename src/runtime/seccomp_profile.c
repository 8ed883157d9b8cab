/*
 * seccomp_profile.c - the default seccomp profile, compiled to BPF with libseccomp.
 *
 * This runs at build time (sbx-seccomp-gen writes the BPF into a generated header that
 * security.c embeds) and in the unit test that checks the embedded copy against a fresh
 * compile. The runtime itself never links libseccomp: compiling the filter cost every
 * `sbx run` ~0.5 ms of CPU, and loading the library more.
 */
#include "runtime/seccomp_profile.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"

/* Denied outright. The reasons, grouped: kernel/module/boot control (kexec, modules, reboot,
 * swap, acct, syslog, clock), kernel attack surface reachable without caps (bpf, perf,
 * userfaultfd, keyrings, io_uring which bypasses seccomp), the mount API and namespaces (the
 * sandbox must not re-arrange its view or enter others'), process inspection of others (ptrace,
 * process_vm_*), and handle-based opens that escape a chroot. */
const struct sbx_seccomp_rule sbx_seccomp_denied[] = {
    {"kexec_load", EPERM},
    {"kexec_file_load", EPERM},
    {"init_module", EPERM},
    {"finit_module", EPERM},
    {"delete_module", EPERM},
    {"bpf", EPERM},
    {"keyctl", EPERM},
    {"add_key", EPERM},
    {"request_key", EPERM},
    {"mount", EPERM},
    {"umount2", EPERM},
    {"pivot_root", EPERM},
    {"move_mount", EPERM},
    {"open_tree", EPERM},
    {"fsopen", EPERM},
    {"fsmount", EPERM},
    {"fsconfig", EPERM},
    {"fspick", EPERM},
    {"mount_setattr", EPERM},
    {"perf_event_open", EPERM},
    {"userfaultfd", EPERM},
    {"setns", EPERM},
    {"ptrace", EPERM},
    {"process_vm_readv", EPERM},
    {"process_vm_writev", EPERM},
    {"swapon", EPERM},
    {"swapoff", EPERM},
    {"reboot", EPERM},
    {"acct", EPERM},
    {"settimeofday", EPERM},
    {"clock_settime", EPERM},
    {"clock_adjtime", EPERM},
    {"adjtimex", EPERM},
    {"syslog", EPERM},
    {"open_by_handle_at", EPERM},
    {"name_to_handle_at", EPERM},
    {"lookup_dcookie", EPERM},
    {"quotactl", EPERM},
    {"iopl", EPERM},
    {"ioperm", EPERM},
    {"io_uring_setup", EPERM},
    {"io_uring_enter", EPERM},
    {"io_uring_register", EPERM},
    {"kcmp", EPERM},
    {"nfsservctl", EPERM},
    {"uselib", EPERM},
    {"vhangup", EPERM},
    {"pidfd_getfd", EPERM},
    /* clone3 passes flags in memory that seccomp cannot inspect: ENOSYS makes libc fall
     * back to clone(2), whose flags are checked below. */
    {"clone3", ENOSYS},
};
const size_t sbx_seccomp_n_denied = SBX_ARRAY_SIZE(sbx_seccomp_denied);

static int
add_arg_rules(scmp_filter_ctx ctx)
{
    /* A new user namespace would give the sandbox a full capability set over new namespaces
     * (the classic path to kernel bugs): refuse it for clone and unshare. */
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
    /* personality: refuse the flags that weaken the address space (no ASLR, page zero
     * mapped, READ_IMPLIES_EXEC); plain personas like LINUX32 stay allowed. Bit 31 is in the
     * mask so that the query 0xffffffff (which sets every bit) does not match. */
    static const unsigned long unsafe[] = {0x0040000, 0x0100000, 0x0400000};
    for (size_t i = 0; r == 0 && i < SBX_ARRAY_SIZE(unsafe); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, unsafe[i] | 0x80000000UL, unsafe[i]));
    }
    return r;
}

static int
export_bpf(struct sock_fprog *out, scmp_filter_ctx ctx)
{
    /* libseccomp 2.5 exports only to an fd: go through a memfd. */
    int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = seccomp_export_bpf(ctx, fd);
    off_t len = r < 0 ? -1 : lseek(fd, 0, SEEK_END);
    struct sock_filter *f = NULL;
    if (r == 0 && (len <= 0 || len % (off_t)sizeof(struct sock_filter) != 0))
        r = -EINVAL;
    if (r == 0 && !(f = malloc((size_t)len)))
        r = -ENOMEM;
    if (r == 0 && pread(fd, f, (size_t)len, 0) != len)
        r = -EIO;
    (void)close(fd);
    if (r < 0) {
        free(f);
        return r;
    }
    out->filter = f;
    out->len = (unsigned short)((size_t)len / sizeof(struct sock_filter));
    return 0;
}

static int
compile(struct sock_fprog *out, uint32_t def, int (*rules)(scmp_filter_ctx))
{
    scmp_filter_ctx ctx = seccomp_init(def);
    if (!ctx)
        return -ENOMEM;
    /* Other architectures (x32, i386 on x86_64) would be a way around the rules: kill. */
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0)
        r = rules(ctx);
    if (r == 0)
        r = export_bpf(out, ctx);
    seccomp_release(ctx);
    return r;
}

static int
default_rules(scmp_filter_ctx ctx)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < sbx_seccomp_n_denied; i++) {
        int nr = seccomp_syscall_resolve_name(sbx_seccomp_denied[i].name);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(sbx_seccomp_denied[i].err), nr, 0);
    }
    return r == 0 ? add_arg_rules(ctx) : r;
}

int
sbx_seccomp_profile_compile(struct sock_fprog *out)
{
    return compile(out, SCMP_ACT_ALLOW, default_rules);
}

/* What the init of `sbx run` calls once its command is forked (child.c: init_loop): wait for
 * signals, forward them, reap, report the status on the sync socket, exit. Every other
 * syscall fails with EPERM, so code that got into the init (it lives as long as the sandbox,
 * next to the attacker's processes) could neither widen the sandbox nor forge much beyond an
 * exit status. EPERM rather than a kill: a sanitizer runtime's stray call must not take the
 * sandbox down. */
const char *const sbx_seccomp_init_allowed[] = {
    "rt_sigtimedwait", "rt_sigreturn", "restart_syscall", "kill",
    "wait4",           "sendto",       "exit_group",      "exit",
};
const size_t sbx_seccomp_n_init_allowed = SBX_ARRAY_SIZE(sbx_seccomp_init_allowed);

static int
init_rules(scmp_filter_ctx ctx)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < sbx_seccomp_n_init_allowed; i++) {
        int nr = seccomp_syscall_resolve_name(sbx_seccomp_init_allowed[i]);
        if (nr != __NR_SCMP_ERROR)
            r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    }
    return r;
}

int
sbx_seccomp_init_compile(struct sock_fprog *out)
{
    return compile(out, SCMP_ACT_ERRNO(EPERM), init_rules);
}
