/*
 * console.h - the web console that `sbx serve` serves at /console/ (console.c, docs/console.md),
 * and the server description its server page shows (GET /admin/server).
 */
#ifndef SBX_SERVER_CONSOLE_H
#define SBX_SERVER_CONSOLE_H

#include <stdbool.h>

#include "server/httpd.h"

/* GET /console, /console/static/{file}: the web console's page and files (public). */
extern const struct sbx_http_handler sbx_console_handler;

/* GET /admin/server (API key): version, listen and public address, providers, limits and the
 * images of the local store. */
void sbx_api_server_info(struct sbx_req *r, struct sbx_reply *out);

#endif
