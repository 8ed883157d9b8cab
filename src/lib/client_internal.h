/*
 * client_internal.h - private declarations shared by the files of libsbx.
 *
 * libsbx never aborts and never prints: allocation failures become SBX_ENOMEM, and every
 * failure leaves a message in the handle (client_fail).
 */
#ifndef SBX_LIB_CLIENT_INTERNAL_H
#define SBX_LIB_CLIENT_INTERNAL_H

#include <stddef.h>

#include <curl/curl.h>
#include <jansson.h>

#include "sbx/client.h"

struct sbx_sandbox {
    char *id;
    char *state;
    char *reason;
    char *message;
    char *image;
    char *created_at;
    char *expires_at;
    char **entrypoint;
    size_t n_entrypoint;
    sbx_kv *metadata; /* keys and values owned by this object */
    size_t n_metadata;
    char *json;
};

/* Largest JSON answer we accept from a server (a list of many sandboxes fits easily). */
#define SBX_CLIENT_MAX_BODY (64u << 20)

struct sbx_client {
    CURL *curl;
    char *host;    /* "http://127.0.0.1:8080", no trailing slash */
    char *api_key; /* NULL when none was found */
    char *ca_cert; /* $SBX_CA_CERT: CAs for an https:// server, NULL: the system's */
    long timeout_ms;
    char err[1024];
    char curl_err[CURL_ERROR_SIZE]; /* libcurl's detail of the last transfer's failure */
};

/* A growable byte buffer with a maximum that never aborts (libsbx's own: src/common's
 * buffer aborts on OOM). */
struct client_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
    int overflow; /* set when an append failed (too large or out of memory) */
};

void client_buf_init(struct client_buf *b, size_t max);
void client_buf_free(struct client_buf *b);
int client_buf_append(struct client_buf *b, const void *p, size_t n);

/* What went wrong in the last transfer: libcurl's detailed message ("SSL certificate problem:
 * unable to get local issuer certificate") when it gave one, else the code's text. */
const char *client_curl_error(const sbx_client *c, CURLcode rc);

/* Record a failure in the handle and return -code. */
int client_fail(sbx_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A request to the lifecycle API. `path` starts with "/v1/...". `body` may be NULL.
 * On success *status is the HTTP status and *out (optional) the parsed JSON body (NULL when
 * the body was empty). Non-2xx answers become errors with the server's {code,message}. */
int client_call(sbx_client *c, const char *method, const char *path, json_t *body, json_t **out);

/* Map an HTTP error answer to an sbx_errc and a message in the handle; returns -code. */
int client_http_error(sbx_client *c, long status, const char *body, size_t len);

/* Set the common options of a request (URL, timeouts, key header) on c->curl.
 * *headers receives the list to free with curl_slist_free_all. */
int client_prepare(sbx_client *c, const char *url, struct curl_slist **headers);

/* URL-escape one path or query component. Caller frees with curl_free. */
char *client_escape(sbx_client *c, const char *s);

/* Where execd of sandbox `id` is reached: base URL ("http://host/.../proxy/44772") and the
 * headers the server asked clients to send. Caller frees *base and the list. */
int client_execd_endpoint(sbx_client *c, const char *id, char **base, struct curl_slist **headers);

/* A request to execd of sandbox `id` at req->path (with its query), through the endpoint the
 * server gives; the answer's body in *out (NUL-terminated, "" when empty). Non-2xx: an error
 * with execd's {code, message}. desktop.c. */
int client_execd_call(sbx_client *c, const char *id, const sbx_desktop_request *req, char **out,
                      size_t *out_len);

/* GET url (endpoint headers ep, may be NULL; the key header is added) into local_path: a temp
 * file next to it, renamed into place only when complete. */
int client_download(sbx_client *c, const char *url, struct curl_slist *ep, const char *local_path);

/* An id that can go into a URL path as it is (execd's ids: hex and dashes). */
int client_id_ok(const char *id);

/* strdup that reports SBX_ENOMEM through the handle. */
char *client_strdup(sbx_client *c, const char *s);

#endif
