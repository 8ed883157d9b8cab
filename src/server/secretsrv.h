/*
 * secretsrv.h - the server's view of the secret store (src/secrets): opened on first use,
 * shared by the admin API and the providers' lazy credential lookups.
 *
 * Nothing is read at startup: the store (and its master key) is opened by the first call
 * that needs it. Every lookup reads the store's file again, so a value set later - by
 * `sbx secret set` writing the file, or by the admin API - is seen without a restart.
 * Values are returned in sodium_malloc'd memory (sbx_secret_value_free) and never logged;
 * error messages name secrets, never values.
 */
#ifndef SBX_SERVER_SECRETSRV_H
#define SBX_SERVER_SECRETSRV_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "secrets/secrets.h"

struct sbx_srv_secrets;

/* dir: the store dir (<state>/secrets); key_file: NULL = <dir>/master.key. Opens nothing. */
struct sbx_srv_secrets *sbx_srv_secrets_new(const char *dir, const char *key_file);
void sbx_srv_secrets_free(struct sbx_srv_secrets *s);

/* The value of `name`. Missing and required: SBX_EUNAVAIL with a message naming the secret
 * and the command that sets it. Missing and optional: 0 with *value NULL. */
int sbx_srv_secret_lookup(struct sbx_srv_secrets *s, const char *name, bool required, char **value,
                          size_t *len, sbx_error **err);

/* Admin operations (the store's own semantics; see secrets.h). */
int sbx_srv_secret_set(struct sbx_srv_secrets *s, const char *name, const void *value, size_t len,
                       sbx_error **err);
int sbx_srv_secret_remove(struct sbx_srv_secrets *s, const char *name, sbx_error **err);
int sbx_srv_secret_list(struct sbx_srv_secrets *s, struct sbx_secret_info **out, size_t *n,
                        sbx_error **err);

#endif
