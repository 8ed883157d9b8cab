/*
 * rest.h - a small JSON-over-HTTP(S) client (libcurl) for remote providers, and byte streams
 * to remote ports (plain TCP, or TLS pumped through a socketpair) for the router.
 *
 * Credentials travel only in the headers the caller passes; error messages carry the HTTP
 * status and the peer's message with every `redact` string replaced by "***", so an API key
 * never reaches a log or an API answer even if the peer echoes it.
 */
#ifndef SBX_PROVIDERS_REST_H
#define SBX_PROVIDERS_REST_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

struct sbx_rest {
    const char *const *headers; /* "Name: value" on every request (NULL-terminated, may be NULL) */
    const char *const *redact;  /* strings never shown in messages (NULL-terminated) */
    long timeout_ms;            /* per request; 0 = 30 s */
    const char *ca_file;        /* CA bundle for https (NULL: the system's) */
};

struct sbx_rest_resp {
    long status;
    json_t *json; /* the body when it is JSON, else NULL */
    char *text;   /* the body (at most 1 MiB kept), NUL-terminated */
};

struct sbx_rest_req {
    const char *method;
    const char *url;
    const char *const *extra; /* more "Name: value" headers (NULL-terminated, may be NULL) */
    const json_t *body;       /* sent as JSON when not NULL */
};

/* One request. Any HTTP status is a success here (look at out->status); transport failures
 * are SBX_EIO (SBX_ETIMEDOUT for a timeout). */
int sbx_rest_call(const struct sbx_rest *c, const struct sbx_rest_req *req,
                  struct sbx_rest_resp *out, sbx_error **err);
/* POST url as multipart/form-data with one file part `field` read from `path`. */
int sbx_rest_upload(const struct sbx_rest *c, const char *url, const char *field, const char *path,
                    struct sbx_rest_resp *out, sbx_error **err);
/* The same with the part's bytes from memory, e.g. a secret that must not touch a local file. */
struct sbx_rest_part {
    const char *name; /* the part's file name */
    const void *data;
    size_t len;
};
int sbx_rest_upload_data(const struct sbx_rest *c, const char *url, const char *field,
                         const struct sbx_rest_part *part, struct sbx_rest_resp *out,
                         sbx_error **err);
void sbx_rest_resp_dispose(struct sbx_rest_resp *r);
/* The error of a non-2xx answer: "<what>: HTTP <status>: <peer's message>", redacted; the code
 * follows the status (401/403 EPERM, 404 ENOTFOUND, 409 ECONFLICT, 429 ELIMIT, other 4xx
 * EINVAL, 5xx EIO). */
int sbx_rest_fail(const struct sbx_rest *c, const struct sbx_rest_resp *r, const char *what,
                  sbx_error **err);
/* Percent-encode s for a query value or a path segment (caller frees). */
char *sbx_rest_escape(const char *s);

/* Split an http(s) URL: *tls, host (caller frees), port (default 80/443). */
int sbx_url_split(const char *url, int *tls, char **host, int *port, sbx_error **err);
/* A connected stream socket to url's host:port: plain TCP for http, for https a socketpair
 * whose other end a detached thread pumps through a TLS connection (libcurl; the peer is
 * verified against ca_file, or the system's CAs when NULL). */
int sbx_url_connect(const char *url, int timeout_ms, const char *ca_file, int *fd, sbx_error **err);

#endif
