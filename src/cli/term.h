/*
 * term.h - the CLI's terminal client: a PTY session of a sandbox on the local terminal
 * (`sbx shell`, `sbx exec -it`). docs/execd.md "PTY sessions" has the protocol.
 */
#ifndef SBX_CLI_TERM_H
#define SBX_CLI_TERM_H

#include <stdbool.h>

#include "sbx/client.h"

/* Open a PTY session in sandbox `id` (a shell, or `command` run by it) and attach the local
 * terminal (stdin must be one): raw mode (restored on every exit), the window size followed,
 * keys (Ctrl-C too) to the sandbox, its output to stdout. Returns the remote exit code, or
 * SBX_TERM_FAILED after printing "sbx VERB: ..." when the session could not be run. */
#define SBX_TERM_FAILED (-1)
int sbx_cli_term(sbx_client *c, const char *verb, const char *id, const char *command);

/* `sbx exec` without -t: the command on pipes (execd's pipe mode, ?pty=0): its stdout and
 * stderr byte for byte to ours, our stdin to it when stdin_open (else EOF at once), SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT forwarded (the third SIGINT gives up), killed after timeout_ms.
 * Returns its exit code (128+N for signal N), or SBX_TERM_FAILED after printing. */
struct sbx_cli_pipe_opts {
    const char *command;
    const char *cwd;
    bool stdin_open;
    long timeout_ms;
    int in_fd;  /* pipe mode: stdin from here (0: ours) */
    int out_fd; /* pipe mode: stdout to here (0: ours) */
};
int sbx_cli_pipe(sbx_client *c, const char *verb, const char *id,
                 const struct sbx_cli_pipe_opts *o);
/* sbx_cli_term with a directory and a timeout (stdin_open is implied). */
int sbx_cli_term_opts(sbx_client *c, const char *verb, const char *id,
                      const struct sbx_cli_pipe_opts *o);

#endif
