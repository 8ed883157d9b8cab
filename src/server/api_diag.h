/*
 * api_diag.h - the diagnostics API: GET /sandboxes/{id}/diagnostics/{logs|events}?scope=
 */
#ifndef SBX_SERVER_API_DIAG_H
#define SBX_SERVER_API_DIAG_H

#include <stdbool.h>

#include "server/httpd.h"
#include "server/manager.h"

/* The descriptor of a sandbox's diagnostic text (logs = true: logs, else events) for scope. */
void sbx_api_diagnostics(struct sbx_mgr *mgr, const char *id, bool logs, const char *scope,
                         struct sbx_reply *out);

#endif
