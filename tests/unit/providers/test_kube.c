/*
 * The kubernetes provider's pure parts: the kubeconfig reader (YAML in block and flow style,
 * CA / client certificate / key data and files, tokens and token files, contexts, what is
 * refused: plain http, insecure-skip-tls-verify, exec plugins, aliases; bad YAML with its
 * line), pods in sbx's state classes, label and quantity rules, the settings' checks, and
 * the lazy factory reading a kubeconfig from the secret store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "providers/kube_api.h"
#include "providers/kubernetes.h"
#include "providers/providers.h"
#include "server/secretsrv.h"

/* base64 of "CA-PEM\n", "CERT-PEM\n", "KEY-PEM\n" */
#define CA_B64   "Q0EtUEVNCg=="
#define CERT_B64 "Q0VSVC1QRU0K"
#define KEY_B64  "S0VZLVBFTQo="

static const char kubeconfig[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: dev\n"
    "clusters:\n"
    "- name: dev-cluster\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:6443/\n"
    "    certificate-authority-data: " CA_B64 "\n"
    "- name: prod-cluster\n"
    "  cluster:\n"
    "    server: https://prod.example.com\n"
    "users:\n"
    "- name: dev-user\n"
    "  user:\n"
    "    token: \"tok-123\"\n"
    "- name: prod-user\n"
    "  user:\n"
    "    client-certificate-data: " CERT_B64 "\n"
    "    client-key-data: " KEY_B64 "\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: dev-cluster, user: dev-user, namespace: team-a}\n"
    "- name: prod\n"
    "  context:\n"
    "    cluster: prod-cluster\n"
    "    user: prod-user\n"
    "preferences: {}\n";

static int
parse(const char *text, const char *ctx, bool insecure, struct kube_cfg *out, sbx_error **err)
{
    struct kube_cfg_opts o = {.context = ctx, .allow_insecure = insecure};
    return kube_cfg_parse(text, strlen(text), "test", &o, out, err);
}

static void
test_current_context_token(void **state)
{
    (void)state;
    struct kube_cfg c;
    sbx_error *err = NULL;
    assert_int_equal(parse(kubeconfig, NULL, false, &c, &err), 0);
    assert_string_equal(c.server, "https://10.0.0.1:6443");
    assert_string_equal(c.context, "dev");
    assert_string_equal(c.namespace, "team-a");
    assert_string_equal(c.ca, "CA-PEM\n");
    assert_string_equal(c.token, "tok-123");
    assert_null(c.cert);
    assert_null(c.key);
    assert_false(c.insecure);
    kube_cfg_dispose(&c);
}

static void
test_named_context_cert(void **state)
{
    (void)state;
    struct kube_cfg c;
    sbx_error *err = NULL;
    assert_int_equal(parse(kubeconfig, "prod", false, &c, &err), 0);
    assert_string_equal(c.server, "https://prod.example.com");
    assert_null(c.namespace);
    assert_null(c.ca);
    assert_string_equal(c.cert, "CERT-PEM\n");
    assert_string_equal(c.key, "KEY-PEM\n");
    assert_null(c.token);
    kube_cfg_dispose(&c);
    assert_int_equal(parse(kubeconfig, "staging", false, &c, &err), -SBX_EINVAL);
    assert_non_null(strstr(sbx_error_msg(err), "no context `staging` (it has: dev, prod)"));
    sbx_error_clear(&err);
}

/* The fake API server writes its kubeconfig as JSON, which is YAML too. */
static void
test_json_kubeconfig(void **state)
{
    (void)state;
    static const char text[] =
        "{\"apiVersion\": \"v1\", \"current-context\": \"fake\", \"clusters\": [{\"name\": "
        "\"fake\", \"cluster\": {\"server\": \"https://127.0.0.1:1234\"}}], \"users\": "
        "[{\"name\": \"u\", \"user\": {\"token\": \"t\"}}], \"contexts\": [{\"name\": \"fake\", "
        "\"context\": {\"cluster\": \"fake\", \"user\": \"u\", \"namespace\": \"default\"}}]}";
    struct kube_cfg c;
    sbx_error *err = NULL;
    assert_int_equal(parse(text, NULL, false, &c, &err), 0);
    assert_string_equal(c.server, "https://127.0.0.1:1234");
    assert_string_equal(c.token, "t");
    assert_string_equal(c.namespace, "default");
    kube_cfg_dispose(&c);
}

static void
expect_error(const char *text, const char *ctx, const char *needle)
{
    struct kube_cfg c;
    sbx_error *err = NULL;
    assert_int_equal(parse(text, ctx, false, &c, &err), -SBX_EINVAL);
    if (!strstr(sbx_error_msg(err), needle))
        fail_msg("`%s` not in `%s`", needle, sbx_error_msg(err));
    sbx_error_clear(&err);
}

#define MINI(cluster, user)                                                                \
    "current-context: c\nclusters:\n- name: k\n  cluster:\n" cluster "users:\n- name: u\n" \
    "  user:\n" user "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"

static void
test_refused(void **state)
{
    (void)state;
    expect_error(MINI("    server: http://10.0.0.1\n", "    token: t\n"), NULL, "not https://");
    expect_error(
        MINI("    server: https://a\n    insecure-skip-tls-verify: true\n", "    token: t\n"), NULL,
        "insecure-skip-tls-verify");
    expect_error(MINI("    server: https://a\n", "    exec: {command: aws}\n"), NULL,
                 "uses `exec`");
    expect_error(MINI("    server: https://a\n", "    client-key-data: " KEY_B64 "\n"), NULL,
                 "without a certificate");
    expect_error(MINI("    server: https://a\n", "    token: t\n"), "other", "no context");
    expect_error(
        MINI("    server: https://a\n    certificate-authority-data: '!!!'\n", "    token: t\n"),
        NULL, "not valid base64");
    expect_error("clusters: []\n", NULL, "no current-context");
    expect_error("- a\n- b\n", NULL, "not a kubeconfig");
    expect_error("a: &x 1\nb: *x\n", NULL, "anchors and aliases");
    expect_error("a: [1, 2\n", NULL, "line ");
    expect_error("", NULL, "empty YAML");
    expect_error("a: 1\n---\nb: 2\n", NULL, "more than one YAML document");
    /* allowed when the operator says so */
    struct kube_cfg c;
    sbx_error *err = NULL;
    assert_int_equal(
        parse(MINI("    server: https://a\n    insecure-skip-tls-verify: true\n", "    token: t\n"),
              NULL, true, &c, &err),
        0);
    assert_true(c.insecure);
    kube_cfg_dispose(&c);
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Paths are relative to the kubeconfig's directory; tokenFile is re-read by the client. */
static void
test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-kube-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof path, "%s/ca.crt", dir);
    write_file(path, "CA-FILE\n");
    (void)snprintf(path, sizeof path, "%s/c.crt", dir);
    write_file(path, "CERT-FILE\n");
    (void)snprintf(path, sizeof path, "%s/c.key", dir);
    write_file(path, "KEY-FILE\n");
    (void)snprintf(path, sizeof path, "%s/config", dir);
    write_file(path, MINI("    server: https://a\n    certificate-authority: ca.crt\n",
                          "    client-certificate: c.crt\n    client-key: c.key\n"
                          "    tokenFile: tok\n"));
    struct kube_cfg c;
    struct kube_cfg_opts o = {0};
    sbx_error *err = NULL;
    assert_int_equal(kube_cfg_load(path, &o, &c, &err), 0);
    assert_string_equal(c.ca, "CA-FILE\n");
    assert_string_equal(c.cert, "CERT-FILE\n");
    assert_string_equal(c.key, "KEY-FILE\n");
    assert_null(c.token);
    char want[128];
    (void)snprintf(want, sizeof want, "%s/tok", dir);
    assert_string_equal(c.token_file, want);
    kube_cfg_dispose(&c);
    /* a missing file names itself */
    (void)snprintf(path, sizeof path, "%s/c.key", dir);
    assert_int_equal(unlink(path), 0);
    (void)snprintf(path, sizeof path, "%s/config", dir);
    assert_true(kube_cfg_load(path, &o, &c, &err) < 0);
    assert_non_null(strstr(sbx_error_msg(err), "c.key"));
    sbx_error_clear(&err);
    (void)sbx_rm_rf(dir, NULL);
}

static void
test_in_cluster(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-kube-sa-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof path, "%s/token", dir);
    write_file(path, "sa-token\n");
    (void)snprintf(path, sizeof path, "%s/ca.crt", dir);
    write_file(path, "SA-CA\n");
    (void)snprintf(path, sizeof path, "%s/namespace", dir);
    write_file(path, "sandboxes\n");
    struct kube_cfg c;
    sbx_error *err = NULL;
    /* single-threaded test: nothing else reads the environment meanwhile */
    (void)unsetenv("KUBERNETES_SERVICE_HOST"); // NOLINT(concurrency-mt-unsafe)
    assert_false(kube_in_cluster_available(dir));
    assert_int_equal(kube_cfg_in_cluster(dir, &c, &err), -SBX_EUNAVAIL);
    sbx_error_clear(&err);
    (void)setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1); // NOLINT(concurrency-mt-unsafe)
    (void)setenv("KUBERNETES_SERVICE_PORT", "443", 1);       // NOLINT(concurrency-mt-unsafe)
    assert_true(kube_in_cluster_available(dir));
    assert_int_equal(kube_cfg_in_cluster(dir, &c, &err), 0);
    assert_string_equal(c.server, "https://10.96.0.1:443");
    assert_string_equal(c.ca, "SA-CA\n");
    assert_string_equal(c.namespace, "sandboxes");
    assert_non_null(strstr(c.token_file, "/token"));
    kube_cfg_dispose(&c);
    (void)unsetenv("KUBERNETES_SERVICE_HOST"); // NOLINT(concurrency-mt-unsafe)
    (void)unsetenv("KUBERNETES_SERVICE_PORT"); // NOLINT(concurrency-mt-unsafe)
    (void)sbx_rm_rf(dir, NULL);
}

static enum sbx_state_class
classify(const char *json, struct sbx_provider_status *st, const char **msg)
{
    json_t *pod = json_loads(json, 0, NULL);
    assert_non_null(pod);
    enum sbx_state_class c = sbx_kube_classify(pod, st, msg);
    /* msg borrows from pod: copy before it goes */
    static char keep[512];
    if (msg && *msg) {
        (void)snprintf(keep, sizeof keep, "%s", *msg);
        *msg = keep;
    }
    json_decref(pod);
    return c;
}

static void
test_states(void **state)
{
    (void)state;
    struct sbx_provider_status st;
    const char *msg = NULL;
    assert_int_equal(classify("{\"status\": {\"phase\": \"Running\"}}", &st, &msg),
                     SBX_CLASS_USABLE);
    assert_string_equal(st.state, "running");
    assert_int_equal(
        classify("{\"status\": {\"phase\": \"Pending\", \"containerStatuses\": [{\"name\": "
                 "\"sandbox\", \"state\": {\"waiting\": {\"reason\": \"ContainerCreating\"}}}]}}",
                 &st, &msg),
        SBX_CLASS_TRANSIENT);
    assert_string_equal(st.reason, "ContainerCreating");
    assert_int_equal(
        classify("{\"status\": {\"phase\": \"Pending\", \"conditions\": [{\"type\": "
                 "\"PodScheduled\", \"status\": \"False\", \"reason\": \"Unschedulable\", "
                 "\"message\": \"0/1 nodes\"}]}}",
                 &st, &msg),
        SBX_CLASS_TRANSIENT);
    assert_string_equal(st.reason, "Unschedulable");
    assert_string_equal(msg, "0/1 nodes");
    assert_int_equal(
        classify("{\"status\": {\"phase\": \"Pending\", \"containerStatuses\": [{\"name\": "
                 "\"sandbox\", \"state\": {\"waiting\": {\"reason\": \"ImagePullBackOff\", "
                 "\"message\": \"Back-off pulling image\"}}}]}}",
                 &st, &msg),
        SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "ImagePullBackOff");
    assert_string_equal(msg, "Back-off pulling image");
    assert_int_equal(
        classify("{\"status\": {\"phase\": \"Pending\", \"initContainerStatuses\": [{\"name\": "
                 "\"i\", \"state\": {\"terminated\": {\"exitCode\": 1, \"message\": \"no\"}}}]}}",
                 &st, &msg),
        SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "InitContainerFailed");
    assert_int_equal(classify("{\"status\": {\"phase\": \"Failed\", \"reason\": \"Evicted\", "
                              "\"message\": \"low on memory\"}}",
                              &st, &msg),
                     SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "Evicted");
    assert_string_equal(msg, "low on memory");
    assert_int_equal(
        classify("{\"status\": {\"phase\": \"Failed\", \"containerStatuses\": [{\"name\": "
                 "\"sandbox\", \"state\": {\"terminated\": {\"exitCode\": 137, \"reason\": "
                 "\"OOMKilled\"}}}]}}",
                 &st, &msg),
        SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "OOMKilled");
    assert_int_equal(classify("{\"status\": {\"phase\": \"Succeeded\"}}", &st, &msg),
                     SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "Succeeded");
    assert_int_equal(classify("{\"status\": {\"phase\": \"Unknown\"}}", &st, &msg),
                     SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "NodeLost");
    assert_int_equal(classify("{\"metadata\": {\"deletionTimestamp\": \"2026-01-01T00:00:00Z\"}, "
                              "\"status\": {\"phase\": \"Running\"}}",
                              &st, &msg),
                     SBX_CLASS_TERMINAL);
    assert_string_equal(st.reason, "SANDBOX_LOST");
}

static void
test_labels_quantities(void **state)
{
    (void)state;
    assert_true(sbx_kube_label_key_ok("owner"));
    assert_true(sbx_kube_label_key_ok("sbx.dev/sandbox-id"));
    assert_true(sbx_kube_label_key_ok("sbx/name"));
    assert_false(sbx_kube_label_key_ok("Bad.Prefix/x"));
    assert_false(sbx_kube_label_key_ok("-x"));
    assert_false(sbx_kube_label_key_ok(""));
    assert_true(sbx_kube_label_value_ok(""));
    assert_false(sbx_kube_label_value_ok("has space"));
    char *q = sbx_kube_quantity("memory", "512m"); /* sbx: MiB, not milli-bytes */
    assert_string_equal(q, "536870912");
    free(q);
    q = sbx_kube_quantity("memory", "2Gi");
    assert_string_equal(q, "2147483648");
    free(q);
    q = sbx_kube_quantity("cpu", "500m");
    assert_string_equal(q, "500m");
    free(q);
    q = sbx_kube_quantity("cpu", "1.5");
    assert_string_equal(q, "1.5");
    free(q);
    assert_null(sbx_kube_quantity("cpu", "lots"));
    assert_null(sbx_kube_quantity("cpu", "-1"));
    assert_null(sbx_kube_quantity("memory", "x"));
    assert_null(sbx_kube_quantity("gpu", "1"));
}

static void
expect_bad_settings(const char *json, const char *needle)
{
    json_t *s = json_loads(json, 0, NULL);
    assert_non_null(s);
    sbx_error *err = NULL;
    assert_int_equal(sbx_provider_kubernetes_check(s, &err), -SBX_EINVAL);
    if (!strstr(sbx_error_msg(err), needle))
        fail_msg("`%s` not in `%s`", needle, sbx_error_msg(err));
    sbx_error_clear(&err);
    json_decref(s);
}

static void
test_settings(void **state)
{
    (void)state;
    json_t *ok = json_loads("{\"kubeconfig\": \"/etc/sbx/kubeconfig\", \"namespace\": \"sbx\", "
                            "\"connect\": \"pod-ip\", \"labels\": [\"a=b\"], \"node_selector\": "
                            "[\"x/y=z\"], \"tolerations\": \"[{\\\"key\\\": \\\"k\\\"}]\", "
                            "\"retries\": 2, \"allow_insecure\": false}",
                            0, NULL);
    assert_non_null(ok);
    sbx_error *err = NULL;
    assert_int_equal(sbx_provider_kubernetes_check(ok, &err), 0);
    json_decref(ok);
    expect_bad_settings("{\"connect\": \"ssh\"}", "connect");
    expect_bad_settings("{\"kubeconfig\": \"rel/path\"}", "absolute");
    expect_bad_settings("{\"kubeconfig\": \"/a\", \"kubeconfig_secret\": \"K\"}", "not both");
    expect_bad_settings("{\"kubeconfig_secret\": \"bad name\"}", "secret name");
    expect_bad_settings("{\"namespace\": \"Not_Valid\"}", "namespace");
    expect_bad_settings("{\"labels\": [\"novalue\"]}", "labels");
    expect_bad_settings("{\"tolerations\": \"{}\"}", "tolerations");
    expect_bad_settings("{\"retries\": 99}", "retries");
    expect_bad_settings("{\"poll_ms\": \"5\"}", "poll_ms");
    expect_bad_settings("{\"workspace_pvc_size\": \"10G\"}", "workspace_pvc_size");
    expect_bad_settings("{\"volume_default_size\": \"lots\"}", "volume_default_size");
    expect_bad_settings("{\"storage_class\": \"Fast_One\"}", "storage_class");
    expect_bad_settings("{\"workspace_path\": \"work\"}", "workspace_path");
    expect_bad_settings("{\"workspace_path\": \"/opt/sbx\"}", "workspace_path");
    expect_bad_settings("{\"workspace_path\": \"/opt\"}", "workspace_path");
    expect_bad_settings("{\"workspace_path\": \"/w/../x\"}", "workspace_path");
    json_t *ws = json_loads("{\"workspace_pvc_size\": \"1.5Gi\", \"storage_class\": "
                            "\"fast\", \"workspace_path\": \"/home/user\"}",
                            0, NULL);
    assert_int_equal(sbx_provider_kubernetes_check(ws, &err), 0);
    json_decref(ws);
}

static void
test_sizes(void **state)
{
    (void)state;
    static const char *const good[] = {"1", "10Gi", "1.5Gi", "512Mi", "3Ei", "100Ki"};
    static const char *const bad[] = {"",    "Gi",   "1G", "1.Gi", ".5Gi",
                                      "1gi", "1Gix", "-1", "1 Gi", "1e3"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        assert_true(sbx_kube_size_ok(good[i]));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (sbx_kube_size_ok(bad[i]))
            fail_msg("`%s` taken as a size", bad[i]);
    }
}

/* Lazy: a kubeconfig secret that is not set names itself; set, the provider is built (no
 * network at construction). */
static void
test_lazy_secret(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-kube-store-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[96];
    (void)snprintf(sub, sizeof sub, "%s/secrets", dir);
    struct sbx_srv_secrets *secrets = sbx_srv_secrets_new(sub, NULL);
    struct sbx_provider_env env = {.state_dir = dir, .exe_dir = dir, .secrets = secrets};
    json_t *settings = json_pack("{s:s}", "kubeconfig_secret", "KUBECONFIG");
    struct sbx_provider *p = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_provider_kubernetes_new(settings, &env, &p, &err), -SBX_EUNAVAIL);
    assert_non_null(strstr(sbx_error_msg(err), "KUBECONFIG"));
    sbx_error_clear(&err);
    assert_int_equal(
        sbx_srv_secret_set(secrets, "KUBECONFIG", kubeconfig, strlen(kubeconfig), &err), 0);
    assert_int_equal(sbx_provider_kubernetes_new(settings, &env, &p, &err), 0);
    assert_null(p->ops->pause);
    assert_non_null(p->ops->check_create);
    p->ops->free(p);
    json_decref(settings);
    sbx_srv_secrets_free(secrets);
    (void)sbx_rm_rf(dir, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_current_context_token),
        cmocka_unit_test(test_named_context_cert),
        cmocka_unit_test(test_json_kubeconfig),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_in_cluster),
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_labels_quantities),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_lazy_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
