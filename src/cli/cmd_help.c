/*
 * cmd_help.c - `sbx help [COMMAND]`.
 */
#include <stdio.h>

#include "cli/cli.h"

int
sbx_cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        sbx_cli_print_overview(stdout);
        return SBX_EXIT_OK;
    }
    const struct sbx_cli_cmd *cmd = sbx_cli_find(argv[1]);
    if (!cmd) {
        fprintf(stderr, "sbx help: unknown command `%s`\n", argv[1]);
        return SBX_EXIT_USAGE;
    }
    sbx_cli_print_usage(stdout, cmd);
    return SBX_EXIT_OK;
}
