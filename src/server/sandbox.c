/*
 * sandbox.c - sandbox records.
 */
#include "server/sandbox.h"

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
}
