/*
 * cmd_lifecycle.c - the one-argument lifecycle verbs: `sbx pause|resume|rm ID...`.
 * They share one shape (connect, call, report), so they share one file.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client_util.h"

typedef int (*lifecycle_fn)(sbx_client *c, const char *id);

static int
run_each(int argc, char **argv, const char *verb, const char *what, lifecycle_fn fn)
{
    struct sbx_cli_conn conn = {0};
    if (sbx_cli_parse_conn(&conn, argc, argv) < 0)
        return SBX_EXIT_USAGE;
    if (optind >= argc) {
        fprintf(stderr, "sbx %s: expected one or more sandbox ids\n", verb);
        return SBX_EXIT_USAGE;
    }
    sbx_client *c = sbx_cli_connect(&conn, verb);
    if (!c)
        return SBX_EXIT_FAIL;
    int rc = SBX_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int ret = fn(c, argv[i]);
        if (ret < 0) {
            char ctx[512];
            (void)snprintf(ctx, sizeof ctx, "%s %s", what, argv[i]);
            rc = sbx_cli_fail(c, verb, ctx, ret);
        }
    }
    sbx_client_free(c);
    return rc;
}

int
sbx_cmd_pause(int argc, char **argv)
{
    return run_each(argc, argv, "pause", "pause", sbx_sandbox_pause);
}

int
sbx_cmd_resume(int argc, char **argv)
{
    return run_each(argc, argv, "resume", "resume", sbx_sandbox_resume);
}

int
sbx_cmd_rm(int argc, char **argv)
{
    return run_each(argc, argv, "rm", "delete", sbx_sandbox_delete);
}
