/*
 * api.h - the lifecycle API (api.c) and the admin APIs it dispatches to, as the handlers the
 * server puts in its route table (server.c).
 */
#ifndef SBX_SERVER_API_H
#define SBX_SERVER_API_H

#include "server/httpd.h"
#include "server/sandbox.h"

/* Every JSON API route: the whole body is buffered, then one call answers it. */
extern const struct sbx_http_handler sbx_api_handler;
/* POST /snapshots/import: the body (an image archive) streamed to a temp file, not memory. */
extern const struct sbx_http_handler sbx_api_import_handler;

/* The API's answer to a request whose whole body is in r->body. */
void sbx_api_dispatch(struct sbx_req *r, struct sbx_reply *out);
/* The pools API (api_pools.c): /pools routes, and a create with extensions.poolRef. */
void sbx_api_pools(struct sbx_req *r, struct sbx_reply *out);
void sbx_api_pool_sandbox(struct sbx_req *r, const json_t *body, struct sbx_reply *out);
/* Check a create body as POST /sandboxes does and build its record (not created yet):
 * 0 and *out, or -1 with the 400 in *rep. */
int sbx_api_build_create(struct sbx_srv *srv, const json_t *body, struct sbx_record **out,
                         struct sbx_reply *rep);
/* The Sandbox JSON of a record (full = GET/list/PATCH, else CreateSandboxResponse). */
json_t *sbx_api_sandbox_json(const struct sbx_record *sb, bool full);
/* The answer to a failed create (done: the record when one was made). */
void sbx_api_create_failed(struct sbx_reply *out, const sbx_error *err,
                           const struct sbx_record *done);
/* The secrets admin API (api_secrets.c). */
void sbx_api_secrets(struct sbx_req *r, struct sbx_reply *out);

#endif
