/*
 * docker_api.h - a small Docker Engine API client over the daemon's unix socket (libcurl), and
 * the pure helpers of the docker provider (image references, registry auth, state mapping).
 *
 * Every call is pinned to API version 1.41: what Debian 12's docker.io (20.10) serves and what
 * podman's Docker-compatible service (`podman system service`) implements; newer daemons still
 * serve it. No docker CLI is involved anywhere.
 */
#ifndef SBX_PROVIDERS_DOCKER_API_H
#define SBX_PROVIDERS_DOCKER_API_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "server/provider.h"

#define SBX_DOCKER_API_VERSION "1.41"

struct sbx_docker;

/* A client for the daemon at socket_path (nothing is contacted here). */
struct sbx_docker *sbx_docker_new(const char *socket_path);
void sbx_docker_free(struct sbx_docker *d);
const char *sbx_docker_socket(const struct sbx_docker *d);

struct sbx_docker_req {
    const char *method; /* GET, POST, DELETE */
    const char *path;   /* below /v1.41, e.g. "/containers/sbx-x/json" (already escaped) */
    const json_t *body; /* sent as JSON, or NULL */
    const char *auth;   /* X-Registry-Auth value, or NULL */
    long timeout_s;     /* whole request; 0 = the client's default (60 s) */
    const char *what;   /* for error messages: "start container `sbx-x`" */
    const int *ok;      /* extra statuses that count as success (0-terminated), or NULL */
    int in_fd;          /* > 0: POST this file (from its offset) as application/x-tar */
    int out_fd;         /* > 0: a 2xx answer's body is written here, not parsed (resp NULL) */
    size_t out_max;     /* with out_fd: > 0: a longer body fails the call (SBX_EIO, EFBIG) */
};

/* One request. 2xx (and req->ok) -> 0 with *status and *resp (parsed JSON, NULL when the body
 * was empty or not JSON; may be NULL to ignore). Anything else -> an error naming req->what and
 * the daemon's message: 400 SBX_EINVAL, 404 SBX_ENOTFOUND, 409 SBX_ECONFLICT, other SBX_EIO; an
 * unreachable daemon is SBX_EUNAVAIL "docker: cannot reach <socket>: <why>". */
int sbx_docker_call(struct sbx_docker *d, const struct sbx_docker_req *req, long *status,
                    json_t **resp, sbx_error **err);

/* Pull ref (normalized with sbx_docker_pull_ref) with an optional X-Registry-Auth value; the
 * daemon's progress goes to the server log (one line per layer state, download progress at
 * most once a second). An error line in the stream fails the pull. */
int sbx_docker_pull(struct sbx_docker *d, const char *ref, const char *auth, long timeout_s,
                    sbx_error **err);

/* The last lines of a container's stdout+stderr (demultiplexed), newlines as "|", into out. */
void sbx_docker_logs_tail(struct sbx_docker *d, const char *name, char *out, size_t n);

/* ---- pure helpers (unit tested) ---- */

/* True when ref only holds characters of an image reference ([A-Za-z0-9._:/@-]), so it can go
 * into a URL path and query unescaped. */
bool sbx_docker_ref_ok(const char *ref);
/* ref with ":latest" appended when it names neither a tag nor a digest (a pull without a tag
 * would fetch every tag of the repository). New string. */
char *sbx_docker_pull_ref(const char *ref);
/* The registry host of ref ("docker.io" when the first component is not a host). New string. */
char *sbx_docker_ref_registry(const char *ref);
/* X-Registry-Auth for an ImageSpec's `auth` ({username, password}): base64url of
 * {"username","password","serveraddress"}. NULL when auth is absent. New string. */
char *sbx_docker_auth_header(const json_t *auth, const char *serveraddress);

/* Map an inspect answer's State to a provider status. stopped_by_us: the provider stopped it
 * (an exited container is then startable, else it died: terminal). */
void sbx_docker_state_map(const json_t *state, bool stopped_by_us, struct sbx_provider_status *out);

/* "500m" -> 500, "2" -> 2000, "1.5" -> 1500 (Kubernetes CPU quantities); -1 when malformed. */
int sbx_docker_parse_cpu(const char *s, uint64_t *millis);

#endif
