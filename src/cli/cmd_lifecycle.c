/*
 * cmd_lifecycle.c - the one-argument lifecycle verbs: `sbx pause|resume|rm ID...`.
 * They share one shape (connect, call, report: sbx_cli_each_id), so they share one file.
 */
#include "cli/cli.h"
#include "cli/client_util.h"

int
sbx_cmd_pause(int argc, char **argv)
{
    return sbx_cli_each_id(argc, argv, "pause", "pause", sbx_sandbox_pause);
}

int
sbx_cmd_resume(int argc, char **argv)
{
    return sbx_cli_each_id(argc, argv, "resume", "resume", sbx_sandbox_resume);
}

int
sbx_cmd_rm(int argc, char **argv)
{
    return sbx_cli_each_id(argc, argv, "rm", "delete", sbx_sandbox_delete);
}
