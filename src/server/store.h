/*
 * store.h - the durable record of sandboxes: SQLite (WAL) in <state>/sbx.db.
 *
 * One connection guarded by a mutex; every call is one statement or one transaction, so a
 * kill -9 at any point leaves either the old or the new row.
 */
#ifndef SBX_SERVER_STORE_H
#define SBX_SERVER_STORE_H

#include <jansson.h>

#include "common/error.h"
#include "server/sandbox.h"

struct sbx_store;

/* Open (create, migrate) the database at path. */
int sbx_store_open(const char *path, struct sbx_store **out, sbx_error **err);
void sbx_store_close(struct sbx_store *st);
/* Insert or replace the whole row of sb. */
int sbx_store_put(struct sbx_store *st, const struct sbx_record *sb, sbx_error **err);
int sbx_store_delete(struct sbx_store *st, const char *id, sbx_error **err);
/* Call fn for every row (fn takes ownership of the record). */
int sbx_store_load(struct sbx_store *st, void (*fn)(struct sbx_record *sb, void *ud), void *ud,
                   sbx_error **err);
/* Snapshot rows (snapshot.c): a JSON document per id. load calls fn for each row (fn takes
 * ownership of the document). */
int sbx_store_snapshot_put(struct sbx_store *st, const char *id, const json_t *doc,
                           sbx_error **err);
int sbx_store_snapshot_delete(struct sbx_store *st, const char *id, sbx_error **err);
int sbx_store_snapshot_load(struct sbx_store *st, void (*fn)(json_t *doc, void *ud), void *ud,
                            sbx_error **err);
/* Pool rows (pool.c): a JSON document per pool name; load calls fn for each (fn owns it). */
int sbx_store_pool_put(struct sbx_store *st, const char *name, const json_t *doc, sbx_error **err);
int sbx_store_pool_delete(struct sbx_store *st, const char *name, sbx_error **err);
int sbx_store_pool_load(struct sbx_store *st, void (*fn)(json_t *doc, void *ud), void *ud,
                        sbx_error **err);
/* 0 when the store can be written (its write lock taken and released). */
int sbx_store_check(struct sbx_store *st, sbx_error **err);
/* The schema version of an open store. */
int sbx_store_version(struct sbx_store *st);

#endif
