/*
 * sbx/client.h - libsbx, the C client of an sbx server (OpenSandbox lifecycle + execd APIs).
 *
 * Conventions
 * - Every function returns 0 on success or a negative sbx_errc (include/sbx/error.h).
 *   On failure a one-line message is kept in the client handle: sbx_client_last_error().
 * - Objects returned through a pointer-to-pointer (`out`) are owned by the caller and freed
 *   with the matching *_free function. Strings inside them are owned by that object.
 * - Input pointers are borrowed for the duration of the call only.
 * - The library never writes to stdout/stderr and never aborts: out of memory is SBX_ENOMEM.
 * - A client handle is not thread-safe: use one handle per thread (handles are cheap).
 * - Call sbx_global_init() once at the start of the program (before threads), and
 *   sbx_global_cleanup() at its end.
 * - Options structs: fill them with their *_options_init() (or the *_OPTIONS_INIT macro in
 *   C), then set fields; `version` lets a newer library accept an older caller's struct.
 * - Objects the library returns are opaque handles read through accessor functions.
 */
#ifndef SBX_CLIENT_H
#define SBX_CLIENT_H

#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_client sbx_client;

/** Process-wide setup (libcurl's global state): call once before any other sbx function and
 *  before starting threads. 0, or a negative sbx_errc. Calls nest: each needs a cleanup. */
SBX_PUBLIC int sbx_global_init(void);
/** Undo sbx_global_init() (the last of nested calls does the work). */
SBX_PUBLIC void sbx_global_cleanup(void);

/** A failure where there is no client handle to hold it (sbx_client_new). */
typedef struct sbx_err sbx_err;
/** The negative sbx_errc of the failure. */
SBX_PUBLIC int sbx_err_code(const sbx_err *e);
/** A one-line message (borrowed from e; "" for NULL). */
SBX_PUBLIC const char *sbx_err_message(const sbx_err *e);
SBX_PUBLIC void sbx_err_free(sbx_err *e);

/** A key/value pair (environment, metadata, resource limits). */
typedef struct sbx_kv {
    const char *key;
    const char *value;
} sbx_kv;

#define SBX_CLIENT_OPTIONS_VERSION 1

typedef struct sbx_client_options {
    unsigned int version; /**< SBX_CLIENT_OPTIONS_VERSION */
    /** Server base URL, e.g. "http://127.0.0.1:8080" (a missing scheme means http://).
     *  NULL: $SBX_HOST, else http://127.0.0.1:8080. An https:// server's certificate is
     *  verified against the system's CAs, or the PEM file named by $SBX_CA_CERT. */
    const char *host;
    /** API key. NULL: $SBX_API_KEY, else the file <state dir>/api-key of a local server. */
    const char *api_key;
    /** State dir used to find a local server's API key. NULL: $SBX_STATE_DIR or /var/lib/sbx. */
    const char *state_dir;
    /** Timeout of each non-streaming request in milliseconds; 0 means 60000. */
    long timeout_ms;
} sbx_client_options;

#define SBX_CLIENT_OPTIONS_INIT                         \
    {                                                   \
        SBX_CLIENT_OPTIONS_VERSION, NULL, NULL, NULL, 0 \
    }

SBX_PUBLIC void sbx_client_options_init(sbx_client_options *opts);

/** Create a client. *out is set only on success; free with sbx_client_free(). opts may be
 *  NULL (all defaults). On failure *err (when err is not NULL) gets what went wrong; free it
 *  with sbx_err_free(). */
SBX_PUBLIC int sbx_client_new(sbx_client **out, const sbx_client_options *opts, sbx_err **err);
/** Free a client (NULL is fine). */
SBX_PUBLIC void sbx_client_free(sbx_client *c);
/** Message of the last failed call on this handle ("" if none). Borrowed; valid until the
 *  next call on the handle. */
SBX_PUBLIC const char *sbx_client_last_error(const sbx_client *c);
/** The base URL the client talks to. Borrowed from the handle. */
SBX_PUBLIC const char *sbx_client_host(const sbx_client *c);

/** A sandbox as the server describes it: an opaque handle, read through the accessors below.
 *  Every string returned is borrowed from the handle (valid until sbx_sandbox_free); NULL
 *  when the server sent none. */
typedef struct sbx_sandbox sbx_sandbox;

SBX_PUBLIC const char *sbx_sandbox_id(const sbx_sandbox *s);
/** Pending, Running, Paused, Stopped, ... (unknown values are possible). */
SBX_PUBLIC const char *sbx_sandbox_state(const sbx_sandbox *s);
/** Machine-readable reason of the state. */
SBX_PUBLIC const char *sbx_sandbox_reason(const sbx_sandbox *s);
SBX_PUBLIC const char *sbx_sandbox_message(const sbx_sandbox *s);
SBX_PUBLIC const char *sbx_sandbox_image(const sbx_sandbox *s);
/** RFC 3339. */
SBX_PUBLIC const char *sbx_sandbox_created_at(const sbx_sandbox *s);
/** RFC 3339; NULL when the sandbox never expires. */
SBX_PUBLIC const char *sbx_sandbox_expires_at(const sbx_sandbox *s);
SBX_PUBLIC size_t sbx_sandbox_entrypoint_count(const sbx_sandbox *s);
/** Word i of the entrypoint (NULL past the end). */
SBX_PUBLIC const char *sbx_sandbox_entrypoint(const sbx_sandbox *s, size_t i);
SBX_PUBLIC size_t sbx_sandbox_metadata_count(const sbx_sandbox *s);
/** Key and value of metadata label i (NULL past the end). */
SBX_PUBLIC const char *sbx_sandbox_metadata_key(const sbx_sandbox *s, size_t i);
SBX_PUBLIC const char *sbx_sandbox_metadata_value(const sbx_sandbox *s, size_t i);
/** The value of label `key`, or NULL. */
SBX_PUBLIC const char *sbx_sandbox_metadata_get(const sbx_sandbox *s, const char *key);
/** The sandbox's name (the label sbx/name, `sbx create --name`), or NULL. */
SBX_PUBLIC const char *sbx_sandbox_name(const sbx_sandbox *s);
/** The whole JSON object as the server sent it. */
SBX_PUBLIC const char *sbx_sandbox_json(const sbx_sandbox *s);

SBX_PUBLIC void sbx_sandbox_free(sbx_sandbox *s);
SBX_PUBLIC void sbx_sandbox_list_free(sbx_sandbox **list, size_t n);

/* 2 added reuse_key, 3 desktop, 4 extensions; older versions (without them) are still
 * accepted. */
#define SBX_CREATE_OPTIONS_VERSION 5

typedef struct sbx_create_options {
    unsigned int version;          /**< SBX_CREATE_OPTIONS_VERSION */
    const char *image;             /**< image URI; NULL: the server's built-in "host" image */
    const char *const *entrypoint; /**< NULL: ["tail", "-f", "/dev/null"] */
    size_t n_entrypoint;
    const sbx_kv *env;
    size_t n_env;
    const sbx_kv *metadata;
    size_t n_metadata;
    const sbx_kv *resource_limits; /**< e.g. {"cpu","1"}, {"memory","512Mi"}; NULL: cpu 1, 2Gi */
    size_t n_resource_limits;
    long timeout_s;       /**< time to live in seconds (>= 60); 0: never expires */
    const char *provider; /**< NULL: the server's default provider */
    /** Find-or-create (sbx extension, version >= 2): the server returns its existing sandbox
     *  with this key and the same spec when it can be made usable (starting a stopped one)
     *  instead of creating another. NULL: always create. */
    const char *reuse_key;
    /** A desktop started with the sandbox (sbx extension, version >= 3): "true" for
     *  1280x800, or "WxH[xD][,wm=openbox|none]" (docs/desktop.md). NULL: none. */
    const char *desktop;
    /** More `extensions` of the request (version >= 4), e.g. {"sbx.publish", "80:8080"}
     *  (docs/server.md "Published ports"). */
    const sbx_kv *extensions;
    size_t n_extensions;
    /** Restore a snapshot (version >= 5): its id; `image` must then be NULL, and the entrypoint
     *  defaults to the server's (`tail -f /dev/null`). NULL: create from `image`. */
    const char *snapshot;
} sbx_create_options;

#define SBX_CREATE_OPTIONS_INIT                                                                    \
    {                                                                                              \
        SBX_CREATE_OPTIONS_VERSION, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 0, NULL, NULL, NULL, \
            NULL, 0, NULL                                                                          \
    }

SBX_PUBLIC void sbx_create_options_init(sbx_create_options *opts);

/** Create a sandbox and wait until the server answers (it answers once it is Running). */
SBX_PUBLIC int sbx_sandbox_create(sbx_sandbox **out, sbx_client *c, const sbx_create_options *opts);
/** Look a sandbox up. SBX_ENOTFOUND when it does not exist. */
SBX_PUBLIC int sbx_sandbox_get(sbx_sandbox **out, sbx_client *c, const char *id);

#define SBX_LIST_OPTIONS_VERSION 1

typedef struct sbx_list_options {
    unsigned int version;      /**< SBX_LIST_OPTIONS_VERSION */
    const char *const *states; /**< match any of these states (case-insensitive); NULL: all */
    size_t n_states;
    const sbx_kv *metadata; /**< all pairs must match */
    size_t n_metadata;
} sbx_list_options;

#define SBX_LIST_OPTIONS_INIT                      \
    {                                              \
        SBX_LIST_OPTIONS_VERSION, NULL, 0, NULL, 0 \
    }

SBX_PUBLIC void sbx_list_options_init(sbx_list_options *opts);

/** List sandboxes (all pages). *out is an array of *n sandboxes; free with
 *  sbx_sandbox_list_free(). opts may be NULL. */
SBX_PUBLIC int sbx_sandbox_list(sbx_sandbox ***out, size_t *n, sbx_client *c,
                                const sbx_list_options *opts);

SBX_PUBLIC int sbx_sandbox_delete(sbx_client *c, const char *id);
/** SBX_ECONFLICT when the sandbox is not Running. */
SBX_PUBLIC int sbx_sandbox_pause(sbx_client *c, const char *id);
/** SBX_ECONFLICT when the sandbox is not Paused. */
SBX_PUBLIC int sbx_sandbox_resume(sbx_client *c, const char *id);
/** Stop a Running or Paused sandbox, keeping its filesystem for sbx_sandbox_start() (sbx
 *  extension; delete removes it). SBX_ECONFLICT when it is in another state. */
SBX_PUBLIC int sbx_sandbox_stop(sbx_client *c, const char *id);
/** Start a Stopped sandbox again (sbx extension). SBX_ECONFLICT when it is not Stopped. */
SBX_PUBLIC int sbx_sandbox_start(sbx_client *c, const char *id);
/** Set the expiry to now + seconds. *expires_at (optional, caller frees) gets the new time. */
SBX_PUBLIC int sbx_sandbox_renew(char **expires_at, sbx_client *c, const char *id, long seconds);

/** Snapshots (docs/api.md "Snapshots"): answers are the server's JSON text (a Snapshot object,
 *  or for a list `{"items": [...], "pagination": ...}`), caller frees. */
/** Capture sandbox `id`'s files (name may be NULL); the snapshot is Ready once its image is
 *  written (poll sbx_snapshot_get). */
SBX_PUBLIC int sbx_snapshot_create(char **json, sbx_client *c, const char *id, const char *name);
SBX_PUBLIC int sbx_snapshot_get(char **json, sbx_client *c, const char *snapshot_id);
/** The snapshots (of sandbox `id` when not NULL), newest first, up to 200. */
SBX_PUBLIC int sbx_snapshot_list(char **json, sbx_client *c, const char *id);
SBX_PUBLIC int sbx_snapshot_delete(sbx_client *c, const char *snapshot_id);
/** Write the snapshot's image to local_path as an archive (an OCI layout that is also a
 *  `docker save` archive: docker load, podman, skopeo read it). */
SBX_PUBLIC int sbx_snapshot_export(sbx_client *c, const char *snapshot_id, const char *local_path);
/** Import such an archive (or any docker-save / OCI layout archive) as a new Ready snapshot. */
SBX_PUBLIC int sbx_snapshot_import(char **json, sbx_client *c, const char *local_path);

/** Output callbacks of sbx_exec(). `data` is one line without its newline (not
 *  NUL-terminated). Return 0 to go on, non-zero to stop the command (SBX_ECONFLICT). */
typedef int (*sbx_output_cb)(const char *data, size_t len, void *payload);

#define SBX_EXEC_OPTIONS_VERSION 1

typedef struct sbx_exec_options {
    unsigned int version; /**< SBX_EXEC_OPTIONS_VERSION */
    const char *cwd;      /**< NULL: execd's working directory */
    const sbx_kv *env;
    size_t n_env;
    long timeout_ms; /**< 0: no timeout */
    sbx_output_cb on_stdout;
    sbx_output_cb on_stderr;
    void *payload; /**< passed to the callbacks */
} sbx_exec_options;

#define SBX_EXEC_OPTIONS_INIT                                        \
    {                                                                \
        SBX_EXEC_OPTIONS_VERSION, NULL, NULL, 0, 0, NULL, NULL, NULL \
    }

SBX_PUBLIC void sbx_exec_options_init(sbx_exec_options *opts);

/** Run `command` (a shell command line) in the sandbox, streaming its output to the
 *  callbacks. *exit_code gets its exit status as a shell's $? gives it: 128+N when signal N
 *  killed it (-1 only when execd named no signal it knows). Output arrives line by line (the
 *  OpenSandbox wire); sbx_pty_open_opts() in pipe mode carries bytes as they are. */
SBX_PUBLIC int sbx_exec(int *exit_code, sbx_client *c, const char *id, const char *command,
                        const sbx_exec_options *opts);

/** Copy a local file into the sandbox at the absolute path `remote_path` (mode kept). */
SBX_PUBLIC int sbx_upload(sbx_client *c, const char *id, const char *local_path,
                          const char *remote_path);
/** Copy the sandbox file `remote_path` to `local_path` (written to a temp file, then renamed). */
SBX_PUBLIC int sbx_download(sbx_client *c, const char *id, const char *remote_path,
                            const char *local_path);

/* ---- files (execd's /files and /directories) ----
 * Paths are absolute paths in the sandbox. Structured answers are execd's JSON text (caller
 * frees): FileInfo is {path, type (file|directory|symlink|other), size, modified_at,
 * created_at, owner, group, mode (octal digits as a decimal int: 755)}. */

/** The whole file `path` in *data (NUL-terminated, *len bytes without the NUL; caller frees). */
SBX_PUBLIC int sbx_file_read(char **data, size_t *len, sbx_client *c, const char *id,
                             const char *path);
/** Write `len` bytes to `path` (created with its parent directories, replaced if it exists),
 *  with permission bits `mode` (0: 0644). */
SBX_PUBLIC int sbx_file_write(sbx_client *c, const char *id, const char *path, const void *data,
                              size_t len, int mode);
/** *json: {"PATH": FileInfo}. SBX_ENOTFOUND when it does not exist. */
SBX_PUBLIC int sbx_file_info(char **json, sbx_client *c, const char *id, const char *path);
/** Remove a file (a missing one is fine; a directory is refused: sbx_dir_remove). */
SBX_PUBLIC int sbx_file_remove(sbx_client *c, const char *id, const char *path);
/** Rename src to dst (dst's parent is created; an existing dst is never replaced). */
SBX_PUBLIC int sbx_file_move(sbx_client *c, const char *id, const char *src, const char *dst);
/** Set the permission bits (e.g. 0755). */
SBX_PUBLIC int sbx_file_chmod(sbx_client *c, const char *id, const char *path, int mode);
/** *json: [FileInfo] of the non-directories below `path` whose name matches the glob. */
SBX_PUBLIC int sbx_file_search(char **json, sbx_client *c, const char *id, const char *path,
                               const char *pattern);
/** mkdir -p with permission bits `mode`. */
SBX_PUBLIC int sbx_dir_create(sbx_client *c, const char *id, const char *path, int mode);
/** rm -rf (never crosses mounts). */
SBX_PUBLIC int sbx_dir_remove(sbx_client *c, const char *id, const char *path);
/** *json: [FileInfo] below `path`, `depth` levels (0: 1), parents before children. */
SBX_PUBLIC int sbx_dir_list(char **json, sbx_client *c, const char *id, const char *path,
                            int depth);

/* ---- background commands ---- */

/** Start `command` in the background (opts: cwd, env, timeout; callbacks unused). *command_id
 *  gets its id (caller frees). */
SBX_PUBLIC int sbx_exec_background(char **command_id, sbx_client *c, const char *id,
                                   const char *command, const sbx_exec_options *opts);
/** *json: {id, content, running, started_at, exit_code?, finished_at?, error?}. */
SBX_PUBLIC int sbx_command_status(char **json, sbx_client *c, const char *id,
                                  const char *command_id);
/** Its merged output from byte *cursor on, into *data (NUL-terminated, *len bytes; caller
 *  frees); *cursor moves past it, so calling again gets what came since. */
SBX_PUBLIC int sbx_command_logs(char **data, size_t *len, unsigned long long *cursor, sbx_client *c,
                                const char *id, const char *command_id);
/** SIGTERM to its process group, SIGKILL 3 s later. */
SBX_PUBLIC int sbx_command_interrupt(sbx_client *c, const char *id, const char *command_id);

/* ---- bash sessions: cwd and exported variables persist from one run to the next ---- */

/** cwd: where it starts (NULL: execd's). *session_id: caller frees. */
SBX_PUBLIC int sbx_session_create(char **session_id, sbx_client *c, const char *id,
                                  const char *cwd);
/** Run `command` in the session (stdout and stderr both come to on_stdout, one line per
 *  call, as sbx_exec). *exit_code as sbx_exec's. */
SBX_PUBLIC int sbx_session_run(int *exit_code, sbx_client *c, const char *id,
                               const char *session_id, const char *command,
                               const sbx_exec_options *opts);
SBX_PUBLIC int sbx_session_delete(sbx_client *c, const char *id, const char *session_id);

/* ---- code interpreting: contexts (a Python kernel, a bash session) and runs ---- */

/** language: "python", "bash". cwd: NULL for execd's. *context_id: caller frees. */
SBX_PUBLIC int sbx_code_context_create(char **context_id, sbx_client *c, const char *id,
                                       const char *language, const char *cwd);
SBX_PUBLIC int sbx_code_context_delete(sbx_client *c, const char *id, const char *context_id);

#define SBX_CODE_OPTIONS_VERSION 1

typedef struct sbx_code_options {
    unsigned int version;    /**< SBX_CODE_OPTIONS_VERSION (sbx_code_options_init sets it) */
    const char *context_id;  /**< NULL: the language's default context */
    const char *language;    /**< with no context_id: "python", "bash"; NULL: a one-off command */
    sbx_output_cb on_stdout; /**< output as the kernel sends it (not split into lines) */
    sbx_output_cb on_stderr;
    void *payload;
} sbx_code_options;

SBX_PUBLIC void sbx_code_options_init(sbx_code_options *opts);

/** What a code run gave: opaque, read with the accessors below, freed with
 *  sbx_code_result_free. An error in the code is not a failure of the call: the call returns
 *  0 and sbx_code_result_error_name() says it (NameError, KeyboardInterrupt...). */
typedef struct sbx_code_result sbx_code_result;

SBX_PUBLIC int sbx_code_run(sbx_code_result **out, sbx_client *c, const char *id, const char *code,
                            const sbx_code_options *opts);
/** The text of the last result ("4" for 2+2), or NULL. Borrowed from r. */
SBX_PUBLIC const char *sbx_code_result_text(const sbx_code_result *r);
/** The last result's MIME bundle as JSON ({"text": ..., "image/png": ...}), or NULL. */
SBX_PUBLIC const char *sbx_code_result_json(const sbx_code_result *r);
/** The error's name and value, or NULL when the run succeeded. */
SBX_PUBLIC const char *sbx_code_result_error_name(const sbx_code_result *r);
SBX_PUBLIC const char *sbx_code_result_error_value(const sbx_code_result *r);
/** The whole error {ename, evalue, traceback} as JSON, or NULL. */
SBX_PUBLIC const char *sbx_code_result_error_json(const sbx_code_result *r);
SBX_PUBLIC int sbx_code_result_execution_count(const sbx_code_result *r);
SBX_PUBLIC void sbx_code_result_free(sbx_code_result *r);

/** A request to the sandbox's desktop (docs/desktop.md): `path` is below /desktop, with its
 *  query ("/" for the status, "/screenshot?format=jpeg", "/action"); `method` NULL is GET;
 *  `json_body` NULL sends none. */
typedef struct sbx_desktop_request {
    const char *method;
    const char *path;
    const char *json_body;
} sbx_desktop_request;

/** Call a desktop endpoint of sandbox `id`. *out gets the answer's body (NUL-terminated,
 *  *out_len bytes without the NUL; an image for /screenshot, JSON or XML otherwise; caller
 *  frees). A non-2xx answer is an error carrying the server's {code, message}. */
SBX_PUBLIC int sbx_desktop_call(sbx_client *c, const char *id, const sbx_desktop_request *req,
                                char **out, size_t *out_len);

/** A link to sandbox `id`'s live desktop in a browser (noVNC, served by `sbx serve`): *url gets
 *  "http://SERVER/desktop/view/ID#token=T" (caller frees), with a view token valid for
 *  ttl_seconds (0: the server's default, 1 hour). Anyone holding the link sees and drives that
 *  one desktop until it expires. */
SBX_PUBLIC int sbx_desktop_view(char **url, sbx_client *c, const char *id, long ttl_seconds);

/** A PTY session in sandbox `id` (docs/execd.md "PTY sessions"): a shell, or `command` run by
 *  the shell; its process starts when a WebSocket attaches. *ws_url gets that WebSocket's URL
 *  ("ws://SERVER/sandboxes/ID/proxy/44772/pty/SESSION/ws", wss:// for an https server; add
 *  ?cols=&rows= etc.) and *headers the header lines ("Name: value", NULL-terminated) to send
 *  with its handshake. They may hold the API key: free them with sbx_pty_headers_free, which
 *  wipes them. Caller frees *ws_url. */
SBX_PUBLIC int sbx_pty_open(char **ws_url, char ***headers, sbx_client *c, const char *id,
                            const char *command);
SBX_PUBLIC void sbx_pty_headers_free(char **headers);

#define SBX_PTY_OPTIONS_VERSION 1

typedef struct sbx_pty_options {
    unsigned int version; /**< SBX_PTY_OPTIONS_VERSION (sbx_pty_options_init sets it) */
    const char *command;  /**< run by the shell; NULL: an interactive shell */
    const char *cwd;      /**< the process's directory; NULL: execd's */
} sbx_pty_options;

SBX_PUBLIC void sbx_pty_options_init(sbx_pty_options *opts);
/** sbx_pty_open() with options. Attach with `?pty=0` for pipe mode: stdout and stderr apart,
 *  stdin a pipe that the sbx extension message {"type":"eof"} closes. */
SBX_PUBLIC int sbx_pty_open_opts(char **ws_url, char ***headers, sbx_client *c, const char *id,
                                 const sbx_pty_options *opts);
/** End a PTY session: its process group is killed, its output dropped. `session_id` is the
 *  part of the WebSocket URL between "/pty/" and "/ws". */
SBX_PUBLIC int sbx_pty_delete(sbx_client *c, const char *id, const char *session_id);

#ifdef __cplusplus
}
#endif
#endif
