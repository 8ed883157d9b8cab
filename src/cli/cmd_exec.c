/*
 * cmd_exec.c - `sbx exec ID -- CMD...`: run a command in a sandbox, as `docker exec`: its
 * output byte for byte (execd's pipe mode), stdin with -i, the exit code of the command
 * (128+N when signal N killed it; 126/127 from the shell when it cannot run it) or 125
 * when sbx itself failed. `-it`: on a terminal instead (a PTY session, term.c).
 */
#include <getopt.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "cli/term.h"
#include "common/buf.h"
#include "common/util.h"
#include "common/xalloc.h"

/* docker exec: 125 when the failure is sbx's, not the command's. */
#define EXEC_OWN_FAILURE 125

struct exec_args {
    struct sbx_cli_conn conn;
    struct sbx_cli_pipe_opts opts;
    struct sbx_cli_kvs env;
    bool interactive; /* -i */
    bool tty;         /* -t */
};

static int
parse_opt(struct exec_args *a, int opt, char *arg)
{
    uint64_t ms = 0;
    switch (opt) {
    case 'w':
        a->opts.cwd = arg;
        return 0;
    case 'e':
        return sbx_cli_kvs_add(&a->env, arg, "exec", "--env");
    case 'i':
        a->interactive = true;
        return 0;
    case 't':
        a->tty = true;
        return 0;
    case 'T':
        if (sbx_parse_u64(arg, &ms, NULL) < 0 || ms == 0 || ms > INT32_MAX) {
            fprintf(stderr, "sbx exec: --timeout wants milliseconds > 0\n");
            return -1;
        }
        a->opts.timeout_ms = (long)ms;
        return 0;
    default:
        return sbx_cli_conn_opt(&a->conn, opt, arg) ? 0 : -1;
    }
}

static bool
env_name_ok(const char *k)
{
    if (!*k || (*k >= '0' && *k <= '9'))
        return false;
    return k[strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")] == '\0';
}

static int
parse_args(struct exec_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"workdir", required_argument, NULL, 'w'},
        {"env", required_argument, NULL, 'e'},
        {"timeout", required_argument, NULL, 'T'},
        {"interactive", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "+w:e:itH:", longopts, NULL)) != -1) {
        if (parse_opt(a, opt, optarg) < 0)
            return -1;
    }
    if (a->tty && !a->interactive) {
        fprintf(stderr, "sbx exec: -t needs -i (-it: the command on this terminal)\n");
        return -1;
    }
    for (size_t i = 0; i < a->env.n; i++) {
        if (!env_name_ok(a->env.items[i].key)) {
            fprintf(stderr, "sbx exec: --env: `%s` is not a variable name\n", a->env.items[i].key);
            return -1;
        }
    }
    /* ID, then the command (after an optional "--"); with -it the command is optional. */
    size_t need = a->tty ? 1 : 2;
    if ((size_t)(argc - optind) < need ||
        (!a->tty && argc - optind == 2 && strcmp(argv[optind + 1], "--") == 0)) {
        fprintf(stderr, "sbx exec: expected ID -- CMD... (see `sbx exec --help`)\n");
        return -1;
    }
    a->opts.stdin_open = a->interactive;
    return 0;
}

/* One argument is a shell command line as is; several are quoted word by word. */
static char *
command_line(int argc, char **argv)
{
    if (argc == 1)
        return sbx_xstrdup(argv[0]);
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    for (int i = 0; i < argc; i++) {
        if (i)
            (void)sbx_buf_append_str(&b, " ", NULL);
        (void)sbx_buf_append_shell_quoted(&b, argv[i], NULL);
    }
    return sbx_buf_steal(&b);
}

/* --env: `export K='V';` before the command (the shell runs both; with -it and no command,
 * the shell's own: exports then `exec ${SHELL:-sh}`, so the variables are in it). */
static char *
with_env(const struct exec_args *a, char *cmd)
{
    if (!a->env.n)
        return cmd;
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    (void)sbx_buf_append_str(&b, "export", NULL);
    for (size_t i = 0; i < a->env.n; i++) {
        (void)sbx_buf_printf(&b, NULL, " %s=", a->env.items[i].key);
        (void)sbx_buf_append_shell_quoted(&b, a->env.items[i].value, NULL);
    }
    (void)sbx_buf_printf(&b, NULL, "; %s", cmd ? cmd : "exec \"${SHELL:-sh}\"");
    free(cmd);
    return sbx_buf_steal(&b);
}

static int
run(struct exec_args *a, const char *arg_id)
{
    sbx_client *c = sbx_cli_connect(&a->conn, "exec");
    char id[37] = "";
    int rc = SBX_TERM_FAILED;
    if (c && sbx_cli_resolve_id(c, "exec", arg_id, id) == 0)
        rc = a->tty ? sbx_cli_term_opts(c, "exec", id, &a->opts)
                    : sbx_cli_pipe(c, "exec", id, &a->opts);
    sbx_client_free(c);
    return rc == SBX_TERM_FAILED ? EXEC_OWN_FAILURE : rc;
}

int
sbx_cmd_exec(int argc, char **argv)
{
    struct exec_args a = {0};
    if (parse_args(&a, argc, argv) < 0) {
        sbx_cli_kvs_dispose(&a.env);
        return EXEC_OWN_FAILURE; /* docker exec: a usage error is 125 too */
    }
    const char *arg_id = argv[optind];
    int first = optind + 1;
    if (first < argc && strcmp(argv[first], "--") == 0)
        first++;
    char *cmd = with_env(&a, first < argc ? command_line(argc - first, argv + first) : NULL);
    a.opts.command = cmd;
    int rc = run(&a, arg_id);
    free(cmd);
    sbx_cli_kvs_dispose(&a.env);
    return rc;
}
