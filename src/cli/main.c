/*
 * main.c - `sbx`: table dispatch of verbs. Each verb lives in its own cmd_<verb>.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"

#define CMD(n, fn, sum, use)                                       \
    {                                                              \
        .name = (n), .summary = (sum), .usage = (use), .run = (fn) \
    }

const struct sbx_cli_cmd sbx_cli_commands[] = {
    CMD("help", sbx_cmd_help, "Show help for sbx or one of its commands",
        "Usage: sbx help [COMMAND]\n\nShow the list of commands, or the help of COMMAND.\n"),
    CMD("version", sbx_cmd_version, "Print the version of sbx",
        "Usage: sbx version\n\nPrint the version of sbx (same as `sbx --version`).\n"),
    CMD("run", sbx_cmd_run, "Run a command in a fresh sandbox",
        "Usage: sbx run [OPTIONS] [--] CMD [ARG...]\n\n"
        "Run CMD in a fresh sandbox with the caller's stdin/stdout/stderr, exit with its\n"
        "status (128+N if killed by signal N) and remove the sandbox.\n\n"
        "Options:\n"
        "  --image I          image to run (default: host, a read-only view of this host)\n"
        "  --rootfs DIR       use DIR (read-only) as the root filesystem instead of an image\n"
        "  --memory SIZE      memory limit (e.g. 256m, 1g)\n"
        "  --pids N           maximum number of processes\n"
        "  --cpus N           CPU quota in CPUs (e.g. 0.5, 1.5)\n"
        "  --network MODE     none (default, loopback only) | bridge | host\n"
        "  -e, --env K=V      set an environment variable (repeatable)\n"
        "  -w, --workdir DIR  working directory inside the sandbox\n"
        "  -v, --volume SRC:DST[:ro]  bind host path SRC at DST (repeatable)\n"
        "  --hostname H       hostname inside the sandbox (default: the sandbox id)\n"
        "  --user U[:G]       user (and group), by id or by name in the sandbox's /etc\n"
        "  --userns           own user namespace (ids 0-65535 map to host 1000000+)\n"
        "  --state-dir D      state directory (default $SBX_STATE_DIR or /var/lib/sbx)\n"
        "  --cgroup-parent P  cgroup below the caller's own (default $SBX_CGROUP_PARENT or sbx)\n"
        "\nExit status: CMD's status; 125 when sbx itself fails; 2 for usage errors.\n"),
    CMD("gc", sbx_cmd_gc, "Remove what crashed sandboxes left behind",
        "Usage: sbx gc [--all] [--state-dir D]\n\n"
        "Remove the cgroups, network leases and state of every recorded sandbox whose init\n"
        "is gone. With --all, kill and remove running sandboxes too.\n"),
    {0},
};

const struct sbx_cli_cmd *
sbx_cli_find(const char *name)
{
    for (const struct sbx_cli_cmd *c = sbx_cli_commands; c->name; c++) {
        if (strcmp(c->name, name) == 0)
            return c;
    }
    return NULL;
}

void
sbx_cli_print_usage(FILE *out, const struct sbx_cli_cmd *cmd)
{
    fputs(cmd->usage, out);
}

void
sbx_cli_print_overview(FILE *out)
{
    fputs("sbx - sandboxes for AI agents\n\n"
          "Usage: sbx [--version] [--help] COMMAND [ARGS...]\n\nCommands:\n",
          out);
    for (const struct sbx_cli_cmd *c = sbx_cli_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fputs("\nRun `sbx COMMAND --help` for the options of one command.\n"
          "Environment: SBX_LOG_LEVEL=error|warn|info|debug|trace\n",
          out);
}

int
sbx_cli_wants_help(int argc, char **argv, const struct sbx_cli_cmd *cmd)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_cli_print_usage(stdout, cmd);
            return 1;
        }
    }
    return 0;
}

static void
init_logging(void)
{
    enum sbx_log_level level = SBX_LOG_INFO;
    const char *env = getenv("SBX_LOG_LEVEL"); /* NOLINT(concurrency-mt-unsafe): before threads */
    if (env && sbx_log_parse_level(env, &level) < 0)
        fprintf(stderr, "sbx: warning: ignoring SBX_LOG_LEVEL=%s\n", env);
    sbx_log_init("sbx", level, SBX_LOG_TEXT);
}

int
main(int argc, char **argv)
{
    init_logging();
    if (argc < 2) {
        sbx_cli_print_overview(stderr);
        return SBX_EXIT_USAGE;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "--version") == 0 || strcmp(verb, "-V") == 0)
        return sbx_cmd_version(1, argv + 1);
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0)
        return sbx_cmd_help(1, argv + 1);
    const struct sbx_cli_cmd *cmd = sbx_cli_find(verb);
    if (!cmd) {
        fprintf(stderr, "sbx: unknown command `%s`; run `sbx help` for the list\n", verb);
        return SBX_EXIT_USAGE;
    }
    if (sbx_cli_wants_help(argc - 1, argv + 1, cmd))
        return SBX_EXIT_OK;
    return cmd->run(argc - 1, argv + 1);
}
