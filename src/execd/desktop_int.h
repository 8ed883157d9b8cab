/*
 * desktop_int.h - what desktop.c and desktop_ipc.c share (execd's desktop, not its users).
 */
#ifndef SBX_EXECD_DESKTOP_INT_H
#define SBX_EXECD_DESKTOP_INT_H

#include <jansson.h>

#include "common/error.h"
#include "desktop/desktop.h"

struct execd;
struct evconnlistener;

/* The desktop of execd (made on first use; never NULL after ex->desktop is set). */
struct sbx_desktop *execd_desktop_handle(struct execd *ex);
/* An action's answer as JSON ({done, fail, cursor?, image?}); NULL with *err on failure. */
json_t *execd_desktop_result_json(struct sbx_desktop *d, const struct sbx_action_result *res,
                                  sbx_error **err);

/* desktop_ipc.c: the in-sandbox socket and the pyautogui module. */
int execd_desktop_ipc_start(struct execd *ex, struct evconnlistener **out, sbx_error **err);
void execd_desktop_ipc_stop(struct evconnlistener **l);
const char *execd_desktop_ipc_socket(void);
const char *execd_desktop_ipc_pythonpath(void);
/* OSWorld's in-VM API (py/sbx_osworld_server.py), written next to the module. */
const char *execd_desktop_osworld_script(void);

#endif
