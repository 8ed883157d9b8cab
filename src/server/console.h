/*
 * console.h - the web console that `sbx serve` serves at /console/ (console.c, docs/console.md),
 * and the server description its server page shows (GET /admin/server).
 */
#ifndef SBX_SERVER_CONSOLE_H
#define SBX_SERVER_CONSOLE_H

#include <stdbool.h>

#include "server/httpd.h"

/* The routes answered on the connection: the page and its static files (public). */
bool sbx_console_owns(enum sbx_route_id id);
enum MHD_Result sbx_console_handle(struct sbx_req *r);

/* GET /admin/server (API key): version, listen and public address, providers, limits and the
 * images of the local store. */
void sbx_api_server_info(struct sbx_req *r, struct sbx_reply *out);

#endif
