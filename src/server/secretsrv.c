/*
 * secretsrv.c - the server's lazily opened secret store (see secretsrv.h).
 *
 * Security: the store is opened on the first call, never at startup, so a server with no
 * secret configured reads no key material at all. Lookups re-read the store's file on every
 * call (no value is cached here); the providers decide how long a decrypted value lives.
 * Messages name the secret and the command that sets it - never a value.
 */
#include "server/secretsrv.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/xalloc.h"

struct sbx_srv_secrets {
    pthread_mutex_t mu; /* guards store; the store's calls run under it too */
    char *dir;
    char *key_file;
    struct sbx_secret_store *store;
};

struct sbx_srv_secrets *
sbx_srv_secrets_new(const char *dir, const char *key_file)
{
    struct sbx_srv_secrets *s = sbx_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->dir = sbx_xstrdup(dir);
    s->key_file = key_file ? sbx_xstrdup(key_file) : NULL;
    return s;
}

void
sbx_srv_secrets_free(struct sbx_srv_secrets *s)
{
    if (!s)
        return;
    sbx_secret_store_close(s->store);
    pthread_mutex_destroy(&s->mu);
    free(s->dir);
    free(s->key_file);
    free(s);
}

/* Open the store on first use (called with mu held). */
static int
open_locked(struct sbx_srv_secrets *s, sbx_error **err)
{
    if (s->store)
        return 0;
    return sbx_secret_store_open(&s->store, s->dir, s->key_file, err);
}

int
sbx_srv_secret_lookup(struct sbx_srv_secrets *s, const char *name, bool required, char **value,
                      size_t *len, sbx_error **err)
{
    *value = NULL;
    if (len)
        *len = 0;
    sbx_error *gerr = NULL;
    pthread_mutex_lock(&s->mu);
    int r = open_locked(s, &gerr);
    if (r >= 0)
        r = sbx_secret_get(s->store, name, value, len, &gerr);
    pthread_mutex_unlock(&s->mu);
    if (r >= 0) {
        sbx_error_clear(&gerr);
        return 0;
    }
    if (sbx_error_code(gerr) == SBX_ENOTFOUND) {
        sbx_error_clear(&gerr);
        if (!required)
            return 0;
        return sbx_error_set(err, SBX_EUNAVAIL, 0,
                             "the secret `%s` is not set: run `sbx secret set %s` (or PUT "
                             "/v1/admin/secrets/%s); no restart is needed",
                             name, name, name);
    }
    sbx_error_move(err, &gerr);
    return r;
}

int
sbx_srv_secret_set(struct sbx_srv_secrets *s, const char *name, const void *value, size_t len,
                   sbx_error **err)
{
    pthread_mutex_lock(&s->mu);
    int r = open_locked(s, err);
    if (r >= 0)
        r = sbx_secret_set(s->store, name, value, len, err);
    pthread_mutex_unlock(&s->mu);
    return r;
}

int
sbx_srv_secret_remove(struct sbx_srv_secrets *s, const char *name, sbx_error **err)
{
    pthread_mutex_lock(&s->mu);
    int r = open_locked(s, err);
    if (r >= 0)
        r = sbx_secret_remove(s->store, name, err);
    pthread_mutex_unlock(&s->mu);
    return r;
}

int
sbx_srv_secret_list(struct sbx_srv_secrets *s, struct sbx_secret_info **out, size_t *n,
                    sbx_error **err)
{
    pthread_mutex_lock(&s->mu);
    int r = open_locked(s, err);
    if (r >= 0)
        r = sbx_secret_list(s->store, out, n, err);
    pthread_mutex_unlock(&s->mu);
    return r;
}
