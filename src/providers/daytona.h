/*
 * daytona.h - pieces of the Daytona provider that tests look at directly.
 */
#ifndef SBX_PROVIDERS_DAYTONA_H
#define SBX_PROVIDERS_DAYTONA_H

#include "server/provider.h"

/* Daytona's sandbox states (its API's SandboxState, 22 values) in our four classes:
 *   usable     started
 *   startable  stopped, archived, paused
 *   transient  creating, starting, stopping, restoring, archiving, pending_build,
 *              building_snapshot, pulling_snapshot, snapshotting, forking, resizing, pausing,
 *              resuming, unknown (ask again)
 *   terminal   error, build_failed, destroying, destroyed
 * A value this table does not know is transient too: re-polled until the deadline, never
 * reused and never treated as dead. */
enum sbx_state_class sbx_daytona_classify(const char *state);

/* Labels sbx puts on its Daytona sandboxes (find-or-create and ownership). */
#define SBX_DAYTONA_LABEL_ID   "sbx.id"
#define SBX_DAYTONA_LABEL_KEY  "sbx.reuse-key"
#define SBX_DAYTONA_LABEL_SPEC "sbx.spec-hash"

#endif
