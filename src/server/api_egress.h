/*
 * api_egress.h - the egress API (egress-api.yaml `/policy`) of sandboxes with an egress
 * policy, served by the server at /sandboxes/{id}/proxy/18080/policy (see api_egress.c).
 */
#ifndef SBX_SERVER_API_EGRESS_H
#define SBX_SERVER_API_EGRESS_H

#include "server/httpd.h"

/* The router route's reroute (server.c): a router request that is the egress API of a
 * sandbox with a policy gets the route SBX_ROUTE_EGRESS_POLICY (its CORS preflight
 * SBX_ROUTE_PREFLIGHT); anything else stays a proxy request. */
void sbx_api_egress_reroute(struct sbx_req *r);
/* SBX_ROUTE_EGRESS_POLICY: GET/PATCH/DELETE /policy with the sandbox's
 * OPENSANDBOX-EGRESS-AUTH (and nothing else) as the credential. */
extern const struct sbx_http_handler sbx_egress_handler;

#endif
