/*
 * cmd_renew.c - `sbx renew ID SECONDS`: push a sandbox's expiry to now + SECONDS.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "common/util.h"

int
sbx_cmd_renew(int argc, char **argv)
{
    struct sbx_cli_conn conn = {0};
    if (sbx_cli_parse_conn(&conn, argc, argv) < 0)
        return SBX_EXIT_USAGE;
    if (sbx_cli_positional(argc, optind, 2, "renew", "ID SECONDS") < 0)
        return SBX_EXIT_USAGE;
    uint64_t secs = 0;
    if (sbx_parse_u64(argv[optind + 1], &secs, NULL) < 0 || secs == 0 || secs > 315360000) {
        fprintf(stderr, "sbx renew: SECONDS must be a positive number\n");
        return SBX_EXIT_USAGE;
    }
    sbx_client *c = sbx_cli_connect(&conn, "renew");
    if (!c)
        return SBX_EXIT_FAIL;
    char *expires = NULL;
    char id[37];
    if (sbx_cli_resolve_id(c, "renew", argv[optind], id) < 0) {
        sbx_client_free(c);
        return SBX_EXIT_FAIL;
    }
    int ret = sbx_sandbox_renew(&expires, c, id, (long)secs);
    int rc = ret < 0 ? sbx_cli_fail(c, "renew", "renew", ret) : SBX_EXIT_OK;
    if (ret == 0)
        printf("%s\n", expires);
    free(expires);
    sbx_client_free(c);
    return rc;
}
