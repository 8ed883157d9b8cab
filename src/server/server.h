/*
 * server.h - `sbx serve`: the control plane (lifecycle API, provider registry, router, store).
 */
#ifndef SBX_SERVER_SERVER_H
#define SBX_SERVER_SERVER_H

#include "common/error.h"

struct sbx_provider_factory;

struct sbx_server_opts {
    const char *config_path; /* NULL = embedded defaults */
    const char *listen;      /* overrides the config when not NULL */
    const char *state_dir;   /* overrides the config when not NULL */
    /* The providers it may run (src/providers/providers.h: sbx_providers_builtin). */
    const struct sbx_provider_factory *factories;
};

/* Run the server until SIGTERM or SIGINT. */
int sbx_server_run(const struct sbx_server_opts *opts, sbx_error **err);

/* The API key file of a state dir. */
#define SBX_SERVER_KEY_FILE "api-key"

/* Read the API key a server on this host generated in state_dir (for the CLI). *key is
 * malloc'd, without the trailing newline. */
int sbx_server_read_api_key(const char *state_dir, char **key, sbx_error **err);
/* Read the key, or generate one (256 random bits, hex) into state_dir/api-key (0600). */
int sbx_server_ensure_api_key(const char *state_dir, char **key, sbx_error **err);

#endif
