/*
 * conf_probe.c - the server's config keys and values, for test_conffile.py:
 *   conf_probe keys         every key the config file may hold, one a line
 *   conf_probe values FILE  the server and limits values after FILE ("-": defaults only),
 *                           one `key=value` a line; exit 1 with the parser's message
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"
#include "server/config.h"

static void
print_str(const char *key, const char *v)
{
    if (v)
        printf("%s=%s\n", key, v);
}

static void
print_values(const struct sbx_server_config *c)
{
    print_str("server.listen", c->listen);
    print_str("server.state_dir", c->state_dir);
    print_str("server.public_addr", c->public_addr);
    print_str("server.publish_address", c->publish_addr);
    printf("server.metrics_auth=%s\n", c->metrics_public ? "false" : "true");
    for (size_t i = 0; i < c->n_providers; i++)
        printf("providers.supported=%s\n", c->providers[i]);
    print_str("providers.default", c->default_provider);
    printf("limits.max_timeout_seconds=%lld\n", (long long)c->max_timeout_s);
    printf("limits.max_sandboxes=%lld\n", (long long)c->max_sandboxes);
    printf("limits.max_body_bytes=%lld\n", (long long)c->max_body_bytes);
    printf("limits.create_workers=%lld\n", (long long)c->create_workers);
    printf("limits.max_connections=%lld\n", (long long)c->max_connections);
    printf("limits.max_connections_per_client=%lld\n", (long long)c->max_connections_per_client);
    printf("limits.request_head_timeout_seconds=%lld\n", (long long)c->request_head_timeout_s);
    print_str("limits.sandbox_memory", c->sandbox_memory);
    printf("limits.wait_usable_seconds=%lld\n", (long long)c->wait_usable_s);
    print_str("secrets.key_file", c->secrets_key_file);
}

int
main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "keys") == 0) {
        char **keys = sbx_server_config_keys(sbx_providers_builtin);
        for (size_t i = 0; keys[i]; i++) {
            puts(keys[i]);
            free(keys[i]);
        }
        free((void *)keys);
        return 0;
    }
    if (argc != 3 || strcmp(argv[1], "values") != 0) {
        fputs("usage: conf_probe keys | values FILE|-\n", stderr);
        return 2;
    }
    struct sbx_server_config cfg;
    sbx_server_config_defaults(&cfg, sbx_providers_builtin);
    sbx_error *err = NULL;
    if (strcmp(argv[2], "-") != 0 && sbx_server_config_load(&cfg, argv[2], &err) < 0) {
        fprintf(stderr, "conf_probe: %s\n", sbx_error_msg(err));
        sbx_error_clear(&err);
        sbx_server_config_dispose(&cfg);
        return 1;
    }
    print_values(&cfg);
    sbx_server_config_dispose(&cfg);
    return 0;
}
