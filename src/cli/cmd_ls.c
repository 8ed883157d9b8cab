/*
 * cmd_ls.c - `sbx ls`: list sandboxes as a table (or JSON lines with --json).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "cli/format.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

struct ls_args {
    struct sbx_cli_conn conn;
    int json;
    int quiet;
    const char *format;
    const char **states;
    size_t n_states;
    struct sbx_cli_kvs metadata;
};

static int
parse_args(struct ls_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},
        {"format", required_argument, NULL, 'f'}, /* no short option: docker ps's -f filters */
        {"state", required_argument, NULL, 's'},
        {"metadata", required_argument, NULL, 'l'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "jqs:l:H:", longopts, NULL)) != -1) {
        if (opt == 'j') {
            a->json = 1;
        } else if (opt == 'q') {
            a->quiet = 1;
        } else if (opt == 'f') {
            a->format = optarg;
        } else if (opt == 's') {
            a->states = sbx_xrealloc(a->states, (a->n_states + 1) * sizeof *a->states);
            a->states[a->n_states++] = optarg;
        } else if (opt == 'l') {
            if (sbx_cli_kvs_add(&a->metadata, optarg, "ls", "--metadata") < 0)
                return -1;
        } else if (!sbx_cli_conn_opt(&a->conn, opt, optarg)) {
            return -1;
        }
    }
    if (a->json + a->quiet + (a->format != NULL) > 1) {
        fprintf(stderr, "sbx ls: --json, --quiet and --format exclude each other\n");
        return -1;
    }
    sbx_autofree char *err = NULL;
    if (a->format && sbx_cli_format_check(a->format, &err) < 0) {
        fprintf(stderr, "sbx ls: --format: %s\n", err);
        return -1;
    }
    if (a->json)
        a->format = "json";
    return sbx_cli_positional(argc, optind, 0, "ls", "no arguments");
}

static const char *
or_dash(const char *s)
{
    return s && *s ? s : "-";
}

static void
print_table(sbx_sandbox **list, size_t n)
{
    /* the name last, as docker ps's NAMES */
    printf("%-36s  %-10s  %-24s  %-20s  %-24s  %s\n", "ID", "STATE", "IMAGE", "CREATED", "EXPIRES",
           "NAME");
    for (size_t i = 0; i < n; i++) {
        const sbx_sandbox *s = list[i];
        printf("%-36s  %-10s  %-24.24s  %-20.20s  %-24s  %s\n", sbx_sandbox_id(s),
               sbx_sandbox_state(s), or_dash(sbx_sandbox_image(s)),
               or_dash(sbx_sandbox_created_at(s)),
               sbx_sandbox_expires_at(s) ? sbx_sandbox_expires_at(s) : "never",
               or_dash(sbx_cli_name(s)));
    }
}

int
sbx_cmd_ls(int argc, char **argv)
{
    struct ls_args a = {0};
    int rc = SBX_EXIT_USAGE;
    if (parse_args(&a, argc, argv) == 0) {
        sbx_list_options opts = SBX_LIST_OPTIONS_INIT;
        opts.states = a.states;
        opts.n_states = a.n_states;
        opts.metadata = a.metadata.items;
        opts.n_metadata = a.metadata.n;
        sbx_client *c = sbx_cli_connect(&a.conn, "ls");
        sbx_sandbox **list = NULL;
        size_t n = 0;
        int ret = c ? sbx_sandbox_list(&list, &n, c, &opts) : -SBX_EGENERIC;
        if (!c)
            rc = SBX_EXIT_FAIL;
        else if (ret < 0)
            rc = sbx_cli_fail(c, "ls", "list sandboxes", ret);
        else
            rc = SBX_EXIT_OK;
        if (ret == 0 && a.format)
            sbx_cli_format_header(stdout, a.format);
        for (size_t i = 0; ret == 0 && a.format && i < n; i++)
            sbx_cli_format_one(stdout, a.format, sbx_sandbox_json(list[i]));
        for (size_t i = 0; ret == 0 && a.quiet && i < n; i++)
            printf("%s\n", sbx_sandbox_id(list[i])); /* -q: ids, as docker ps */
        if (ret == 0 && !a.format && !a.quiet)
            print_table(list, n);
        sbx_sandbox_list_free(list, n);
        sbx_client_free(c);
    }
    free(a.states);
    sbx_cli_kvs_dispose(&a.metadata);
    return rc;
}
