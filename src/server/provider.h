/*
 * provider.h - the provider interface and the registry of provider factories.
 *
 * A provider turns a sandbox record into something running: `native` (the runtime), `docker`
 * (containers of a Docker Engine), `process` (execd as a plain host process, no isolation) or
 * `daytona` (a remote cloud sandbox). The manager owns the record and writes every state
 * transition to the store before it calls the provider; the provider keeps what it needs to find
 * its sandbox again (pid, start time, ports, tokens) in sb->priv, which the manager persists
 * after each call.
 *
 * All calls may block; the manager never calls two of them at once on the same sandbox (except
 * connect and status, which must be safe to call any time).
 *
 * `start` is called after `create` and again after `stop` (sb->priv then holds what the
 * provider recorded; a stopped sandbox must report a STARTABLE status, not a terminal one).
 */
#ifndef SBX_SERVER_PROVIDER_H
#define SBX_SERVER_PROVIDER_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "server/sandbox.h"

/* What the manager may do with a sandbox in a provider's own state. */
enum sbx_state_class {
    SBX_CLASS_USABLE,    /* running: commands and the router work (API state Running) */
    SBX_CLASS_STARTABLE, /* exists but stopped/paused: resume or start make it usable (Paused) */
    SBX_CLASS_TRANSIENT, /* between states; ask again later (Pending) */
    SBX_CLASS_TERMINAL,  /* gone or dead; only delete makes sense (Failed) */
};

struct sbx_provider_status {
    char state[SBX_NAME_MAX]; /* the provider's own word ("running", "stopped", "dead") */
    enum sbx_state_class cls;
    char reason[SBX_NAME_MAX * 2]; /* why, when terminal (e.g. SANDBOX_LOST) */
};

struct sbx_provider;

/* What a provider's snapshot captured; snapshot.c makes an image of the server's store of it. */
struct sbx_snapshot_capture {
    const char *id;      /* in: the snapshot's id */
    const char *tmp_dir; /* in: for temp files (the image store's file system) */
    int fd;              /* out: an unlinked temp file, read from its start */
    /* out: true - fd holds an uncompressed layer tar (diff_id) to stack on the store's image
     * `base` (a manifest digest); false - fd holds an image archive (`docker save`) */
    bool is_layer;
    char *base;
    char *diff_id;
    uint64_t frozen_us; /* how long the sandbox's processes were stopped for the copy */
};

/* What a sandbox uses now (provider.h: usage); UINT64_MAX where unknown. */
struct sbx_provider_usage {
    uint64_t memory_bytes;
    uint64_t cpu_ns;
    uint64_t pids;
};

/* Fill a status (state word, class, reason). */
void sbx_provider_status_set(struct sbx_provider_status *out, const char *state,
                             enum sbx_state_class cls, const char *reason);

struct sbx_provider_ops {
    /* Allocate what the sandbox needs (dirs, ports, tokens) into sb->priv; nothing runs yet. */
    int (*create)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    /* Start the workload; return once it is usable (execd answers /ping) or failed. */
    int (*start)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    /* Stop the workload, keep the resources and the filesystem (start runs it again). Also
     * called on a paused sandbox. */
    int (*stop)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    /* Freeze / thaw. NULL: the provider cannot pause (the API answers 400). */
    int (*pause)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    int (*resume)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    /* Optional (NULL: the provider cannot snapshot). Capture the sandbox's filesystem into c,
     * consistent: its processes stopped for the copy (and let go after it unless it was
     * paused). Called for Running, Paused and Stopped sandboxes, nothing else running on it. */
    int (*snapshot)(struct sbx_provider *p, const struct sbx_record *sb,
                    struct sbx_snapshot_capture *c, sbx_error **err);
    /* Optional: what the sandbox uses now (GET /metrics' sbx_sandbox_* families). Cheap (a
     * few file reads): called for every running sandbox at each scrape. <0 when unknown. */
    int (*usage)(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_usage *u);
    /* Stop everything and remove every resource. Idempotent; works on half-made creates. */
    int (*delete)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    /* The live state of the sandbox. */
    int (*status)(struct sbx_provider *p, const struct sbx_record *sb,
                  struct sbx_provider_status *out, sbx_error **err);
    /* Optional: a pollable fd that turns readable when the sandbox's workload has exited (a
     * pidfd of its init), so that the server asks `status` only then instead of asking every
     * live sandbox in turn; -1: none now (the server asks `status` periodically). *owned
     * true: the caller owns the fd. false: the fd is the provider's own (e.g. the runtime's
     * pidfd, so that a sandbox costs the server one descriptor, not two): the caller only
     * polls it, never closes it, and stops polling it before it calls stop, start, delete or
     * anything after a failure - the provider keeps it open until one of those. Cheap:
     * called under the manager's lock. */
    int (*watch)(struct sbx_provider *p, const struct sbx_record *sb, bool *owned);
    /* A connected stream socket to `port` inside the sandbox (the router's only way in). */
    int (*connect)(struct sbx_provider *p, const struct sbx_record *sb, int port, int *fd,
                   sbx_error **err);
    /* After a server restart: re-find the sandbox (may refresh sb->priv) and report its state. */
    int (*reconcile)(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
                     sbx_error **err);
    /* Headers the router adds on requests to `port` (e.g. execd's access token); new ref or
     * NULL. */
    json_t *(*proxy_headers)(struct sbx_provider *p, const struct sbx_record *sb, int port);
    /* Optional (NULL = accept). Called on the API thread before anything is recorded, with
     * the create request (already checked for shape): refuse what this provider cannot or may
     * not do (e.g. a host path outside its allow-list). Returns <0 with *code set to the API
     * error code (e.g. "VOLUME::HOST_PATH_NOT_ALLOWED") and err saying why; the API answers
     * 400. */
    int (*check_create)(struct sbx_provider *p, const json_t *request, const char **code,
                        sbx_error **err);
    /* Optional (NULL: no egress policies). Enforce the egress policy in sb->priv
     * (SBX_EGRESS_PRIV) at once on a running sandbox, from the egress API (PATCH, DELETE);
     * nothing to do for a stopped one (its start applies it). */
    int (*egress)(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err);
    void (*free)(struct sbx_provider *p);
};

struct sbx_provider {
    const struct sbx_provider_ops *ops;
    char name[SBX_NAME_MAX];
    void *data;
};

struct sbx_srv_secrets;

/* What every provider factory gets besides its own settings. */
struct sbx_credvault;

struct sbx_provider_env {
    const char *state_dir; /* the server's state dir */
    const char *exe_dir;   /* the directory of the running sbx binary */
    /* The secret store, opened on first use (secretsrv.h). Factories of lazy providers read
     * their credentials here, by the names in their settings; never from the environment. */
    struct sbx_srv_secrets *secrets;
    /* The Credential Vaults' values (credvault.h): the native and docker providers' credential
     * proxy reads them at each request it injects into (docs/network.md "Credential proxy"). */
    struct sbx_credvault *vault;
};

/*
 * What a provider can do beyond the lifecycle every provider has (create, start, stop, delete,
 * status, connect, renew). The API refuses a request that needs a capability its provider
 * does not declare with 400 API_NOT_SUPPORTED before anything is recorded, and the registry
 * refuses to build a provider whose ops disagree with what it declares. A provider declaring
 * nothing can do nothing extra: a new provider fails closed, it never silently drops a field
 * it does not know about.
 */
enum sbx_provider_cap {
    SBX_CAP_PAUSE = 1u << 0,             /* pause/resume (ops->pause, ops->resume) */
    SBX_CAP_SNAPSHOT = 1u << 1,          /* filesystem snapshots (ops->snapshot) */
    SBX_CAP_VOLUMES = 1u << 2,           /* `volumes` at create (check_create checks each) */
    SBX_CAP_NETWORK_POLICY = 1u << 3,    /* `networkPolicy` + the egress API (ops->egress) */
    SBX_CAP_POOLS = 1u << 4,             /* warm sandboxes (`extensions.poolRef`) */
    SBX_CAP_RESOURCE_REQUESTS = 1u << 5, /* `resourceRequests` reach a scheduler */
    /* `credentialProxy` + the Credential Vault API: credentials injected into the sandbox's
     * outbound requests by the server (needs SBX_CAP_NETWORK_POLICY; docs/network.md) */
    SBX_CAP_CREDENTIAL_PROXY = 1u << 6,
};

struct sbx_provider_factory {
    const char *name;
    /* The platform its sandboxes run ("amd64", "arm64"); NULL: this machine's. */
    const char *arch;
    /* settings: the provider's config group as a JSON object (never NULL). */
    int (*create)(const json_t *settings, const struct sbx_provider_env *env,
                  struct sbx_provider **out, sbx_error **err);
    /* Keys the settings may hold (NULL-terminated); anything else is a config error. */
    const char *const *keys;
    /* Optional: validate the settings at startup without reading secrets or touching the
     * network (lazy providers: config mistakes still stop the server at startup). */
    int (*check)(const json_t *settings, sbx_error **err);
    /* Build on first use instead of at startup: for providers whose construction needs
     * secrets. The registry then builds it outside its lock and caches it; a failed build
     * (a secret not set yet) is not cached, so the next use tries again. */
    bool lazy;
    /* enum sbx_provider_cap bits: what its providers can do (see there). */
    unsigned caps;
};

/* The factory called name in table (NULL-terminated by name), or NULL. The server gets its
 * table from whoever starts it (src/providers/providers.h: sbx_providers_builtin): the server
 * knows the provider interface, never a provider. */
const struct sbx_provider_factory *sbx_provider_factory_in(const struct sbx_provider_factory *table,
                                                           const char *name);

struct sbx_registry;
struct sbx_server_config;

/* Set up the supported providers of cfg: eager ones are built now, lazy ones only checked.
 * Fails on duplicates, unknown names, bad settings, and a default that is not in the
 * supported set. */
int sbx_registry_build(const struct sbx_server_config *cfg, const struct sbx_provider_env *env,
                       struct sbx_registry **out, sbx_error **err);
/* Same, with another factory table (tests). */
int sbx_registry_build_with(const struct sbx_server_config *cfg, const struct sbx_provider_env *env,
                            const struct sbx_provider_factory *factories, struct sbx_registry **out,
                            sbx_error **err);
void sbx_registry_free(struct sbx_registry *reg);
/* The canonical name of the provider called name (NULL or "" = the default), or NULL when it
 * is not supported. Never builds anything. Borrowed from the registry. */
const char *sbx_registry_resolve(const struct sbx_registry *reg, const char *name);
/* The provider called name (NULL or "" = the default), built on first use. Concurrent first
 * uses build it once (the others wait for that build, other providers are not blocked).
 * SBX_EINVAL when not supported; a failed build's error (e.g. SBX_EUNAVAIL: a secret is not
 * set) is returned and nothing is cached. */
int sbx_registry_acquire(struct sbx_registry *reg, const char *name, struct sbx_provider **out,
                         sbx_error **err);
/* The factory of the provider called name (NULL or "" = the default), or NULL when it is not
 * supported: its capabilities and platform, known before it is built. Never builds. */
const struct sbx_provider_factory *sbx_registry_factory(const struct sbx_registry *reg,
                                                        const char *name);
/* The provider called name if it is built already, else NULL (never builds). */
struct sbx_provider *sbx_registry_peek(struct sbx_registry *reg, const char *name);
/* "a, b" - the supported names, for error messages. Borrowed. */
const char *sbx_registry_names(const struct sbx_registry *reg);
/* [{name, state: ready | not built yet | failed, reason?}] for /health (caller owns it). */
json_t *sbx_registry_status(struct sbx_registry *reg);

#endif
