/*
 * manager.h - the sandbox manager: records in memory + store, provider calls, the create
 * worker pool, the TTL reaper, and reconciliation after a restart.
 *
 * Every state transition is written to the store before the provider is asked to act, and
 * one operation at a time runs on a sandbox (others get SBX_ECONFLICT).
 */
#ifndef SBX_SERVER_MANAGER_H
#define SBX_SERVER_MANAGER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "server/provider.h"
#include "server/sandbox.h"
#include "server/store.h"

struct sbx_mgr;
struct sbx_credvault;

struct sbx_mgr_opts {
    struct sbx_store *store;       /* borrowed */
    struct sbx_registry *registry; /* borrowed */
    size_t max_sandboxes;
    size_t fd_cap;          /* the open-files limit allows about this many sandboxes (0: no cap) */
    unsigned long fd_limit; /* that limit (RLIMIT_NOFILE), for the error */
    size_t workers;
    int64_t wait_usable_ms;      /* find-or-create: deadline for a transient sandbox (0 = 120 s) */
    struct sbx_credvault *vault; /* borrowed, may be NULL: a deleted sandbox's vault values go */
    /* Records no list shows (a pool's warm sandboxes); NULL: none. Asked whenever a record
     * changes, so that a list without a filter counts them without a walk. */
    bool (*unlisted)(const struct sbx_record *sb);
};

/* Load the store, reconcile every sandbox with its provider, start the workers and reaper. */
int sbx_mgr_new(const struct sbx_mgr_opts *opts, struct sbx_mgr **out, sbx_error **err);
/* Stop the threads (in-flight creates finish). Sandboxes keep running. */
void sbx_mgr_free(struct sbx_mgr *mgr);

/* Create sb (owned; id, provider, timestamps and spec filled) on the worker pool and wait until
 * it is Running or Failed. *out is a copy of the final record (also on failure, when the
 * record exists); a failed start returns its error. A lazy provider is built first; when that
 * fails (a secret is not set) its error is returned and nothing is recorded.
 *
 * Find-or-create: when sb has a reuse key (extensions.reuseKey), the newest sandbox of the same
 * provider with that key and the same spec hash is returned instead if it can be made usable:
 * the provider is polled until the wait_usable deadline (transient states wait), a startable
 * sandbox is started (or resumed), a terminal one is marked Failed and never reused - then a
 * fresh sandbox is created. Creates with the same key run one at a time. */
int sbx_mgr_create(struct sbx_mgr *mgr, struct sbx_record *sb, struct sbx_record **out,
                   sbx_error **err);
/* A copy of the record. */
int sbx_mgr_get(struct sbx_mgr *mgr, const char *id, struct sbx_record **out, sbx_error **err);
/* Copies of all records, newest first; free with sbx_mgr_list_free. */
void sbx_mgr_list(struct sbx_mgr *mgr, struct sbx_record ***out, size_t *n);
void sbx_mgr_list_free(struct sbx_record **items, size_t n);
/* A page of the list, newest first: copies of the listed records (opts.unlisted) that `match`
 * accepts (all when NULL), from the start-th match, at most count; returns how many match in
 * all. Only the page is copied; with a match the rest is walked once to count, without one
 * not at all (a list without a filter does not grow with the sandboxes). */
typedef bool (*sbx_mgr_match_fn)(const struct sbx_record *sb, void *ud);
struct sbx_mgr_page {
    sbx_mgr_match_fn match; /* NULL: every sandbox */
    void *ud;               /* for match */
    size_t start, count;    /* the page: from the start-th match, at most count */
};
size_t sbx_mgr_list_page(struct sbx_mgr *mgr, const struct sbx_mgr_page *pg,
                         struct sbx_record ***out, size_t *n);
/* How many records no list shows (opts.unlisted): a pool's warm sandboxes. */
size_t sbx_mgr_unlisted(struct sbx_mgr *mgr);
int sbx_mgr_delete(struct sbx_mgr *mgr, const char *id, const char *reason, sbx_error **err);
/* sbx_mgr_delete, only if `still` accepts the record once any operation on it is over (checked
 * under the lock, with the delete); SBX_ECONFLICT when it does not. */
int sbx_mgr_delete_if(struct sbx_mgr *mgr, const char *id, sbx_mgr_match_fn still,
                      const char *reason, sbx_error **err);
int sbx_mgr_pause(struct sbx_mgr *mgr, const char *id, sbx_error **err);
int sbx_mgr_resume(struct sbx_mgr *mgr, const char *id, sbx_error **err);
/* Stop a Running or Paused sandbox, keeping its filesystem (state Stopped). */
int sbx_mgr_stop(struct sbx_mgr *mgr, const char *id, sbx_error **err);
/* Start a Stopped sandbox again (state Running once its execd answers). */
int sbx_mgr_start(struct sbx_mgr *mgr, const char *id, sbx_error **err);
/* Capture sandbox id's filesystem for a snapshot (provider.h: snapshot) while no other
 * operation runs on it. SBX_ECONFLICT unless it is Running, Paused or Stopped; SBX_EINVAL when
 * its provider cannot snapshot. *provider (SBX_NAME_MAX) gets the provider's name. */
int sbx_mgr_snapshot(struct sbx_mgr *mgr, const char *id, struct sbx_snapshot_capture *c,
                     char *provider, sbx_error **err);
/* Set a new expiry (ms since the epoch). SBX_ECONFLICT when the sandbox has no expiry. */
int sbx_mgr_renew(struct sbx_mgr *mgr, const char *id, int64_t expires_ms, sbx_error **err);
/* Apply a JSON merge patch to the metadata; the merged result is validated. */
int sbx_mgr_patch_metadata(struct sbx_mgr *mgr, const char *id, const json_t *patch,
                           struct sbx_record **out, sbx_error **err);
/* Connect to port of a Running sandbox; *headers (may be NULL) are the ones the router adds. */
/* 0 when the store can be written (for /health). */
int sbx_mgr_store_check(struct sbx_mgr *mgr, sbx_error **err);
/* A use through the router: renew-on-access (extensions["access.renew.extend.seconds"]). */
void sbx_mgr_touch(struct sbx_mgr *mgr, const char *id);
/* What the sandbox's provider says of it now (the diagnostics' runtime scope). */
int sbx_mgr_provider_status(struct sbx_mgr *mgr, const char *id, struct sbx_provider_status *st,
                            sbx_error **err);
/* What a Running or Paused sandbox uses now, when its provider is built and can tell. */
int sbx_mgr_usage(struct sbx_mgr *mgr, const char *id, struct sbx_provider_usage *u);
/* True when token is the secureAccess token of sandbox id (constant-time compare). */
/* The egress policy of sandbox id: change(policy, arg, err) edits a copy of priv.egress.policy
 * (SBX_ENOTFOUND when the sandbox has none); the result is stored, then enforced by the
 * provider; a failed enforcement puts the old policy back. *out: the new policy (caller owns). */
typedef int (*sbx_mgr_egress_fn)(json_t *policy, void *arg, sbx_error **err);
int sbx_mgr_egress(struct sbx_mgr *mgr, const char *id, sbx_mgr_egress_fn change, void *arg,
                   json_t **out, sbx_error **err);
/* 1: token is sandbox id's egress token (constant-time compare); 0: it is not (or NULL);
 * -1: id has no egress policy (or is unknown). */
int sbx_mgr_egress_auth(struct sbx_mgr *mgr, const char *id, const char *token);
/* The Credential Vault of sandbox id (api_vault.c): change(eg, arg, err) edits a copy of its
 * priv.egress under the manager's lock and returns 1 when it changed it (then it is stored;
 * when storing fails, undo(arg) is called), 0 when not, < 0 on error. *out: priv.egress after
 * (caller owns). SBX_ENOTFOUND when the sandbox has no egress record. */
typedef int (*sbx_mgr_vault_fn)(json_t *eg, void *arg, sbx_error **err);
struct sbx_mgr_vault_op {
    sbx_mgr_vault_fn change; /* NULL: only read */
    void (*undo)(void *arg); /* may be NULL */
    void *arg;
};
int sbx_mgr_vault(struct sbx_mgr *mgr, const char *id, const struct sbx_mgr_vault_op *op,
                  json_t **out, sbx_error **err);
bool sbx_mgr_access_ok(struct sbx_mgr *mgr, const char *id, const char *token);
int sbx_mgr_connect(struct sbx_mgr *mgr, const char *id, int port, int *fd, json_t **headers,
                    sbx_error **err);
/* Call fn for every record under the manager's lock, busy = an operation runs on it (fn must
 * not call the manager; pool.c counts its sandboxes with it). */
typedef void (*sbx_mgr_each_fn)(const struct sbx_record *sb, bool busy, void *ud);
void sbx_mgr_each(struct sbx_mgr *mgr, sbx_mgr_each_fn fn, void *ud);
/* Take a sandbox (pools): the first idle Running sandbox whose record pick() accepts gets
 * change() applied to a copy of its record, which is stored and then replaces it - all under
 * the manager's lock, so two claims never take the same one. A name label the change sets
 * must be free (SBX_EEXISTS). *out: a copy of the new record. SBX_ENOTFOUND when none fits. */
typedef bool (*sbx_mgr_pick_fn)(const struct sbx_record *sb, void *ud);
typedef int (*sbx_mgr_change_fn)(struct sbx_record *sb, void *ud, sbx_error **err);
int sbx_mgr_claim(struct sbx_mgr *mgr, sbx_mgr_pick_fn pick, sbx_mgr_change_fn change, void *ud,
                  struct sbx_record **out, sbx_error **err);
/* Ask the provider of every Running/Paused sandbox whether it is still alive; dead ones become
 * Failed (reason from the provider, e.g. SANDBOX_LOST). The reaper runs this every 5 s. */
int sbx_mgr_check_live(struct sbx_mgr *mgr);
/* Run one reaper pass now (tests); returns how many sandboxes expired. */
int sbx_mgr_reap(struct sbx_mgr *mgr);

#endif
