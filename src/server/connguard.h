/*
 * connguard.h - per-connection bookkeeping against connection floods (see connguard.c).
 */
#ifndef SBX_SERVER_CONNGUARD_H
#define SBX_SERVER_CONNGUARD_H

#include <microhttpd.h>
#include <stdint.h>

#include "common/error.h"

struct sbx_connguard;

/* Start the watchdog: a connection whose first request head is not complete deadline_ms after
 * accept is shut down. */
int sbx_connguard_start(struct sbx_connguard **out, uint64_t deadline_ms, sbx_error **err);
/* After MHD_stop_daemon. */
void sbx_connguard_stop(struct sbx_connguard *g);
/* MHD_OPTION_NOTIFY_CONNECTION callback (cls = the guard). */
void sbx_connguard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);
/* The first request head of conn is complete. */
void sbx_connguard_head_done(struct sbx_connguard *g, struct MHD_Connection *conn);

#endif
