/*
 * kwalk.c - what the kernel makes every sandbox create pay for every sandbox already there
 * (bench section 12, docs/server.md "Many sandboxes"). Three steps of a native create walk
 * lists that hold one entry per sandbox on the host:
 *   pivot_root     chroot_fs_refs visits every thread on the host;
 *   sysfs          mounting sysfs compares every sysfs superblock, one per network namespace;
 *   cfs_quota      a CPU quota write checks every cpu cgroup from the root (tg_set_bandwidth).
 * kwalk grows the host, step by step, by N "sandboxes" (a child in a network and mount
 * namespace of its own with sysfs mounted, and a cpu cgroup with a quota), and at each step
 * times each of the three in a fresh namespace (or cgroup) SAMPLES times.
 *
 *   sbx-kwalk [--steps 0,1000,10000] [--samples 30] [--scratch DIR]
 *
 * Prints one JSON object: {"points": [{"n", "pivot_root", "sysfs", "cfs_quota"}, ...]} with
 * the p50s in seconds (cfs_quota null without a cpu controller to write to). Needs root.
 * Everything it made is gone when it exits (children killed by pid, cgroups removed).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_STEPS   16
#define MAX_SAMPLES 200

struct opts {
    long steps[MAX_STEPS];
    size_t n_steps;
    long samples;
    const char *scratch;
};

struct host {
    pid_t *kids;
    long n_kids;
    char cg[256]; /* the cpu cgroup parent, "" without one */
    int cg_v2;
    long n_cgs;
};

static double
now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

static int
parse_long(const char *s, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    *out = v;
    return (int)(end - s);
}

static int
parse_steps(const char *s, struct opts *o)
{
    o->n_steps = 0;
    while (*s && o->n_steps < MAX_STEPS) {
        long v = 0;
        int used = parse_long(s, &v);
        if (used < 0)
            return -1;
        o->steps[o->n_steps++] = v;
        s += used;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *s ? -1 : 0;
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.steps = {0, 1000}, .n_steps = 2, .samples = 30, .scratch = "/tmp"};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v;
        if (!bad && strcmp(argv[i], "--steps") == 0)
            bad = parse_steps(v, o) < 0;
        else if (!bad && strcmp(argv[i], "--samples") == 0)
            bad = parse_long(v, &o->samples) < 0 || o->samples < 1 || o->samples > MAX_SAMPLES;
        else if (!bad && strcmp(argv[i], "--scratch") == 0)
            o->scratch = v;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr,
                    "usage: sbx-kwalk [--steps N,N,...] [--samples 1..%d] [--scratch DIR]\n",
                    MAX_SAMPLES);
            return -1;
        }
        i++;
    }
    return 0;
}

/* A namespace of our own: network and mount, nothing propagating back to the host. */
static int
own_namespaces(void)
{
    if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0)
        return -1;
    return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

/* One resident: its own netns with sysfs mounted (one more superblock), asleep until killed. */
static pid_t
add_resident(const char *mnt)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t parent = getpid();
    pid_t k = fork();
    if (k == 0) {
        (void)close(p[0]);
        /* Gone with us, whatever ends us (a time box's SIGKILL included). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(1);
        if (own_namespaces() < 0 || mount("sysfs", mnt, "sysfs", MS_RDONLY, NULL) < 0)
            _exit(1);
        (void)!write(p[1], "r", 1);
        for (;;)
            pause();
    }
    (void)close(p[1]);
    char c = 0;
    ssize_t n = k > 0 ? read(p[0], &c, 1) : -1;
    (void)close(p[0]);
    if (n != 1) {
        if (k > 0)
            (void)kill(k, SIGKILL);
        return -1;
    }
    return k;
}

static int
write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    int r = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) < 0 ? -1 : r;
}

/* The cpu controller: v1's hierarchy, or v2's root with cpu delegated to its children. */
static void
find_cpu_cgroup(struct host *h)
{
    snprintf(h->cg, sizeof h->cg, "/sys/fs/cgroup/cpu/sbx-kwalk-%d", (int)getpid());
    h->cg_v2 = access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", F_OK) != 0;
    if (h->cg_v2)
        snprintf(h->cg, sizeof h->cg, "/sys/fs/cgroup/sbx-kwalk-%d", (int)getpid());
    if (mkdir(h->cg, 0755) < 0 ||
        (h->cg_v2 && write_file(h->cg, "cgroup.subtree_control", "+cpu") < 0)) {
        (void)rmdir(h->cg);
        h->cg[0] = '\0';
    }
}

static int
set_quota(const char *dir, int v2)
{
    return v2 ? write_file(dir, "cpu.max", "100000 100000")
              : write_file(dir, "cpu.cfs_quota_us", "100000");
}

static int
grow(struct host *h, long n, const char *mnt)
{
    while (h->n_kids < n) {
        pid_t k = add_resident(mnt);
        if (k < 0) {
            fprintf(stderr, "sbx-kwalk: resident %ld: cannot make it\n", h->n_kids);
            return -1;
        }
        h->kids[h->n_kids++] = k;
    }
    char d[300];
    while (h->cg[0] && h->n_cgs < n) {
        snprintf(d, sizeof d, "%s/g%ld", h->cg, h->n_cgs);
        if (mkdir(d, 0755) < 0 || set_quota(d, h->cg_v2) < 0)
            return -1;
        h->n_cgs++;
    }
    return 0;
}

/* In a fresh child: mount sysfs, then pivot into a tmpfs; both timed, sent back in v[2]. */
static void
probe_child(int out, const char *mnt, const char *root)
{
    double v[2] = {-1, -1};
    if (own_namespaces() == 0) {
        double t = now_s();
        if (mount("sysfs", mnt, "sysfs", MS_RDONLY, NULL) == 0)
            v[0] = now_s() - t;
        if (mount("kwalk", root, "tmpfs", 0, NULL) == 0 && chdir(root) == 0) {
            t = now_s();
            if (syscall(SYS_pivot_root, ".", ".") == 0)
                v[1] = now_s() - t;
        }
    }
    (void)!write(out, v, sizeof v);
    _exit(0);
}

static int
probe_ns(const char *mnt, const char *root, double *sysfs, double *pivot)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t k = fork();
    if (k == 0) {
        (void)close(p[0]);
        probe_child(p[1], mnt, root);
    }
    (void)close(p[1]);
    double v[2];
    ssize_t n = k > 0 ? read(p[0], v, sizeof v) : -1;
    (void)close(p[0]);
    if (k > 0)
        (void)waitpid(k, NULL, 0);
    if (n != (ssize_t)sizeof v || v[0] < 0 || v[1] < 0)
        return -1;
    *sysfs = v[0];
    *pivot = v[1];
    return 0;
}

static int
probe_quota(const struct host *h, double *out)
{
    char d[300];
    snprintf(d, sizeof d, "%s/probe", h->cg);
    if (mkdir(d, 0755) < 0)
        return -1;
    double t = now_s();
    int r = set_quota(d, h->cg_v2);
    *out = now_s() - t;
    (void)rmdir(d);
    return r;
}

static int
measure(const struct host *h, const struct opts *o, const char *mnt, const char *root,
        const char *sep)
{
    double sysfs[MAX_SAMPLES];
    double pivot[MAX_SAMPLES];
    double quota[MAX_SAMPLES];
    for (long i = 0; i < o->samples; i++) {
        if (probe_ns(mnt, root, &sysfs[i], &pivot[i]) < 0 ||
            (h->cg[0] && probe_quota(h, &quota[i]) < 0)) {
            fprintf(stderr, "sbx-kwalk: a probe failed at %ld\n", h->n_kids);
            return -1;
        }
    }
    printf("%s{\"n\": %ld, \"pivot_root\": %.9f, \"sysfs\": %.9f, \"cfs_quota\": ", sep, h->n_kids,
           median(pivot, o->samples), median(sysfs, o->samples));
    if (h->cg[0])
        printf("%.9f}", median(quota, o->samples));
    else
        printf("null}");
    return 0;
}

static void
teardown(struct host *h)
{
    for (long i = 0; i < h->n_kids; i++)
        (void)kill(h->kids[i], SIGKILL);
    for (long i = 0; i < h->n_kids; i++)
        (void)waitpid(h->kids[i], NULL, 0);
    char d[300];
    for (long i = 0; i < h->n_cgs; i++) {
        snprintf(d, sizeof d, "%s/g%ld", h->cg, i);
        (void)rmdir(d);
    }
    if (h->cg[0])
        (void)rmdir(h->cg);
}

int
main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o) < 0)
        return 2;
    char mnt[256];
    char root[256];
    snprintf(mnt, sizeof mnt, "%s/sbx-kwalk-%d-sys", o.scratch, (int)getpid());
    snprintf(root, sizeof root, "%s/sbx-kwalk-%d-root", o.scratch, (int)getpid());
    long most = 0;
    for (size_t i = 0; i < o.n_steps; i++)
        most = o.steps[i] > most ? o.steps[i] : most;
    struct host h = {.kids = calloc((size_t)most + 1, sizeof(pid_t))};
    if (!h.kids || mkdir(mnt, 0755) < 0 || mkdir(root, 0755) < 0) {
        fprintf(stderr, "sbx-kwalk: cannot make %s and %s\n", mnt, root);
        (void)rmdir(mnt);
        free(h.kids);
        return 1;
    }
    find_cpu_cgroup(&h);
    int rc = 0;
    printf("{\"points\": [");
    for (size_t i = 0; i < o.n_steps && rc == 0; i++) {
        rc = grow(&h, o.steps[i], mnt) < 0 || measure(&h, &o, mnt, root, i ? ", " : "") < 0;
        fflush(stdout);
    }
    printf("]}\n");
    teardown(&h);
    (void)rmdir(mnt);
    (void)rmdir(root);
    free(h.kids);
    return rc;
}
