/*
 * cp_dir.h - `sbx cp` of directories and tar streams (cp_dir.c), as docker cp.
 */
#ifndef SBX_CLI_CP_DIR_H
#define SBX_CLI_CP_DIR_H

#include "sbx/client.h"

/* A local directory, or `-` (a tar stream on stdin), to `dst` in sandbox id. 0, or -1 after
 * printing why. */
int sbx_cli_cp_up(sbx_client *c, const char *id, const char *local, const char *dst);
/* Directory `src` of sandbox id to a local path, or to `-` (a tar stream on stdout). */
int sbx_cli_cp_down(sbx_client *c, const char *id, const char *src, const char *local);
/* 1 when `path` is a directory in the sandbox, 0 when not, -1 after printing an error. */
int sbx_cli_remote_is_dir(sbx_client *c, const char *id, const char *path);

#endif
