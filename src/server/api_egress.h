/*
 * api_egress.h - the egress API (egress-api.yaml `/policy`) of sandboxes with an egress
 * policy, served by the server at /sandboxes/{id}/proxy/18080/policy (see api_egress.c).
 */
#ifndef SBX_SERVER_API_EGRESS_H
#define SBX_SERVER_API_EGRESS_H

#include <stdbool.h>

struct sbx_req;
struct sbx_reply;

/* A router request that is the egress API of a sandbox with a policy: its route becomes
 * SBX_ROUTE_EGRESS_POLICY (true); anything else stays a proxy request (false). */
bool sbx_api_egress_claim(struct sbx_req *r);
/* The request carries that sandbox's OPENSANDBOX-EGRESS-AUTH. */
bool sbx_api_egress_auth_ok(struct sbx_req *r);
void sbx_api_egress(struct sbx_req *r, struct sbx_reply *out);

#endif
