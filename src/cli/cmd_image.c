/*
 * cmd_image.c - `sbx image pull|import|ls|rm`: the local OCI image store.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/image.h"

struct image_cli {
    const char *state_dir;
    const char *username;
    const char *password;
    const char *platform;
    const char *tag;
    bool insecure;
    bool json;
    bool password_stdin;
};

enum {
    OPT_STATE_DIR = 256,
    OPT_INSECURE,
    OPT_PLATFORM,
    OPT_JSON,
    OPT_USER,
    OPT_PASS_STDIN
};

static const struct option image_opts[] = {
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"platform", required_argument, NULL, OPT_PLATFORM},
    {"username", required_argument, NULL, OPT_USER},
    {"password-stdin", no_argument, NULL, OPT_PASS_STDIN},
    {"tag", required_argument, NULL, 't'},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

static int
parse_opts(struct image_cli *o, int argc, char **argv)
{
    int c;
    optind = 0; /* full re-initialisation of getopt (glibc) */
    opterr = 0; /* our own message below */
    while ((c = getopt_long(argc, argv, "t:", image_opts, NULL)) != -1) {
        switch (c) {
        case OPT_STATE_DIR:
            o->state_dir = optarg;
            break;
        case OPT_INSECURE:
            o->insecure = true;
            break;
        case OPT_PLATFORM:
            o->platform = optarg;
            break;
        case OPT_USER:
            o->username = optarg;
            break;
        case OPT_PASS_STDIN:
            o->password_stdin = true;
            break;
        case 't':
            o->tag = optarg;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        default:
            fprintf(stderr,
                    "sbx image: bad option or missing value `%s` (see `sbx image --help`)\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    return optind;
}

static int
fail(const char *sub, sbx_error *err)
{
    fprintf(stderr, "sbx image %s: %s\n", sub, sbx_error_msg(err));
    return SBX_EXIT_FAIL;
}

static int
open_store(struct sbx_image_store **s, const struct image_cli *o, const char *sub)
{
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): the CLI is single-threaded here */
    const char *state = o->state_dir ? o->state_dir : getenv("SBX_STATE_DIR");
    sbx_autofree char *root = sbx_image_default_root(state);
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_image_store_open(s, root, &err) < 0)
        return fail(sub, err);
    return SBX_EXIT_OK;
}

/* Password from stdin (one line) or SBX_REGISTRY_PASSWORD; never from argv (visible in ps). */
static char *
read_password(const struct image_cli *o)
{
    if (o->password_stdin) {
        char line[1024];
        if (!fgets(line, sizeof(line), stdin))
            return NULL;
        line[strcspn(line, "\r\n")] = '\0';
        return sbx_xstrdup(line);
    }
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): the CLI is single-threaded here */
    const char *env = getenv("SBX_REGISTRY_PASSWORD");
    return env ? sbx_xstrdup(env) : NULL;
}

/* ---- progress on a terminal, per layer, as docker pull shows it ---- */

struct pull_view {
    FILE *out;
    uint64_t last_ms; /* the last redraw of the current layer's line */
};

static void
human(char *buf, size_t n, uint64_t bytes)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    (void)snprintf(buf, n, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

static void
on_progress(const struct sbx_image_progress *p, void *arg)
{
    struct pull_view *v = arg;
    if (p->is_config)
        return; /* as docker: layers only */
    const char *hex = strchr(p->digest, ':');
    char id[13];
    (void)snprintf(id, sizeof id, "%.12s", hex ? hex + 1 : p->digest);
    char done[16];
    char total[16];
    human(done, sizeof done, p->done);
    human(total, sizeof total, p->total);
    uint64_t now = sbx_now_ms();
    switch (p->phase) {
    case SBX_IMAGE_BLOB_CACHED:
        fprintf(v->out, "%s: Already exists\n", id);
        break;
    case SBX_IMAGE_BLOB_DOWNLOADING:
        if (p->done && p->done < p->total && now - v->last_ms < 100)
            return; /* at most ten redraws a second */
        v->last_ms = now;
        fprintf(v->out, "\r\033[K%s: Downloading %s/%s (layer %d of %d)", id, done, total,
                p->index + 1, p->n_layers);
        break;
    case SBX_IMAGE_BLOB_DONE:
        fprintf(v->out, "\r\033[K%s: Pull complete %s\n", id, total);
        break;
    }
    (void)fflush(v->out);
}

static int
image_pull(struct sbx_image_store *s, struct image_cli *o, const char *ref)
{
    sbx_autofree char *password = read_password(o);
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): the CLI is single-threaded here */
    const char *user = o->username ? o->username : getenv("SBX_REGISTRY_USERNAME");
    struct sbx_image_pull_opts po = {
        .username = user, .password = password, .insecure = o->insecure, .platform = o->platform};
    struct pull_view view = {.out = stderr};
    if (isatty(STDERR_FILENO)) { /* to a terminal only: logs and pipes get the digest alone */
        po.progress = on_progress;
        po.progress_arg = &view;
        fprintf(stderr, "Pulling %s\n", ref);
    }
    sbx_autoerror sbx_error *err = NULL;
    sbx_autofree char *digest = NULL;
    if (sbx_image_pull(s, ref, &po, &digest, &err) < 0)
        return fail("pull", err);
    printf("%s\n", digest);
    return SBX_EXIT_OK;
}

static int
image_import(struct sbx_image_store *s, const struct image_cli *o, const char *file)
{
    sbx_autoerror sbx_error *err = NULL;
    sbx_autofree char *digest = NULL;
    if (sbx_image_import(s, file, o->tag, &digest, &err) < 0)
        return fail("import", err);
    printf("%s\n", digest);
    return SBX_EXIT_OK;
}

static void
human_size(char *buf, size_t n, uint64_t size)
{
    const char *units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)size;
    size_t u = 0;
    while (v >= 1000.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1000.0;
        u++;
    }
    (void)snprintf(buf, n, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
}

static void
print_json(const struct sbx_image_info *v, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        (void)json_array_append_new(arr, json_pack("{s:s,s:s,s:I,s:s?}", "name", v[i].name,
                                                   "digest", v[i].digest, "size",
                                                   (json_int_t)v[i].size, "created", v[i].created));
    }
    sbx_autofree char *text = json_dumps(arr, JSON_INDENT(2));
    json_decref(arr);
    printf("%s\n", text ? text : "[]");
}

static void
print_table(const struct sbx_image_info *v, size_t n)
{
    printf("%-50s %-14s %-9s %s\n", "REF", "DIGEST", "SIZE", "CREATED");
    for (size_t i = 0; i < n; i++) {
        char size[32];
        human_size(size, sizeof(size), v[i].size);
        const char *d = strncmp(v[i].digest, "sha256:", 7) == 0 ? v[i].digest + 7 : v[i].digest;
        printf("%-50s %-14.12s %-9s %.19s\n", v[i].name, d, size,
               v[i].created ? v[i].created : "-");
    }
}

static int
image_ls(struct sbx_image_store *s, const struct image_cli *o)
{
    struct sbx_image_info *v = NULL;
    size_t n = 0;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_image_list(&v, &n, s, &err) < 0)
        return fail("ls", err);
    if (o->json)
        print_json(v, n);
    else
        print_table(v, n);
    sbx_image_info_free(v, n);
    return SBX_EXIT_OK;
}

static int
image_rm(struct sbx_image_store *s, int argc, char **argv)
{
    int rc = SBX_EXIT_OK;
    for (int i = 0; i < argc; i++) {
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_image_remove(s, argv[i], &err) < 0)
            rc = fail("rm", err);
    }
    return rc;
}

static int
usage_error(const char *msg)
{
    fprintf(stderr, "sbx image: %s (see `sbx image --help`)\n", msg);
    return SBX_EXIT_USAGE;
}

/* Which positional arguments each subcommand takes: min, max (-1: any). */
static int
check_args(const char *sub, int n)
{
    if (strcmp(sub, "ls") == 0)
        return n == 0 ? 0 : usage_error("ls takes no arguments");
    if (strcmp(sub, "rm") == 0)
        return n >= 1 ? 0 : usage_error("rm needs at least one REF");
    if (strcmp(sub, "pull") == 0 || strcmp(sub, "import") == 0)
        return n == 1 ? 0 : usage_error("pull and import take exactly one argument");
    return usage_error("unknown subcommand");
}

static int
dispatch(struct sbx_image_store *s, struct image_cli *o, const char *sub, int argc, char **argv)
{
    if (strcmp(sub, "pull") == 0)
        return image_pull(s, o, argv[0]);
    if (strcmp(sub, "import") == 0)
        return image_import(s, o, argv[0]);
    if (strcmp(sub, "ls") == 0)
        return image_ls(s, o);
    return image_rm(s, argc, argv);
}

int
sbx_cmd_image(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("missing subcommand");
    const char *sub = argv[1];
    struct image_cli o = {0};
    int first = parse_opts(&o, argc - 1, argv + 1);
    if (first < 0)
        return SBX_EXIT_USAGE;
    int nargs = argc - 1 - first;
    char **args = argv + 1 + first;
    if (check_args(sub, nargs) != 0)
        return SBX_EXIT_USAGE;
    struct sbx_image_store *s = NULL;
    int rc = open_store(&s, &o, sub);
    if (rc != SBX_EXIT_OK)
        return rc;
    rc = dispatch(s, &o, sub, nargs, args);
    sbx_image_store_close(s);
    return rc;
}
