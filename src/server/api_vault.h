/*
 * api_vault.h - the Credential Vault routes of egress-api.yaml (`/credential-vault...`),
 * served with `/policy` at /sandboxes/{id}/proxy/18080/ (api_egress.c) for a sandbox created
 * with `credentialProxy: {enabled: true}`. See docs/network.md "Credential proxy".
 */
#ifndef SBX_SERVER_API_VAULT_H
#define SBX_SERVER_API_VAULT_H

#include <jansson.h>
#include <stdbool.h>

#include "server/httpd.h"

#define SBX_VAULT_PATH         "/credential-vault"
#define SBX_VAULT_CREDS_MAX    256
#define SBX_VAULT_BINDINGS_MAX 1024
#define SBX_VAULT_LIST_MAX     64 /* hosts, ports, methods, paths, headers of one binding */
#define SBX_VAULT_VALUE_MAX    8192
#define SBX_VAULT_NAME_MAX     128

/* True when rest (the path after /proxy/18080) is one of the vault's routes. */
bool sbx_api_vault_path(const char *rest);
/* Answer a vault route of the (authenticated) request. */
void sbx_api_vault(struct sbx_req *r, struct sbx_reply *out);

/* The schema checks of the request bodies (exported for the unit tests): a Credential into
 * *name and *value (borrowed from c); a CredentialBinding into its normalized form (the spec's
 * defaults filled in, hosts normalized) or NULL with a message in msg. */
int sbx_vault_credential_check(const json_t *c, const char **name, const char **value, char *msg,
                               size_t msg_len);
json_t *sbx_vault_binding_check(const json_t *b, char *msg, size_t msg_len);

#endif
