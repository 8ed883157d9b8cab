/*
 * kube_api.h - a small client of the Kubernetes API for the kubernetes provider: the
 * kubeconfig reader (YAML through libyaml), in-cluster credentials, JSON calls over HTTPS
 * (libcurl: client certificates, bearer tokens and CA data from memory, never written to a
 * file) and pods/portforward streams (WebSocket, subprotocol v4.channel.k8s.io).
 *
 * No kubectl, no client-go: the provider needs pods (create, get, list by label, delete),
 * their portforward, and nothing else.
 */
#ifndef SBX_PROVIDERS_KUBE_API_H
#define SBX_PROVIDERS_KUBE_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Where the API server is and how to prove who we are: one context of a kubeconfig, or the
 * pod's service account (in-cluster). Byte fields are NUL-terminated PEM. */
struct kube_cfg {
    char *server;     /* https://host[:port], no trailing '/' */
    char *context;    /* the context's name (for messages); "in-cluster" */
    char *namespace;  /* the context's namespace, or NULL */
    char *ca;         /* PEM of the CA bundle that signs the server, or NULL: the system's */
    char *cert;       /* client certificate (PEM), or NULL */
    char *key;        /* its key (PEM, sodium memory), or NULL */
    char *token;      /* bearer token (sodium memory), or NULL */
    char *token_file; /* re-read on every call when set (service account tokens rotate) */
    bool insecure;    /* insecure-skip-tls-verify (only when the caller allowed it) */
};

/* YAML (a kubeconfig: block or flow style, JSON too) as a JSON tree: mappings are objects,
 * sequences arrays, every scalar a string. Anchors/aliases, tags and more than one document
 * are refused. SBX_EINVAL with the line and column of a syntax error. */
int kube_yaml_to_json(const char *text, size_t len, json_t **out, sbx_error **err);

struct kube_cfg_opts {
    const char *context;  /* NULL: current-context */
    const char *base_dir; /* relative file paths in the kubeconfig are relative to it */
    bool allow_insecure;  /* accept insecure-skip-tls-verify: true (else refused) */
};

/* One context of a kubeconfig's text: its cluster's server and CA, its user's credentials
 * (token, tokenFile, client-certificate[-data] + client-key[-data]; exec and auth-provider
 * plugins are refused: no external program runs). `what` names the kubeconfig in messages. */
int kube_cfg_parse(const char *text, size_t len, const char *what, const struct kube_cfg_opts *o,
                   struct kube_cfg *out, sbx_error **err);
/* The same from a file. */
int kube_cfg_load(const char *path, const struct kube_cfg_opts *o, struct kube_cfg *out,
                  sbx_error **err);
/* In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, sa_dir/token (re-read
 * on each call), sa_dir/ca.crt, sa_dir/namespace (sa_dir NULL: $SBX_KUBERNETES_SA_DIR when
 * set, else the standard /var/run/secrets/kubernetes.io/serviceaccount). */
int kube_cfg_in_cluster(const char *sa_dir, struct kube_cfg *out, sbx_error **err);
/* True when in-cluster credentials look present (the variables and the token file). */
bool kube_in_cluster_available(const char *sa_dir);
void kube_cfg_dispose(struct kube_cfg *c);

struct kube_client;

struct kube_client_opts {
    long timeout_ms; /* per request; 0 = 30 s */
    int retries;     /* extra tries after a 429, a 5xx or a transport failure (bounded backoff) */
    long backoff_ms; /* the first wait; doubles */
};

/* Takes cfg's contents (cfg is left empty). */
int kube_client_new(struct kube_cfg *cfg, const struct kube_client_opts *o,
                    struct kube_client **out, sbx_error **err);
void kube_client_free(struct kube_client *c);
const char *kube_client_server(const struct kube_client *c);
const char *kube_client_namespace(const struct kube_client *c);

struct kube_resp {
    long status;
    json_t *json; /* the body when it is JSON */
};

/* One call: method, path ("/api/v1/..."), body (JSON, or NULL). A 429, a 5xx or a transport
 * failure is retried (opts.retries); then the last answer is returned. Transport failures are
 * SBX_EUNAVAIL. Any HTTP status is a success here. */
int kube_call(struct kube_client *c, const char *method, const char *path, const json_t *body,
              struct kube_resp *out, sbx_error **err);
void kube_resp_dispose(struct kube_resp *r);
/* The error of a non-2xx answer: "<what>: HTTP <status> <reason>: <Status.message>", with the
 * code following the status: 401/403 SBX_EUNAVAIL (the provider cannot act), 404
 * SBX_ENOTFOUND, 409 SBX_ECONFLICT, 410 SBX_ECONFLICT, 422 and other 4xx SBX_EINVAL, 429 and
 * 5xx SBX_EUNAVAIL. */
int kube_fail(const struct kube_resp *r, const char *what, sbx_error **err);

/* A streamed GET (a watch): the body's lines as they come. */
struct kube_stream_ops {
    /* the answer's status, before its body */
    void (*on_status)(void *ud, long status);
    /* one line of a 200 answer's body (no newline); <0 ends the stream */
    int (*on_line)(void *ud, const char *line, size_t n);
    /* asked about once a second, also while connecting: true ends the stream */
    bool (*stopped)(void *ud);
    void *ud;
};

/* GET path (no retry), its body handed over line by line until the server ends it (0), an
 * on_line or stopped callback ends it (0), max_ms passes or the transport fails
 * (SBX_EUNAVAIL); a non-200 answer is kube_fail's error. */
int kube_stream(struct kube_client *c, const char *path, const struct kube_stream_ops *o,
                long max_ms, sbx_error **err);

/* A connected stream to `port` of pod ns/name through the API server's pods/portforward
 * (WebSocket, v4.channel.k8s.io): a socketpair whose other end a detached thread pumps
 * (data channel 0 both ways; a message on error channel 1 is logged and ends the stream). */
int kube_portforward(struct kube_client *c, const char *ns, const char *name, int port, int *fd,
                     sbx_error **err);

#endif
