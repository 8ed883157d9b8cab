/*
 * credvault.c - the encrypted values of sandboxes' Credential Vaults (see credvault.h).
 *
 * Security: values go to disk only through the secret store (encrypted, authenticated,
 * written atomically, 0600 under a 0700 dir); the decrypted form lives in sodium memory while
 * it is parsed and then only in the caller's JSON object (which must never be logged or sent).
 * Error messages name the sandbox, never a value.
 */
#include "server/credvault.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "server/secretsrv.h"

struct sbx_credvault {
    struct sbx_srv_secrets *store;
};

struct sbx_credvault *
sbx_credvault_new(const char *dir)
{
    struct sbx_credvault *v = sbx_xcalloc(1, sizeof *v);
    v->store = sbx_srv_secrets_new(dir, NULL);
    return v;
}

void
sbx_credvault_free(struct sbx_credvault *v)
{
    if (!v)
        return;
    sbx_srv_secrets_free(v->store);
    free(v);
}

/* The secret's name: the sandbox id is a UUID (checked by the callers' routes), which the
 * store's name syntax takes as it is. */
static void
name_of(const char *id, char out[64])
{
    (void)snprintf(out, 64, "v.%.48s", id);
}

int
sbx_credvault_put(struct sbx_credvault *v, const char *id, const json_t *values, sbx_error **err)
{
    char name[64];
    name_of(id, name);
    if (json_object_size(values) == 0) {
        sbx_autoerror sbx_error *e = NULL;
        (void)sbx_srv_secret_remove(v->store, name, &e);
        return 0;
    }
    char *s = json_dumps(values, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return sbx_error_set(err, SBX_ENOMEM, 0, "credential vault of `%s`", id);
    size_t n = strlen(s);
    int r = sbx_srv_secret_set(v->store, name, s, n, err);
    sodium_memzero(s, n);
    free(s);
    return r;
}

int
sbx_credvault_get(struct sbx_credvault *v, const char *id, json_t **values, sbx_error **err)
{
    char name[64];
    name_of(id, name);
    *values = NULL;
    char *s = NULL;
    size_t n = 0;
    int r = sbx_srv_secret_lookup(v->store, name, false, &s, &n, err);
    if (r < 0)
        return r;
    if (!s) {
        *values = json_object();
        return 0;
    }
    json_t *j = json_loadb(s, n, 0, NULL);
    sbx_secret_value_free(s);
    if (!json_is_object(j)) {
        json_decref(j);
        return sbx_error_set(err, SBX_EGENERIC, 0, "credential vault of `%s` is unreadable", id);
    }
    *values = j;
    return 0;
}

void
sbx_credvault_remove(struct sbx_credvault *v, const char *id)
{
    if (!v)
        return;
    char name[64];
    name_of(id, name);
    sbx_autoerror sbx_error *e = NULL;
    (void)sbx_srv_secret_remove(v->store, name, &e);
}
