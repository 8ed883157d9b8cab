/*
 * registry.c - provider factories keyed by name, and the set the config enables.
 *
 * Eager providers (native, process) are built at startup. Lazy ones (daytona: it needs an API
 * key) only record their settings - which hold secret *names* - and are built on first use:
 * the factory runs outside the registry lock (a slow secret read or a provider's setup never
 * blocks the other providers), concurrent first uses of the same provider wait for the one
 * build in progress, and a failed build is not cached, so a secret set later is picked up by
 * the next request without a restart.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "server/config.h"
#include "server/provider.h"

struct item {
    const struct sbx_provider_factory *f;
    char *name;
    json_t *settings;       /* the provider's config group */
    struct sbx_provider *p; /* NULL until built */
    bool building;          /* a thread runs the factory now (without the lock) */
    char last_error[256];   /* why its last build failed ("" when none did) */
};

struct sbx_registry {
    pthread_mutex_t mu; /* guards every item's p and building */
    pthread_cond_t cv;  /* a build finished */
    struct item *items;
    size_t n;
    struct item *def;
    char *names;
    struct sbx_provider_env env; /* copied strings */
};

const struct sbx_provider_factory *
sbx_provider_factory_in(const struct sbx_provider_factory *table, const char *name)
{
    for (const struct sbx_provider_factory *f = table; name && f->name; f++) {
        if (strcmp(f->name, name) == 0)
            return f;
    }
    return NULL;
}

static char *
known_names(const struct sbx_provider_factory *table)
{
    struct sbx_buf b;
    sbx_buf_init(&b, 4096);
    for (const struct sbx_provider_factory *f = table; f->name; f++)
        (void)sbx_buf_printf(&b, NULL, "%s%s", b.len ? ", " : "", f->name);
    return b.data ? b.data : sbx_xstrdup("");
}

static struct item *
find_item(const struct sbx_registry *reg, const char *name)
{
    if (!name || !*name)
        return reg->def;
    for (size_t i = 0; i < reg->n; i++) {
        if (strcmp(reg->items[i].name, name) == 0)
            return &reg->items[i];
    }
    return NULL;
}

/* The ops a provider has must be what its factory declares: the API decides from the
 * declaration (before a lazy provider is even built), the manager calls the ops. */
static const char *
caps_mismatch(unsigned caps, const struct sbx_provider_ops *ops)
{
    if (!(caps & SBX_CAP_PAUSE) != !(ops->pause && ops->resume))
        return "pause";
    if (!(caps & SBX_CAP_SNAPSHOT) != !ops->snapshot)
        return "snapshots";
    if (!(caps & SBX_CAP_NETWORK_POLICY) != !ops->egress)
        return "network policy";
    if ((caps & SBX_CAP_CREDENTIAL_PROXY) && !(caps & SBX_CAP_NETWORK_POLICY))
        return "credential proxy (without network policy)";
    if ((caps & SBX_CAP_VOLUMES) && !ops->check_create)
        return "volumes (without a check_create to check them)";
    return NULL;
}

/* Run f->create for it (no lock held) and name the result. */
static int
build(const struct sbx_registry *reg, const struct item *it, struct sbx_provider **out,
      sbx_error **err)
{
    struct sbx_provider *p = NULL;
    if (it->f->create(it->settings, &reg->env, &p, err) < 0)
        return sbx_error_wrap(err, "provider `%s`", it->name);
    const char *bad = caps_mismatch(it->f->caps, p->ops);
    if (bad) {
        p->ops->free(p);
        return sbx_error_set(err, SBX_EGENERIC, 0,
                             "provider `%s`: its declared capabilities and its operations "
                             "disagree on %s (a bug in this sbx build)",
                             it->name, bad);
    }
    (void)snprintf(p->name, sizeof p->name, "%s", it->name);
    *out = p;
    return 0;
}

static int
add_one(struct sbx_registry *reg, const struct sbx_server_config *cfg,
        const struct sbx_provider_factory *table, const char *name, sbx_error **err)
{
    if (find_item(reg, name) && *name)
        return sbx_error_set(err, SBX_EINVAL, 0, "provider `%s` is configured twice", name);
    const struct sbx_provider_factory *f = sbx_provider_factory_in(table, name);
    if (!f) {
        char *known = known_names(table);
        int r = sbx_error_set(err, SBX_EINVAL, 0, "unknown provider `%s` (this sbx has: %s)", name,
                              known);
        free(known);
        return r;
    }
    json_t *settings = json_object_get(cfg->provider_settings, name);
    struct item *it = &reg->items[reg->n];
    it->f = f;
    it->name = sbx_xstrdup(name);
    it->settings = settings ? json_incref(settings) : json_object();
    reg->n++;
    if (f->check && f->check(it->settings, err) < 0)
        return sbx_error_wrap(err, "provider `%s`", name);
    if (!f->lazy)
        return build(reg, it, &it->p, err);
    return 0;
}

static void
copy_env(struct sbx_provider_env *dst, const struct sbx_provider_env *src)
{
    dst->state_dir = src->state_dir ? sbx_xstrdup(src->state_dir) : NULL;
    dst->exe_dir = src->exe_dir ? sbx_xstrdup(src->exe_dir) : NULL;
    dst->secrets = src->secrets;
    dst->vault = src->vault;
}

int
sbx_registry_build_with(const struct sbx_server_config *cfg, const struct sbx_provider_env *env,
                        const struct sbx_provider_factory *factories, struct sbx_registry **out,
                        sbx_error **err)
{
    struct sbx_registry *reg = sbx_xcalloc(1, sizeof *reg);
    pthread_mutex_init(&reg->mu, NULL);
    pthread_cond_init(&reg->cv, NULL);
    copy_env(&reg->env, env);
    reg->items = sbx_xcalloc(cfg->n_providers + 1, sizeof(struct item));
    struct sbx_buf names;
    sbx_buf_init(&names, 4096);
    for (size_t i = 0; i < cfg->n_providers; i++) {
        if (add_one(reg, cfg, factories, cfg->providers[i], err) < 0) {
            sbx_buf_dispose(&names);
            sbx_registry_free(reg);
            return -SBX_EINVAL;
        }
        (void)sbx_buf_printf(&names, NULL, "%s%s", i ? ", " : "", cfg->providers[i]);
    }
    reg->names = names.data ? names.data : sbx_xstrdup("");
    reg->def = cfg->default_provider ? find_item(reg, cfg->default_provider) : NULL;
    if (!reg->def) {
        int r = sbx_error_set(err, SBX_EINVAL, 0,
                              "default provider `%s` is not in the supported set (%s)",
                              cfg->default_provider ? cfg->default_provider : "", reg->names);
        sbx_registry_free(reg);
        return r;
    }
    *out = reg;
    return 0;
}

int
sbx_registry_build(const struct sbx_server_config *cfg, const struct sbx_provider_env *env,
                   struct sbx_registry **out, sbx_error **err)
{
    return sbx_registry_build_with(cfg, env, cfg->factories, out, err);
}

void
sbx_registry_free(struct sbx_registry *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n; i++) {
        if (reg->items[i].p)
            reg->items[i].p->ops->free(reg->items[i].p);
        free(reg->items[i].name);
        json_decref(reg->items[i].settings);
    }
    free(reg->items);
    free(reg->names);
    free((char *)reg->env.state_dir);
    free((char *)reg->env.exe_dir);
    pthread_cond_destroy(&reg->cv);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

const struct sbx_provider_factory *
sbx_registry_factory(const struct sbx_registry *reg, const char *name)
{
    const struct item *it = find_item(reg, name);
    return it ? it->f : NULL;
}

const char *
sbx_registry_resolve(const struct sbx_registry *reg, const char *name)
{
    const struct item *it = find_item(reg, name);
    return it ? it->name : NULL;
}

struct sbx_provider *
sbx_registry_peek(struct sbx_registry *reg, const char *name)
{
    pthread_mutex_lock(&reg->mu);
    struct item *it = find_item(reg, name);
    struct sbx_provider *p = it ? it->p : NULL;
    pthread_mutex_unlock(&reg->mu);
    return p;
}

int
sbx_registry_acquire(struct sbx_registry *reg, const char *name, struct sbx_provider **out,
                     sbx_error **err)
{
    struct item *it = find_item(reg, name);
    if (!it)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "provider `%.64s` is not supported by this server (supported: %s)",
                             name ? name : "", reg->names);
    pthread_mutex_lock(&reg->mu);
    /* One build at a time per provider: later callers wait for it, then use its result (or,
     * if it failed, try themselves - each caller gets its own up-to-date error). */
    while (!it->p && it->building)
        pthread_cond_wait(&reg->cv, &reg->mu);
    if (it->p) {
        *out = it->p;
        pthread_mutex_unlock(&reg->mu);
        return 0;
    }
    it->building = true;
    pthread_mutex_unlock(&reg->mu);
    /* The factory runs without the lock: reading a secret (or anything slow a provider does
     * to set itself up) must not hold up the other providers. */
    struct sbx_provider *p = NULL;
    int r = build(reg, it, &p, err);
    pthread_mutex_lock(&reg->mu);
    it->building = false;
    if (r >= 0)
        it->p = p;
    (void)snprintf(it->last_error, sizeof it->last_error, "%s",
                   r >= 0 || !err ? "" : sbx_error_msg(*err));
    pthread_cond_broadcast(&reg->cv);
    pthread_mutex_unlock(&reg->mu);
    if (r >= 0)
        *out = p;
    return r;
}

json_t *
sbx_registry_status(struct sbx_registry *reg)
{
    json_t *a = json_array();
    pthread_mutex_lock(&reg->mu);
    for (size_t i = 0; i < reg->n; i++) {
        const struct item *it = &reg->items[i];
        const char *state = it->p ? "ready" : it->last_error[0] ? "failed" : "not built yet";
        json_t *o = json_pack("{s:s, s:s}", "name", it->name, "state", state);
        if (!it->p && it->last_error[0])
            (void)json_object_set_new(o, "reason", json_string(it->last_error));
        else if (!it->p)
            (void)json_object_set_new(o, "reason",
                                      json_string("built by its first use (it reads a secret)"));
        (void)json_array_append_new(a, o);
    }
    pthread_mutex_unlock(&reg->mu);
    return a;
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
