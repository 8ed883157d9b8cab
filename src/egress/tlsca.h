/*
 * tlsca.h - the credential proxy's certificates (docs/network.md "Credential proxy", HTTPS):
 * each sandbox with a Credential Proxy trusts a CA of its own (its certificate is in the
 * sandbox's CA bundle, its key only in the server's encrypted credvault); the proxy terminates
 * a matched HTTPS connection with a leaf for the SNI name that this CA signs.
 */
#ifndef SBX_EGRESS_TLSCA_H
#define SBX_EGRESS_TLSCA_H

#include <openssl/ssl.h>

#include "common/error.h"

/* A new CA (EC P-256, 10 years, CA:TRUE pathlen 0, CN=cn): its key and certificate as PEM
 * (the caller frees both; the key is secret). */
int sbx_tlsca_new(const char *cn, char **key_pem, char **cert_pem, sbx_error **err);
/* A server context presenting a fresh leaf for name (SAN DNS:name, 7 days) signed by the CA
 * of key_pem/cert_pem, the CA in its chain; TLS 1.2 at least. */
int sbx_tlsca_leaf_ctx(const char *key_pem, const char *cert_pem, const char *name, SSL_CTX **out,
                       sbx_error **err);

#endif
