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
 */
#ifndef SBX_CLIENT_H
#define SBX_CLIENT_H

#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_client sbx_client;

/** A key/value pair (environment, metadata, resource limits). */
typedef struct sbx_kv {
    const char *key;
    const char *value;
} sbx_kv;

#define SBX_CLIENT_OPTIONS_VERSION 1

typedef struct sbx_client_options {
    unsigned int version; /**< SBX_CLIENT_OPTIONS_VERSION */
    /** Server base URL, e.g. "http://127.0.0.1:8080" (a missing scheme means http://).
     *  NULL: $SBX_HOST, else http://127.0.0.1:8080. */
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

/** Create a client. *out is set only on success; free with sbx_client_free(). */
SBX_PUBLIC int sbx_client_new(sbx_client **out, const sbx_client_options *opts);
/** Free a client (NULL is fine). */
SBX_PUBLIC void sbx_client_free(sbx_client *c);
/** Message of the last failed call on this handle ("" if none). Borrowed; valid until the
 *  next call on the handle. */
SBX_PUBLIC const char *sbx_client_last_error(const sbx_client *c);
/** The base URL the client talks to. Borrowed from the handle. */
SBX_PUBLIC const char *sbx_client_host(const sbx_client *c);

/** A sandbox as the server describes it. */
typedef struct sbx_sandbox {
    char *id;
    char *state;      /**< Pending, Running, Paused, ... (unknown values are possible) */
    char *reason;     /**< machine-readable reason of the state, or NULL */
    char *message;    /**< human-readable message, or NULL */
    char *image;      /**< image URI, or NULL */
    char *created_at; /**< RFC 3339 */
    char *expires_at; /**< RFC 3339, or NULL when the sandbox never expires */
    char **entrypoint;
    size_t n_entrypoint;
    sbx_kv *metadata; /**< keys and values owned by this object */
    size_t n_metadata;
    char *json; /**< the whole JSON object as the server sent it */
} sbx_sandbox;

SBX_PUBLIC void sbx_sandbox_free(sbx_sandbox *s);
SBX_PUBLIC void sbx_sandbox_list_free(sbx_sandbox **list, size_t n);

/* 2 added reuse_key, 3 desktop; older versions (without them) are still accepted. */
#define SBX_CREATE_OPTIONS_VERSION 3

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
} sbx_create_options;

#define SBX_CREATE_OPTIONS_INIT                                                                   \
    {                                                                                             \
        SBX_CREATE_OPTIONS_VERSION, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 0, NULL, NULL, NULL \
    }

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
