/*
 * security.c - the default capability set and seccomp profile, and applying them in the child.
 *
 * Both are computed once per runtime in the parent; the child only makes syscalls.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

/* Docker's default set less CAP_MKNOD (the minimal /dev needs no new nodes) and CAP_NET_RAW
 * (raw sockets allow spoofing on a shared bridge). Deliberately absent, among others:
 * SYS_ADMIN (mount, namespaces...), SYS_MODULE, SYS_PTRACE, SYS_RAWIO, SYS_TIME, NET_ADMIN,
 * SYS_BOOT, DAC_READ_SEARCH (open_by_handle_at escapes), SYS_RESOURCE, BPF, PERFMON. */
const cap_value_t sbx_caps_keep[] = {
    CAP_CHOWN,  CAP_DAC_OVERRIDE,     CAP_FSETID,     CAP_FOWNER,
    CAP_SETGID, CAP_SETUID,           CAP_SETFCAP,    CAP_SETPCAP,
    CAP_KILL,   CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_AUDIT_WRITE,
};
const size_t sbx_caps_n_keep = SBX_ARRAY_SIZE(sbx_caps_keep);

cap_t
sbx_caps_default(void)
{
    cap_t c = cap_init();
    if (!c)
        abort();
    for (size_t i = 0; i < sbx_caps_n_keep; i++) {
        (void)cap_set_flag(c, CAP_EFFECTIVE, 1, &sbx_caps_keep[i], CAP_SET);
        (void)cap_set_flag(c, CAP_PERMITTED, 1, &sbx_caps_keep[i], CAP_SET);
        (void)cap_set_flag(c, CAP_INHERITABLE, 1, &sbx_caps_keep[i], CAP_SET);
    }
    return c;
}

static bool
cap_kept(cap_value_t v)
{
    for (size_t i = 0; i < sbx_caps_n_keep; i++) {
        if (sbx_caps_keep[i] == v)
            return true;
    }
    return false;
}

/* Raw id syscalls. glibc's setgroups/setresuid/setresgid apply the change to every thread of
 * the process (__nptl_setxid signals each one and waits): in a child cloned from a
 * multi-threaded caller (the server) the other threads do not exist, so glibc would wait for
 * them forever. The kernel calls change only the calling thread, which is all the child has. */
int
sbx_raw_setgroups0(void)
{
    return (int)syscall(SYS_setgroups, 0, NULL);
}

int
sbx_raw_setresgid(gid_t gid)
{
    return (int)syscall(SYS_setresgid, gid, gid, gid);
}

int
sbx_raw_setresuid(uid_t uid)
{
    return (int)syscall(SYS_setresuid, uid, uid, uid);
}

int
sbx_security_apply(cap_t caps, uid_t uid, gid_t gid, bool userns, const char **what)
{
    /* The bounding set caps what any later exec (setuid binaries, file caps) can regain; it
     * needs CAP_SETPCAP, so it goes first. */
    *what = "drop bounding set";
    for (cap_value_t v = 0; v <= CAP_LAST_CAP; v++) {
        if (!cap_kept(v) && cap_drop_bound(v) < 0 && errno != EINVAL)
            return -errno;
    }
    *what = "set groups/ids";
    /* In a user namespace setgroups is denied (so a group cannot be dropped to gain access);
     * there the supplementary groups are already empty. */
    if ((!userns && sbx_raw_setgroups0() < 0) || sbx_raw_setresgid(gid) < 0 ||
        sbx_raw_setresuid(uid) < 0)
        return -errno;
    /* A non-root uid lost its permitted set in setresuid (no keepcaps); root keeps the
     * default set only. */
    *what = "set capabilities";
    if (uid == 0 && cap_set_proc(caps) < 0)
        return -errno;
    *what = "clear ambient capabilities";
    if (cap_reset_ambient() < 0 && errno != EINVAL)
        return -errno;
    /* no_new_privs: setuid binaries and file caps cannot raise privileges after exec, and it
     * allows an unprivileged seccomp filter. */
    *what = "no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    return 0;
}

int
sbx_seccomp_apply(const struct sock_fprog *prog)
{
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) < 0)
        return -errno;
    return 0;
}

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
export_bpf(struct sock_fprog *out, scmp_filter_ctx ctx, sbx_error **err)
{
    /* libseccomp 2.5 exports only to an fd: go through a memfd, once per runtime. */
    sbx_autoclose int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "memfd_create");
    int r = seccomp_export_bpf(ctx, fd);
    if (r < 0)
        return sbx_error_set(err, SBX_EGENERIC, -r, "seccomp_export_bpf");
    off_t len = lseek(fd, 0, SEEK_END);
    if (len <= 0 || len % (off_t)sizeof(struct sock_filter) != 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "seccomp export: bad size");
    struct sock_filter *f = sbx_xmalloc((size_t)len);
    if (pread(fd, f, (size_t)len, 0) != len) {
        free(f);
        return sbx_error_set(err, SBX_EGENERIC, errno, "read seccomp export");
    }
    out->filter = f;
    out->len = (unsigned short)((size_t)len / sizeof(struct sock_filter));
    return 0;
}

int
sbx_seccomp_build(struct sock_fprog *out, sbx_error **err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return sbx_error_set(err, SBX_EGENERIC, 0, "seccomp_init");
    /* Other architectures (x32, i386 on x86_64) would be a way around the rules: kill. */
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (size_t i = 0; r == 0 && i < sbx_seccomp_n_denied; i++) {
        int nr = seccomp_syscall_resolve_name(sbx_seccomp_denied[i].name);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(sbx_seccomp_denied[i].err), nr, 0);
    }
    if (r == 0)
        r = add_arg_rules(ctx);
    if (r < 0) {
        seccomp_release(ctx);
        return sbx_error_set(err, SBX_EGENERIC, -r, "build seccomp profile");
    }
    r = export_bpf(out, ctx, err);
    seccomp_release(ctx);
    return r;
}

void
sbx_seccomp_free(struct sock_fprog *prog)
{
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}
