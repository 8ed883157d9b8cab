/*
 * secrets.h - the secret store: named values encrypted at rest (libsodium XChaCha20-Poly1305).
 *
 * Layout under the store dir (0700):
 *   master.key         32 random bytes, 0600 (or a key file named by the caller)
 *   <NAME>.secret      "SBXS" | u32 header length | header JSON | 24-byte nonce | ciphertext
 * The header ({"name","createdAt","updatedAt"}) is authenticated as associated data, so a
 * file renamed to another name, or with edited dates, does not decrypt. Every write is
 * atomic (temp file, fsync, rename); names are unique (one file per name).
 *
 * Values are never logged and never put into error messages. Decrypted values live in
 * sodium_malloc'd memory (guarded, locked, wiped on free): free them with
 * sbx_secret_value_free.
 */
#ifndef SBX_SECRETS_H
#define SBX_SECRETS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SBX_SECRET_NAME_MAX  128
#define SBX_SECRET_VALUE_MAX (64u << 10)

struct sbx_secret_store;

struct sbx_secret_info {
    char name[SBX_SECRET_NAME_MAX + 1];
    int64_t created_ms; /* Unix ms */
    int64_t updated_ms;
};

/* Open (creating if needed) the store in `dir`. `key_file` NULL: <dir>/master.key, created
 * with 32 random bytes on first use. A key file of the wrong size or readable by others is
 * refused. */
int sbx_secret_store_open(struct sbx_secret_store **out, const char *dir, const char *key_file,
                          sbx_error **err);
void sbx_secret_store_close(struct sbx_secret_store *s);

/* Names: [A-Za-z_][A-Za-z0-9_.-]*, at most SBX_SECRET_NAME_MAX characters. */
int sbx_secret_name_valid(const char *name);

/* Create or replace NAME. The value may hold any bytes (up to SBX_SECRET_VALUE_MAX). */
int sbx_secret_set(struct sbx_secret_store *s, const char *name, const void *value, size_t len,
                   sbx_error **err);
/* Decrypt NAME into *value (NUL-terminated after len bytes; free with sbx_secret_value_free).
 * SBX_ENOTFOUND when it is not set. */
int sbx_secret_get(struct sbx_secret_store *s, const char *name, char **value, size_t *len,
                   sbx_error **err);
void sbx_secret_value_free(char *value);
/* Remove NAME; SBX_ENOTFOUND when it is not set. */
int sbx_secret_remove(struct sbx_secret_store *s, const char *name, sbx_error **err);
/* Names and dates, sorted by name (never values). *out: caller frees (free()). */
int sbx_secret_list(struct sbx_secret_store *s, struct sbx_secret_info **out, size_t *n,
                    sbx_error **err);

#endif
