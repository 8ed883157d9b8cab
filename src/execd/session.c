/*
 * session.c - bash sessions (COMPAT 2.4): not a long-lived shell; each run is a new shell that
 * restores the session's exported environment and cwd, runs the command, and saves them again
 * from an EXIT trap (so `exit N` in the command still saves). Output is merged into stdout.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/proc.h"

#define SESSION_RUN_CAP_MS (24LL * 3600 * 1000)

struct execd_session {
    struct execd_session *next;
    struct execd *ex;
    char id[40];
    char *env_path;
    char *cwd_path;
    char cmd_id[40]; /* the running command, "" when idle */
    bool deleted;    /* freed once the running command finishes */
};

/* $1 env file, $2 cwd file, $3 command, $4 cwd override (may be empty). */
static const char session_script[] =
    "__sbx_env=$1; __sbx_cwd=$2; __sbx_cmd=$3; __sbx_dir=$4; shift 4\n"
    "if [ -r \"$__sbx_env\" ]; then . \"$__sbx_env\" >/dev/null 2>&1; fi\n"
    "if [ -r \"$__sbx_cwd\" ]; then read -r __sbx_d < \"$__sbx_cwd\"; "
    "cd -- \"$__sbx_d\" 2>/dev/null; unset __sbx_d; fi\n"
    "if [ -n \"$__sbx_dir\" ]; then cd -- \"$__sbx_dir\" || exit 1; fi\n"
    "trap '__sbx_rc=$?; export -p > \"$__sbx_env\" 2>/dev/null; "
    "pwd > \"$__sbx_cwd\" 2>/dev/null; exit $__sbx_rc' EXIT\n"
    "eval \"$__sbx_cmd\"\n";

static struct execd_session *
session_find(struct execd *ex, const char *id)
{
    for (struct execd_session *s = ex->sessions; s; s = s->next) {
        if (strcmp(s->id, id) == 0)
            return s;
    }
    return NULL;
}

static void
session_free(struct execd_session *s)
{
    (void)unlink(s->env_path);
    (void)unlink(s->cwd_path);
    free(s->env_path);
    free(s->cwd_path);
    free(s);
}

static void
session_unlink(struct execd *ex, struct execd_session *s)
{
    for (struct execd_session **pp = &ex->sessions; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            return;
        }
    }
}

struct execd_session *
execd_session_new(struct execd *ex, const char *cwd, bool linked)
{
    struct execd_session *s = sbx_xcalloc(1, sizeof(*s));
    s->ex = ex;
    execd_uuid4(s->id, true);
    s->env_path = sbx_xasprintf("%s/session-%s.env", ex->cfg.state_dir, s->id);
    s->cwd_path = sbx_xasprintf("%s/session-%s.cwd", ex->cfg.state_dir, s->id);
    if (cwd && cwd[0]) {
        sbx_autofree char *line = sbx_xasprintf("%s\n", cwd);
        (void)sbx_write_file_atomic(s->cwd_path, line, strlen(line), 0600, NULL);
    }
    if (linked) {
        s->next = ex->sessions;
        ex->sessions = s;
    }
    return s;
}

void
execd_session_create(struct execd *ex, struct evhttp_request *req)
{
    bool empty = false;
    json_t *j = execd_body_json(req, &empty);
    if (!j && !empty)
        return;
    json_t *cwd = json_object_get(j, "cwd");
    if (cwd && !json_is_null(cwd) && !json_is_string(cwd)) {
        json_decref(j);
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`cwd` must be a string");
        return;
    }
    struct execd_session *s = execd_session_new(ex, json_string_value(cwd), true);
    json_decref(j);
    execd_reply_json(req, 200, json_pack("{s:s}", "session_id", s->id));
}

void
execd_session_start_run(struct execd *ex, struct evhttp_request *req, struct execd_session *s,
                        struct execd_cmd_req *cr, const char *init_id)
{
    const char *dir = cr->cwd ? cr->cwd : "";
    cr->cwd = NULL; /* the script changes directory itself, after restoring the saved one */
    cr->background = false;
    if (cr->timeout_ms == 0)
        cr->timeout_ms = SESSION_RUN_CAP_MS; /* COMPAT 2.3: session runs are capped at 24 h */
    char *argv[] = {(char *)s->ex->shell, "-c",        (char *)session_script,
                    "sbx-session",        s->env_path, s->cwd_path,
                    (char *)cr->command,  (char *)dir, NULL};
    struct execd_run run = {.content = cr->command,
                            .argv = argv,
                            .req = cr,
                            .merged = true,
                            .session = s,
                            .init_id = init_id};
    execd_cmd_start(ex, req, &run);
}

void
execd_session_run(struct execd *ex, struct evhttp_request *req, const char *id)
{
    struct execd_session *s = session_find(ex, id);
    if (!s) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no such session `%s`", id);
        return;
    }
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    struct execd_cmd_req cr;
    char msg[256];
    if (execd_cmd_req_parse(&cr, j, msg, sizeof(msg)) < 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "%s", msg);
        json_decref(j);
        return;
    }
    /* COMPAT 2.3: a session run's `init` carries the session id */
    execd_session_start_run(ex, req, s, &cr, s->id);
    json_decref(j);
}

bool
execd_session_busy(const struct execd_session *s)
{
    return s->cmd_id[0] != '\0';
}

bool
execd_session_stop_run(struct execd *ex, struct execd_session *s)
{
    return s->cmd_id[0] && execd_cmd_interrupt(ex, s->cmd_id);
}

void
execd_session_release(struct execd *ex, struct execd_session *s)
{
    if (s->cmd_id[0] && execd_cmd_interrupt(ex, s->cmd_id)) {
        s->deleted = true; /* freed by execd_session_cmd_done */
        return;
    }
    session_free(s);
}

void
execd_session_cmd_done(struct execd_session *s)
{
    s->cmd_id[0] = '\0';
    if (s->deleted)
        session_free(s);
}

void
execd_session_note_cmd(struct execd_session *s, const char *cmd_id)
{
    (void)snprintf(s->cmd_id, sizeof(s->cmd_id), "%s", cmd_id);
}

static void
session_close(struct execd *ex, struct execd_session *s)
{
    session_unlink(ex, s);
    execd_session_release(ex, s);
}

bool
execd_session_interrupt(struct execd *ex, const char *id)
{
    struct execd_session *s = session_find(ex, id);
    if (!s)
        return false;
    session_close(ex, s);
    return true;
}

void
execd_session_delete(struct execd *ex, struct evhttp_request *req, const char *id)
{
    if (!execd_session_interrupt(ex, id)) {
        execd_reply_error(req, 404, "CONTEXT_NOT_FOUND", "no such session `%s`", id);
        return;
    }
    execd_reply_empty(req);
}

void
execd_session_free_all(struct execd *ex)
{
    while (ex->sessions) {
        struct execd_session *s = ex->sessions;
        ex->sessions = s->next;
        session_free(s);
    }
}
