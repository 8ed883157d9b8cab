/*
 * snapshot.h - snapshots of sandboxes (the OpenSandbox Snapshot API): a sandbox's filesystem
 * captured by its provider (provider.h: snapshot) and kept as an image of the server's OCI
 * store (<state>/images) named SBX_SNAPSHOT_REPO:<id>, with a record in the store's SQLite
 * file. A create with `snapshotId` runs that image.
 */
#ifndef SBX_SERVER_SNAPSHOT_H
#define SBX_SERVER_SNAPSHOT_H

#include "common/error.h"
#include "server/httpd.h"

/* The repository of snapshot images in the image store (a tag per snapshot id). */
#define SBX_SNAPSHOT_REPO "sbx.local/snapshots"

/* The largest snapshot archive an import takes (it is written to the image store's disk). */
#define SBX_SNAPSHOT_IMPORT_MAX (64ULL << 30)

/* The key of a restored sandbox's record (priv) that names its snapshot. */
#define SBX_SNAPSHOT_PRIV "snapshot_id"

struct sbx_snaps;
struct sbx_store;
struct sbx_mgr;

/* Load the records; a snapshot a killed server left Creating becomes Failed, one left
 * Deleting is deleted now. */
int sbx_snaps_open(struct sbx_snaps **out, struct sbx_store *store, struct sbx_mgr *mgr,
                   const char *state_dir, sbx_error **err);
/* Waits for snapshots being written. */
void sbx_snaps_close(struct sbx_snaps *s);

/* The image (store name, caller frees) of snapshot id, for a create with snapshotId:
 * SBX_ENOTFOUND when there is none, SBX_ECONFLICT when it is not Ready. */
int sbx_snaps_image(struct sbx_snaps *s, const char *id, char **image, sbx_error **err);

/* An unlinked temp file on the image store's disk (an import's body), or -1. */
int sbx_snaps_tmpfile(struct sbx_snaps *s);

/* The API: POST /sandboxes/{id}/snapshots, GET /snapshots, GET|DELETE /snapshots/{id}; sbx
 * extensions: GET /snapshots/{id}/export (the image as an archive: OCI layout + docker save)
 * and POST /snapshots/import (such an archive in, a new Ready snapshot out). */
void sbx_api_snapshots(struct sbx_req *r, struct sbx_reply *out);

#endif
