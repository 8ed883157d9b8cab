/*
 * api.h - the lifecycle API (api.c) and the admin APIs it dispatches to, as the handlers the
 * server puts in its route table (server.c).
 */
#ifndef SBX_SERVER_API_H
#define SBX_SERVER_API_H

#include "server/httpd.h"

/* Every JSON API route: the whole body is buffered, then one call answers it. */
extern const struct sbx_http_handler sbx_api_handler;
/* POST /snapshots/import: the body (an image archive) streamed to a temp file, not memory. */
extern const struct sbx_http_handler sbx_api_import_handler;

/* The API's answer to a request whose whole body is in r->body. */
void sbx_api_dispatch(struct sbx_req *r, struct sbx_reply *out);
/* The secrets admin API (api_secrets.c). */
void sbx_api_secrets(struct sbx_req *r, struct sbx_reply *out);

#endif
