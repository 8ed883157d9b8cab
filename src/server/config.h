/*
 * config.h - `sbx serve` configuration (libconfig syntax; see docs/server.md).
 */
#ifndef SBX_SERVER_CONFIG_H
#define SBX_SERVER_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include "common/error.h"

struct sbx_provider_factory;

struct sbx_server_config {
    /* The providers this sbx has (src/providers/providers.h: sbx_providers_builtin; tests
     * give their own): what `providers.*` may name. Borrowed, never NULL. */
    const struct sbx_provider_factory *factories;
    char *listen; /* "HOST:PORT" */
    char *state_dir;
    char *public_addr;   /* host[:port] put in endpoints; NULL = the request's Host */
    char *publish_addr;  /* where published sandbox ports listen; NULL = 127.0.0.1 */
    bool metrics_public; /* GET /metrics without the API key (server.metrics_auth = false) */
    char **providers;    /* supported set, in config order */
    size_t n_providers;
    char *default_provider;
    json_t *provider_settings; /* name -> object */
    int64_t max_timeout_s;
    int64_t max_sandboxes;
    int64_t max_body_bytes;
    int64_t create_workers;
    int64_t max_connections;
    char *sandbox_memory; /* resourceLimits.memory when a create gives none; NULL: none */
    int64_t max_connections_per_client; /* per source address */
    int64_t request_head_timeout_s;     /* a connection's first request head, from accept */
    int64_t wait_usable_s;  /* find-or-create: how long to wait for a transient sandbox */
    char *secrets_key_file; /* master key of the secret store; NULL = <state>/secrets/master.key */
};

/* Fill cfg with the embedded defaults for the providers of `factories` (its first one is the
 * default provider). */
void sbx_server_config_defaults(struct sbx_server_config *cfg,
                                const struct sbx_provider_factory *factories);
/* Parse config text over cfg (which holds defaults). Unknown keys, wrong types, duplicate
 * providers fail with a message naming the key. */
int sbx_server_config_parse(struct sbx_server_config *cfg, const char *text, sbx_error **err);
int sbx_server_config_load(struct sbx_server_config *cfg, const char *path, sbx_error **err);
void sbx_server_config_dispose(struct sbx_server_config *cfg);
/* Every key a config file may hold, dotted ("server.listen", "providers.native.execd", ...):
 * a NULL-terminated array the caller frees (each string, then the array). */
char **sbx_server_config_keys(const struct sbx_provider_factory *factories);

#endif
