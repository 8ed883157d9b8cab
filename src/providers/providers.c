/*
 * providers.c - the factory table of this build: each provider with what it declares it can
 * do (server/provider.h: enum sbx_provider_cap). The registry checks each declaration against
 * the provider's ops when it builds one.
 */
#include "providers/providers.h"

const struct sbx_provider_factory sbx_providers_builtin[] = {
#ifdef SBX_HAVE_RUNTIME
    {.name = "native",
     .caps = SBX_CAP_PAUSE | SBX_CAP_SNAPSHOT | SBX_CAP_VOLUMES | SBX_CAP_NETWORK_POLICY |
             SBX_CAP_CREDENTIAL_PROXY | SBX_CAP_POOLS,
     .create = sbx_provider_native_new,
     .keys = sbx_provider_native_keys},
#endif
    /* no isolation: nothing to enforce a network policy or mount volumes with */
    {.name = "process",
     .caps = SBX_CAP_PAUSE | SBX_CAP_POOLS,
     .create = sbx_provider_process_new,
     .keys = sbx_provider_process_keys},
    /* pools: a warm container is one whose execd answered /ping (docker_start) */
    {.name = "docker",
     .caps = SBX_CAP_PAUSE | SBX_CAP_SNAPSHOT | SBX_CAP_NETWORK_POLICY | SBX_CAP_POOLS |
             SBX_CAP_CREDENTIAL_PROXY,
     .create = sbx_provider_docker_new,
     .keys = sbx_provider_docker_keys},
    /* Daytona's sandboxes are linux/amd64 whatever this machine is */
    {.name = "daytona",
     .arch = "amd64",
     .create = sbx_provider_daytona_new,
     .keys = sbx_provider_daytona_keys,
     .check = sbx_provider_daytona_check,
     .lazy = true},
    /* a pod per sandbox; resourceRequests go to the scheduler; pvc volumes; warm pods */
    {.name = "kubernetes",
     .caps = SBX_CAP_RESOURCE_REQUESTS | SBX_CAP_VOLUMES | SBX_CAP_POOLS,
     .create = sbx_provider_kubernetes_new,
     .keys = sbx_provider_kubernetes_keys,
     .check = sbx_provider_kubernetes_check,
     .lazy = true},
    {0},
};
