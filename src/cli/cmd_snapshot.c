/*
 * cmd_snapshot.c - `sbx snapshot create|ls|inspect|rm|export|import`: snapshots of sandboxes on
 * a server (libsbx's sbx_snapshot_*). A snapshot restores with `sbx create --snapshot SNAP`.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client_util.h"

struct snap_args {
    struct sbx_cli_conn conn;
    const char *name;    /* create: --name */
    const char *sandbox; /* ls: --sandbox */
    const char *out;     /* export: -o FILE */
    int quiet;           /* ls, create, import: ids only */
    int wait;            /* create: until Ready */
};

static int
parse_args(struct snap_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"name", required_argument, NULL, 'n'},
        {"sandbox", required_argument, NULL, 's'},
        {"output", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, 'q'},
        {"wait", no_argument, NULL, 'w'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "n:s:o:qwH:", longopts, NULL)) != -1) {
        if (sbx_cli_conn_opt(&a->conn, opt, optarg))
            continue;
        if (opt == 'n')
            a->name = optarg;
        else if (opt == 's')
            a->sandbox = optarg;
        else if (opt == 'o')
            a->out = optarg;
        else if (opt == 'q')
            a->quiet = 1;
        else if (opt == 'w')
            a->wait = 1;
        else
            return -1;
    }
    return 0;
}

static const char *
state_of(json_t *snap)
{
    const char *s = json_string_value(json_object_get(json_object_get(snap, "status"), "state"));
    return s ? s : "?";
}

/* One line per snapshot: ID STATE SANDBOX CREATED NAME. */
static void
print_row(json_t *s, int quiet)
{
    const char *id = json_string_value(json_object_get(s, "id"));
    if (quiet) {
        printf("%s\n", id ? id : "");
        return;
    }
    const char *sb = json_string_value(json_object_get(s, "sandboxId"));
    const char *at = json_string_value(json_object_get(s, "createdAt"));
    const char *name = json_string_value(json_object_get(s, "name"));
    printf("%-36s  %-8s  %-36s  %-24s  %s\n", id ? id : "", state_of(s), sb && *sb ? sb : "-",
           at ? at : "", name ? name : "");
}

/* Poll until the snapshot is no longer Creating; its final JSON replaces *json. */
static int
wait_ready(sbx_client *c, const char *id, char **json)
{
    for (int i = 0; i < 36000; i++) {
        json_t *s = json_loads(*json, 0, NULL);
        int creating = s && strcmp(state_of(s), "Creating") == 0;
        json_decref(s);
        if (!creating)
            return 0;
        (void)usleep(100 * 1000);
        free(*json);
        *json = NULL;
        int ret = sbx_snapshot_get(json, c, id);
        if (ret < 0)
            return ret;
    }
    return 0;
}

static int
do_create(sbx_client *c, struct snap_args *a, char **argv, int nargs)
{
    if (nargs != 1) {
        fprintf(stderr, "sbx snapshot create: want ID (a sandbox)\n");
        return SBX_EXIT_USAGE;
    }
    char sid[37];
    if (sbx_cli_resolve_id(c, "snapshot", argv[0], sid) < 0)
        return SBX_EXIT_FAIL;
    char *json = NULL;
    int ret = sbx_snapshot_create(&json, c, sid, a->name);
    json_t *s = ret == 0 ? json_loads(json, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(s, "id"));
    if (ret == 0 && a->wait && id)
        ret = wait_ready(c, id, &json);
    json_decref(s);
    s = ret == 0 ? json_loads(json, 0, NULL) : NULL;
    int rc = ret < 0 ? sbx_cli_fail(c, "snapshot", "create", ret) : SBX_EXIT_OK;
    if (ret == 0 && a->wait && strcmp(state_of(s), "Failed") == 0) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(s, "status"), "message"));
        fprintf(stderr, "sbx snapshot create: the snapshot failed: %s\n", msg ? msg : "?");
        rc = SBX_EXIT_FAIL;
    } else if (ret == 0) {
        printf("%s\n", json_string_value(json_object_get(s, "id")));
    }
    json_decref(s);
    free(json);
    return rc;
}

static int
do_ls(sbx_client *c, struct snap_args *a, int nargs)
{
    if (nargs != 0) {
        fprintf(stderr, "sbx snapshot ls: takes no arguments (--sandbox ID filters)\n");
        return SBX_EXIT_USAGE;
    }
    char sid[37];
    if (a->sandbox && sbx_cli_resolve_id(c, "snapshot", a->sandbox, sid) < 0)
        return SBX_EXIT_FAIL;
    char *json = NULL;
    int ret = sbx_snapshot_list(&json, c, a->sandbox ? sid : NULL);
    if (ret < 0)
        return sbx_cli_fail(c, "snapshot", "ls", ret);
    json_t *doc = json_loads(json, 0, NULL);
    free(json);
    if (!a->quiet)
        printf("%-36s  %-8s  %-36s  %-24s  %s\n", "SNAPSHOT", "STATE", "SANDBOX", "CREATED",
               "NAME");
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(doc, "items"), i, s)
        print_row(s, a->quiet);
    json_decref(doc);
    return SBX_EXIT_OK;
}

/* inspect and rm: one call per snapshot id. */
static int
each(sbx_client *c, const char *sub, char **argv, int nargs)
{
    if (nargs < 1) {
        fprintf(stderr, "sbx snapshot %s: want SNAPSHOT...\n", sub);
        return SBX_EXIT_USAGE;
    }
    int rc = SBX_EXIT_OK;
    int inspect = strcmp(sub, "inspect") == 0;
    if (inspect)
        printf("[");
    for (int i = 0; i < nargs; i++) {
        char *json = NULL;
        int ret = inspect ? sbx_snapshot_get(&json, c, argv[i]) : sbx_snapshot_delete(c, argv[i]);
        if (ret < 0) {
            fprintf(stderr, "sbx snapshot %s %s: %s\n", sub, argv[i], sbx_client_last_error(c));
            rc = SBX_EXIT_FAIL;
        } else if (inspect) {
            printf("%s%s", i ? "," : "", json);
        } else {
            printf("%s\n", argv[i]);
        }
        free(json);
    }
    if (inspect)
        printf("]\n");
    return rc;
}

static int
do_export(sbx_client *c, struct snap_args *a, char **argv, int nargs)
{
    if (nargs != 1 || !a->out) {
        fprintf(stderr, "sbx snapshot export: want SNAPSHOT -o FILE\n");
        return SBX_EXIT_USAGE;
    }
    int ret = sbx_snapshot_export(c, argv[0], a->out);
    return ret < 0 ? sbx_cli_fail(c, "snapshot", "export", ret) : SBX_EXIT_OK;
}

static int
do_import(sbx_client *c, struct snap_args *a, char **argv, int nargs)
{
    (void)a;
    if (nargs != 1) {
        fprintf(stderr, "sbx snapshot import: want FILE (an archive from `sbx snapshot export`, "
                        "`docker save` or an OCI layout)\n");
        return SBX_EXIT_USAGE;
    }
    char *json = NULL;
    int ret = sbx_snapshot_import(&json, c, argv[0]);
    if (ret < 0)
        return sbx_cli_fail(c, "snapshot", "import", ret);
    json_t *s = json_loads(json, 0, NULL);
    printf("%s\n", json_string_value(json_object_get(s, "id")));
    json_decref(s);
    free(json);
    return SBX_EXIT_OK;
}

static int
dispatch(sbx_client *c, const char *sub, struct snap_args *a, char **argv, int nargs)
{
    if (strcmp(sub, "create") == 0)
        return do_create(c, a, argv, nargs);
    if (strcmp(sub, "ls") == 0)
        return do_ls(c, a, nargs);
    if (strcmp(sub, "inspect") == 0 || strcmp(sub, "rm") == 0)
        return each(c, sub, argv, nargs);
    if (strcmp(sub, "export") == 0)
        return do_export(c, a, argv, nargs);
    return do_import(c, a, argv, nargs);
}

int
sbx_cmd_snapshot(int argc, char **argv)
{
    static const char *const subs[] = {"create", "ls", "inspect", "rm", "export", "import"};
    const char *sub = argc >= 2 ? argv[1] : "";
    int known = 0;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        known |= strcmp(sub, subs[i]) == 0;
    if (!known) {
        fprintf(stderr, "sbx snapshot: want a subcommand (create, ls, inspect, rm, export, "
                        "import); see sbx snapshot --help\n");
        return SBX_EXIT_USAGE;
    }
    struct snap_args a = {0};
    if (parse_args(&a, argc - 1, argv + 1) < 0)
        return SBX_EXIT_USAGE;
    int first = optind + 1; /* getopt ran on argv + 1 */
    sbx_client *c = sbx_cli_connect(&a.conn, "snapshot");
    if (!c)
        return SBX_EXIT_FAIL;
    int rc = dispatch(c, sub, &a, argv + first, argc - first);
    sbx_client_free(c);
    return rc;
}
