/*
 * cmd_inspect.c - `sbx inspect ID...`: the server's JSON for each sandbox, pretty-printed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/client_util.h"

static void
print_pretty(const char *json)
{
    json_t *j = json_loads(json, 0, NULL);
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    printf("%s\n", s ? s : json);
    free(s);
    json_decref(j);
}

int
sbx_cmd_inspect(int argc, char **argv)
{
    struct sbx_cli_conn conn = {0};
    if (sbx_cli_parse_conn(&conn, argc, argv) < 0)
        return SBX_EXIT_USAGE;
    if (optind >= argc) {
        fprintf(stderr, "sbx inspect: expected one or more sandbox ids\n");
        return SBX_EXIT_USAGE;
    }
    sbx_client *c = sbx_cli_connect(&conn, "inspect");
    if (!c)
        return SBX_EXIT_FAIL;
    int rc = SBX_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        sbx_sandbox *s = NULL;
        int ret = sbx_sandbox_get(&s, c, argv[i]);
        if (ret < 0)
            rc = sbx_cli_fail(c, "inspect", argv[i], ret);
        else
            print_pretty(s->json);
        sbx_sandbox_free(s);
    }
    sbx_client_free(c);
    return rc;
}
