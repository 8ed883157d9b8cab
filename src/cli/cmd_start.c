/*
 * cmd_start.c - `sbx start ID...`: start stopped sandboxes again, with the files they had.
 */
#include "cli/cli.h"
#include "cli/client_util.h"

int
sbx_cmd_start(int argc, char **argv)
{
    return sbx_cli_each_id(argc, argv, "start", "start", sbx_sandbox_start);
}
