/*
 * proc.h - running commands: request parsing, spawning, the SSE stream of a command.
 */
#ifndef SBX_EXECD_PROC_H
#define SBX_EXECD_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "common/error.h"
#include "execd/execd.h"

/* RunCommandRequest / RunInSessionRequest (COMPAT 2.4); strings borrowed from the JSON. */
struct execd_cmd_req {
    const char *command;
    const char *cwd; /* NULL: daemon cwd */
    bool background;
    int64_t timeout_ms; /* 0: none */
    bool has_uid;
    bool has_gid;
    uint32_t uid;
    uint32_t gid;
    json_t *envs; /* object of strings, or NULL */
};

/* Validate types and fill out; on failure writes a message to msg and returns -1. Unknown
 * fields are ignored. */
int execd_cmd_req_parse(struct execd_cmd_req *out, json_t *j, char *msg, size_t msgn);

/* What to start for one command. */
struct execd_run {
    const char *content; /* shown in status records */
    char **argv;         /* argv[0] is the program path */
    const struct execd_cmd_req *req;
    char **direct;       /* the command's words when it may be exec'd without bash (fastpath.h) */
    const char *init_id; /* text of the `init` event; NULL: the command id */
    bool merged;         /* stderr into stdout (sessions) */
    struct execd_session *session;
};

/* ---- sse.c: COMPAT 2.3 frames ---- */
struct evbuffer;
void execd_sse_begin(struct evbuffer *b, const char *type); /* `{"type":"T"` */
void execd_sse_end(struct evbuffer *b);                     /* `,"timestamp":MS}\n\n` */
void execd_sse_text(struct evbuffer *b, const char *type, const char *text, size_t n);
void execd_sse_headers(struct evhttp_request *req);

/* Start a command and answer req with its SSE stream (or a JSON error). */
void execd_cmd_start(struct execd *ex, struct evhttp_request *req, const struct execd_run *run);

/* A shell command as POST /command runs it (direct exec when fastpath.h allows). */
void execd_cmd_run_shell(struct execd *ex, struct evhttp_request *req,
                         const struct execd_cmd_req *cr);

/* Environment for a child: the daemon's, the EXECD_ENVS file, then envs (may be NULL). */
char **execd_child_env(struct execd *ex, json_t *envs);

/* Expand $VAR and ${VAR} from env (NULL-ended "K=V" array). Caller frees. */
char *execd_expand_vars(const char *s, char *const *env);

/* Sessions: the command run for a session started / finished (cmd is going away). */
void execd_session_note_cmd(struct execd_session *s, const char *cmd_id);
void execd_session_cmd_done(struct execd_session *s);
/* Kill a command by id with SIGTERM then SIGKILL after a grace. False when not running. */
bool execd_cmd_interrupt(struct execd *ex, const char *id);

/* Sessions as the machinery of bash code contexts (code.c): a session not reachable through
 * /session (linked = false), a run whose `init` carries init_id, the running command. */
struct execd_session *execd_session_new(struct execd *ex, const char *cwd, bool linked);
void execd_session_start_run(struct execd *ex, struct evhttp_request *req, struct execd_session *s,
                             struct execd_cmd_req *cr, const char *init_id);
bool execd_session_busy(const struct execd_session *s);
/* Interrupt the running command (SIGTERM, SIGKILL after the grace); false when idle. */
bool execd_session_stop_run(struct execd *ex, struct execd_session *s);
/* Free an unlinked session (after its running command, which is interrupted, finished). */
void execd_session_release(struct execd *ex, struct execd_session *s);

#endif
