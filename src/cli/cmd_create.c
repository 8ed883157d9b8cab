/*
 * cmd_create.c - `sbx create`: create a sandbox and print its id.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"

struct create_args {
    struct sbx_cli_conn conn;
    sbx_create_options opts;
    struct sbx_cli_kvs env, metadata, limits;
    const char *name;
    int quiet;
};

static int
parse_timeout(const char *arg, long *out)
{
    uint64_t v = 0;
    if (sbx_parse_u64(arg, &v, NULL) < 0 || (v != 0 && v < 60) || v > 315360000) {
        fprintf(stderr, "sbx create: --timeout wants seconds >= 60 (or 0 for no expiry)\n");
        return -1;
    }
    *out = (long)v;
    return 0;
}

static int
parse_opt(struct create_args *a, int opt, char *arg)
{
    switch (opt) {
    case 'i':
        a->opts.image = arg;
        return 0;
    case 't':
        return parse_timeout(arg, &a->opts.timeout_s);
    case 'e':
        return sbx_cli_kvs_add(&a->env, arg, "create", "--env");
    case 'l':
        return sbx_cli_kvs_add(&a->metadata, arg, "create", "--metadata");
    case 'c':
        return sbx_cli_kvs_add(&a->limits, arg, "create", "--limit");
    case 'p':
        a->opts.provider = arg;
        return 0;
    case 'r':
        a->opts.reuse_key = arg;
        return 0;
    case 'q':
        a->quiet = 1;
        return 0;
    case 'N':
        if (!sbx_cli_name_valid(arg)) {
            fprintf(stderr,
                    "sbx create: --name `%s`: 1-63 letters, digits, `_`, `.`, `-`, "
                    "starting and ending with a letter or digit\n",
                    arg);
            return -1;
        }
        a->name = arg;
        return 0;
    case 'D':
        a->opts.desktop = arg ? arg : "true";
        return 0;
    default:
        return sbx_cli_conn_opt(&a->conn, opt, arg) ? 0 : -1;
    }
}

static int
parse_args(struct create_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"image", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},
        {"env", required_argument, NULL, 'e'},
        {"metadata", required_argument, NULL, 'l'},
        {"limit", required_argument, NULL, 'c'},
        {"provider", required_argument, NULL, 'p'},
        {"reuse-key", required_argument, NULL, 'r'},
        {"quiet", no_argument, NULL, 'q'},
        {"name", required_argument, NULL, 'N'},
        {"desktop", optional_argument, NULL, 'D'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "+i:t:e:l:c:p:r:qH:", longopts, NULL)) != -1) {
        if (parse_opt(a, opt, optarg) < 0)
            return -1;
    }
    if (optind < argc) {
        a->opts.entrypoint = (const char *const *)(argv + optind);
        a->opts.n_entrypoint = (size_t)(argc - optind);
    }
    if (a->name) { /* the name is a label the server keeps unique (409 on a clash) */
        a->metadata.items =
            sbx_xrealloc(a->metadata.items, (a->metadata.n + 1) * sizeof *a->metadata.items);
        a->metadata.items[a->metadata.n++] = (sbx_kv){SBX_CLI_NAME_LABEL, a->name};
    }
    a->opts.env = a->env.items;
    a->opts.n_env = a->env.n;
    a->opts.metadata = a->metadata.items;
    a->opts.n_metadata = a->metadata.n;
    if (a->limits.n) {
        a->opts.resource_limits = a->limits.items;
        a->opts.n_resource_limits = a->limits.n;
    }
    return 0;
}

int
sbx_cmd_create(int argc, char **argv)
{
    struct create_args a = {.opts = SBX_CREATE_OPTIONS_INIT};
    int rc = SBX_EXIT_USAGE;
    if (parse_args(&a, argc, argv) == 0) {
        sbx_client *c = sbx_cli_connect(&a.conn, "create");
        sbx_sandbox *s = NULL;
        int ret = c ? sbx_sandbox_create(&s, c, &a.opts) : -SBX_EGENERIC;
        if (!c)
            rc = SBX_EXIT_FAIL;
        else if (ret < 0)
            rc = sbx_cli_fail(c, "create", "create sandbox", ret);
        else {
            printf("%s\n", sbx_sandbox_id(s));
            if (!a.quiet)
                fprintf(stderr, "sbx create: %s is %s\n", sbx_sandbox_id(s), sbx_sandbox_state(s));
            rc = SBX_EXIT_OK;
        }
        sbx_sandbox_free(s);
        sbx_client_free(c);
    }
    sbx_cli_kvs_dispose(&a.env);
    sbx_cli_kvs_dispose(&a.metadata);
    sbx_cli_kvs_dispose(&a.limits);
    return rc;
}
