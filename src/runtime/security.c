/*
 * security.c - the default capability set and seccomp profile, and applying them in the child.
 *
 * Both are computed once per runtime in the parent; the child only makes syscalls.
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/internal.h"

/* Docker's default set less CAP_MKNOD (the minimal /dev needs no new nodes) and CAP_NET_RAW
 * (raw sockets allow spoofing on a shared bridge). Deliberately absent, among others:
 * SYS_ADMIN (mount, namespaces...), SYS_MODULE, SYS_PTRACE, SYS_RAWIO, SYS_TIME, NET_ADMIN,
 * SYS_BOOT, DAC_READ_SEARCH (open_by_handle_at escapes), SYS_RESOURCE, BPF, PERFMON. */
const int sbx_caps_keep[] = {
    CAP_CHOWN,  CAP_DAC_OVERRIDE,     CAP_FSETID,     CAP_FOWNER,
    CAP_SETGID, CAP_SETUID,           CAP_SETFCAP,    CAP_SETPCAP,
    CAP_KILL,   CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_AUDIT_WRITE,
};
const size_t sbx_caps_n_keep = SBX_ARRAY_SIZE(sbx_caps_keep);

/* The kernel's capset format, filled once: effective, permitted and inheritable = the kept
 * set. Raw syscalls instead of libcap: libcap probes the kernel in a constructor and clears
 * ambient capabilities one prctl per capability; here it is one capset and one prctl. */
void
sbx_caps_default(struct sbx_caps *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sbx_caps_n_keep; i++) {
        unsigned v = (unsigned)sbx_caps_keep[i];
        c->data[v / 32].effective |= 1U << (v % 32);
        c->data[v / 32].permitted |= 1U << (v % 32);
        c->data[v / 32].inheritable |= 1U << (v % 32);
    }
}

static bool
cap_kept(int v)
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

/* Drop every capability but the kept ones from the bounding set: up to the first number the
 * kernel does not know (EINVAL), so capabilities newer than our headers go too. */
static int
drop_bounding(void)
{
    for (int v = 0;; v++) {
        if (cap_kept(v))
            continue;
        if (prctl(PR_CAPBSET_DROP, v, 0, 0, 0) < 0)
            return errno == EINVAL ? 0 : -errno;
    }
}

int
sbx_security_apply(const struct sbx_caps *caps, uid_t uid, gid_t gid, bool userns,
                   const char **what)
{
    /* The bounding set caps what any later exec (setuid binaries, file caps) can regain; it
     * needs CAP_SETPCAP, so it goes first. */
    *what = "drop bounding set";
    int r = drop_bounding();
    if (r < 0)
        return r;
    *what = "set groups/ids";
    /* In a user namespace setgroups is denied (so a group cannot be dropped to gain access);
     * there the supplementary groups are already empty. */
    if ((!userns && sbx_raw_setgroups0() < 0) || sbx_raw_setresgid(gid) < 0 ||
        sbx_raw_setresuid(uid) < 0)
        return -errno;
    /* A non-root uid lost its permitted set in setresuid (no keepcaps); root keeps the
     * default set only. */
    *what = "set capabilities";
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    if (uid == 0 && syscall(SYS_capset, &hdr, caps->data) < 0)
        return -errno;
    /* Nothing ambient survives the exec (EINVAL: a kernel without ambient capabilities). */
    *what = "clear ambient capabilities";
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
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

/* The default profile (seccomp_profile.c), compiled to BPF at build time by sbx-seccomp-gen:
 * compiling it here cost every `sbx run` ~0.5 ms of CPU. tests/unit/runtime/test_security.c
 * checks that this copy equals a fresh compile of the profile. */
#include "runtime/seccomp_bpf.h"

int
sbx_seccomp_build(struct sock_fprog *out, sbx_error **err)
{
    (void)err;
    out->filter = (struct sock_filter *)sbx_seccomp_bpf; /* the kernel only reads it */
    out->len = (unsigned short)SBX_ARRAY_SIZE(sbx_seccomp_bpf);
    return 0;
}

int
sbx_seccomp_init_build(struct sock_fprog *out)
{
    out->filter = (struct sock_filter *)sbx_seccomp_init_bpf; /* the kernel only reads it */
    out->len = (unsigned short)SBX_ARRAY_SIZE(sbx_seccomp_init_bpf);
    return 0;
}

void
sbx_seccomp_free(struct sock_fprog *prog)
{
    prog->filter = NULL;
    prog->len = 0;
}
