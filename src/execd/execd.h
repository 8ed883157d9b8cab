/*
 * execd.h - sbx-execd internals: the daemon inside every sandbox that speaks the OpenSandbox
 * execd API (commands over SSE, background commands, bash sessions, files, metrics).
 *
 * One thread, one libevent loop. Children are tracked by pid; SIGCHLD (delivered through the
 * loop) reaps every child, known or not, so execd can be PID 1.
 */
#ifndef SBX_EXECD_EXECD_H
#define SBX_EXECD_EXECD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/listener.h>
#include <jansson.h>

#include "common/error.h"

struct event_base;
struct evhttp;
struct evhttp_request;
struct evbuffer;
struct event;

#define EXECD_DEFAULT_PORT       44772
#define EXECD_TOKEN_HEADER       "X-EXECD-ACCESS-TOKEN"
#define EXECD_CURSOR_HEADER      "EXECD-COMMANDS-TAIL-CURSOR"
#define EXECD_MAX_JSON_BODY      (16u << 20)
#define EXECD_MAX_HEADERS        (64u << 10)
#define EXECD_DEFAULT_MAX_UPLOAD (64ull << 30)
#define EXECD_MAX_FINISHED       1024         /* finished command records kept for status queries */
#define EXECD_DEFAULT_LOG_RING   (256u << 10) /* logs.c: execd's log + the entrypoint's output */

struct execd_config {
    char *listen_host; /* "0.0.0.0" */
    uint16_t port;
    char *token;         /* NULL: no auth */
    uint64_t max_upload; /* bytes per upload request */
    char *state_dir;     /* background logs, session state */
    char *envs_file;     /* EXECD_ENVS: KEY=VALUE lines merged into every command */
    char *python;        /* --python / EXECD_PYTHON: the kernel interpreter; NULL: search */
    uint64_t log_ring;   /* --log-buffer: bytes of log kept in memory (logs.c) */
    char *desktop;       /* --desktop SPEC: start one at boot (desktop.c) */
    char *install;       /* --install DEST: copy this binary there and exit (main.c) */
    char *install_token; /* --install-token SRC:DEST: with --install, copy SRC to DEST */
    char *token_file;    /* --access-token-file: read the token there, then remove it */
};

struct execd_cmd;
struct execd_session;
struct execd_watch;
struct execd_kernel;
struct execd_ctx;
struct execd_logs;
struct execd_desktop;
struct execd_pty;

struct execd {
    struct execd_config cfg;
    struct event_base *base;
    struct evhttp *http;
    struct event *sig_chld;
    struct event *sig_term;
    struct event *sig_int;
    struct event *stop_timer;
    struct execd_cmd *cmds; /* newest first */
    unsigned n_finished;
    struct execd_session *sessions;
    struct execd_watch *watches;
    struct execd_ctx *ctxs;        /* code contexts (code.c) */
    struct execd_kernel *kernels;  /* kernel processes (kernel.c) */
    struct execd_kernel *warm;     /* the warm kernel nobody took yet, or NULL (kernel.c) */
    struct execd_logs *logs;       /* logs.c */
    struct execd_desktop *desktop; /* desktop.c: NULL until one is started */
    struct execd_pty *ptys;        /* pty.c: PTY sessions, newest first */
    char *python_ok;               /* the interpreter that last started a kernel */
    char *kernel_dir;              /* short dir for kernel sockets when state_dir is deep */
    const char *shell;             /* /bin/bash, else /bin/sh */
    enum {
        EXECD_FAST_UNKNOWN,
        EXECD_FAST_YES,
        EXECD_FAST_NO
    } fast_shell; /* fastpath.h */
    bool pid1;
    bool stopping;
    int exit_code;
};

/* ---- http.c: routing, replies ---- */
int execd_http_start(struct execd *ex, sbx_error **err);
void execd_http_stop(struct execd *ex);
void execd_reply_error(struct evhttp_request *req, int status, const char *code, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));
/* Reply 200 with a JSON body (steals j). */
void execd_reply_json(struct evhttp_request *req, int status, json_t *j);
/* The handler answers later (after a timer): keep evhttp from reading the connection in the
 * meantime (it would see pipelined bytes in its "writing" state) but notice a close. */
void execd_http_park(struct evhttp_request *req);
/* From a connection close callback: evhttp leaves a request it was still answering to its
 * user (detached from the connection); free it. */
void execd_http_abandon(struct evhttp_request *req);
/* Reply 200 with an empty body. */
void execd_reply_empty(struct evhttp_request *req);
/* The request body parsed as JSON; replies 400 and returns NULL when it is not. An empty body
 * gives NULL with *empty = true (and no reply) when empty is not NULL. */
json_t *execd_body_json(struct evhttp_request *req, bool *empty);
/* First value of query parameter `name` (decoded, caller frees), or NULL. */
char *execd_query(struct evhttp_request *req, const char *name);
/* All values of a repeatable query parameter; returns the count, *out is a NULL-ended array. */
size_t execd_query_all(struct evhttp_request *req, const char *name, char ***out);
void execd_strv_free(char **v);

/* ---- util.c: ids, time, JSON text, lines ---- */
/* 32 hex chars (dashes=false) or the 36-char uuid4 form; buf holds >= 37 bytes. */
void execd_uuid4(char *buf, bool dashes);
/* RFC3339 UTC with milliseconds into buf (>= 32 bytes). */
void execd_rfc3339(char *buf, size_t n, int64_t wall_ms);
/* Append s[0..n) as a JSON string literal (quotes included); invalid UTF-8 becomes U+FFFD. */
void execd_json_quote(struct evbuffer *out, const char *s, size_t n);
/* A listening unix socket (SOCK_STREAM or SOCK_SEQPACKET) at path, mode 0666, cb(ex) per
 * connection; an old socket file there is replaced. */
int execd_unix_listen(struct execd *ex, const char *path, int type, evconnlistener_cb cb,
                      struct evconnlistener **out, sbx_error **err);
/* Constant-time string equality (length leaks, content does not). */
bool execd_token_equal(const char *a, const char *b);

/* ---- command.c ---- */
void execd_cmd_post(struct execd *ex, struct evhttp_request *req);
void execd_cmd_delete(struct execd *ex, struct evhttp_request *req);
void execd_cmd_status(struct execd *ex, struct evhttp_request *req, const char *id);
void execd_cmd_logs(struct execd *ex, struct evhttp_request *req, const char *id);
/* The interrupt dispatcher (COMPAT 2.4): a command, a code context, or a session by id. */
bool execd_interrupt(struct execd *ex, const char *id);
/* SIGCHLD: reap everything; update known commands. True when no child is left at all. */
bool execd_cmd_reap(struct execd *ex);
/* Signal every running command's process group. */
void execd_cmd_signal_all(struct execd *ex, int sig);
bool execd_cmd_any_running(const struct execd *ex);
void execd_cmd_free_all(struct execd *ex);

/* ---- session.c ---- */
void execd_session_create(struct execd *ex, struct evhttp_request *req);
void execd_session_run(struct execd *ex, struct evhttp_request *req, const char *id);
void execd_session_delete(struct execd *ex, struct evhttp_request *req, const char *id);
/* Interrupt by session id: closes the session. Returns false when id is not a session. */
bool execd_session_interrupt(struct execd *ex, const char *id);
void execd_session_free_all(struct execd *ex);

/* ---- files.c / upload.c ---- */
void execd_files_info(struct execd *ex, struct evhttp_request *req);
void execd_files_remove(struct execd *ex, struct evhttp_request *req);
void execd_files_permissions(struct execd *ex, struct evhttp_request *req);
void execd_files_move(struct execd *ex, struct evhttp_request *req);
void execd_files_search(struct execd *ex, struct evhttp_request *req);
void execd_files_replace(struct execd *ex, struct evhttp_request *req);
void execd_files_download(struct execd *ex, struct evhttp_request *req);
void execd_dirs_list(struct execd *ex, struct evhttp_request *req);
void execd_dirs_create(struct execd *ex, struct evhttp_request *req);
void execd_dirs_remove(struct execd *ex, struct evhttp_request *req);
void execd_files_upload(struct execd *ex, struct evhttp_request *req);

/* ---- code.c: code interpreting (COMPAT 2.2, 2.7) ---- */
void execd_code_run(struct execd *ex, struct evhttp_request *req);
void execd_code_interrupt_req(struct execd *ex, struct evhttp_request *req);
void execd_code_context_create(struct execd *ex, struct evhttp_request *req);
void execd_code_contexts_list(struct execd *ex, struct evhttp_request *req);
void execd_code_contexts_delete(struct execd *ex, struct evhttp_request *req);
void execd_code_context_get(struct execd *ex, struct evhttp_request *req, const char *id);
void execd_code_context_delete(struct execd *ex, struct evhttp_request *req, const char *id);
/* Interrupt by context id (kernel SIGINT / the shell context's command); false if no such
 * context. */
bool execd_code_interrupt(struct execd *ex, const char *id);
void execd_code_free_all(struct execd *ex);

/* ---- logs.c: our log and the entrypoint's output, in a bounded ring ---- */
/* From now on every log line goes to the ring (and stderr). cap 0: the default. */
int execd_logs_init(struct execd *ex, size_t cap);
/* A pipe whose output goes to the ring: returns its write end (CLOEXEC), -1 on failure. */
int execd_logs_output_pipe(struct execd *ex);
void execd_logs_get(struct execd *ex, struct evhttp_request *req);
void execd_logs_free(struct execd *ex);

/* ---- sudo.c: sudo for the desktop's user, started by execd (no setuid) ---- */
int execd_sudo_start(struct execd *ex, sbx_error **err);
void execd_sudo_stop(void);
/* A reaped child: true when it was a sudo command (its client is told). */
bool execd_sudo_reaped(struct execd *ex, pid_t pid, int status);

/* ---- desktop.c: the sandbox's desktop (src/desktop) ---- */
/* Start the desktop at boot (--desktop SPEC); failures are logged, not fatal. */
int execd_desktop_boot(struct execd *ex, const char *spec);
/* A reaped child: true when it was the desktop's (handled there). */
bool execd_desktop_reaped(struct execd *ex, pid_t pid, int status);
/* DISPLAY and the rest for commands, or NULL without a running desktop. */
const char *const *execd_desktop_env(const struct execd *ex);
void execd_desktop_free(struct execd *ex);
void execd_desktop_status(struct execd *ex, struct evhttp_request *req);
void execd_desktop_start(struct execd *ex, struct evhttp_request *req);
void execd_desktop_stop(struct execd *ex, struct evhttp_request *req);
void execd_desktop_screenshot(struct execd *ex, struct evhttp_request *req);
void execd_desktop_screen(struct execd *ex, struct evhttp_request *req);
void execd_desktop_cursor(struct execd *ex, struct evhttp_request *req);
void execd_desktop_action(struct execd *ex, struct evhttp_request *req);
void execd_desktop_windows(struct execd *ex, struct evhttp_request *req);
void execd_desktop_window_activate(struct execd *ex, struct evhttp_request *req, const char *arg);
void execd_desktop_window_close(struct execd *ex, struct evhttp_request *req, const char *arg);
void execd_desktop_clipboard_get(struct execd *ex, struct evhttp_request *req);
void execd_desktop_clipboard_set(struct execd *ex, struct evhttp_request *req);
void execd_desktop_a11y(struct execd *ex, struct evhttp_request *req);
void execd_desktop_recording_get(struct execd *ex, struct evhttp_request *req);
void execd_desktop_recording_start(struct execd *ex, struct evhttp_request *req);
void execd_desktop_recording_stop(struct execd *ex, struct evhttp_request *req);

/* ---- pty.c, pty_ws.c: PTY sessions over WebSocket (COMPAT 2.6) ---- */
void execd_pty_create(struct execd *ex, struct evhttp_request *req);
void execd_pty_get(struct execd *ex, struct evhttp_request *req, const char *id);
void execd_pty_delete(struct execd *ex, struct evhttp_request *req, const char *id);
void execd_pty_attach(struct execd *ex, struct evhttp_request *req, const char *id);
/* A reaped child: true when it was a PTY session's process. */
bool execd_pty_reaped(struct execd *ex, pid_t pid, int status);
void execd_pty_signal_all(struct execd *ex, int sig);
bool execd_pty_any_running(const struct execd *ex);
void execd_pty_free_all(struct execd *ex);

/* ---- metrics.c ---- */
void execd_metrics_get(struct execd *ex, struct evhttp_request *req);
void execd_metrics_watch(struct execd *ex, struct evhttp_request *req);
void execd_metrics_free_all(struct execd *ex);

#endif
