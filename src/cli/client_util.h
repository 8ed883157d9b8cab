/*
 * client_util.h - what the client verbs (create, ls, exec, ...) share: the connection
 * options (--host, SBX_HOST), KEY=VALUE lists and error reporting.
 */
#ifndef SBX_CLI_CLIENT_UTIL_H
#define SBX_CLI_CLIENT_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/client.h"

/* getopt_long entries every client verb accepts (--host, --api-key-file; --api-key only to
 * refuse it: a key on the command line is in `ps` and /proc/PID/cmdline for every user). */
#define SBX_CLI_CLIENT_LONGOPTS                                                             \
    {"host", required_argument, NULL, 'H'}, {"api-key-file", required_argument, NULL, 'F'}, \
    {                                                                                       \
        "api-key", required_argument, NULL, 'K'                                             \
    }

#define SBX_CLI_CLIENT_HELP                                                                    \
    "  -H, --host URL       server to talk to (default: $SBX_HOST or http://127.0.0.1:8080)\n" \
    "      --api-key-file F API key from file F (- = stdin; default: $SBX_API_KEY, else\n"     \
    "                       /var/lib/sbx/api-key)\n"

struct sbx_cli_conn {
    const char *host;
    const char *api_key;
    char key_buf[1024]; /* --api-key-file's key */
};

/* Handle --host/--api-key (opt 'H'/'K'); returns 1 when handled. */
int sbx_cli_conn_opt(struct sbx_cli_conn *conn, int opt, const char *arg);
/* Parse a verb's options when it takes only --host/--api-key; optind is left at the first
 * argument. Returns 0, or -1 on an unknown option (getopt printed it). */
int sbx_cli_parse_conn(struct sbx_cli_conn *conn, int argc, char **argv);
/* Connect; prints the error as "sbx VERB: ..." and returns NULL on failure. */
sbx_client *sbx_cli_connect(const struct sbx_cli_conn *conn, const char *verb);
/* Print "sbx VERB: what: <last error>" and return the exit code for ret. */
int sbx_cli_fail(sbx_client *c, const char *verb, const char *what, int ret);

/* A growing list of KEY=VALUE pairs parsed from repeated options. */
struct sbx_cli_kvs {
    sbx_kv *items;
    size_t n;
};
/* Add "K=V"; returns -1 (and prints) when there is no '='. The strings are borrowed from argv. */
int sbx_cli_kvs_add(struct sbx_cli_kvs *kvs, char *arg, const char *verb, const char *what);
void sbx_cli_kvs_dispose(struct sbx_cli_kvs *kvs);

/* A sandbox id from what the user typed: a full id as it is, else the one id that starts with
 * it (docker's id prefixes). 0, or -1 after printing why (none, or several: listed). */
int sbx_cli_resolve_id(sbx_client *c, const char *verb, const char *arg, char out[37]);

/* A sandbox's name is its metadata label sbx/name (the server keeps it unique). */
#define SBX_CLI_NAME_LABEL "sbx/name"
/* Its name, or NULL. Borrowed from s. */
const char *sbx_cli_name(const sbx_sandbox *s);
/* docker's [a-zA-Z0-9][a-zA-Z0-9_.-]*, within a label's rules: at most 63, ending with a
 * letter or digit. */
bool sbx_cli_name_valid(const char *name);

/* `sbx VERB [options] ID...`: connect, call fn(c, id) for every id, report failures as
 * "sbx VERB: what ID: ...". Returns the exit code. */
int sbx_cli_each_id(int argc, char **argv, const char *verb, const char *what,
                    int (*fn)(sbx_client *c, const char *id));

/* Exactly `want` positional args left, else usage error message; returns 0 or -1. */
int sbx_cli_positional(int argc, int optind_, int want, const char *verb, const char *names);

#endif
