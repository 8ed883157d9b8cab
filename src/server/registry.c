/*
 * registry.c - provider factories keyed by name, and the set the config enables.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "server/config.h"
#include "server/provider.h"

const struct sbx_provider_factory sbx_provider_factories[] = {
#ifdef SBX_HAVE_RUNTIME
    {.name = "native", .create = sbx_provider_native_new, .keys = sbx_provider_native_keys},
#endif
    {.name = "process", .create = sbx_provider_process_new, .keys = sbx_provider_process_keys},
    {.name = "docker", .create = sbx_provider_docker_new, .keys = sbx_provider_docker_keys},
    {0},
};

struct sbx_registry {
    struct sbx_provider **items;
    size_t n;
    struct sbx_provider *def;
    char *names;
};

const struct sbx_provider_factory *
sbx_provider_factory_find(const char *name)
{
    for (const struct sbx_provider_factory *f = sbx_provider_factories; name && f->name; f++) {
        if (strcmp(f->name, name) == 0)
            return f;
    }
    return NULL;
}

static char *
known_names(void)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 4096);
    for (const struct sbx_provider_factory *f = sbx_provider_factories; f->name; f++)
        (void)sbx_buf_printf(&b, NULL, "%s%s", b.len ? ", " : "", f->name);
    return b.data ? b.data : sbx_xstrdup("");
}

static int
add_one(struct sbx_registry *reg, const struct sbx_server_config *cfg, const char *name,
        const struct sbx_provider_env *env, sbx_error **err)
{
    for (size_t i = 0; i < reg->n; i++) {
        if (strcmp(reg->items[i]->name, name) == 0)
            return sbx_error_set(err, SBX_EINVAL, 0, "provider `%s` is configured twice", name);
    }
    const struct sbx_provider_factory *f = sbx_provider_factory_find(name);
    if (!f) {
        char *known = known_names();
        int r = sbx_error_set(err, SBX_EINVAL, 0, "unknown provider `%s` (this sbx has: %s)", name,
                              known);
        free(known);
        return r;
    }
    json_t *settings = json_object_get(cfg->provider_settings, name);
    json_t *empty = json_object();
    struct sbx_provider *p = NULL;
    int r = f->create(settings ? settings : empty, env, &p, err);
    json_decref(empty);
    if (r < 0)
        return sbx_error_wrap(err, "provider `%s`", name);
    (void)snprintf(p->name, sizeof p->name, "%s", name);
    reg->items[reg->n++] = p;
    return 0;
}

int
sbx_registry_build(const struct sbx_server_config *cfg, const struct sbx_provider_env *env,
                   struct sbx_registry **out, sbx_error **err)
{
    struct sbx_registry *reg = sbx_xcalloc(1, sizeof *reg);
    reg->items = sbx_xcalloc(cfg->n_providers + 1, sizeof(struct sbx_provider *));
    struct sbx_buf names;
    sbx_buf_init(&names, 4096);
    for (size_t i = 0; i < cfg->n_providers; i++) {
        if (add_one(reg, cfg, cfg->providers[i], env, err) < 0) {
            sbx_buf_dispose(&names);
            sbx_registry_free(reg);
            return -SBX_EINVAL;
        }
        (void)sbx_buf_printf(&names, NULL, "%s%s", i ? ", " : "", cfg->providers[i]);
    }
    reg->names = names.data ? names.data : sbx_xstrdup("");
    reg->def = sbx_registry_get(reg, cfg->default_provider);
    if (!reg->def) {
        int r = sbx_error_set(err, SBX_EINVAL, 0,
                              "default provider `%s` is not in the supported set (%s)",
                              cfg->default_provider, reg->names);
        sbx_registry_free(reg);
        return r;
    }
    *out = reg;
    return 0;
}

void
sbx_registry_free(struct sbx_registry *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n; i++)
        reg->items[i]->ops->free(reg->items[i]);
    free(reg->items);
    free(reg->names);
    free(reg);
}

struct sbx_provider *
sbx_registry_get(struct sbx_registry *reg, const char *name)
{
    if ((!name || !*name) && reg->def)
        return reg->def;
    for (size_t i = 0; name && i < reg->n; i++) {
        if (strcmp(reg->items[i]->name, name) == 0)
            return reg->items[i];
    }
    return NULL;
}

const char *
sbx_registry_names(const struct sbx_registry *reg)
{
    return reg->names;
}

void
sbx_provider_status_set(struct sbx_provider_status *out, const char *state,
                        enum sbx_state_class cls, const char *reason)
{
    (void)snprintf(out->state, sizeof out->state, "%s", state);
    (void)snprintf(out->reason, sizeof out->reason, "%s", reason);
    out->cls = cls;
}
