/*
 * cmd_secret.c - `sbx secret set|ls|rm`: manage the server's encrypted secrets locally.
 *
 * Values never travel through argv (they would show in `ps` and shell history): they come
 * from standard input, or from an environment variable named with --from-env that this
 * command reads once.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "secrets/secrets.h"

struct secret_args {
    const char *state_dir;
    const char *key_file;
    const char *from_env;
    int json;
};

static int
parse_args(struct secret_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"state-dir", required_argument, NULL, 's'},
        {"key-file", required_argument, NULL, 'k'},
        {"from-env", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "s:k:e:j", longopts, NULL)) != -1) {
        if (opt == 's')
            a->state_dir = optarg;
        else if (opt == 'k')
            a->key_file = optarg;
        else if (opt == 'e')
            a->from_env = optarg;
        else if (opt == 'j')
            a->json = 1;
        else
            return -1;
    }
    if (!a->state_dir)
        a->state_dir = getenv("SBX_STATE_DIR"); // NOLINT(concurrency-mt-unsafe): single thread
    if (!a->state_dir || !*a->state_dir)
        a->state_dir = "/var/lib/sbx";
    return 0;
}

/* Read the value from stdin (without echo on a terminal); one trailing newline is dropped. */
static char *
read_stdin_value(size_t *len)
{
    struct termios old;
    struct termios quiet;
    int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
    if (tty) {
        fprintf(stderr, "value (not echoed): ");
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
    }
    char *buf = sodium_malloc(SBX_SECRET_VALUE_MAX + 2);
    ssize_t n = buf ? sbx_read_full(STDIN_FILENO, buf, SBX_SECRET_VALUE_MAX + 1) : -1;
    if (tty) {
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &old);
        fputc('\n', stderr);
    }
    if (n < 0 || n > (ssize_t)SBX_SECRET_VALUE_MAX) {
        sodium_free(buf);
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static int
do_set(struct sbx_secret_store *s, const struct secret_args *a, const char *name, sbx_error **err)
{
    if (a->from_env) {
        const char *v = getenv(a->from_env); // NOLINT(concurrency-mt-unsafe): single thread
        if (!v)
            return sbx_error_set(err, SBX_ENOTFOUND, 0, "environment variable %s is not set",
                                 a->from_env);
        return sbx_secret_set(s, name, v, strlen(v), err);
    }
    size_t len = 0;
    char *v = read_stdin_value(&len);
    if (!v)
        return sbx_error_set(err, SBX_ELIMIT, 0,
                             "cannot read the value from stdin (at most %u "
                             "bytes)",
                             SBX_SECRET_VALUE_MAX);
    int ret = sbx_secret_set(s, name, v, len, err);
    sodium_free(v);
    return ret;
}

static void
format_time(char *out, size_t n, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    (void)strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int
do_list(struct sbx_secret_store *s, const struct secret_args *a, sbx_error **err)
{
    struct sbx_secret_info *items = NULL;
    size_t n = 0;
    int ret = sbx_secret_list(s, &items, &n, err);
    if (ret < 0)
        return ret;
    if (!a->json)
        printf("%-32s  %-20s  %s\n", "NAME", "CREATED", "UPDATED");
    for (size_t i = 0; i < n; i++) {
        char c[32];
        char u[32];
        format_time(c, sizeof c, items[i].created_ms);
        format_time(u, sizeof u, items[i].updated_ms);
        if (a->json)
            printf("{\"name\":\"%s\",\"createdAt\":\"%s\",\"updatedAt\":\"%s\"}\n", items[i].name,
                   c, u);
        else
            printf("%-32s  %-20s  %s\n", items[i].name, c, u);
    }
    free(items);
    return 0;
}

static int
dispatch(struct sbx_secret_store *s, const struct secret_args *a, const char *sub, const char *name,
         sbx_error **err)
{
    if (strcmp(sub, "ls") == 0 || strcmp(sub, "list") == 0)
        return do_list(s, a, err);
    if (strcmp(sub, "set") == 0)
        return do_set(s, a, name, err);
    return sbx_secret_remove(s, name, err);
}

static int
check_usage(const char *sub, int nargs)
{
    int known = strcmp(sub, "set") == 0 || strcmp(sub, "rm") == 0 || strcmp(sub, "ls") == 0 ||
                strcmp(sub, "list") == 0;
    int want = strcmp(sub, "ls") == 0 || strcmp(sub, "list") == 0 ? 0 : 1;
    if (!known) {
        fprintf(stderr, "sbx secret: unknown subcommand `%s` (set, ls, rm)\n", sub);
        return -1;
    }
    if (nargs != want) {
        fprintf(stderr, "sbx secret %s: expected %s\n", sub, want ? "NAME" : "no arguments");
        return -1;
    }
    return 0;
}

int
sbx_cmd_secret(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "sbx secret: expected a subcommand: set, ls, rm (see --help)\n");
        return SBX_EXIT_USAGE;
    }
    const char *sub = argv[1];
    struct secret_args a = {0};
    if (parse_args(&a, argc - 1, argv + 1) < 0 || check_usage(sub, argc - 1 - optind) < 0)
        return SBX_EXIT_USAGE;
    const char *name = optind < argc - 1 ? argv[optind + 1] : NULL;
    sbx_autoerror sbx_error *err = NULL;
    sbx_autofree char *dir = sbx_xasprintf("%s/secrets", a.state_dir);
    struct sbx_secret_store *s = NULL;
    int ret = sbx_secret_store_open(&s, dir, a.key_file, &err);
    if (ret == 0)
        ret = dispatch(s, &a, sub, name, &err);
    sbx_secret_store_close(s);
    if (ret < 0) {
        fprintf(stderr, "sbx secret %s: %s\n", sub, sbx_error_msg(err));
        return SBX_EXIT_FAIL;
    }
    return SBX_EXIT_OK;
}
