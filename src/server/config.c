/*
 * config.c - the `sbx serve` config file.
 *
 * Format: libconfig (Debian libconfig-dev): typed values, groups and lists, comments, and a
 * maintained C parser - unlike INI it can say "a list of provider names" without inventing
 * a syntax. Every key is checked against a table here, so a typo stops the server at startup
 * instead of being silently ignored.
 */
#include "server/config.h"

#include <arpa/inet.h>
#include <libconfig.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/provider.h"

void
sbx_server_config_defaults(struct sbx_server_config *cfg,
                           const struct sbx_provider_factory *factories)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->factories = factories;
    cfg->listen = sbx_xstrdup("127.0.0.1:8080");
    cfg->state_dir = sbx_xstrdup("/var/lib/sbx");
    /* The table's first provider: isolated sandboxes (native) when the runtime is built in;
     * the unisolated `process` provider only when asked for, or when there is nothing else
     * (src/providers/providers.c orders the table so). */
    cfg->providers = sbx_xcalloc(1, sizeof(char *));
    cfg->providers[0] = sbx_xstrdup(factories[0].name);
    cfg->n_providers = 1;
    cfg->default_provider = sbx_xstrdup(factories[0].name);
    cfg->provider_settings = json_object();
    cfg->max_timeout_s = 86400;
    cfg->max_sandboxes = 1000;
    cfg->max_body_bytes = 1 << 20;
    cfg->create_workers = 8;
    cfg->max_connections = 4096;
    /* A sandbox without a memory limit could take the host's: every create gets one. 2 GiB is
     * what the OpenSandbox SDKs ask for by default. */
    cfg->sandbox_memory = sbx_xstrdup("2Gi");
    cfg->max_connections_per_client = 512;
    cfg->request_head_timeout_s = 10;
    cfg->wait_usable_s = 120;
}

void
sbx_server_config_dispose(struct sbx_server_config *cfg)
{
    free(cfg->listen);
    free(cfg->state_dir);
    free(cfg->public_addr);
    free(cfg->publish_addr);
    for (size_t i = 0; i < cfg->n_providers; i++)
        free(cfg->providers[i]);
    free(cfg->providers);
    free(cfg->default_provider);
    free(cfg->secrets_key_file);
    free(cfg->sandbox_memory);
    json_decref(cfg->provider_settings);
    memset(cfg, 0, sizeof *cfg);
}

static bool
in_list(const char *name, const char *const *keys)
{
    for (; keys && *keys; keys++) {
        if (strcmp(*keys, name) == 0)
            return true;
    }
    return false;
}

/* Every member of group must be in keys. */
static int
check_keys(const config_setting_t *group, const char *where, const char *const *keys,
           sbx_error **err)
{
    for (int i = 0; i < config_setting_length(group); i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        if (!name || !in_list(name, keys))
            return sbx_error_set(err, SBX_EINVAL, 0, "unknown key `%s%s%s` (line %d)", where,
                                 *where ? "." : "", name ? name : "?",
                                 config_setting_source_line(s));
    }
    return 0;
}

static int
get_str(const config_setting_t *g, const char *key, const char *where, char **dst, sbx_error **err)
{
    const config_setting_t *s = config_setting_get_member(g, key);
    if (!s)
        return 0;
    const char *v = config_setting_get_string(s);
    if (!v || !*v)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s.%s` must be a non-empty string", where, key);
    free(*dst);
    *dst = sbx_xstrdup(v);
    return 0;
}

static int
get_int(const config_setting_t *g, const char *key, int64_t min, int64_t *dst, sbx_error **err)
{
    const config_setting_t *s = config_setting_get_member(g, key);
    if (!s)
        return 0;
    int type = config_setting_type(s);
    if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
        return sbx_error_set(err, SBX_EINVAL, 0, "`limits.%s` must be an integer", key);
    long long v = config_setting_get_int64(s);
    if (v < min)
        return sbx_error_set(err, SBX_EINVAL, 0, "`limits.%s` must be >= %lld", key,
                             (long long)min);
    *dst = v;
    return 0;
}

/* The keys of each group. A key added here must be added to packaging/sbx.conf too (the
 * installed /etc/sbx/sbx.conf and sbx.conf(5)): the test deb/conffile fails until it is. */
static const char *const root_keys[] = {"server", "providers", "limits", "secrets", NULL};
static const char *const server_keys[] = {"listen",          "state_dir",    "public_addr",
                                          "publish_address", "metrics_auth", NULL};
static const char *const limits_keys[] = {"max_timeout_seconds",
                                          "max_sandboxes",
                                          "max_body_bytes",
                                          "create_workers",
                                          "max_connections",
                                          "max_connections_per_client",
                                          "request_head_timeout_seconds",
                                          "sandbox_memory",
                                          "wait_usable_seconds",
                                          NULL};
static const char *const providers_keys[] = {"supported", "default", NULL};
static const char *const secrets_keys[] = {"key_file", NULL};

static void
push_keys(char ***v, size_t *n, const char *prefix, const char *const *keys)
{
    for (; keys && *keys; keys++) {
        *v = sbx_xrealloc(*v, (*n + 2) * sizeof **v);
        (*v)[(*n)++] = sbx_xasprintf("%s.%s", prefix, *keys);
        (*v)[*n] = NULL;
    }
}

char **
sbx_server_config_keys(const struct sbx_provider_factory *factories)
{
    char **v = sbx_xcalloc(1, sizeof *v);
    size_t n = 0;
    push_keys(&v, &n, "server", server_keys);
    push_keys(&v, &n, "providers", providers_keys);
    for (const struct sbx_provider_factory *f = factories; f->name; f++) {
        sbx_autofree char *prefix = sbx_xasprintf("providers.%s", f->name);
        push_keys(&v, &n, prefix, f->keys);
    }
    push_keys(&v, &n, "limits", limits_keys);
    push_keys(&v, &n, "secrets", secrets_keys);
    return v;
}

static int
parse_server(struct sbx_server_config *cfg, const config_setting_t *g, sbx_error **err)
{
    const char *const *keys = server_keys;
    const config_setting_t *ma = config_setting_get_member(g, "metrics_auth");
    if (ma && config_setting_type(ma) != CONFIG_TYPE_BOOL)
        return sbx_error_set(err, SBX_EINVAL, 0, "`server.metrics_auth` must be true or false");
    cfg->metrics_public = ma && !config_setting_get_bool(ma);
    if (check_keys(g, "server", keys, err) < 0 ||
        get_str(g, "listen", "server", &cfg->listen, err) < 0 ||
        get_str(g, "state_dir", "server", &cfg->state_dir, err) < 0 ||
        get_str(g, "public_addr", "server", &cfg->public_addr, err) < 0 ||
        get_str(g, "publish_address", "server", &cfg->publish_addr, err) < 0)
        return -SBX_EINVAL;
    unsigned char ip[16];
    if (cfg->publish_addr && inet_pton(AF_INET, cfg->publish_addr, ip) != 1 &&
        inet_pton(AF_INET6, cfg->publish_addr, ip) != 1)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`server.publish_address` must be an IPv4 or IPv6 address, not `%s`",
                             cfg->publish_addr);
    return 0;
}

static int
parse_limits(struct sbx_server_config *cfg, const config_setting_t *g, sbx_error **err)
{
    const char *const *keys = limits_keys;
    if (check_keys(g, "limits", keys, err) < 0 ||
        get_int(g, "wait_usable_seconds", 1, &cfg->wait_usable_s, err) < 0 ||
        get_int(g, "max_timeout_seconds", 60, &cfg->max_timeout_s, err) < 0 ||
        get_int(g, "max_sandboxes", 1, &cfg->max_sandboxes, err) < 0 ||
        get_int(g, "max_body_bytes", 1024, &cfg->max_body_bytes, err) < 0 ||
        get_int(g, "create_workers", 1, &cfg->create_workers, err) < 0 ||
        get_int(g, "max_connections", 16, &cfg->max_connections, err) < 0 ||
        get_int(g, "max_connections_per_client", 1, &cfg->max_connections_per_client, err) < 0 ||
        get_int(g, "request_head_timeout_seconds", 1, &cfg->request_head_timeout_s, err) < 0 ||
        get_str(g, "sandbox_memory", "limits", &cfg->sandbox_memory, err) < 0)
        return -SBX_EINVAL;
    uint64_t bytes = 0;
    if (cfg->sandbox_memory && sbx_parse_size(cfg->sandbox_memory, &bytes, NULL) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "limits.sandbox_memory must be a size such as \"2Gi\" (\"0\": none)");
    return 0;
}

static int
parse_supported(struct sbx_server_config *cfg, const config_setting_t *list, sbx_error **err)
{
    if (!config_setting_is_aggregate(list) || config_setting_length(list) < 1)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "`providers.supported` must be a non-empty list of names");
    size_t n = (size_t)config_setting_length(list);
    char **names = sbx_xcalloc(n, sizeof *names);
    for (size_t i = 0; i < n; i++) {
        const char *v = config_setting_get_string_elem(list, (int)i);
        names[i] = sbx_xstrdup(v ? v : "");
    }
    for (size_t i = 0; i < cfg->n_providers; i++)
        free(cfg->providers[i]);
    free(cfg->providers);
    cfg->providers = names;
    cfg->n_providers = n;
    for (size_t i = 0; i < n; i++) {
        if (!*names[i])
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "`providers.supported[%zu]` must be a provider name", i);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0)
                return sbx_error_set(err, SBX_EINVAL, 0,
                                     "provider `%s` is listed twice in `providers.supported`",
                                     names[i]);
        }
    }
    return 0;
}

static json_t *setting_to_json(const config_setting_t *s);

/* An array or list of scalars (e.g. a list of paths); NULL if an element is not a scalar. */
static json_t *
list_to_json(const config_setting_t *s)
{
    json_t *a = json_array();
    for (int i = 0; i < config_setting_length(s); i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        json_t *v = config_setting_is_scalar(e) ? setting_to_json(e) : NULL;
        if (!v) {
            json_decref(a);
            return NULL;
        }
        (void)json_array_append_new(a, v);
    }
    return a;
}

static json_t *
setting_to_json(const config_setting_t *s)
{
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_ARRAY:
    case CONFIG_TYPE_LIST:
        return list_to_json(s);
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        return json_integer(config_setting_get_int64(s));
    case CONFIG_TYPE_FLOAT:
        return json_real(config_setting_get_float(s));
    case CONFIG_TYPE_BOOL:
        return json_boolean(config_setting_get_bool(s));
    case CONFIG_TYPE_STRING:
        return json_string(config_setting_get_string(s));
    default:
        return NULL;
    }
}

static int
parse_provider_group(struct sbx_server_config *cfg, const config_setting_t *g, sbx_error **err)
{
    const char *name = config_setting_name(g);
    const struct sbx_provider_factory *f = sbx_provider_factory_in(cfg->factories, name);
    if (!f || !config_setting_is_group(g))
        return sbx_error_set(err, SBX_EINVAL, 0, "unknown key `providers.%s` (line %d)", name,
                             config_setting_source_line(g));
    sbx_autofree char *where = sbx_xasprintf("providers.%s", name);
    if (check_keys(g, where, f->keys, err) < 0)
        return -SBX_EINVAL;
    json_t *obj = json_object();
    for (int i = 0; i < config_setting_length(g); i++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        json_t *v = setting_to_json(s);
        if (!v) {
            json_decref(obj);
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "`%s.%s` must be a scalar or a list of scalars", where,
                                 config_setting_name(s));
        }
        (void)json_object_set_new(obj, config_setting_name(s), v);
    }
    (void)json_object_set_new(cfg->provider_settings, name, obj);
    return 0;
}

static int
parse_providers(struct sbx_server_config *cfg, const config_setting_t *g, sbx_error **err)
{
    for (int i = 0; i < config_setting_length(g); i++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *name = config_setting_name(s);
        int r = 0;
        if (strcmp(name, "supported") == 0)
            r = parse_supported(cfg, s, err);
        else if (strcmp(name, "default") == 0)
            r = get_str(g, "default", "providers", &cfg->default_provider, err);
        else
            r = parse_provider_group(cfg, s, err);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
parse_secrets(struct sbx_server_config *cfg, const config_setting_t *g, sbx_error **err)
{
    if (check_keys(g, "secrets", secrets_keys, err) < 0 ||
        get_str(g, "key_file", "secrets", &cfg->secrets_key_file, err) < 0)
        return -SBX_EINVAL;
    return 0;
}

static int
parse_root(struct sbx_server_config *cfg, const config_setting_t *root, sbx_error **err)
{
    if (check_keys(root, "", root_keys, err) < 0)
        return -SBX_EINVAL;
    const config_setting_t *g = NULL;
    if ((g = config_setting_get_member(root, "server")) && parse_server(cfg, g, err) < 0)
        return -SBX_EINVAL;
    if ((g = config_setting_get_member(root, "limits")) && parse_limits(cfg, g, err) < 0)
        return -SBX_EINVAL;
    if ((g = config_setting_get_member(root, "providers")) && parse_providers(cfg, g, err) < 0)
        return -SBX_EINVAL;
    if ((g = config_setting_get_member(root, "secrets")) && parse_secrets(cfg, g, err) < 0)
        return -SBX_EINVAL;
    return 0;
}

int
sbx_server_config_parse(struct sbx_server_config *cfg, const char *text, sbx_error **err)
{
    config_t c;
    config_init(&c);
    int r = 0;
    if (config_read_string(&c, text) != CONFIG_TRUE)
        r = sbx_error_set(err, SBX_EINVAL, 0, "line %d: %s", config_error_line(&c),
                          config_error_text(&c));
    else
        r = parse_root(cfg, config_root_setting(&c), err);
    config_destroy(&c);
    return r;
}

int
sbx_server_config_load(struct sbx_server_config *cfg, const char *path, sbx_error **err)
{
    sbx_autofree char *text = NULL;
    if (sbx_read_file(path, 1 << 20, &text, NULL, err) < 0)
        return sbx_error_wrap(err, "config `%s`", path);
    if (sbx_server_config_parse(cfg, text, err) < 0)
        return sbx_error_wrap(err, "config `%s`", path);
    return 0;
}
