/*
 * providers.h - the providers compiled into this sbx, as the factory table the server is
 * started with (server.h: sbx_server_opts.factories).
 *
 * A provider lives in this folder with the clients it needs (docker_api, rest, volumes...)
 * and may use the server's provider interface (server/provider.h), the sandbox record
 * (server/sandbox.h) and the server's helpers (server/srvutil.h, server/secretsrv.h), never
 * the API, the router or the manager. docs/architecture.md: "How to add a provider".
 */
#ifndef SBX_PROVIDERS_PROVIDERS_H
#define SBX_PROVIDERS_PROVIDERS_H

#include "server/provider.h"

/* Every provider of this build, the default first (native when the runtime is built in,
 * else process); NULL-terminated by name. */
extern const struct sbx_provider_factory sbx_providers_builtin[];

#ifdef SBX_HAVE_RUNTIME
/* The native provider's factory (built when src/runtime is part of the build). */
int sbx_provider_native_new(const json_t *settings, const struct sbx_provider_env *env,
                            struct sbx_provider **out, sbx_error **err);
extern const char *const sbx_provider_native_keys[];
/* The kubernetes provider's factory (lazy: a kubeconfig, possibly from the secret store). */
int sbx_provider_kubernetes_new(const json_t *settings, const struct sbx_provider_env *env,
                                struct sbx_provider **out, sbx_error **err);
int sbx_provider_kubernetes_check(const json_t *settings, sbx_error **err);
extern const char *const sbx_provider_kubernetes_keys[];

#endif

/* The process provider's factory. */
int sbx_provider_process_new(const json_t *settings, const struct sbx_provider_env *env,
                             struct sbx_provider **out, sbx_error **err);
extern const char *const sbx_provider_process_keys[];

/* The docker provider's factory (a Docker Engine API over a unix socket: dockerd or podman). */
int sbx_provider_docker_new(const json_t *settings, const struct sbx_provider_env *env,
                            struct sbx_provider **out, sbx_error **err);
extern const char *const sbx_provider_docker_keys[];

/* The Daytona provider's factory (lazy: it needs the API key from the secret store). */
int sbx_provider_daytona_new(const json_t *settings, const struct sbx_provider_env *env,
                             struct sbx_provider **out, sbx_error **err);
int sbx_provider_daytona_check(const json_t *settings, sbx_error **err);
extern const char *const sbx_provider_daytona_keys[];

/* The kubernetes provider's factory (lazy: a kubeconfig, possibly from the secret store). */
int sbx_provider_kubernetes_new(const json_t *settings, const struct sbx_provider_env *env,
                                struct sbx_provider **out, sbx_error **err);
int sbx_provider_kubernetes_check(const json_t *settings, sbx_error **err);
extern const char *const sbx_provider_kubernetes_keys[];

#endif
