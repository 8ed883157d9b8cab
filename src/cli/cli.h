/*
 * cli.h - the `sbx` command line: one verb per file (cmd_<verb>.c), dispatched from a table.
 */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>
#include <stdio.h>

struct sbx_cli_cmd {
    const char *name;
    const char *summary; /* one line, for `sbx help` */
    const char *usage;   /* full text for `sbx VERB --help` */
    int (*run)(int argc, char **argv);
};

/* The verb table (NULL-terminated by name). */
extern const struct sbx_cli_cmd sbx_cli_commands[];

const struct sbx_cli_cmd *sbx_cli_find(const char *name);
void sbx_cli_print_usage(FILE *out, const struct sbx_cli_cmd *cmd);
void sbx_cli_print_overview(FILE *out);

/* True (and prints usage to stdout) when argv[1..] holds -h or --help before any "--". */
int sbx_cli_wants_help(int argc, char **argv, const struct sbx_cli_cmd *cmd);

/* Exit codes: 0 ok, 1 failure, 2 usage error (like most Unix tools). */
#define SBX_EXIT_OK    0
#define SBX_EXIT_FAIL  1
#define SBX_EXIT_USAGE 2

/* Run this verb in the companion binary sbx-full (same directory as sbx): exec, no return on
 * success. argv[0] is the verb. */
int sbx_cli_forward(int argc, char **argv);

int sbx_cmd_version(int argc, char **argv);
int sbx_cmd_help(int argc, char **argv);
int sbx_cmd_create(int argc, char **argv);
int sbx_cmd_ls(int argc, char **argv);
int sbx_cmd_inspect(int argc, char **argv);
int sbx_cmd_exec(int argc, char **argv);
int sbx_cmd_shell(int argc, char **argv);
int sbx_cmd_cp(int argc, char **argv);
int sbx_cmd_desktop(int argc, char **argv);
int sbx_cmd_pause(int argc, char **argv);
int sbx_cmd_resume(int argc, char **argv);
int sbx_cmd_stop(int argc, char **argv);
int sbx_cmd_start(int argc, char **argv);
int sbx_cmd_renew(int argc, char **argv);
int sbx_cmd_rm(int argc, char **argv);
int sbx_cmd_secret(int argc, char **argv);
int sbx_cmd_snapshot(int argc, char **argv);
int sbx_cmd_image(int argc, char **argv);
int sbx_cmd_net(int argc, char **argv);
int sbx_cmd_run(int argc, char **argv);
int sbx_cmd_gc(int argc, char **argv);
/* gc of every bridge network sbx made on this host (`sbx net gc` without --bridge, `sbx gc`):
 * stale leases and empty leaf bridges, one line per network unless quiet. state_dir: of the
 * leases (NULL: the default). Returns the number of networks whose gc failed (each said). */
int sbx_cli_net_gc_all(const char *state_dir, bool quiet);
int sbx_cmd_serve(int argc, char **argv);

#endif
