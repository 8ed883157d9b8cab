/*
 * credvault.h - where the credential values of sandboxes' Credential Vaults live: one
 * encrypted file per sandbox in a secret store of its own (<state>/credvault, libsodium
 * XChaCha20-Poly1305 with its own master.key; src/secrets), holding the JSON object
 * {"<credential name>": "<value>", ...}. The vault's metadata (names, revisions, bindings)
 * is in the sandbox's record (priv.egress.vault); values are never there, never in an API
 * answer, never logged, never inside the sandbox (the proxy that injects them runs in the
 * server: docs/network.md "Credential proxy").
 *
 * A store of its own and not the admin secret store: `sbx secret list` and the admin API
 * neither see nor change these, and a sandbox's values go with it (sbx_credvault_remove).
 */
#ifndef SBX_SERVER_CREDVAULT_H
#define SBX_SERVER_CREDVAULT_H

#include <jansson.h>

#include "common/error.h"

struct sbx_credvault;

/* dir: the store dir; nothing is opened until the first use. */
struct sbx_credvault *sbx_credvault_new(const char *dir);
void sbx_credvault_free(struct sbx_credvault *v);

/* Replace sandbox id's values with `values` (an object of strings; empty: the file goes). */
int sbx_credvault_put(struct sbx_credvault *v, const char *id, const json_t *values,
                      sbx_error **err);
/* Sandbox id's values (a new object; {} when it has none). The caller must not log it. */
int sbx_credvault_get(struct sbx_credvault *v, const char *id, json_t **values, sbx_error **err);
/* Forget sandbox id's values (none: nothing). */
void sbx_credvault_remove(struct sbx_credvault *v, const char *id);

#endif
