/*
 * The Daytona provider's pure parts: all 22 of Daytona's sandbox states in their classes,
 * settings checked at startup (URLs that would send the key in clear text, secret names),
 * and the lazy factory: a missing API key names the secret and the command that sets it, a
 * key set later builds the provider (no network at construction), the environment is never
 * read. Also the spec hash that find-or-create compares.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "providers/daytona.h"
#include "providers/providers.h"
#include "server/sandbox.h"
#include "server/secretsrv.h"

static void
test_states(void **state)
{
    (void)state;
    static const char *const usable[] = {"started"};
    static const char *const startable[] = {"stopped", "archived", "paused"};
    static const char *const transient[] = {
        "creating",      "starting",          "stopping",         "restoring",    "archiving",
        "pending_build", "building_snapshot", "pulling_snapshot", "snapshotting", "forking",
        "resizing",      "pausing",           "resuming",         "unknown"};
    static const char *const terminal[] = {"error", "build_failed", "destroying", "destroyed"};
    size_t total = 0;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(usable); i++, total++)
        assert_int_equal(sbx_daytona_classify(usable[i]), SBX_CLASS_USABLE);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(startable); i++, total++)
        assert_int_equal(sbx_daytona_classify(startable[i]), SBX_CLASS_STARTABLE);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(transient); i++, total++)
        assert_int_equal(sbx_daytona_classify(transient[i]), SBX_CLASS_TRANSIENT);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(terminal); i++, total++)
        assert_int_equal(sbx_daytona_classify(terminal[i]), SBX_CLASS_TERMINAL);
    assert_int_equal(total, 22);
    /* unknown to this table: waited for, never reused, never dead */
    assert_int_equal(sbx_daytona_classify("teleporting"), SBX_CLASS_TRANSIENT);
    assert_int_equal(sbx_daytona_classify(NULL), SBX_CLASS_TRANSIENT);
    assert_int_equal(sbx_daytona_classify("STARTED"), SBX_CLASS_USABLE);
}

static void
check_settings(const char *json, const char *needle)
{
    json_t *s = json_loads(json, 0, NULL);
    assert_non_null(s);
    sbx_error *err = NULL;
    int r = sbx_provider_daytona_check(s, &err);
    if (needle) {
        assert_true(r < 0);
        if (!strstr(sbx_error_msg(err), needle))
            fail_msg("%s: want `%s` in `%s`", json, needle, sbx_error_msg(err));
    } else if (r < 0) {
        fail_msg("%s: %s", json, sbx_error_msg(err));
    }
    sbx_error_clear(&err);
    json_decref(s);
}

static void
test_settings(void **state)
{
    (void)state;
    check_settings("{}", NULL);
    check_settings("{\"api_url\": \"http://127.0.0.1:9/api\", \"poll_ms\": 50}", NULL);
    check_settings("{\"api_url\": \"http://daytona.example.com/api\"}", "clear text");
    check_settings("{\"toolbox_url\": \"ftp://x\"}", "not an http(s) URL");
    check_settings("{\"api_key_secret\": \"bad name\"}", "not a valid secret name");
    check_settings("{\"remote_dir\": \"/tmp/$(x)\"}", "remote_dir");
    check_settings("{\"remote_dir\": \"relative\"}", "remote_dir");
    check_settings("{\"poll_ms\": \"fast\"}", "poll_ms");
    check_settings("{\"api_url\": 5}", "api_url");
}

struct store {
    char dir[64];
    struct sbx_srv_secrets *secrets;
};

static void
store_open(struct store *st)
{
    (void)snprintf(st->dir, sizeof st->dir, "/tmp/sbx-test-daytona-XXXXXX");
    assert_non_null(mkdtemp(st->dir));
    char sub[96];
    (void)snprintf(sub, sizeof sub, "%s/secrets", st->dir);
    st->secrets = sbx_srv_secrets_new(sub, NULL);
}

static void
store_close(struct store *st)
{
    sbx_srv_secrets_free(st->secrets);
    (void)sbx_rm_rf(st->dir, NULL);
}

static void
test_lazy_secret(void **state)
{
    (void)state;
    struct store st;
    store_open(&st);
    /* single-threaded test: nothing else reads the environment meanwhile */
    (void)setenv("DAYTONA_API_KEY", "from-the-environment", 1); // NOLINT(concurrency-mt-unsafe)
    struct sbx_provider_env env = {.state_dir = st.dir, .exe_dir = st.dir, .secrets = st.secrets};
    json_t *settings = json_pack("{s:s}", "api_url", "http://127.0.0.1:9/api");
    struct sbx_provider *p = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_provider_daytona_new(settings, &env, &p, &err), -SBX_EUNAVAIL);
    assert_non_null(strstr(sbx_error_msg(err), "`DAYTONA_API_KEY` is not set"));
    assert_non_null(strstr(sbx_error_msg(err), "sbx secret set DAYTONA_API_KEY"));
    assert_null(strstr(sbx_error_msg(err), "from-the-environment"));
    sbx_error_clear(&err);
    assert_int_equal(sbx_srv_secret_set(st.secrets, "DAYTONA_API_KEY", "k-123", 5, &err), 0);
    assert_int_equal(sbx_provider_daytona_new(settings, &env, &p, &err), 0);
    p->ops->free(p);
    /* another name in the settings: that one is looked up */
    json_t *other = json_pack("{s:s, s:s}", "api_url", "http://127.0.0.1:9/api", "api_key_secret",
                              "TEAM_DAYTONA_KEY");
    assert_int_equal(sbx_provider_daytona_new(other, &env, &p, &err), -SBX_EUNAVAIL);
    assert_non_null(strstr(sbx_error_msg(err), "`TEAM_DAYTONA_KEY`"));
    sbx_error_clear(&err);
    json_decref(other);
    json_decref(settings);
    (void)unsetenv("DAYTONA_API_KEY"); // NOLINT(concurrency-mt-unsafe)
    store_close(&st);
}

static void
test_spec_hash(void **state)
{
    (void)state;
    struct sbx_record *a = sbx_record_new();
    (void)snprintf(a->provider, sizeof a->provider, "daytona");
    a->image = json_pack("{s:s}", "uri", "python:3.11");
    (void)json_object_set_new(a->env, "A", json_string("1"));
    (void)json_object_set_new(a->extensions, SBX_REUSE_KEY_EXT, json_string("k"));
    char ha[SBX_SPEC_HASH_LEN + 1];
    char hb[SBX_SPEC_HASH_LEN + 1];
    sbx_record_spec_hash(a, ha);
    assert_int_equal(strlen(ha), SBX_SPEC_HASH_LEN);
    struct sbx_record *b = sbx_record_dup(a);
    (void)json_object_set_new(b->extensions, SBX_REUSE_KEY_EXT, json_string("other"));
    (void)json_object_set_new(b->extensions, "provider", json_string("daytona"));
    (void)json_object_set_new(b->metadata, "team", json_string("x"));
    sbx_record_spec_hash(b, hb);
    assert_string_equal(ha, hb); /* key, metadata, extensions.provider: not the spec */
    (void)json_object_set_new(b->env, "A", json_string("2"));
    sbx_record_spec_hash(b, hb);
    assert_string_not_equal(ha, hb);
    (void)snprintf(b->provider, sizeof b->provider, "process");
    (void)json_object_set_new(b->env, "A", json_string("1"));
    sbx_record_spec_hash(b, hb);
    assert_string_not_equal(ha, hb);
    assert_true(sbx_reuse_key_valid("agent:a1/main@v2"));
    assert_false(sbx_reuse_key_valid(""));
    assert_false(sbx_reuse_key_valid("has space"));
    assert_false(sbx_reuse_key_valid(NULL));
    sbx_record_free(a);
    sbx_record_free(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_lazy_secret),
        cmocka_unit_test(test_spec_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
