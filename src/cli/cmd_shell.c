/*
 * cmd_shell.c - `sbx shell ID`: an interactive shell in a sandbox on the local terminal (a PTY
 * session, term.c).
 */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "cli/term.h"

int
sbx_cmd_shell(int argc, char **argv)
{
    struct sbx_cli_conn conn = {0};
    if (sbx_cli_parse_conn(&conn, argc, argv) < 0 ||
        sbx_cli_positional(argc, optind, 1, "shell", "ID") < 0)
        return SBX_EXIT_USAGE;
    sbx_client *c = sbx_cli_connect(&conn, "shell");
    if (!c)
        return SBX_EXIT_FAIL;
    char id[37] = "";
    int rc = SBX_EXIT_FAIL;
    if (sbx_cli_resolve_id(c, "shell", argv[optind], id) == 0)
        rc = sbx_cli_term(c, "shell", id, NULL);
    if (rc == SBX_TERM_FAILED)
        rc = SBX_EXIT_FAIL;
    sbx_client_free(c);
    return rc;
}
