/*
 * cmd_exec.c - `sbx exec ID -- CMD...`: run a command in a sandbox, stream its output,
 * exit with its exit code. `-it`: on a terminal instead (a PTY session, term.c).
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

static int
put_line(FILE *out, const char *data, size_t len)
{
    (void)fwrite(data, 1, len, out);
    (void)fputc('\n', out);
    (void)fflush(out);
    return 0;
}

static int
on_stdout(const char *data, size_t len, void *payload)
{
    (void)payload;
    return put_line(stdout, data, len);
}

static int
on_stderr(const char *data, size_t len, void *payload)
{
    (void)payload;
    return put_line(stderr, data, len);
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
        (void)sbx_buf_append_str(&b, "'", NULL);
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'')
                (void)sbx_buf_append_str(&b, "'\\''", NULL);
            else
                (void)sbx_buf_append(&b, p, 1, NULL);
        }
        (void)sbx_buf_append_str(&b, "'", NULL);
    }
    return sbx_buf_steal(&b);
}

struct exec_args {
    struct sbx_cli_conn conn;
    sbx_exec_options opts;
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
        if (sbx_parse_u64(arg, &ms, NULL) < 0 || ms == 0) {
            fprintf(stderr, "sbx exec: --timeout wants milliseconds > 0\n");
            return -1;
        }
        a->opts.timeout_ms = (long)ms;
        return 0;
    default:
        return sbx_cli_conn_opt(&a->conn, opt, arg) ? 0 : -1;
    }
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
    if (a->interactive != a->tty) {
        fprintf(stderr, "sbx exec: -i and -t go together (-it: the command on a terminal)\n");
        return -1;
    }
    if (a->tty && (a->opts.cwd || a->env.n || a->opts.timeout_ms)) {
        fprintf(stderr, "sbx exec: -it takes no --workdir, --env or --timeout (use the shell: "
                        "cd DIR && K=V CMD)\n");
        return -1;
    }
    /* ID, then the command (after an optional "--"); with -it the command is optional. */
    size_t need = a->tty ? 1 : 2;
    if ((size_t)(argc - optind) < need ||
        (!a->tty && argc - optind == 2 && strcmp(argv[optind + 1], "--") == 0)) {
        fprintf(stderr, "sbx exec: expected ID -- CMD... (see `sbx exec --help`)\n");
        return -1;
    }
    a->opts.env = a->env.items;
    a->opts.n_env = a->env.n;
    a->opts.on_stdout = on_stdout;
    a->opts.on_stderr = on_stderr;
    return 0;
}

/* -it: the command (or a shell) on a terminal. */
static int
exec_tty(struct exec_args *a, const char *arg_id, char *cmd)
{
    sbx_client *c = sbx_cli_connect(&a->conn, "exec");
    char id[37] = "";
    int rc = SBX_EXIT_FAIL;
    if (c && sbx_cli_resolve_id(c, "exec", arg_id, id) == 0)
        rc = sbx_cli_term(c, "exec", id, cmd);
    sbx_client_free(c);
    return rc;
}

int
sbx_cmd_exec(int argc, char **argv)
{
    struct exec_args a = {.opts = SBX_EXEC_OPTIONS_INIT};
    if (parse_args(&a, argc, argv) < 0) {
        sbx_cli_kvs_dispose(&a.env);
        return SBX_EXIT_USAGE;
    }
    const char *arg_id = argv[optind];
    char id[37] = "";
    int first = optind + 1;
    if (first < argc && strcmp(argv[first], "--") == 0)
        first++;
    char *cmd = first < argc ? command_line(argc - first, argv + first) : NULL;
    if (a.tty) {
        int rc = exec_tty(&a, arg_id, cmd);
        free(cmd);
        sbx_cli_kvs_dispose(&a.env);
        return rc;
    }
    sbx_client *c = sbx_cli_connect(&a.conn, "exec");
    int exit_code = -1;
    bool found = c && sbx_cli_resolve_id(c, "exec", arg_id, id) == 0;
    int ret = found ? sbx_exec(&exit_code, c, id, cmd, &a.opts) : -SBX_EGENERIC;
    int rc = SBX_EXIT_FAIL;
    if (found && ret < 0)
        rc = sbx_cli_fail(c, "exec", id, ret);
    else if (found)
        rc = exit_code < 0 ? 128 + 9 : exit_code; /* killed by a signal: like a shell */
    free(cmd);
    sbx_client_free(c);
    sbx_cli_kvs_dispose(&a.env);
    return rc;
}
