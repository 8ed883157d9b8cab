/*
 * credca.h - the native and docker providers' part of the credential proxy's HTTPS: each sandbox's
 * CA (in the server's credvault) and the CA bundle bound into the sandbox (credca.c).
 */
#ifndef SBX_PROVIDERS_CREDCA_H
#define SBX_PROVIDERS_CREDCA_H

#include "common/error.h"
#include "runtime/runtime.h"

struct sbx_credvault;

#define SBX_CREDCA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* Sandbox id's CA as PEM texts (sbx_egress_config.ca; vault: a struct sbx_credvault). */
int sbx_credca_get(void *vault, const char *id, char **key_pem, char **cert_pem, sbx_error **err);
/* Make id's CA if it has none, and write the bundle for the image of spec (its layers) into
 * <state_dir>/credproxy/<id>.pem: its path in bundle, or "" when the image has no bundle at
 * SBX_CREDCA_BUNDLE (then nothing is bound and HTTPS is never intercepted). */
int sbx_credca_prepare(struct sbx_credvault *vault, const char *state_dir, const char *id,
                       const struct sbx_rt_spec *spec, char bundle[4096], sbx_error **err);
/* The same with the image's bundle given (base, n bytes: the docker provider reads it through
 * the engine). */
struct sbx_credca_base {
    struct sbx_credvault *vault;
    const char *state_dir;
    const char *id;
    const char *data; /* the image's bundle */
    size_t n;
};
int sbx_credca_prepare_with(const struct sbx_credca_base *b, char bundle[4096], sbx_error **err);
#define SBX_CREDCA_BUNDLE_MAX ((size_t)8 << 20) /* the largest image bundle taken */
/* Forget id's CA and bundle (the sandbox is deleted). */
void sbx_credca_remove(struct sbx_credvault *vault, const char *state_dir, const char *id);

#endif
