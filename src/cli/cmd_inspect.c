/*
 * cmd_inspect.c - `sbx inspect ID...`: the server's JSON of the sandboxes, as one JSON array
 * (docker inspect), or each through --format.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "cli/format.h"
#include "common/cleanup.h"

static int
parse_args(struct sbx_cli_conn *conn, const char **format, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "f:H:", longopts, NULL)) != -1) {
        if (opt == 'f')
            *format = optarg;
        else if (!sbx_cli_conn_opt(conn, opt, optarg))
            return -1;
    }
    sbx_autofree char *err = NULL;
    if (*format && sbx_cli_format_check(*format, &err) < 0) {
        fprintf(stderr, "sbx inspect: --format: %s\n", err);
        return -1;
    }
    if (optind >= argc) {
        fprintf(stderr, "sbx inspect: expected one or more sandbox ids\n");
        return -1;
    }
    return 0;
}

int
sbx_cmd_inspect(int argc, char **argv)
{
    struct sbx_cli_conn conn = {0};
    const char *format = NULL;
    if (parse_args(&conn, &format, argc, argv) < 0)
        return SBX_EXIT_USAGE;
    sbx_client *c = sbx_cli_connect(&conn, "inspect");
    if (!c)
        return SBX_EXIT_FAIL;
    int rc = SBX_EXIT_OK;
    json_t *all = json_array(); /* like docker inspect: one JSON array of every one found */
    if (format)
        sbx_cli_format_header(stdout, format);
    for (int i = optind; i < argc; i++) {
        char id[37];
        sbx_sandbox *s = NULL;
        if (sbx_cli_resolve_id(c, "inspect", argv[i], id) < 0) {
            rc = SBX_EXIT_FAIL;
            continue;
        }
        int ret = sbx_sandbox_get(&s, c, id);
        json_t *j = ret == 0 && !format ? json_loads(sbx_sandbox_json(s), 0, NULL) : NULL;
        if (ret < 0)
            rc = sbx_cli_fail(c, "inspect", argv[i], ret);
        else if (format)
            sbx_cli_format_one(stdout, format, sbx_sandbox_json(s));
        else if (j)
            (void)json_array_append_new(all, j);
        sbx_sandbox_free(s);
    }
    char *out = format ? NULL : json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!format)
        printf("%s\n", out ? out : "[]");
    free(out);
    json_decref(all);
    sbx_client_free(c);
    return rc;
}
