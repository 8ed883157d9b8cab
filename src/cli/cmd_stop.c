/*
 * cmd_stop.c - `sbx stop ID...`: stop sandboxes but keep their filesystems (`sbx start` runs
 * them again; `sbx rm` removes them).
 */
#include "cli/cli.h"
#include "cli/client_util.h"

int
sbx_cmd_stop(int argc, char **argv)
{
    return sbx_cli_each_id(argc, argv, "stop", "stop", sbx_sandbox_stop);
}
