/*
 * client_util.c - shared plumbing of the client verbs.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "common/xalloc.h"

/* The first line of path ("-": stdin), trimmed, into conn->key_buf. */
static int
read_key(struct sbx_cli_conn *conn, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
    if (!f) {
        fprintf(stderr, "sbx: --api-key-file `%s`: %s\n", path,
                strerror(errno)); // NOLINT(concurrency-mt-unsafe): no threads
        return 0;
    }
    char *line = fgets(conn->key_buf, sizeof conn->key_buf, f);
    if (f != stdin)
        (void)fclose(f);
    size_t n = line ? strcspn(line, "\r\n") : 0;
    while (n > 0 && isspace((unsigned char)line[n - 1]))
        n--;
    size_t skip = 0;
    while (skip < n && isspace((unsigned char)conn->key_buf[skip]))
        skip++;
    if (n <= skip) {
        fprintf(stderr, "sbx: --api-key-file `%s` holds no key\n", path);
        return 0;
    }
    memmove(conn->key_buf, conn->key_buf + skip, n - skip);
    conn->key_buf[n - skip] = '\0';
    conn->api_key = conn->key_buf;
    return 1;
}

int
sbx_cli_conn_opt(struct sbx_cli_conn *conn, int opt, const char *arg)
{
    if (opt == 'H') {
        conn->host = arg;
        return 1;
    }
    if (opt == 'F')
        return read_key(conn, arg);
    if (opt == 'K') {
        /* Refused, not taken: the key would be readable by every user in `ps` for as long as
         * the command runs. */
        fprintf(stderr, "sbx: --api-key would show the key to every user (ps, /proc/PID/cmdline);"
                        " use SBX_API_KEY or --api-key-file FILE (- reads stdin)\n");
        return 0;
    }
    return 0;
}

int
sbx_cli_parse_conn(struct sbx_cli_conn *conn, int argc, char **argv)
{
    static const struct option longopts[] = {SBX_CLI_CLIENT_LONGOPTS, {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "H:", longopts, NULL)) != -1) {
        if (!sbx_cli_conn_opt(conn, opt, optarg))
            return -1;
    }
    return 0;
}

sbx_client *
sbx_cli_connect(const struct sbx_cli_conn *conn, const char *verb)
{
    sbx_client_options opts = SBX_CLIENT_OPTIONS_INIT;
    opts.host = conn->host;
    opts.api_key = conn->api_key;
    sbx_client *c = NULL;
    sbx_err *err = NULL;
    if (sbx_client_new(&c, &opts, &err) < 0) {
        fprintf(stderr, "sbx %s: cannot set up the client: %s\n", verb, sbx_err_message(err));
        sbx_err_free(err);
        return NULL;
    }
    return c;
}

int
sbx_cli_fail(sbx_client *c, const char *verb, const char *what, int ret)
{
    const char *msg = sbx_client_last_error(c);
    fprintf(stderr, "sbx %s: %s: %s\n", verb, what, *msg ? msg : sbx_strerror(ret));
    if (ret == -SBX_EUNAVAIL)
        fprintf(stderr, "sbx %s: is the server running at %s? (start it with `sbx serve`)\n", verb,
                sbx_client_host(c));
    return SBX_EXIT_FAIL;
}

int
sbx_cli_kvs_add(struct sbx_cli_kvs *kvs, char *arg, const char *verb, const char *what)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "sbx %s: %s `%s` is not KEY=VALUE\n", verb, what, arg);
        return -1;
    }
    kvs->items = sbx_xrealloc(kvs->items, (kvs->n + 1) * sizeof *kvs->items);
    *eq = '\0';
    kvs->items[kvs->n].key = arg;
    kvs->items[kvs->n].value = eq + 1;
    kvs->n++;
    return 0;
}

void
sbx_cli_kvs_dispose(struct sbx_cli_kvs *kvs)
{
    free(kvs->items);
    kvs->items = NULL;
    kvs->n = 0;
}

int
sbx_cli_positional(int argc, int optind_, int want, const char *verb, const char *names)
{
    if (argc - optind_ == want)
        return 0;
    fprintf(stderr, "sbx %s: expected %s (see `sbx %s --help`)\n", verb, names, verb);
    return -1;
}

static bool
full_id(const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !strchr(hex, s[i]) || !s[i])
            return false;
    }
    return true;
}

const char *
sbx_cli_name(const sbx_sandbox *s)
{
    return sbx_sandbox_metadata_get(s, SBX_CLI_NAME_LABEL);
}

bool
sbx_cli_name_valid(const char *name)
{
    size_t n = strlen(name);
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    return n >= 1 && n <= 63 && strspn(name, ok) == n && isalnum((unsigned char)name[0]) &&
           isalnum((unsigned char)name[n - 1]);
}

static bool
live(const sbx_sandbox *s)
{
    return strcmp(sbx_sandbox_state(s), "Failed") != 0 &&
           strcmp(sbx_sandbox_state(s), "Terminated") != 0;
}

/* The sandbox named `arg`: a live one first (names are unique among those). */
static const sbx_sandbox *
by_name(sbx_sandbox **list, size_t n, const char *arg)
{
    const sbx_sandbox *hit = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *name = sbx_cli_name(list[i]);
        if (name && strcmp(name, arg) == 0 && (!hit || live(list[i])))
            hit = list[i];
    }
    return hit;
}

/* How many ids start with `arg`; the first one in out. */
static size_t
by_prefix(sbx_sandbox *const *list, size_t n, const char *arg, char out[37])
{
    size_t hits = 0;
    size_t len = strlen(arg);
    for (size_t i = 0; i < n; i++) {
        if (list[i] && strncmp(sbx_sandbox_id(list[i]), arg, len) == 0 && hits++ == 0)
            (void)snprintf(out, 37, "%s", sbx_sandbox_id(list[i]));
    }
    return hits;
}

int
sbx_cli_resolve_id(sbx_client *c, const char *verb, const char *arg, char out[37])
{
    if (!*arg) {
        fprintf(stderr, "sbx %s: an empty sandbox id\n", verb);
        return -1;
    }
    if (full_id(arg) || strlen(arg) >= 36) {
        (void)snprintf(out, 37, "%.36s", arg); /* the server says whether it exists */
        return 0;
    }
    sbx_list_options opts = SBX_LIST_OPTIONS_INIT;
    sbx_sandbox **list = NULL;
    size_t n = 0;
    int ret = sbx_sandbox_list(&list, &n, c, &opts);
    if (ret < 0) {
        (void)sbx_cli_fail(c, verb, "list sandboxes to find the id", ret);
        return -1;
    }
    const sbx_sandbox *named = by_name(list, n, arg);
    if (named) { /* as docker: a full id, else a name, else an id prefix */
        (void)snprintf(out, 37, "%s", sbx_sandbox_id(named));
        sbx_sandbox_list_free(list, n);
        return 0;
    }
    size_t hits = by_prefix(list, n, arg, out);
    size_t len = strlen(arg);
    if (hits > 1) {
        fprintf(stderr, "sbx %s: `%s` is the start of %zu sandbox ids:", verb, arg, hits);
        for (size_t i = 0; i < n; i++) {
            if (strncmp(sbx_sandbox_id(list[i]), arg, len) == 0)
                fprintf(stderr, " %s", sbx_sandbox_id(list[i]));
        }
        fprintf(stderr, "; give more of the id\n");
    } else if (hits == 0) {
        fprintf(stderr, "sbx %s: no sandbox is named `%s` or has an id starting with it\n", verb,
                arg);
    }
    sbx_sandbox_list_free(list, n);
    return hits == 1 ? 0 : -1;
}

int
sbx_cli_each_id(int argc, char **argv, const char *verb, const char *what,
                int (*fn)(sbx_client *c, const char *id))
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
        char id[37];
        if (sbx_cli_resolve_id(c, verb, argv[i], id) < 0) {
            rc = SBX_EXIT_FAIL;
            continue;
        }
        int ret = fn(c, id);
        if (ret < 0) {
            char ctx[512];
            (void)snprintf(ctx, sizeof ctx, "%s %s", what, argv[i]);
            rc = sbx_cli_fail(c, verb, ctx, ret);
        }
    }
    sbx_client_free(c);
    return rc;
}
