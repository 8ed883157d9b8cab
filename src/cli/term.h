/*
 * term.h - the CLI's terminal client: a PTY session of a sandbox on the local terminal
 * (`sbx shell`, `sbx exec -it`). docs/execd.md "PTY sessions" has the protocol.
 */
#ifndef SBX_CLI_TERM_H
#define SBX_CLI_TERM_H

#include "sbx/client.h"

/* Open a PTY session in sandbox `id` (a shell, or `command` run by it) and attach the local
 * terminal (stdin must be one): raw mode (restored on every exit), the window size followed,
 * keys (Ctrl-C too) to the sandbox, its output to stdout. Returns the remote exit code, or
 * SBX_EXIT_FAIL after printing "sbx VERB: ..." when the session could not be run. */
int sbx_cli_term(sbx_client *c, const char *verb, const char *id, const char *command);

#endif
