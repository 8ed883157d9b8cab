/*
 * desktop_view.h - a sandbox's live desktop in a browser: view tokens, the VNC WebSocket and
 * the page (Debian's noVNC) that `sbx serve` serves. See desktop_view.c and docs/desktop.md.
 */
#ifndef SBX_SERVER_DESKTOP_VIEW_H
#define SBX_SERVER_DESKTOP_VIEW_H

#include <stdbool.h>

#include "server/httpd.h"

/* GET /v1/sandboxes/{id}/desktop/vnc (WebSocket: the key or a view token), /desktop/view/{id},
 * /desktop/static/..., /desktop/novnc/...: answered on the connection. */
extern const struct sbx_http_handler sbx_view_handler;
/* POST /v1/sandboxes/{id}/desktop/view (API key): a view token for that sandbox's desktop. */
void sbx_view_mint(struct sbx_req *r, struct sbx_reply *out);

#endif
