/*
 * cmd_inspect.c - `sbx inspect ID...`: the server's JSON of the sandboxes, as one JSON array.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/client_util.h"

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
    json_t *all = json_array(); /* like docker inspect: one JSON array of every one found */
    for (int i = optind; i < argc; i++) {
        char id[37];
        sbx_sandbox *s = NULL;
        if (sbx_cli_resolve_id(c, "inspect", argv[i], id) < 0) {
            rc = SBX_EXIT_FAIL;
            continue;
        }
        int ret = sbx_sandbox_get(&s, c, id);
        json_t *j = ret == 0 ? json_loads(s->json, 0, NULL) : NULL;
        if (ret < 0)
            rc = sbx_cli_fail(c, "inspect", argv[i], ret);
        else if (j)
            (void)json_array_append_new(all, j);
        sbx_sandbox_free(s);
    }
    char *out = json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", out ? out : "[]");
    free(out);
    json_decref(all);
    sbx_client_free(c);
    return rc;
}
