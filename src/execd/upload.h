/*
 * upload.h - streaming multipart uploads underneath evhttp.
 */
#ifndef SBX_EXECD_UPLOAD_H
#define SBX_EXECD_UPLOAD_H

#include "execd/execd.h"

/* Hook the connection filter that streams upload bodies into evhttp. */
void execd_upload_install(struct execd *ex);

/* Forget every connection's upload state (before evhttp frees the connections). */
void execd_upload_stop(struct execd *ex);

#endif
