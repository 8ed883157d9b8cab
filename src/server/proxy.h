/*
 * proxy.h - the router (proxy.c): /sandboxes/{id}/proxy/{port}/... streamed to the sandbox's
 * port through its provider's connect, WebSocket upgrades spliced.
 */
#ifndef SBX_SERVER_PROXY_H
#define SBX_SERVER_PROXY_H

#include "server/httpd.h"

/* The router's route: the API key, the sandbox's own secure-access token or (WebSockets) the
 * key as a subprotocol open it; the body streams upstream as it comes. */
extern const struct sbx_http_handler sbx_proxy_handler;

#endif
