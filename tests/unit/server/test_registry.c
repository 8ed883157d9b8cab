/*
 * The provider registry: eager providers built at startup, lazy ones on first use; the build
 * runs outside the registry lock (another provider can be acquired while one is being built);
 * concurrent first uses build once; a failed build is not cached (a secret set later works);
 * unknown names and a bad default are errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "server/config.h"
#include "server/provider.h"

static atomic_int builds_eager, builds_slow, builds_fast, builds_flaky;
static atomic_bool slow_entered;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static atomic_bool flaky_ready; /* "the secret is set" */

static void
fake_free(struct sbx_provider *p)
{
    free(p);
}

static const struct sbx_provider_ops fake_ops = {.free = fake_free};

static struct sbx_provider *
fake_new(void)
{
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &fake_ops;
    return p;
}

static int
make_eager(const json_t *s, const struct sbx_provider_env *env, struct sbx_provider **out,
           sbx_error **err)
{
    (void)s, (void)env, (void)err;
    atomic_fetch_add(&builds_eager, 1);
    *out = fake_new();
    return 0;
}

/* Blocks until the test opens the gate: a slow build (network, secret store). */
static int
make_slow(const json_t *s, const struct sbx_provider_env *env, struct sbx_provider **out,
          sbx_error **err)
{
    (void)s, (void)env, (void)err;
    atomic_fetch_add(&builds_slow, 1);
    atomic_store(&slow_entered, true);
    pthread_mutex_lock(&gate_mu);
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    *out = fake_new();
    return 0;
}

static int
make_fast(const json_t *s, const struct sbx_provider_env *env, struct sbx_provider **out,
          sbx_error **err)
{
    (void)s, (void)env, (void)err;
    atomic_fetch_add(&builds_fast, 1);
    *out = fake_new();
    return 0;
}

static int
make_flaky(const json_t *s, const struct sbx_provider_env *env, struct sbx_provider **out,
           sbx_error **err)
{
    (void)s, (void)env;
    atomic_fetch_add(&builds_flaky, 1);
    if (!atomic_load(&flaky_ready))
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "the secret `FLAKY_KEY` is not set");
    *out = fake_new();
    return 0;
}

static int
check_strict(const json_t *s, sbx_error **err)
{
    if (json_object_get(s, "bad"))
        return sbx_error_set(err, SBX_EINVAL, 0, "`bad` is bad");
    return 0;
}

static const char *const no_keys[] = {"bad", NULL};

static const struct sbx_provider_factory factories[] = {
    {.name = "eager", .create = make_eager, .keys = no_keys},
    {.name = "slow", .create = make_slow, .keys = no_keys, .lazy = true},
    {.name = "fast", .create = make_fast, .keys = no_keys, .lazy = true},
    {.name = "flaky", .create = make_flaky, .keys = no_keys, .check = check_strict, .lazy = true},
    {0},
};

static void
config(struct sbx_server_config *cfg, const char *const *names, size_t n, const char *def)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->providers = sbx_xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        cfg->providers[i] = sbx_xstrdup(names[i]);
    cfg->n_providers = n;
    cfg->default_provider = sbx_xstrdup(def);
    cfg->provider_settings = json_object();
}

static struct sbx_registry *
build(const char *def)
{
    static const char *const all[] = {"eager", "slow", "fast", "flaky"};
    struct sbx_server_config cfg;
    config(&cfg, all, 4, def);
    struct sbx_provider_env env = {.state_dir = "/nonexistent", .exe_dir = "/nonexistent"};
    struct sbx_registry *reg = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_registry_build_with(&cfg, &env, factories, &reg, &err), 0);
    sbx_server_config_dispose(&cfg);
    return reg;
}

static void
reset(void)
{
    atomic_store(&builds_eager, 0);
    atomic_store(&builds_slow, 0);
    atomic_store(&builds_fast, 0);
    atomic_store(&builds_flaky, 0);
    atomic_store(&slow_entered, false);
    atomic_store(&flaky_ready, false);
    gate_open = false;
}

static void
test_eager_now_lazy_later(void **state)
{
    (void)state;
    reset();
    struct sbx_registry *reg = build("eager");
    assert_int_equal(builds_eager, 1);
    assert_int_equal(builds_fast + builds_slow + builds_flaky, 0); /* nothing read at startup */
    assert_non_null(sbx_registry_peek(reg, "eager"));
    assert_null(sbx_registry_peek(reg, "fast"));
    assert_string_equal(sbx_registry_resolve(reg, NULL), "eager");
    assert_string_equal(sbx_registry_resolve(reg, ""), "eager");
    assert_string_equal(sbx_registry_resolve(reg, "fast"), "fast");
    assert_null(sbx_registry_resolve(reg, "docker-nope"));
    struct sbx_provider *p = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_registry_acquire(reg, "fast", &p, &err), 0);
    assert_string_equal(p->name, "fast");
    struct sbx_provider *again = NULL;
    assert_int_equal(sbx_registry_acquire(reg, "fast", &again, &err), 0);
    assert_ptr_equal(p, again);
    assert_int_equal(builds_fast, 1); /* cached */
    assert_ptr_equal(sbx_registry_peek(reg, "fast"), p);
    assert_int_equal(sbx_registry_acquire(reg, "nosuch", &p, &err), -SBX_EINVAL);
    assert_non_null(strstr(sbx_error_msg(err), "supported: eager, slow, fast, flaky"));
    sbx_error_clear(&err);
    sbx_registry_free(reg);
}

struct racer {
    struct sbx_registry *reg;
    struct sbx_provider *got;
    int rc;
};

static void *
race(void *arg)
{
    struct racer *r = arg;
    sbx_error *err = NULL;
    r->rc = sbx_registry_acquire(r->reg, "slow", &r->got, &err);
    sbx_error_clear(&err);
    return NULL;
}

static void
test_concurrent_first_use(void **state)
{
    (void)state;
    reset();
    struct sbx_registry *reg = build("eager");
    enum {
        N = 16
    };
    struct racer rs[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        rs[i] = (struct racer){.reg = reg};
        assert_int_equal(pthread_create(&t[i], NULL, race, &rs[i]), 0);
    }
    while (!atomic_load(&slow_entered))
        (void)usleep(1000);
    /* `slow` is being built and blocks: the registry lock is not held meanwhile, so another
     * provider can be built and acquired. */
    struct sbx_provider *fast = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_registry_acquire(reg, "fast", &fast, &err), 0);
    assert_non_null(fast);
    assert_null(sbx_registry_peek(reg, "slow"));
    pthread_mutex_lock(&gate_mu);
    gate_open = true;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(rs[i].rc, 0);
        assert_ptr_equal(rs[i].got, rs[0].got);
    }
    assert_int_equal(builds_slow, 1); /* sixteen first uses, one build */
    sbx_registry_free(reg);
}

static void
test_failure_not_cached(void **state)
{
    (void)state;
    reset();
    struct sbx_registry *reg = build("eager");
    struct sbx_provider *p = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_registry_acquire(reg, "flaky", &p, &err), -SBX_EUNAVAIL);
    assert_non_null(strstr(sbx_error_msg(err), "provider `flaky`: the secret `FLAKY_KEY`"));
    sbx_error_clear(&err);
    assert_int_equal(sbx_registry_acquire(reg, "flaky", &p, &err), -SBX_EUNAVAIL);
    sbx_error_clear(&err);
    atomic_store(&flaky_ready, true); /* the secret was set meanwhile */
    assert_int_equal(sbx_registry_acquire(reg, "flaky", &p, &err), 0);
    assert_int_equal(builds_flaky, 3);
    assert_ptr_equal(sbx_registry_peek(reg, "flaky"), p);
    sbx_registry_free(reg);
}

static void
test_startup_errors(void **state)
{
    (void)state;
    reset();
    struct sbx_provider_env env = {.state_dir = "/nonexistent", .exe_dir = "/nonexistent"};
    struct sbx_registry *reg = NULL;
    sbx_error *err = NULL;
    struct sbx_server_config cfg;
    static const char *const dup[] = {"fast", "fast"};
    config(&cfg, dup, 2, "fast");
    assert_true(sbx_registry_build_with(&cfg, &env, factories, &reg, &err) < 0);
    assert_non_null(strstr(sbx_error_msg(err), "configured twice"));
    sbx_error_clear(&err);
    sbx_server_config_dispose(&cfg);
    static const char *const one[] = {"fast"};
    config(&cfg, one, 1, "slow");
    assert_true(sbx_registry_build_with(&cfg, &env, factories, &reg, &err) < 0);
    assert_non_null(strstr(sbx_error_msg(err), "not in the supported set"));
    sbx_error_clear(&err);
    sbx_server_config_dispose(&cfg);
    /* a lazy provider's settings are still checked at startup */
    static const char *const fl[] = {"flaky"};
    config(&cfg, fl, 1, "flaky");
    (void)json_object_set_new(cfg.provider_settings, "flaky", json_pack("{s:b}", "bad", 1));
    assert_true(sbx_registry_build_with(&cfg, &env, factories, &reg, &err) < 0);
    assert_non_null(strstr(sbx_error_msg(err), "provider `flaky`: `bad` is bad"));
    assert_int_equal(builds_flaky, 0);
    sbx_error_clear(&err);
    sbx_server_config_dispose(&cfg);
}

/* A factory declaring a capability its ops lack (or the other way round) is not built: the
 * API decides from the declaration, the manager calls the ops. */
static int
no_op_pause(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)p, (void)sb, (void)err;
    return 0;
}

static const struct sbx_provider_ops pausing_ops = {
    .pause = no_op_pause, .resume = no_op_pause, .free = fake_free};

static int
make_pausing(const json_t *s, const struct sbx_provider_env *env, struct sbx_provider **out,
             sbx_error **err)
{
    (void)s, (void)env, (void)err;
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &pausing_ops;
    *out = p;
    return 0;
}

static void
expect_caps_refused(const struct sbx_provider_factory *table, const char *what)
{
    struct sbx_provider_env env = {.state_dir = "/nonexistent", .exe_dir = "/nonexistent"};
    struct sbx_server_config cfg;
    static const char *const one[] = {"p"};
    config(&cfg, one, 1, "p");
    struct sbx_registry *reg = NULL;
    sbx_error *err = NULL;
    assert_true(sbx_registry_build_with(&cfg, &env, table, &reg, &err) < 0);
    if (!strstr(sbx_error_msg(err), what))
        fail_msg("want `%s` in: %s", what, sbx_error_msg(err));
    sbx_error_clear(&err);
    sbx_server_config_dispose(&cfg);
}

static void
test_caps_match_ops(void **state)
{
    (void)state;
    /* pauses without saying so; says it snapshots without the op; network policy without
     * egress; volumes without a check_create */
    static const struct sbx_provider_factory undeclared[] = {
        {.name = "p", .create = make_pausing, .keys = no_keys}, {0}};
    static const struct sbx_provider_factory snap[] = {{.name = "p",
                                                        .caps = SBX_CAP_PAUSE | SBX_CAP_SNAPSHOT,
                                                        .create = make_pausing,
                                                        .keys = no_keys},
                                                       {0}};
    static const struct sbx_provider_factory net[] = {
        {.name = "p", .caps = SBX_CAP_NETWORK_POLICY, .create = make_eager, .keys = no_keys}, {0}};
    static const struct sbx_provider_factory vol[] = {
        {.name = "p", .caps = SBX_CAP_VOLUMES, .create = make_eager, .keys = no_keys}, {0}};
    expect_caps_refused(undeclared, "disagree on pause");
    expect_caps_refused(snap, "disagree on snapshots");
    expect_caps_refused(net, "disagree on network policy");
    expect_caps_refused(vol, "disagree on volumes");
    /* what matches is built, and its declaration is what the API reads */
    static const struct sbx_provider_factory ok[] = {{.name = "p",
                                                      .caps = SBX_CAP_PAUSE,
                                                      .arch = "arm64",
                                                      .create = make_pausing,
                                                      .keys = no_keys},
                                                     {0}};
    struct sbx_provider_env env = {.state_dir = "/nonexistent", .exe_dir = "/nonexistent"};
    struct sbx_server_config cfg;
    static const char *const one[] = {"p"};
    config(&cfg, one, 1, "p");
    struct sbx_registry *reg = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_registry_build_with(&cfg, &env, ok, &reg, &err), 0);
    const struct sbx_provider_factory *f = sbx_registry_factory(reg, NULL);
    assert_non_null(f);
    assert_int_equal(f->caps, SBX_CAP_PAUSE);
    assert_string_equal(f->arch, "arm64");
    assert_null(sbx_registry_factory(reg, "nope"));
    sbx_registry_free(reg);
    sbx_server_config_dispose(&cfg);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_now_lazy_later), cmocka_unit_test(test_concurrent_first_use),
        cmocka_unit_test(test_failure_not_cached),   cmocka_unit_test(test_startup_errors),
        cmocka_unit_test(test_caps_match_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
