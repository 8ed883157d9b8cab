/*
 * sandbox.c - sandbox records.
 */
#include "server/sandbox.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "common/xalloc.h"

struct sbx_record *
sbx_record_new(void)
{
    struct sbx_record *sb = sbx_xcalloc(1, sizeof *sb);
    sb->entrypoint = json_array();
    sb->env = json_object();
    sb->metadata = json_object();
    sb->limits = json_object();
    sb->extensions = json_object();
    sb->priv = json_object();
    sb->events = json_array();
    return sb;
}

static json_t *
deep(const json_t *j)
{
    return j ? json_deep_copy(j) : NULL;
}

struct sbx_record *
sbx_record_dup(const struct sbx_record *sb)
{
    struct sbx_record *c = sbx_xmalloc(sizeof *c);
    *c = *sb;
    c->message = sb->message ? sbx_xstrdup(sb->message) : NULL;
    c->image = deep(sb->image);
    c->entrypoint = deep(sb->entrypoint);
    c->env = deep(sb->env);
    c->metadata = deep(sb->metadata);
    c->limits = deep(sb->limits);
    c->extensions = deep(sb->extensions);
    c->priv = deep(sb->priv);
    c->events = deep(sb->events);
    return c;
}

void
sbx_record_free(struct sbx_record *sb)
{
    if (!sb)
        return;
    free(sb->message);
    json_decref(sb->image);
    json_decref(sb->entrypoint);
    json_decref(sb->env);
    json_decref(sb->metadata);
    json_decref(sb->limits);
    json_decref(sb->extensions);
    json_decref(sb->priv);
    json_decref(sb->events);
    free(sb);
}

void
sbx_record_set_state(struct sbx_record *sb, const char *state, const char *reason,
                     const char *message)
{
    (void)snprintf(sb->state, sizeof sb->state, "%s", state);
    (void)snprintf(sb->reason, sizeof sb->reason, "%s", reason ? reason : "");
    free(sb->message);
    sb->message = message ? sbx_xstrdup(message) : NULL;
    sb->last_transition_ms = sbx_wall_ms();
    if (!json_is_array(sb->events)) {
        json_decref(sb->events);
        sb->events = json_array();
    }
    json_t *ev = json_pack("{s:I, s:s}", "at", (json_int_t)sb->last_transition_ms, "state", state);
    if (reason && *reason)
        (void)json_object_set_new(ev, "reason", json_string(sb->reason));
    if (message && *message) /* a provider's text: kept only when it is UTF-8 */
        (void)json_object_set_new(ev, "message", json_string(message));
    (void)json_array_append_new(sb->events, ev);
    while (json_array_size(sb->events) > SBX_EVENTS_MAX)
        (void)json_array_remove(sb->events, 0);
}

const char *
sbx_record_reuse_key(const struct sbx_record *sb)
{
    const char *k = json_string_value(json_object_get(sb->extensions, SBX_REUSE_KEY_EXT));
    return k && *k ? k : NULL;
}

const char *
sbx_record_name(const struct sbx_record *sb)
{
    const char *n = json_string_value(json_object_get(sb->metadata, SBX_NAME_LABEL));
    return n && *n ? n : NULL;
}

bool
sbx_reuse_key_valid(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    static const char ok[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@=+-";
    return n >= 1 && n <= SBX_REUSE_KEY_MAX && strspn(key, ok) == n;
}

void
sbx_record_spec_hash(const struct sbx_record *sb, char out[SBX_SPEC_HASH_LEN + 1])
{
    json_t *ext = sb->extensions ? json_deep_copy(sb->extensions) : json_object();
    (void)json_object_del(ext, SBX_REUSE_KEY_EXT);
    (void)json_object_del(ext, "provider");
    /* Registry credentials are not spec (and the store keeps no copy of them). */
    json_t *image = sb->image ? json_copy(sb->image) : NULL;
    (void)json_object_del(image, "auth");
    /* The egress policy is spec: a find-or-create must never hand out a sandbox whose policy
     * differs from the one asked for (absent: no key, so hashes without one are as before). */
    json_t *policy = json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "policy");
    /* so is credentialProxy (a sandbox without a vault API is not one with it); absent when
     * off, so other hashes are as before */
    json_t *cp = json_object_get(json_object_get(sb->priv, SBX_EGRESS_PRIV), "credentialProxy");
    json_t *spec =
        json_pack("{s:s, s:o?, s:O?, s:O?, s:O?, s:O?, s:o, s:O?, s:O?}", "provider", sb->provider,
                  "image", image, "entrypoint", sb->entrypoint, "env", sb->env, "resourceLimits",
                  sb->limits, "volumes", json_object_get(sb->priv, "volumes"), "extensions", ext,
                  "networkPolicy", policy, "credentialProxy", cp);
    /* Sorted keys, no whitespace: the same spec always serialises to the same bytes. */
    char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    unsigned char h[crypto_generichash_BYTES_MIN]; /* 16 bytes; the first 8 are used */
    crypto_generichash(h, sizeof h, (const unsigned char *)(text ? text : ""),
                       text ? strlen(text) : 0, NULL, 0);
    free(text);
    json_decref(spec);
    (void)sodium_bin2hex(out, SBX_SPEC_HASH_LEN + 1, h, SBX_SPEC_HASH_LEN / 2);
}
