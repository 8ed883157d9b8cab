/*
 * pool.h - pools of warm sandboxes (OpenSandbox's /pools API and `extensions.poolRef`).
 *
 * A pool is a create body (its template) and a capacity: `available` (warm: Running, execd
 * answering, not handed out) kept between bufferMin and bufferMax, `total` (available +
 * allocated + being created) at most poolMax and at least poolMin. A thread of its own
 * refills every pool through the manager's ordinary create (store first, then provider), so
 * warm sandboxes are ordinary records: their private part says whose they are
 * (priv.pool = {"name", "uid", "warm"}), they never expire while warm, and a restarted server
 * re-adopts them like any other. A create with `extensions.poolRef` takes one (sbx_mgr_claim:
 * two creates never get the same one) and gives it the request's metadata and timeout; with
 * none warm it creates one from the template while the pool has room.
 */
#ifndef SBX_SERVER_POOL_H
#define SBX_SERVER_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "server/sandbox.h"

struct sbx_srv;
struct sbx_store;
struct sbx_pools;

/* priv of a pool's sandbox: {"name": pool, "uid": the pool's uid, "warm": true until taken} */
#define SBX_POOL_PRIV     "pool"
#define SBX_POOL_REF_EXT  "poolRef"
#define SBX_POOL_NAME_MAX 63
/* No count of a capacity may exceed this (whatever max_sandboxes says). */
#define SBX_POOL_COUNT_MAX 100000

/* ---- the pure part (unit-tested) ---- */

struct sbx_pool_capacity {
    int64_t buffer_max, buffer_min, pool_max, pool_min;
};

struct sbx_pool_counts {
    size_t available; /* warm and Running */
    size_t allocated; /* taken and not Failed/Terminated */
    size_t creating;  /* warm ones being made (creates in flight) */
    size_t taking;    /* sandboxes made for takes while none was warm (in flight) */
};

/* A pool name: 1-63 characters of [a-z0-9-], starting and ending with [a-z0-9] (a DNS label,
 * as the reference's pool names). */
bool sbx_pool_name_valid(const char *name);
/* Parse capacitySpec {bufferMax, bufferMin, poolMax, poolMin}: each an integer in
 * [0, SBX_POOL_COUNT_MAX], bufferMin <= bufferMax, poolMin <= poolMax, bufferMin <= poolMax,
 * poolMax <= max_total. 0, or -1 with why (a message naming the field). */
int sbx_pool_capacity_parse(const json_t *spec, int64_t max_total, struct sbx_pool_capacity *out,
                            char *why, size_t why_size);
json_t *sbx_pool_capacity_json(const struct sbx_pool_capacity *c);
/* What the refiller does next: *create warm sandboxes to make (available up to bufferMin and
 * total up to poolMin, never available past bufferMax or total past poolMax), *trim warm ones
 * to delete (available past bufferMax, or total past poolMax after a capacity change). */
void sbx_pool_plan(const struct sbx_pool_capacity *c, const struct sbx_pool_counts *n,
                   size_t *create, size_t *trim);
/* A pooled create may make a sandbox on demand (none warm) when total < poolMax. */
bool sbx_pool_room(const struct sbx_pool_capacity *c, const struct sbx_pool_counts *n);

/* The pool of a record: its name (NULL when none), *warm, *uid (borrowed). */
const char *sbx_pool_of(const struct sbx_record *sb, bool *warm, const char **uid);
/* True for a pool's warm sandbox: no one's yet, so never listed (the manager's unlisted). */
bool sbx_pool_is_warm(const struct sbx_record *sb);

/* ---- the pools of a server ---- */

/* Load the pools from the store and start the refiller. */
int sbx_pools_open(struct sbx_srv *srv, struct sbx_store *store, struct sbx_pools **out,
                   sbx_error **err);
/* Stop the refiller (warm sandboxes stay, for the next start). */
void sbx_pools_close(struct sbx_pools *p);

/* The API (api_pools.c) - JSON documents in the reference's PoolResponse shape. */
int sbx_pools_add(struct sbx_pools *p, const char *name, const json_t *tmpl,
                  const struct sbx_pool_capacity *c, json_t **out, sbx_error **err);
json_t *sbx_pools_list(struct sbx_pools *p);
int sbx_pools_get(struct sbx_pools *p, const char *name, json_t **out, sbx_error **err);
int sbx_pools_update(struct sbx_pools *p, const char *name, const struct sbx_pool_capacity *c,
                     json_t **out, sbx_error **err);
/* Remove the pool, then delete its warm sandboxes (taken ones stay their owners'). */
int sbx_pools_remove(struct sbx_pools *p, const char *name, sbx_error **err);
/* A copy of the pool's template (SBX_ENOTFOUND). */
int sbx_pools_template(struct sbx_pools *p, const char *name, json_t **out, sbx_error **err);
/* Give the request's record `want` (built from the template and the request: metadata,
 * extensions, expiry, secureAccess token) a sandbox of the pool: a warm one is taken at once;
 * with none warm and room in the pool a new one is created from want; a full pool waits a
 * while for one being made, else SBX_ELIMIT. want is consumed. *out: the sandbox's record. */
int sbx_pools_take(struct sbx_pools *p, const char *name, struct sbx_record *want,
                   struct sbx_record **out, sbx_error **err);
/* Wake the refiller (tests: after a delete of a taken sandbox it notices on its own tick). */
void sbx_pools_kick(struct sbx_pools *p);

#endif
