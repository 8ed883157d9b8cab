/*
 * upload.h - streaming multipart uploads underneath evhttp.
 */
#ifndef SBX_EXECD_UPLOAD_H
#define SBX_EXECD_UPLOAD_H

#include "execd/execd.h"

struct bufferevent;

/* Hook the connection filter that streams upload bodies into evhttp. */
void execd_upload_install(struct execd *ex);

/* Stop following this connection: it is not HTTP any more (a WebSocket, pty_ws.c). */
void execd_upload_forget(struct bufferevent *bev);

/* Forget every connection's upload state (before evhttp frees the connections). */
void execd_upload_stop(struct execd *ex);

#endif
