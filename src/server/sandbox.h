/*
 * sandbox.h - the server's record of one sandbox (what the store persists).
 */
#ifndef SBX_SERVER_SANDBOX_H
#define SBX_SERVER_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/srvutil.h"

#define SBX_NAME_MAX 32

struct sbx_record {
    char id[SBX_UUID_LEN + 1];
    char provider[SBX_NAME_MAX];
    char state[SBX_NAME_MAX]; /* API state: Pending, Running, Paused, ... */
    char reason[SBX_NAME_MAX * 2];
    char *message; /* owned, may be NULL */
    int64_t last_transition_ms;
    int64_t created_ms;
    int64_t expires_ms; /* 0 = no expiry */
    json_t *image;      /* ImageSpec object or NULL */
    json_t *entrypoint; /* array of strings */
    json_t *env;        /* object */
    json_t *metadata;   /* object */
    json_t *limits;     /* object (resourceLimits) */
    json_t *extensions; /* object */
    json_t *priv;       /* provider-private object (pid, start time, port, token...); a create
                           with volumes starts it as {"volumes": [the request's Volume objects]} */
    json_t *events;     /* the last SBX_EVENTS_MAX transitions, oldest first:
                           [{"at": ms, "state", "reason"?, "message"?}] (diagnostics) */
};

#define SBX_EVENTS_MAX 64

/* priv of a sandbox with an egress policy: {"policy": NetworkPolicy, "token": hex} (the
 * egress API's OPENSANDBOX-EGRESS-AUTH). */
#define SBX_EGRESS_PRIV "egress"
/* priv["resourceRequests"]: the create's resourceRequests (providers declaring
 * SBX_CAP_RESOURCE_REQUESTS hand them to their scheduler) */
#define SBX_REQUESTS_PRIV "resourceRequests"
#define SBX_EGRESS_HEADER "OPENSANDBOX-EGRESS-AUTH"
#define SBX_EGRESS_PORT   18080

/* Find-or-create (sbx extension): a create whose `extensions` hold this key returns the
 * existing sandbox with the same key and spec when it can be made usable. */
#define SBX_REUSE_KEY_EXT "reuseKey"
/* extensions["sbx.desktop"]: a desktop started with execd (`--desktop SPEC`) */
#define SBX_DESKTOP_EXT "sbx.desktop"
/* A sandbox's name (`sbx create --name`): a metadata label, so that the OpenSandbox SDKs see
 * it and can set it and filter on it; unique among the sandboxes that are not Failed or
 * Terminated (409 otherwise). */
#define SBX_NAME_LABEL    "sbx/name"
#define SBX_REUSE_KEY_MAX 128
#define SBX_SPEC_HASH_LEN 16

/* A fresh record with empty JSON fields. */
struct sbx_record *sbx_record_new(void);
/* Deep copy. */
struct sbx_record *sbx_record_dup(const struct sbx_record *sb);
void sbx_record_free(struct sbx_record *sb);
/* Set state, reason (may be NULL) and message (may be NULL, copied); stamps the transition. */
void sbx_record_set_state(struct sbx_record *sb, const char *state, const char *reason,
                          const char *message);

/* The record's reuse key (extensions.reuseKey), or NULL. Borrowed. */
const char *sbx_record_reuse_key(const struct sbx_record *sb);
/* The name label's value, NULL when none. */
const char *sbx_record_name(const struct sbx_record *sb);
/* True when key is a valid reuse key: 1-128 characters of [A-Za-z0-9._:/@=+-]. */
bool sbx_reuse_key_valid(const char *key);
/* What makes two sandboxes interchangeable - provider, image (not its registry credentials),
 * entrypoint, env, resource limits, volumes, the egress policy, extensions other than reuseKey
 * and provider (not metadata, not the expiry) - hashed into 16 hex characters. */
void sbx_record_spec_hash(const struct sbx_record *sb, char out[SBX_SPEC_HASH_LEN + 1]);

#endif
