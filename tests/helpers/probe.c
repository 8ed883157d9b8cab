/*
 * probe.c - a small static program run INSIDE sandboxes by the runtime's integration tests.
 *
 *   probe escape HOSTPID MARKER   try every escape in the battery; each must fail as expected
 *   probe spin MS                 burn CPU for MS ms of wall time, print "cpu_ms wall_ms"
 *   probe counter FILE            write an increasing counter to FILE every 5 ms, forever
 *   probe listen PORT             accept one connection on 127.0.0.1:PORT, write "hello\n"
 *   probe forkbomb N              fork up to N children, print how many succeeded
 *   probe pid1                    PID 1 (the init or execd) is closed to us: memory, environ,
 *                                 fds, ptrace; it runs filtered and with no_new_privs
 *   probe hostinodes              the host's device nodes cannot be changed, only used
 *
 * Linked statically (no sanitizers) so it runs in any root filesystem.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static int failures;

/* Check that a call failed with one of the wanted errnos (0 ends the list). */
static void
expect3(const char *name, long ret, int e, int want1, int want2, int want3)
{
    if (ret < 0 && (e == want1 || (want2 && e == want2) || (want3 && e == want3))) {
        printf("ok %s (%s)\n", name, strerrordesc_np(e));
        return;
    }
    printf("FAIL %s: ret %ld errno %d (%s), want %s\n", name, ret, ret < 0 ? e : 0,
           ret < 0 ? strerrordesc_np(e) : "success", strerrordesc_np(want1));
    failures++;
}

static void
expect(const char *name, long ret, int e, int want1, int want2)
{
    expect3(name, ret, e, want1, want2, 0);
}

#define TRY3(name, call, w1, w2, w3)                  \
    do {                                              \
        errno = 0;                                    \
        long r_ = (long)(call);                       \
        expect3((name), r_, errno, (w1), (w2), (w3)); \
    } while (0)
#define TRY(name, call, w1, w2) TRY3(name, call, w1, w2, 0)

static void
escape_mounts(void)
{
    TRY("mount tmpfs", mount("none", "/mnt", "tmpfs", 0, NULL), EPERM, 0);
    TRY("umount /proc", umount2("/proc", MNT_DETACH), EPERM, 0);
    TRY("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"), EPERM, 0);
    TRY("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 1), EPERM, 0);
    TRY("fsopen", syscall(SYS_fsopen, "tmpfs", 0), EPERM, 0);
    TRY("unshare(NEWUSER)", unshare(CLONE_NEWUSER), EPERM, 0);
    TRY("unshare(NEWNS)", unshare(CLONE_NEWNS), EPERM, 0);
    int ns = open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC);
    TRY("setns", setns(ns, 0), EPERM, 0);
    if (ns >= 0)
        close(ns);
    struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    TRY("clone3(NEWUSER)", syscall(SYS_clone3, &ca, sizeof ca), ENOSYS, 0);
    TRY("clone(NEWUSER)", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0), EPERM, 0);
    TRY("sethostname", sethostname("x", 1), EPERM, 0);
}

static void
escape_chroot(const char *marker)
{
    /* The classic: keep a dir fd, chroot deeper, fchdir back out and climb. With pivot_root
     * and the old root detached, the climb stops at the sandbox's root. */
    (void)mkdir("/tmp/jail", 0755);
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (chroot("/tmp/jail") == 0 && fchdir(fd) == 0) {
        for (int i = 0; i < 64; i++)
            (void)!chdir("..");
        (void)!chroot(".");
    }
    TRY("chroot escape reaches host marker", open(marker, O_RDONLY | O_CLOEXEC), ENOENT, 0);
    if (fd >= 0)
        close(fd);
}

static void
escape_procs(pid_t hostpid)
{
    TRY("ptrace pid 1", ptrace(PTRACE_ATTACH, 1, 0, 0), EPERM, 0);
    TRY("kill host pid", kill(hostpid, 0), ESRCH, 0);
    TRY("process_vm_readv", syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0), EPERM, 0);
    /* Root gets EROFS (read-only mount); other users are stopped earlier by EACCES. */
    TRY("write /proc/sys", open("/proc/sys/kernel/hostname", O_WRONLY | O_CLOEXEC), EROFS, EACCES);
    TRY("write /proc/sys/vm", open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC), EROFS,
        EACCES);
    /* Absent when the kernel lacks CONFIG_MAGIC_SYSRQ (this machine kind). */
    TRY3("write /proc/sysrq-trigger", open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC), EROFS,
         EACCES, ENOENT);
    TRY("write /sys", open("/sys/class/net/lo/tx_queue_len", O_WRONLY | O_CLOEXEC), EROFS, EACCES);
    int kc = open("/proc/kcore", O_RDONLY | O_CLOEXEC);
    char b[16];
    /* Masked with /dev/null: reads nothing; or absent (no CONFIG_PROC_KCORE). */
    long n = kc >= 0 ? (long)read(kc, b, sizeof b) : -1;
    expect("read /proc/kcore", n > 0 ? n : -1, kc >= 0 ? ENOENT : errno, ENOENT, EACCES);
    if (kc >= 0)
        close(kc);
}

static void
escape_kernel(void)
{
    TRY("init_module", syscall(SYS_init_module, NULL, 0, ""), EPERM, 0);
    TRY("finit_module", syscall(SYS_finit_module, 0, "", 0), EPERM, 0);
    TRY("delete_module", syscall(SYS_delete_module, "x", 0), EPERM, 0);
    TRY("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM, 0);
    TRY("bpf", syscall(SYS_bpf, 0, NULL, 0), EPERM, 0);
    TRY("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM, 0);
    TRY("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM, 0);
    TRY("userfaultfd", syscall(SYS_userfaultfd, 0), EPERM, 0);
    TRY("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL), EPERM, 0);
    TRY("reboot", syscall(SYS_reboot, 0, 0, 0, NULL), EPERM, 0);
    TRY("swapon", syscall(SYS_swapon, "/x", 0), EPERM, 0);
    struct timespec ts = {0, 0};
    TRY("clock_settime", clock_settime(CLOCK_REALTIME, &ts), EPERM, 0);
    TRY("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0), EPERM, 0);
    TRY("iopl", syscall(SYS_iopl, 3), EPERM, 0);
    TRY("personality(ADDR_NO_RANDOMIZE)", personality(ADDR_NO_RANDOMIZE), EPERM, 0);
    TRY("raw socket", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP), EPERM, 0);
}

static void
escape_devices(void)
{
    TRY("open /dev/sda", open("/dev/sda", O_RDONLY | O_CLOEXEC), ENOENT, 0);
    TRY("open /dev/vda", open("/dev/vda", O_RDONLY | O_CLOEXEC), ENOENT, 0);
    TRY("open /dev/mem", open("/dev/mem", O_RDONLY | O_CLOEXEC), ENOENT, 0);
    TRY("mknod block device", mknod("/tmp/vda", S_IFBLK | 0600, makedev(254, 0)), EPERM, 0);
    TRY("mknod char device", mknod("/tmp/mem", S_IFCHR | 0600, makedev(1, 1)), EPERM, 0);
}

/* A successful call where one is expected: the control that shows a refusal above is not
 * just a broken sandbox. */
static void
works(const char *name, long ret, int e)
{
    if (ret >= 0) {
        printf("ok %s works\n", name);
        return;
    }
    printf("FAIL %s: %s\n", name, strerrordesc_np(e));
    failures++;
}

#define WORKS(name, call)         \
    do {                          \
        errno = 0;                \
        long r_ = (long)(call);   \
        works((name), r_, errno); \
    } while (0)

/* Every host device node the sandbox sees is the host's own inode: using it is fine, changing
 * it (what `chmod 000 /dev/null` would do to the host) must fail. Each attempt sets what is
 * there already (same mode, owner, times): refused with EROFS where the boundary holds, and
 * harmless to the host where it does not (a regressed build must not break the test host). */
static void
escape_host_inodes(void)
{
    static const char *const nodes[] = {"/dev/null",   "/dev/zero",    "/dev/full",
                                        "/dev/random", "/dev/urandom", "/dev/tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char name[96];
        struct stat st;
        if (stat(nodes[i], &st) < 0) {
            printf("FAIL stat %s: %s\n", nodes[i], strerrordesc_np(errno));
            failures++;
            continue;
        }
        snprintf(name, sizeof name, "chmod %s", nodes[i]);
        TRY(name, chmod(nodes[i], st.st_mode & 07777), EROFS, 0);
        snprintf(name, sizeof name, "chown %s", nodes[i]);
        TRY(name, chown(nodes[i], st.st_uid, st.st_gid), EROFS, 0);
        snprintf(name, sizeof name, "utimes %s", nodes[i]);
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        TRY(name, utimensat(AT_FDCWD, nodes[i], ts, 0), EROFS, 0);
        snprintf(name, sizeof name, "setxattr %s", nodes[i]);
        TRY(name, setxattr(nodes[i], "user.sbx", "x", 1, 0), EROFS, EPERM);
    }
    struct stat st;
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    TRY("fchmod an open /dev/null", fstat(fd, &st) < 0 ? -1 : fchmod(fd, st.st_mode & 07777), EROFS,
        0);
    WORKS("write /dev/null", write(fd, "x", 1));
    close(fd);
    char b[8];
    fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    WORKS("read /dev/zero", read(fd, b, sizeof b));
    close(fd);
}

/* PID 1 (sbx run's init, or execd in a server's sandbox) holds what the sandbox must not
 * have: the caller's memory, the access token, a status channel. */
static void
escape_pid1(void)
{
    TRY("open /proc/1/environ", open("/proc/1/environ", O_RDONLY | O_CLOEXEC), EACCES, 0);
    TRY("open /proc/1/mem rw", open("/proc/1/mem", O_RDWR | O_CLOEXEC), EACCES, 0);
    TRY("open /proc/1/mem ro", open("/proc/1/mem", O_RDONLY | O_CLOEXEC), EACCES, 0);
    TRY("open /proc/1/fd/0", open("/proc/1/fd/0", O_RDONLY | O_CLOEXEC), EACCES, 0);
    TRY("open /proc/1/fd/1", open("/proc/1/fd/1", O_WRONLY | O_CLOEXEC), EACCES, 0);
    TRY("open /proc/1/fd/2", open("/proc/1/fd/2", O_WRONLY | O_CLOEXEC), EACCES, 0);
    char buf[256];
    TRY("readlink /proc/1/exe", readlink("/proc/1/exe", buf, sizeof buf), EACCES, 0);
    TRY("ptrace attach 1", ptrace(PTRACE_ATTACH, 1, NULL, NULL), EPERM, 0);
    TRY("pidfd_getfd of 1", syscall(SYS_pidfd_getfd, syscall(SYS_pidfd_open, 1, 0), 1, 0), EPERM,
        0);
    /* the same operations on ourselves work: the refusals above are about PID 1 */
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    works("open /proc/self/mem rw", fd, errno);
    close(fd);
    fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    works("open /proc/self/environ", fd, errno);
    close(fd);
    FILE *f = fopen("/proc/1/status", "re");
    int nnp = -1;
    int secc = -1;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        (void)sscanf(line, "NoNewPrivs: %d", &nnp);
        (void)sscanf(line, "Seccomp: %d", &secc);
    }
    if (f)
        (void)fclose(f);
    if (nnp == 1 && secc == 2) {
        printf("ok PID 1 runs with no_new_privs and a seccomp filter\n");
    } else {
        printf("FAIL PID 1: NoNewPrivs %d Seccomp %d\n", nnp, secc);
        failures++;
    }
}

static int
report_failures(void)
{
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}

static int
escape(pid_t hostpid, const char *marker)
{
    (void)setvbuf(stdout, NULL, _IOLBF, 0);
    escape_mounts();
    escape_procs(hostpid);
    escape_kernel();
    escape_devices();
    escape_host_inodes();
    escape_pid1();
    escape_chroot(marker);
    return report_failures();
}

static long
ms_of(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
spin(long ms)
{
    long start = ms_of(CLOCK_MONOTONIC);
    volatile unsigned long x = 0;
    while (ms_of(CLOCK_MONOTONIC) - start < ms)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
    printf("%ld %ld\n", ms_of(CLOCK_PROCESS_CPUTIME_ID), ms_of(CLOCK_MONOTONIC) - start);
    return 0;
}

static int
counter(const char *file)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return 1;
    for (unsigned long n = 1;; n++) {
        char b[32];
        int len = snprintf(b, sizeof b, "%lu\n", n);
        (void)!pwrite(fd, b, (size_t)len, 0);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

/* A bounded fork bomb: fork up to n sleeping children, report how many the kernel allowed. */
static int
forkbomb(int n)
{
    int ok = 0;
    int err = 0;
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            pause();
            _exit(0);
        }
        if (p < 0) {
            err = errno;
            break;
        }
        ok++;
    }
    printf("forked=%d errno=%s\n", ok, err ? strerrordesc_np(err) : "none");
    fflush(stdout);
    kill(0, SIGKILL); /* the whole group, including us: the sandbox's init reports it */
    return 0;
}

static int
listen_once(int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s, 4) < 0)
        return 1;
    printf("listening\n");
    fflush(stdout);
    int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return 1;
    (void)!write(c, "hello\n", 6);
    close(c);
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "escape") == 0)
        return escape((pid_t)strtol(argv[2], NULL, 10), argv[3]);
    if (argc == 3 && strcmp(argv[1], "spin") == 0)
        return spin(strtol(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "counter") == 0)
        return counter(argv[2]);
    if (argc == 3 && strcmp(argv[1], "forkbomb") == 0)
        return forkbomb((int)strtol(argv[2], NULL, 10));
    if (argc == 2 && strcmp(argv[1], "pid1") == 0) {
        (void)setvbuf(stdout, NULL, _IOLBF, 0);
        escape_pid1();
        return report_failures();
    }
    if (argc == 2 && strcmp(argv[1], "hostinodes") == 0) {
        (void)setvbuf(stdout, NULL, _IOLBF, 0);
        escape_host_inodes();
        return report_failures();
    }
    if (argc == 3 && strcmp(argv[1], "listen") == 0)
        return listen_once((int)strtol(argv[2], NULL, 10));
    fprintf(stderr, "usage: probe escape HOSTPID MARKER | spin MS | counter FILE | listen PORT | "
                    "forkbomb N | pid1 | hostinodes\n");
    return 2;
}
