/*
 * cmd_run.c - `sbx run`: run one command in a fresh sandbox, pass stdio through, exit with its
 * status, leave nothing behind.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run_stdio.h"
#include "cli/run_tty.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/native.h"
#include "runtime/runtime.h"

#include <sys/random.h>

/* sbx's own failures (not the command's): like `docker run`, 125. */
#define EXIT_RUN_FAIL 125
#define MAX_ITEMS     64

struct run_opts {
    const char *image;
    const char *rootfs;
    const char *state_dir;
    const char *cgroup_parent;
    const char *memory_arg;
    const char *user;
    struct sbx_rt_spec spec;
    char *env[MAX_ITEMS + 1];
    size_t n_env;
    struct sbx_rt_volume vols[MAX_ITEMS];
    char *vol_bufs[MAX_ITEMS];
    size_t n_vols;
    const char *layers[1];
    struct sbx_native_image image_ref; /* an OCI image's pinned layers */
    char *image_argv[MAX_ITEMS + 1];   /* the image's entrypoint + cmd when no CMD is given */
    char id[40];
    bool tty;         /* -t: a terminal of its own for the command */
    bool interactive; /* -i: the caller's stdin is copied to that terminal */
};

static int
parse_cpus(const char *s, uint64_t *millis)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !end || *end || v <= 0 || v > 1024)
        return -1;
    *millis = (uint64_t)(v * 1000 + 0.5);
    return *millis ? 0 : -1;
}

static int
parse_volume(struct run_opts *o, const char *arg)
{
    if (o->n_vols >= MAX_ITEMS)
        return -1;
    char *buf = sbx_xstrdup(arg);
    o->vol_bufs[o->n_vols] = buf;
    char *dst = strchr(buf, ':');
    if (!dst || dst == buf)
        return -1;
    *dst++ = '\0';
    char *mode = strchr(dst, ':');
    bool ro = false;
    if (mode) {
        *mode++ = '\0';
        if (strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0)
            return -1;
        ro = strcmp(mode, "ro") == 0;
    }
    if (dst[0] != '/')
        return -1;
    o->vols[o->n_vols++] = (struct sbx_rt_volume){.src = buf, .dst = dst, .ro = ro};
    return 0;
}

static int
parse_network(const char *s, enum sbx_rt_netmode *out)
{
    static const char *const names[] = {"none", "host", "bridge"};
    static const enum sbx_rt_netmode modes[] = {SBX_RT_NET_NONE, SBX_RT_NET_HOST,
                                                SBX_RT_NET_BRIDGE};
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = modes[i];
            return 0;
        }
    }
    return -1;
}

enum {
    OPT_IMAGE = 0x100,
    OPT_ROOTFS,
    OPT_MEMORY,
    OPT_PIDS,
    OPT_CPUS,
    OPT_NETWORK,
    OPT_HOSTNAME,
    OPT_USER,
    OPT_USERNS,
    OPT_STATE,
    OPT_CGROUP,
    OPT_UPPER,
    OPT_RM,
    OPT_NAME,
};

/* docker run flags that a one-shot local sandbox cannot honour: say why (RUN_REFUSED: the
 * caller adds no "invalid value" message). */
#define RUN_REFUSED (-1000)

static int
refuse_docker(int c)
{
    const char *why = c == 'p'        ? "-p: no published ports on a local run: `sbx create -p`"
                      : c == 'c'      ? "-c/--cpu-shares: relative CPU weights are not "
                                        "supported: --cpus N"
                      : c == 'd'      ? "-d: a run is in the foreground: `sbx create` for one "
                                        "that lives on"
                      : c == OPT_NAME ? "--name: a run sandbox is gone at exit: `sbx create "
                                        "--name`"
                                      : NULL;
    if (why)
        fprintf(stderr, "sbx run: %s\n", why);
    return why ? RUN_REFUSED : -1;
}

static int
apply_opt(struct run_opts *o, int c, const char *arg)
{
    sbx_autoerror sbx_error *err = NULL;
    switch (c) {
    case OPT_IMAGE:
        o->image = arg;
        return 0;
    case OPT_ROOTFS:
        o->rootfs = arg;
        return 0;
    case OPT_MEMORY:
        o->memory_arg = arg;
        return sbx_parse_size(arg, &o->spec.memory_bytes, &err);
    case OPT_PIDS:
        return sbx_parse_u64(arg, &o->spec.pids_max, &err);
    case OPT_CPUS:
        return parse_cpus(arg, &o->spec.cpu_millis);
    case OPT_NETWORK:
        return parse_network(arg, &o->spec.net);
    case OPT_HOSTNAME:
        o->spec.hostname = arg;
        return 0;
    case OPT_USER:
        o->user = arg;
        return 0;
    case OPT_USERNS:
        o->spec.userns = true;
        return 0;
    case OPT_STATE:
        o->state_dir = arg;
        return 0;
    case OPT_CGROUP:
        o->cgroup_parent = arg;
        return 0;
    case OPT_UPPER:
        if (strcmp(arg, "disk") != 0 && strcmp(arg, "tmpfs") != 0)
            return -1;
        o->spec.upper = strcmp(arg, "disk") == 0 ? SBX_RT_UPPER_DISK : SBX_RT_UPPER_TMPFS;
        return 0;
    case 'e':
        if (o->n_env >= MAX_ITEMS || !strchr(arg, '='))
            return -1;
        o->env[o->n_env++] = (char *)arg;
        return 0;
    case 'w':
        o->spec.cwd = arg;
        return arg[0] == '/' ? 0 : -1;
    case 'v':
        return parse_volume(o, arg);
    case 'm':
        return apply_opt(o, OPT_MEMORY, arg);
    case 'i': /* docker's -i; without -t the caller's stdin is always the command's */
        o->interactive = true;
        return 0;
    case 't':
        o->tty = true;
        return 0;
    case OPT_RM: /* docker's --rm: a run sandbox is always removed */
        return 0;
    default:
        return refuse_docker(c);
    }
}

static int
parse_args(struct run_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"image", required_argument, NULL, OPT_IMAGE},
        {"rootfs", required_argument, NULL, OPT_ROOTFS},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"pids", required_argument, NULL, OPT_PIDS},
        {"cpus", required_argument, NULL, OPT_CPUS},
        {"network", required_argument, NULL, OPT_NETWORK},
        {"hostname", required_argument, NULL, OPT_HOSTNAME},
        {"user", required_argument, NULL, OPT_USER},
        {"userns", no_argument, NULL, OPT_USERNS},
        {"state-dir", required_argument, NULL, OPT_STATE},
        {"cgroup-parent", required_argument, NULL, OPT_CGROUP},
        {"upper", required_argument, NULL, OPT_UPPER},
        {"env", required_argument, NULL, 'e'},
        {"workdir", required_argument, NULL, 'w'},
        {"volume", required_argument, NULL, 'v'},
        {"interactive", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},
        {"rm", no_argument, NULL, OPT_RM},
        {"detach", no_argument, NULL, 'd'},
        {"publish", required_argument, NULL, 'p'},
        {"cpu-shares", required_argument, NULL, 'c'},
        {"name", required_argument, NULL, OPT_NAME},
        {0},
    };
    optind = 1;
    int c;
    /* "+": stop at the first non-option, so `sbx run ls -l` needs no "--". */
    while ((c = getopt_long(argc, argv, "+e:w:v:m:itdp:c:", longopts, NULL)) != -1) {
        int r = c == '?' ? RUN_REFUSED : apply_opt(o, c, optarg);
        if (r < 0 && r != RUN_REFUSED)
            fprintf(stderr, "sbx run: invalid value `%s` for %s\n", optarg ? optarg : "",
                    argv[optind - 1]);
        if (r < 0)
            return -1;
    }
    /* Without CMD an OCI image's entrypoint + cmd run (filled in by resolve_image). */
    if (optind >= argc && (!o->image || strcmp(o->image, "host") == 0)) {
        fputs("sbx run: no command given (sbx run [OPTIONS] -- CMD...)\n", stderr);
        return -1;
    }
    o->spec.argv = optind < argc ? argv + optind : NULL;
    o->spec.volumes = o->vols;
    o->spec.n_volumes = o->n_vols;
    return 0;
}

/* Look NAME up in a passwd/group file: field 3 is the id. */
static int
lookup_id(const char *file, const char *name, uint32_t *id, uint32_t *gid)
{
    sbx_autofclose FILE *f = fopen(file, "re");
    char line[1024];
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) != 0 || line[n] != ':')
            continue;
        char *p = strchr(line + n + 1, ':');
        if (!p)
            return -1;
        char *end = NULL;
        *id = (uint32_t)strtoul(p + 1, &end, 10);
        if (gid && end && *end == ':')
            *gid = (uint32_t)strtoul(end + 1, NULL, 10);
        return 0;
    }
    return -1;
}

static int
resolve_one(const char *root, const char *file, const char *s, uint32_t *id, uint32_t *gid)
{
    uint64_t v;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_parse_u64(s, &v, &err) == 0 && v < UINT32_MAX) {
        *id = (uint32_t)v;
        return 0;
    }
    sbx_autofree char *path = sbx_xasprintf("%s/etc/%s", root, file);
    return lookup_id(path, s, id, gid);
}

/* --user U[:G] with names resolved in the sandbox's own /etc/passwd and /etc/group. */
static int
resolve_user(struct run_opts *o)
{
    if (!o->user)
        return 0;
    const char *root = o->rootfs ? o->rootfs : "";
    if (o->image_ref.img)
        root = o->image_ref.passwd_root ? o->image_ref.passwd_root : "/nonexistent";
    sbx_autofree char *u = sbx_xstrdup(o->user);
    char *g = strchr(u, ':');
    if (g)
        *g++ = '\0';
    uint32_t uid = 0;
    uint32_t gid = 0;
    if (resolve_one(root, "passwd", u, &uid, &gid) < 0 ||
        (g && resolve_one(root, "group", g, &gid, NULL) < 0)) {
        fprintf(stderr, "sbx run: unknown user `%s`\n", o->user);
        return -1;
    }
    o->spec.uid = uid;
    o->spec.gid = gid;
    return 0;
}

static const char *
state_dir_of(const struct run_opts *o)
{
    if (o->state_dir)
        return o->state_dir;
    const char *env = getenv("SBX_STATE_DIR"); /* NOLINT(concurrency-mt-unsafe): no threads */
    return env && *env ? env : "/var/lib/sbx";
}

/* The image's entrypoint followed by its cmd, when the user gave no CMD. */
static int
image_command(struct run_opts *o, sbx_error **err)
{
    size_t n = 0;
    const struct sbx_image *img = o->image_ref.img;
    for (char **p = img->entrypoint; p && *p && n < MAX_ITEMS; p++)
        o->image_argv[n++] = *p;
    for (char **p = img->cmd; p && *p && n < MAX_ITEMS; p++)
        o->image_argv[n++] = *p;
    if (n == 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "image `%s` has no entrypoint or cmd: give a command", o->image);
    o->spec.argv = o->image_argv;
    return 0;
}

/* The one place images are resolved: --rootfs, the built-in `host`, or the OCI image store
 * (layers pinned under this run's sandbox id until it is gone). */
static int
resolve_image(struct run_opts *o, sbx_error **err)
{
    if (o->rootfs) {
        if (o->image)
            return sbx_error_set(err, SBX_EINVAL, 0, "--image and --rootfs exclude each other");
        o->layers[0] = o->rootfs;
        o->spec.layers = o->layers;
        o->spec.n_layers = 1;
        return 0;
    }
    if (!o->image || strcmp(o->image, "host") == 0)
        return 0; /* no layers: the built-in `host` image */
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return sbx_error_set(err, SBX_EGENERIC, errno, "getrandom");
    (void)snprintf(o->id, sizeof o->id, "run-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                   rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    o->spec.id = o->id;
    int ret =
        sbx_native_image_apply(&o->image_ref, &o->spec, state_dir_of(o), o->image, o->id, err);
    if (ret == 0 && !o->spec.argv)
        ret = image_command(o, err);
    if (ret == 0 && !o->user && o->image_ref.img->user && *o->image_ref.img->user)
        o->user = o->image_ref.img->user; /* the image's USER, unless --user says otherwise */
    return ret;
}

static void
opts_init(struct run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->spec.stdio[0] = 0;
    o->spec.stdio[1] = 1;
    o->spec.stdio[2] = 2;
    o->spec.die_with_parent = true;
    /* A fork bomb must not reach the host's pid_max: 1024 unless --pids says otherwise. */
    o->spec.pids_max = 1024;
    o->spec.start = true; /* no separate start step: one scheduler round trip less */
    o->spec.env = o->env;
    /* A one-shot command's writable layer dies with it: RAM keeps the start path free of
     * disk metadata writes (~1 ms here); --upper disk for commands that write a lot. */
    o->spec.upper = SBX_RT_UPPER_TMPFS;
    /* --userns: sandbox ids 0-65535 are host ids 1000000-1065535 (no host user owns those). */
    o->spec.uid_map = (struct sbx_rt_idmap){0, 1000000, 65536};
    o->spec.gid_map = (struct sbx_rt_idmap){0, 1000000, 65536};
}

static void
opts_release(struct run_opts *o)
{
    for (size_t i = 0; i < MAX_ITEMS; i++)
        free(o->vol_bufs[i]);
    /* The sandbox is destroyed by now: its layers may go. */
    sbx_native_image_release(&o->image_ref, true);
}

static int
report(const struct sbx_rt_exit *ex, const struct run_opts *o)
{
    if (ex->start_error[0]) {
        fprintf(stderr, "sbx run: %s\n", ex->start_error);
    } else if (ex->oom_killed && ex->code == 128 + SIGKILL) {
        fprintf(stderr, "sbx run: killed: out of memory (limit %s)\n",
                o->memory_arg ? o->memory_arg : "none");
    }
    return ex->code < 0 ? EXIT_RUN_FAIL : ex->code;
}

static int
run(struct run_opts *o, sbx_error **err)
{
    const char *state = state_dir_of(o);
    const char *cg = o->cgroup_parent;
    if (!cg)
        cg = getenv("SBX_CGROUP_PARENT"); /* NOLINT(concurrency-mt-unsafe): no threads yet */
    struct sbx_native_bridge *bridge = NULL;
    struct sbx_rt_net_ops net_ops;
    (void)sbx_native_bridge_new(&bridge, state, err);
    sbx_native_bridge_ops(&net_ops, bridge);
    struct sbx_rt_config cfg = {.state_dir = state, .cgroup_parent = cg, .net_ops = &net_ops};
    struct sbx_rt *rt = NULL;
    int ret = sbx_rt_open(&rt, &cfg, err);
    if (ret < 0) {
        sbx_native_bridge_free(bridge);
        return ret;
    }
    /* Terminal and job-control signals go to the sandbox, which decides; we keep waiting. */
    sigset_t fwd;
    sigemptyset(&fwd);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(sigs); i++)
        sigaddset(&fwd, sigs[i]);
    (void)sigprocmask(SIG_BLOCK, &fwd, NULL);
    struct sbx_rt_sandbox *sb = NULL;
    struct sbx_rt_exit ex = {.code = -1};
    struct sbx_run_stdio io = {0};
    struct sbx_run_tty tty = {.master = -1, .slave = -1, .stop = {-1, -1}, .winch = -1};
    if (o->tty) {
        /* the window size goes to the terminal (run_tty.c), not as a signal to the command */
        sigdelset(&fwd, SIGWINCH);
        ret = sbx_run_tty_open(&tty, o->interactive);
        if (ret < 0)
            ret = sbx_error_set(err, SBX_EGENERIC, -ret, "a terminal for the command");
        for (int i = 0; ret == 0 && i < 3; i++)
            o->spec.stdio[i] = tty.slave;
        o->spec.tty = true;
    } else {
        ret = sbx_run_stdio_setup(&io, o->spec.stdio);
        if (ret < 0)
            ret = sbx_error_set(err, SBX_EGENERIC, -ret, "pipe for the command's stdio");
    }
    if (ret == 0)
        ret = sbx_rt_create(&sb, rt, &o->spec, err);
    if (o->tty && ret == 0 && sbx_run_tty_start(&tty) < 0)
        ret = sbx_error_set(err, SBX_EGENERIC, errno, "copy the terminal");
    if (!o->tty)
        sbx_run_stdio_started(&io);
    if (ret == 0)
        ret = sbx_rt_wait(&ex, sb, &fwd, err);
    if (o->tty)
        sbx_run_tty_finish(&tty); /* the terminal is the caller's again before we exit */
    else
        sbx_run_stdio_finish(&io); /* all it wrote is in the caller's files before we exit */
    if (sb) {
        /* The teardown (the init's exit, cgroups, lease, record) finishes in a detached
         * process once the command's status is known: the caller waits for our exit only. */
        sbx_autoerror sbx_error *derr = NULL;
        int d = ret == 0 ? sbx_rt_destroy_detached(sb, &derr) : sbx_rt_destroy(sb, &derr);
        if (d < 0)
            fprintf(stderr, "sbx run: warning: %s (run `sbx gc`)\n", sbx_error_msg(derr));
        sbx_rt_sandbox_free(sb);
    }
    sbx_rt_close(rt);
    sbx_native_bridge_free(bridge);
    return ret < 0 ? ret : report(&ex, o);
}

int
sbx_cmd_run(int argc, char **argv)
{
    struct run_opts o;
    opts_init(&o);
    int code = SBX_EXIT_USAGE;
    sbx_autoerror sbx_error *err = NULL;
    if (parse_args(&o, argc, argv) == 0) {
        int ret = resolve_image(&o, &err);
        if (ret == 0 && resolve_user(&o) < 0) /* it printed why */
            ret = sbx_error_set(&err, SBX_EINVAL, 0, "cannot resolve --user");
        if (ret == 0)
            ret = run(&o, &err);
        code = ret;
        if (ret < 0) {
            fprintf(stderr, "sbx run: %s\n", sbx_error_msg(err));
            code = ret == -SBX_EINVAL ? SBX_EXIT_USAGE : EXIT_RUN_FAIL;
        }
    }
    opts_release(&o);
    return code;
}
