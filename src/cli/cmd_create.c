/*
 * cmd_create.c - `sbx create`: create a sandbox and print its id.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    char *publish; /* "PORT[:HOSTPORT],..." (extensions["sbx.publish"]) */
    char *memory;  /* -m: a resource quantity */
    sbx_kv ext[1]; /* sbx.publish */
    int quiet;
};

/* Long options without a short form. */
enum {
    OPT_IMAGE = 0x100,
    OPT_TIMEOUT,
    OPT_LIMIT,
    OPT_PROVIDER,
    OPT_CPUS,
    OPT_SNAPSHOT,
};

/* docker's -m SIZE (b, k, m, g: powers of 1024) as a resource quantity ("512Mi"). */
static char *
memory_quantity(const char *arg)
{
    char *end = NULL;
    unsigned long long v = strtoull(arg, &end, 10);
    if (end == arg || arg[0] == '-' || v == 0)
        return NULL;
    static const char units[] = "bkmg";
    static const char *const k8s[] = {"", "Ki", "Mi", "Gi"};
    const char *u = *end ? strchr(units, tolower((unsigned char)*end)) : units;
    if (!u || (*end && end[1] && !(tolower((unsigned char)end[1]) == 'b' && !end[2])))
        return NULL;
    return sbx_xasprintf("%llu%s", v, k8s[u - units]);
}

/* docker's -p [IP:]HOSTPORT:PORT[/tcp] or PORT[/tcp] as sbx.publish's PORT[:HOSTPORT]. */
static int
add_publish(struct create_args *a, const char *arg)
{
    sbx_autofree char *spec = sbx_xstrdup(arg);
    char *proto = strchr(spec, '/');
    if (proto && strcmp(proto, "/tcp") != 0) {
        fprintf(stderr, "sbx create: -p %s: only tcp ports are published\n", arg);
        return -1;
    }
    if (proto)
        *proto = '\0';
    char *last = strrchr(spec, ':');
    char *first = strchr(spec, ':');
    if (first != last) {
        fprintf(stderr,
                "sbx create: -p %s: no IP: ports are published on the server's "
                "publish_address (docs/server.md)\n",
                arg);
        return -1;
    }
    const char *port = last ? last + 1 : spec;
    if (last)
        *last = '\0';
    const char *host = last ? spec : NULL;
    char *more = host ? sbx_xasprintf("%s:%s", port, host) : sbx_xstrdup(port);
    char *joined = a->publish ? sbx_xasprintf("%s,%s", a->publish, more) : sbx_xstrdup(more);
    free(more);
    free(a->publish);
    a->publish = joined; /* the server checks the numbers (400 naming sbx.publish) */
    return 0;
}

static int
refuse(const char *flag, const char *why)
{
    fprintf(stderr, "sbx create: %s: %s\n", flag, why);
    return -1;
}

static bool
cpus_ok(const char *arg)
{
    size_t n = strspn(arg, "0123456789.");
    return n > 0 && !arg[n] && strchr(arg, '.') == strrchr(arg, '.') && strcmp(arg, ".") != 0;
}

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

/* The resource options: --limit, --cpus, -m (docker's). */
static int
parse_resource(struct create_args *a, int opt, char *arg)
{
    if (opt == OPT_LIMIT)
        return sbx_cli_kvs_add(&a->limits, arg, "create", "--limit");
    if (opt == OPT_CPUS && !cpus_ok(arg))
        return refuse("--cpus", "wants a number of CPUs (e.g. 0.5, 2)");
    if (opt == 'm' && a->memory)
        return refuse("-m", "given twice");
    if (opt == 'm' && !(a->memory = memory_quantity(arg)))
        return refuse("-m", "wants a size: a number with b, k, m or g (e.g. 512m, 2g)");
    a->limits.items = sbx_xrealloc(a->limits.items, (a->limits.n + 1) * sizeof *a->limits.items);
    a->limits.items[a->limits.n++] =
        opt == 'm' ? (sbx_kv){"memory", a->memory} : (sbx_kv){"cpu", arg};
    return 0;
}

static int
parse_opt(struct create_args *a, int opt, char *arg)
{
    switch (opt) {
    case OPT_IMAGE:
        a->opts.image = arg;
        return 0;
    case OPT_SNAPSHOT:
        a->opts.snapshot = arg;
        return 0;
    case OPT_TIMEOUT:
        return parse_timeout(arg, &a->opts.timeout_s);
    case 'e':
        return sbx_cli_kvs_add(&a->env, arg, "create", "--env");
    case 'l':
        return sbx_cli_kvs_add(&a->metadata, arg, "create", "--label");
    case OPT_LIMIT:
    case OPT_CPUS:
    case 'm':
        return parse_resource(a, opt, arg);
    case 'p':
        return add_publish(a, arg);
    case 'i':
    case 't':
        return refuse(opt == 'i' ? "-i" : "-t",
                      "the entrypoint gets no stdin or terminal in sbx; `sbx exec -it ID` or "
                      "`sbx shell ID` gives one (--image and --timeout have no short form)");
    case 'c':
        return refuse("-c/--cpu-shares", "docker's relative CPU weight is not supported; "
                                         "--cpus N limits the CPUs (--limit: any resource)");
    case OPT_PROVIDER:
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
        {"image", required_argument, NULL, OPT_IMAGE},
        {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"env", required_argument, NULL, 'e'},
        {"label", required_argument, NULL, 'l'},
        {"metadata", required_argument, NULL, 'l'},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"cpus", required_argument, NULL, OPT_CPUS},
        {"memory", required_argument, NULL, 'm'},
        {"publish", required_argument, NULL, 'p'},
        {"cpu-shares", required_argument, NULL, 'c'},
        {"interactive", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},
        {"provider", required_argument, NULL, OPT_PROVIDER},
        {"reuse-key", required_argument, NULL, 'r'},
        {"quiet", no_argument, NULL, 'q'},
        {"name", required_argument, NULL, 'N'},
        {"desktop", optional_argument, NULL, 'D'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "+e:l:m:p:c:itr:qH:", longopts, NULL)) != -1) {
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
    if (a->publish) {
        a->ext[0] = (sbx_kv){"sbx.publish", a->publish};
        a->opts.extensions = a->ext;
        a->opts.n_extensions = 1;
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
    free(a.publish);
    free(a.memory);
    return rc;
}
