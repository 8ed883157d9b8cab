/*
 * cmd_desktop.c - `sbx desktop SUB ID ...`: a sandbox's desktop from the shell (status, start,
 * stop, shot, do, tree, windows, record, view), through libsbx's sbx_desktop_call (view:
 * sbx_desktop_view).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"

#define ACTION_MAX (16u << 20) /* what `do -` reads from stdin at most */

struct desk_args {
    struct sbx_cli_conn conn;
    const char *out;  /* shot: -o FILE */
    const char *size; /* start: --size WxH */
    char query[512];  /* shot / tree: the query string built from the options */
    int no_wm;
    int fps;  /* record: --fps */
    long ttl; /* view: --ttl SECONDS */
};

static int
add_query(struct desk_args *a, const char *key, const char *val)
{
    size_t n = strlen(a->query);
    int w = snprintf(a->query + n, sizeof a->query - n, "%c%s=%s", n ? '&' : '?', key, val);
    if (w < 0 || (size_t)w >= sizeof a->query - n) {
        fprintf(stderr, "sbx desktop: options too long\n");
        return -1;
    }
    return 0;
}

/* --region X,Y,W,H */
static int
add_region(struct desk_args *a, const char *arg)
{
    unsigned v[4];
    int used = 0;
    if (sscanf(arg, "%u,%u,%u,%u%n", &v[0], &v[1], &v[2], &v[3], &used) != 4 || arg[used]) {
        fprintf(stderr, "sbx desktop: --region wants X,Y,WIDTH,HEIGHT\n");
        return -1;
    }
    static const char *const keys[] = {"x", "y", "width", "height"};
    for (int i = 0; i < 4; i++) {
        char num[16];
        (void)snprintf(num, sizeof num, "%u", v[i]);
        if (add_query(a, keys[i], num) < 0)
            return -1;
    }
    return 0;
}

static int
parse_opt(struct desk_args *a, int opt, const char *arg)
{
    switch (opt) {
    case 'o':
        a->out = arg;
        return 0;
    case 'j':
        return add_query(a, "format", "jpeg");
    case 'Q':
        return add_query(a, "quality", arg);
    case 'R':
        return add_region(a, arg);
    case 'S':
        return add_query(a, "scale", arg);
    case 'C':
        return add_query(a, "cursor", "false");
    case 'J':
        return add_query(a, "format", "json");
    case 'N':
        return add_query(a, "actions", "false");
    case 's':
        a->size = arg;
        return 0;
    case 'W':
        a->no_wm = 1;
        return 0;
    case 'T': {
        uint64_t v = 0;
        if (sbx_parse_u64(arg, &v, NULL) < 0 || v < 10 || v > 86400) {
            fprintf(stderr, "sbx desktop view: --ttl wants 10-86400 seconds\n");
            return -1;
        }
        a->ttl = (long)v;
        return 0;
    }
    case 'f': {
        uint64_t v = 0;
        if (sbx_parse_u64(arg, &v, NULL) < 0 || v < 1 || v > 60) {
            fprintf(stderr, "sbx desktop: --fps wants 1-60\n");
            return -1;
        }
        a->fps = (int)v;
        return 0;
    }
    default:
        return sbx_cli_conn_opt(&a->conn, opt, arg) ? 0 : -1;
    }
}

static int
parse_args(struct desk_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"jpeg", no_argument, NULL, 'j'},
        {"quality", required_argument, NULL, 'Q'},
        {"region", required_argument, NULL, 'R'},
        {"scale", required_argument, NULL, 'S'},
        {"no-cursor", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'J'},
        {"no-actions", no_argument, NULL, 'N'},
        {"size", required_argument, NULL, 's'},
        {"no-wm", no_argument, NULL, 'W'},
        {"fps", required_argument, NULL, 'f'},
        {"ttl", required_argument, NULL, 'T'},
        SBX_CLI_CLIENT_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "+o:H:", longopts, NULL)) != -1) {
        if (parse_opt(a, opt, optarg) < 0)
            return -1;
    }
    return 0;
}

/* The body of `start`: {"width", "height", "windowManager"}. */
static char *
start_body(const struct desk_args *a)
{
    unsigned w = 0;
    unsigned h = 0;
    int used = 0;
    if (a->size && (sscanf(a->size, "%ux%u%n", &w, &h, &used) != 2 || a->size[used])) {
        fprintf(stderr, "sbx desktop: --size wants WIDTHxHEIGHT\n");
        return NULL;
    }
    if (a->size)
        return sbx_xasprintf("{\"width\":%u,\"height\":%u,\"windowManager\":%s}", w, h,
                             a->no_wm ? "false" : "true");
    return sbx_xasprintf("{\"windowManager\":%s}", a->no_wm ? "false" : "true");
}

/* `do`'s action: the argument, or stdin for "-". */
static char *
action_body(const char *arg)
{
    if (strcmp(arg, "-") != 0)
        return sbx_xstrdup(arg);
    char *data = NULL;
    if (sbx_read_file("/dev/stdin", ACTION_MAX, &data, NULL, NULL) < 0) {
        fprintf(stderr, "sbx desktop do: cannot read the action from stdin\n");
        return NULL;
    }
    return data;
}

static int
write_out(const char *path, const char *data, size_t len)
{
    if (!path && isatty(STDOUT_FILENO)) {
        fprintf(stderr, "sbx desktop: binary output would go to a terminal: use -o FILE\n");
        return SBX_EXIT_USAGE;
    }
    FILE *f = path ? fopen(path, "we") : stdout;
    if (!f || fwrite(data, 1, len, f) != len || (path ? fclose(f) : fflush(f)) != 0) {
        perror(path ? path : "stdout");
        return SBX_EXIT_FAIL;
    }
    return SBX_EXIT_OK;
}

/* What a subcommand sends: the request and the strings it points to (owned). */
struct desk_call {
    sbx_desktop_request rq;
    char *path;
    char *body;
};

/* What each subcommand sends. */
static int
request_for(const char *sub, char **argv, int nargs, const struct desk_args *a,
            struct desk_call *call)
{
    sbx_desktop_request *rq = &call->rq;
    char **path = &call->path;
    char **body = &call->body;
    *body = NULL;
    int want = strcmp(sub, "do") == 0 ? 2 : 1;
    if (nargs != want) {
        fprintf(stderr, "sbx desktop %s: want %s\n", sub, want == 2 ? "ID ACTION" : "ID");
        return -1;
    }
    rq->method = "GET";
    if (strcmp(sub, "status") == 0) {
        *path = sbx_xstrdup("/");
    } else if (strcmp(sub, "start") == 0 || strcmp(sub, "stop") == 0) {
        rq->method = "POST";
        *path = sbx_xasprintf("/%s", sub);
        if (sub[2] == 'a' && !(*body = start_body(a)))
            return -1;
    } else if (strcmp(sub, "shot") == 0) {
        *path = sbx_xasprintf("/screenshot%s", a->query);
    } else if (strcmp(sub, "tree") == 0) {
        *path = sbx_xasprintf("/accessibility%s", a->query);
    } else if (strcmp(sub, "windows") == 0) {
        *path = sbx_xstrdup("/windows");
    } else if (strcmp(sub, "record") == 0) {
        rq->method = "POST";
        *path = sbx_xstrdup("/recording/start");
        *body = sbx_xasprintf("{\"fps\":%d}", a->fps ? a->fps : 15);
    } else if (strcmp(sub, "record-stop") == 0) {
        rq->method = "POST";
        *path = sbx_xstrdup("/recording/stop");
    } else if (strcmp(sub, "do") == 0) {
        rq->method = "POST";
        *path = sbx_xstrdup("/action");
        if (!(*body = action_body(argv[1])))
            return -1;
    } else {
        fprintf(stderr, "sbx desktop: unknown subcommand `%s` (see sbx desktop --help)\n", sub);
        return -1;
    }
    rq->path = *path;
    rq->json_body = *body;
    return 0;
}

/* `view ID`: a link to the live desktop (a view token minted by the server). */
static int
view(struct desk_args *a, char **argv, int nargs)
{
    if (nargs != 1) {
        fprintf(stderr, "sbx desktop view: want ID\n");
        return SBX_EXIT_USAGE;
    }
    sbx_client *c = sbx_cli_connect(&a->conn, "desktop");
    if (!c)
        return SBX_EXIT_FAIL;
    char *url = NULL;
    char id[37];
    if (sbx_cli_resolve_id(c, "desktop", argv[0], id) < 0) {
        sbx_client_free(c);
        return SBX_EXIT_FAIL;
    }
    int ret = sbx_desktop_view(&url, c, id, a->ttl);
    int rc = ret < 0 ? sbx_cli_fail(c, "desktop", "view", ret) : SBX_EXIT_OK;
    if (ret == 0)
        printf("%s\n", url);
    free(url);
    sbx_client_free(c);
    return rc;
}

int
sbx_cmd_desktop(int argc, char **argv)
{
    struct desk_args a = {0};
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "sbx desktop: want a subcommand (status, start, stop, shot, do, tree, "
                        "windows, record, record-stop, view)\n");
        return SBX_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (parse_args(&a, argc - 1, argv + 1) < 0)
        return SBX_EXIT_USAGE;
    int first = optind + 1; /* getopt ran on argv + 1 */
    if (strcmp(sub, "view") == 0)
        return view(&a, argv + first, argc - first);
    struct desk_call call = {0};
    int r = request_for(sub, argv + first, argc - first, &a, &call);
    sbx_client *c = r == 0 ? sbx_cli_connect(&a.conn, "desktop") : NULL;
    if (!c) {
        free(call.path);
        free(call.body);
        return r < 0 ? SBX_EXIT_USAGE : SBX_EXIT_FAIL;
    }
    char *out = NULL;
    size_t len = 0;
    char id[37];
    bool found = sbx_cli_resolve_id(c, "desktop", argv[first], id) == 0;
    int ret = found ? sbx_desktop_call(c, id, &call.rq, &out, &len) : -SBX_ENOTFOUND;
    free(call.path);
    free(call.body);
    int rc = SBX_EXIT_OK;
    if (!found)
        rc = SBX_EXIT_FAIL; /* resolve_id said why */
    else if (ret < 0)
        rc = sbx_cli_fail(c, "desktop", sub, ret);
    else if (strcmp(sub, "shot") == 0 || strcmp(sub, "record-stop") == 0)
        rc = write_out(a.out, out, len);
    else if (len)
        printf("%s%s", out, out[len - 1] == '\n' ? "" : "\n");
    free(out);
    sbx_client_free(c);
    return rc;
}
