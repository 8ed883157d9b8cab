/*
 * kubernetes.c - the `kubernetes` provider: a sandbox is a Pod (kube_api.c speaks the API).
 *
 * The pod: `restartPolicy: Never`; an init container (the `execd_image`, holding the static
 * sbx-execd at /sbx-execd) runs `sbx-execd --install /opt/sbx/sbx-execd` into an emptyDir that
 * the main container (`sandbox`, the user's image) mounts read-only at /opt/sbx; the main
 * container's command is `/opt/sbx/sbx-execd --port 44772 --` and its args the user's
 * entrypoint, so execd starts it and any image works. env, resourceLimits and
 * resourceRequests map to the container; metadata become labels where they are valid label
 * keys and values; the pod carries `sbx.dev/sandbox-id` and `app.kubernetes.io/managed-by:
 * sbx`. Its name is `sbx-<id>` and the record keeps the namespace and name (sb->priv), so a
 * restarted server finds it again by name (and a create cut short, by label).
 *
 * The router reaches a port through the API server's pods/portforward (`connect =
 * "portforward"`, the default: sbx outside the cluster) or straight at the pod's IP
 * (`"pod-ip"`: sbx inside it). execd's token is in a Secret, never in the pod spec (see
 * post_secret). With `workspace_pvc_size` a PVC per sandbox is its workspace: stop deletes the
 * pod and keeps it, start makes a new pod on it; without one stop is refused (the pod's
 * filesystem would be lost). OpenSandbox `pvc` volumes mount claims of the namespace; host
 * paths are refused. Pause is not offered (the API answers 400).
 *
 * Lazy: credentials (a kubeconfig file, a kubeconfig held in sbx's secret store, or the
 * pod's service account in-cluster) are read on first use; `check` validates the settings at
 * startup without any I/O.
 */
#include "providers/kubernetes.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "providers/kube_api.h"
#include "providers/kube_watch.h"
#include "providers/launch.h"
#include "providers/providers.h"
#include "secrets/secrets.h"
#include "server/secretsrv.h"
#include "server/srvutil.h"

#define MOUNT_DIR  "/opt/sbx"
#define EXECD_PATH MOUNT_DIR "/sbx-execd"
#define EXECD_VOL  "sbx-execd"
/* execd's token: the Secret mounted in the init container only, copied into a memory
 * emptyDir that only the sandbox container mounts (read-write: execd removes the copy) */
#define SECRET_VOL      "sbx-token-secret"
#define SECRET_DIR      "/sbx-secret"
#define TOKEN_VOL       "sbx-token"
#define TOKEN_DIR       "/opt/sbx-token"
#define TOKEN_FILE      TOKEN_DIR "/token"
#define TOKEN_KEY       "token"
#define WS_VOL          "sbx-workspace"
#define REQ_PRIV        SBX_REQUESTS_PRIV
#define PING_TIMEOUT_MS 3000

const char *const sbx_provider_kubernetes_keys[] = {"kubeconfig",
                                                    "kubeconfig_secret",
                                                    "context",
                                                    "namespace",
                                                    "execd_image",
                                                    "service_account",
                                                    "runtime_class",
                                                    "node_selector",
                                                    "tolerations",
                                                    "image_pull_secrets",
                                                    "labels",
                                                    "connect",
                                                    "allow_insecure",
                                                    "wait_timeout_ms",
                                                    "poll_ms",
                                                    "request_timeout_ms",
                                                    "retries",
                                                    "workspace_pvc_size",
                                                    "storage_class",
                                                    "workspace_path",
                                                    "volume_default_size",
                                                    NULL};

/* ---- labels, quantities ---- */

static bool
name_part_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '_' && c != '.')
            return false;
    }
    return true;
}

/* A DNS subdomain (RFC 1123): lower-case labels joined by dots, at most 253 characters. */
static bool
dns_subdomain_ok(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        size_t len = i - start;
        if (len == 0 || len > 63 || s[start] == '-' || s[i - 1] == '-')
            return false;
        for (size_t j = start; j < i; j++) {
            unsigned char c = (unsigned char)s[j];
            if (!(islower(c) || isdigit(c) || c == '-'))
                return false;
        }
        start = i + 1;
    }
    return true;
}

bool
sbx_kube_label_key_ok(const char *k)
{
    const char *slash = strchr(k, '/');
    if (!slash)
        return name_part_ok(k, strlen(k));
    return dns_subdomain_ok(k, (size_t)(slash - k)) && name_part_ok(slash + 1, strlen(slash + 1));
}

bool
sbx_kube_label_value_ok(const char *v)
{
    return *v == '\0' || name_part_ok(v, strlen(v));
}

char *
sbx_kube_quantity(const char *resource, const char *value)
{
    if (!value || !*value)
        return NULL;
    if (strcmp(resource, "memory") == 0) {
        uint64_t bytes = 0;
        if (sbx_parse_size(value, &bytes, NULL) < 0 || bytes == 0)
            return NULL;
        return sbx_xasprintf("%llu", (unsigned long long)bytes);
    }
    if (strcmp(resource, "cpu") == 0) {
        char *end = NULL;
        errno = 0;
        double v = strtod(value, &end);
        if (end == value || errno || v <= 0 || (*end && strcmp(end, "m") != 0) ||
            strspn(value, "0123456789.m") != strlen(value))
            return NULL;
        return sbx_xstrdup(value);
    }
    return NULL;
}

/* ---- states ---- */

static const char *const fatal_waiting[] = {
    "ImagePullBackOff",           "ErrImagePull",         "InvalidImageName",  "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff",
};

static bool
is_fatal_waiting(const char *reason)
{
    for (size_t i = 0; reason && i < SBX_ARRAY_SIZE(fatal_waiting); i++) {
        if (strcmp(reason, fatal_waiting[i]) == 0)
            return true;
    }
    return false;
}

static const json_t *
state_of(const json_t *cs, const char *which)
{
    const json_t *s = json_object_get(json_object_get(cs, "state"), which);
    return json_is_object(s) ? s : NULL;
}

/* The first container status (init ones first) that is waiting for a fatal reason, or that
 * as an init container terminated with a non-zero code. */
static const json_t *
blocking_status(const json_t *status, const char **reason, const char **message)
{
    static const char *const keys[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t k = 0; k < SBX_ARRAY_SIZE(keys); k++) {
        size_t i = 0;
        json_t *cs = NULL;
        json_array_foreach (json_object_get(status, keys[k]), i, cs) {
            const json_t *w = state_of(cs, "waiting");
            const char *r = json_string_value(json_object_get(w, "reason"));
            if (w && is_fatal_waiting(r)) {
                *reason = r;
                *message = json_string_value(json_object_get(w, "message"));
                return cs;
            }
            const json_t *t = state_of(cs, "terminated");
            if (k == 0 && t && json_integer_value(json_object_get(t, "exitCode")) != 0) {
                *reason = "InitContainerFailed";
                *message = json_string_value(json_object_get(t, "message"));
                return cs;
            }
        }
    }
    return NULL;
}

/* The sandbox container's status (or the first one). */
static const json_t *
main_status(const json_t *status)
{
    const json_t *all = json_object_get(status, "containerStatuses");
    size_t i = 0;
    json_t *cs = NULL;
    json_array_foreach (all, i, cs) {
        const char *n = json_string_value(json_object_get(cs, "name"));
        if (n && strcmp(n, SBX_KUBE_CONTAINER) == 0)
            return cs;
    }
    return json_array_get(all, 0);
}

/* Pending: what it waits for (a container's waiting reason, else Unschedulable, else
 * Pending). */
static const char *
pending_reason(const json_t *status, const char **message)
{
    static const char *const keys[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t k = 0; k < SBX_ARRAY_SIZE(keys); k++) {
        size_t i = 0;
        json_t *cs = NULL;
        json_array_foreach (json_object_get(status, keys[k]), i, cs) {
            const json_t *w = state_of(cs, "waiting");
            const char *r = json_string_value(json_object_get(w, "reason"));
            if (r && strcmp(r, "PodInitializing") != 0) {
                *message = json_string_value(json_object_get(w, "message"));
                return r;
            }
        }
    }
    size_t i = 0;
    json_t *c = NULL;
    json_array_foreach (json_object_get(status, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        const char *r = json_string_value(json_object_get(c, "reason"));
        if (t && strcmp(t, "PodScheduled") == 0 && s && strcmp(s, "False") == 0 && r) {
            *message = json_string_value(json_object_get(c, "message"));
            return r;
        }
    }
    return json_array_size(json_object_get(status, "initContainerStatuses")) ? "PodInitializing"
                                                                             : "Pending";
}

enum sbx_state_class
sbx_kube_classify(const json_t *pod, struct sbx_provider_status *out, const char **message)
{
    const json_t *status = json_object_get(pod, "status");
    const char *phase = json_string_value(json_object_get(status, "phase"));
    const char *msg = NULL;
    const char *reason = NULL;
    enum sbx_state_class cls = SBX_CLASS_TRANSIENT;
    char word[SBX_NAME_MAX];
    (void)snprintf(word, sizeof word, "%s", phase ? phase : "pending");
    word[0] = (char)tolower((unsigned char)word[0]);
    if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
        cls = SBX_CLASS_TERMINAL;
        reason = "SANDBOX_LOST";
        msg = "the pod is being deleted";
        (void)snprintf(word, sizeof word, "terminating");
    } else if (!phase || strcmp(phase, "Pending") == 0) {
        if (blocking_status(status, &reason, &msg))
            cls = SBX_CLASS_TERMINAL;
        else
            reason = pending_reason(status, &msg);
    } else if (strcmp(phase, "Running") == 0) {
        cls = SBX_CLASS_USABLE;
        reason = "Running";
    } else if (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0) {
        cls = SBX_CLASS_TERMINAL;
        reason = json_string_value(json_object_get(status, "reason"));
        msg = json_string_value(json_object_get(status, "message"));
        const json_t *t = state_of(main_status(status), "terminated");
        if (!reason && t) {
            reason = json_string_value(json_object_get(t, "reason"));
            msg = json_string_value(json_object_get(t, "message"));
        }
        if (!reason)
            (void)blocking_status(status, &reason, &msg);
        if (!reason)
            reason = phase;
    } else {
        /* Unknown: the node stopped reporting */
        cls = SBX_CLASS_TERMINAL;
        reason = json_string_value(json_object_get(status, "reason"));
        msg = json_string_value(json_object_get(status, "message"));
        if (!reason)
            reason = "NodeLost";
    }
    sbx_provider_status_set(out, word, cls, reason);
    if (message)
        *message = msg;
    return cls;
}

/* ---- settings ---- */

struct settings {
    const char *kubeconfig, *kubeconfig_secret, *context, *namespace, *execd_image, *sa,
        *runtime_class, *connect, *ws_size, *storage_class, *ws_path, *vol_size;
    const json_t *node_selector, *pull_secrets, *labels;
    const char *tolerations;
    bool allow_insecure;
    long wait_ms, poll_ms, req_ms, retries;
};

static int
bad(sbx_error **err, const char *key, const char *what)
{
    return sbx_error_set(err, SBX_EINVAL, 0, "providers.kubernetes.%s %s", key, what);
}

/* ["k=v", ...] as {k: v} (labels, node_selector); NULL when an entry is not k=v with a valid
 * label key and value. */
static json_t *
kv_list(const json_t *list)
{
    json_t *o = json_object();
    size_t i = 0;
    json_t *it = NULL;
    json_array_foreach (list, i, it) {
        const char *s = json_string_value(it);
        const char *eq = s ? strchr(s, '=') : NULL;
        if (!eq) {
            json_decref(o);
            return NULL;
        }
        sbx_autofree char *k = sbx_xstrndup(s, (size_t)(eq - s));
        if (!sbx_kube_label_key_ok(k) || !sbx_kube_label_value_ok(eq + 1)) {
            json_decref(o);
            return NULL;
        }
        (void)json_object_set_new(o, k, json_string(eq + 1));
    }
    return o;
}

static int
check_types(const json_t *s, sbx_error **err)
{
    static const char *const ints[] = {"wait_timeout_ms", "poll_ms", "request_timeout_ms",
                                       "retries"};
    static const long mins[] = {1000, 10, 1000, 0};
    static const char *const lists[] = {"node_selector", "image_pull_secrets", "labels"};
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach ((json_t *)s, k, v) {
        bool done = false;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(ints); i++) {
            if (strcmp(k, ints[i]) != 0)
                continue;
            if (!json_is_integer(v) || json_integer_value(v) < mins[i] ||
                (strcmp(k, "retries") == 0 && json_integer_value(v) > 10))
                return sbx_error_set(err, SBX_EINVAL, 0,
                                     "providers.kubernetes.%s must be an integer >= %ld", k,
                                     mins[i]);
            done = true;
        }
        for (size_t i = 0; i < SBX_ARRAY_SIZE(lists); i++) {
            if (strcmp(k, lists[i]) != 0)
                continue;
            size_t j = 0;
            json_t *it = NULL;
            if (!json_is_array(v))
                return bad(err, k, "must be a list of strings");
            json_array_foreach (v, j, it) {
                if (!json_is_string(it) || json_string_length(it) == 0)
                    return bad(err, k, "must be a list of non-empty strings");
            }
            done = true;
        }
        if (strcmp(k, "allow_insecure") == 0) {
            if (!json_is_boolean(v))
                return bad(err, k, "must be true or false");
            done = true;
        }
        if (!done && (!json_is_string(v) || json_string_length(v) == 0))
            return bad(err, k, "must be a non-empty string");
    }
    return 0;
}

/* A storage size as OpenSandbox's PVC.storage takes it: ^\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei)?$ */
bool
sbx_kube_size_ok(const char *s)
{
    size_t n = strspn(s, "0123456789");
    if (n == 0)
        return false;
    s += n;
    if (*s == '.') {
        n = strspn(s + 1, "0123456789");
        if (n == 0)
            return false;
        s += 1 + n;
    }
    if (!*s)
        return true;
    return strlen(s) == 2 && strchr("KMGTPE", s[0]) && s[1] == 'i';
}

/* Where execd and its token live in the sandbox container: no volume may be mounted on or
 * over them (it would hide execd, or let a volume's files stand in for them). */
static bool
clashes_execd(const char *path)
{
    static const char *const own[] = {MOUNT_DIR, TOKEN_DIR};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(own); i++) {
        size_t n = strlen(path);
        size_t m = strlen(own[i]);
        /* path is own[i], below it, or one of its parents */
        if ((strncmp(path, own[i], m) == 0 && (path[m] == '\0' || path[m] == '/')) ||
            (strncmp(own[i], path, n) == 0 && (own[i][n] == '/' || n == 1)))
            return true;
    }
    return false;
}

static int
check_storage(const struct settings *st, sbx_error **err)
{
    if (st->ws_size && !sbx_kube_size_ok(st->ws_size))
        return bad(err, "workspace_pvc_size", "must be a size like \"10Gi\" (Ki..Ei)");
    if (!sbx_kube_size_ok(st->vol_size))
        return bad(err, "volume_default_size", "must be a size like \"1Gi\" (Ki..Ei)");
    if (st->storage_class && !dns_subdomain_ok(st->storage_class, strlen(st->storage_class)))
        return bad(err, "storage_class", "is not a valid StorageClass name");
    const char *w = st->ws_path;
    if (w[0] != '/' || strcmp(w, "/") == 0 || strstr(w, "//") || strstr(w, "/./") ||
        strstr(w, "/../") || w[strlen(w) - 1] == '/' || clashes_execd(w))
        return bad(err, "workspace_path",
                   "must be an absolute, normalized path other than `/`, " MOUNT_DIR
                   " and " TOKEN_DIR);
    return 0;
}

static int
check_values(const struct settings *st, sbx_error **err)
{
    if (check_storage(st, err) < 0)
        return -SBX_EINVAL;
    if (st->kubeconfig && st->kubeconfig_secret)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "providers.kubernetes: set kubeconfig or kubeconfig_secret, not both");
    if (st->kubeconfig_secret && !sbx_secret_name_valid(st->kubeconfig_secret))
        return bad(err, "kubeconfig_secret", "is not a valid secret name");
    if (st->kubeconfig && st->kubeconfig[0] != '/')
        return bad(err, "kubeconfig", "must be an absolute path");
    if (strcmp(st->connect, "portforward") != 0 && strcmp(st->connect, "pod-ip") != 0)
        return bad(err, "connect", "must be \"portforward\" or \"pod-ip\"");
    if (st->namespace && !dns_subdomain_ok(st->namespace, strlen(st->namespace)))
        return bad(err, "namespace", "is not a valid namespace name");
    if (st->sa && !dns_subdomain_ok(st->sa, strlen(st->sa)))
        return bad(err, "service_account", "is not a valid service account name");
    if (st->runtime_class && !dns_subdomain_ok(st->runtime_class, strlen(st->runtime_class)))
        return bad(err, "runtime_class", "is not a valid RuntimeClass name");
    const json_t *kvs[] = {st->node_selector, st->labels};
    const char *names[] = {"node_selector", "labels"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(kvs); i++) {
        json_t *o = kv_list(kvs[i]);
        if (!o)
            return bad(err, names[i],
                       "must be a list of \"key=value\" with valid label keys "
                       "and values");
        json_decref(o);
    }
    size_t i = 0;
    json_t *it = NULL;
    json_array_foreach (st->pull_secrets, i, it) {
        const char *n = json_string_value(it);
        if (!dns_subdomain_ok(n, strlen(n)))
            return bad(err, "image_pull_secrets", "must name secrets (DNS subdomain names)");
    }
    if (st->tolerations) {
        json_t *t = json_loads(st->tolerations, 0, NULL);
        bool ok = json_is_array(t);
        json_array_foreach (t, i, it)
            ok = ok && json_is_object(it);
        json_decref(t);
        if (!ok)
            return bad(err, "tolerations",
                       "must be a JSON array of Toleration objects, e.g. "
                       "'[{\"key\": \"sandbox\", \"operator\": \"Exists\", \"effect\": "
                       "\"NoSchedule\"}]'");
    }
    return 0;
}

static int
read_settings(const json_t *s, struct settings *out, sbx_error **err)
{
    if (check_types(s, err) < 0)
        return -SBX_EINVAL;
    *out = (struct settings){
        .kubeconfig = sbx_srv_setting_str(s, "kubeconfig", NULL),
        .kubeconfig_secret = sbx_srv_setting_str(s, "kubeconfig_secret", NULL),
        .context = sbx_srv_setting_str(s, "context", NULL),
        .namespace = sbx_srv_setting_str(s, "namespace", NULL),
        .execd_image = sbx_srv_setting_str(s, "execd_image", "sbx-execd:" SBX_VERSION),
        .sa = sbx_srv_setting_str(s, "service_account", NULL),
        .runtime_class = sbx_srv_setting_str(s, "runtime_class", NULL),
        .connect = sbx_srv_setting_str(s, "connect", "portforward"),
        .node_selector = json_object_get(s, "node_selector"),
        .pull_secrets = json_object_get(s, "image_pull_secrets"),
        .labels = json_object_get(s, "labels"),
        .tolerations = sbx_srv_setting_str(s, "tolerations", NULL),
        .allow_insecure = json_is_true(json_object_get(s, "allow_insecure")),
        .wait_ms = sbx_srv_setting_int(s, "wait_timeout_ms", 300000),
        .poll_ms = sbx_srv_setting_int(s, "poll_ms", 500),
        .req_ms = sbx_srv_setting_int(s, "request_timeout_ms", 30000),
        .retries = sbx_srv_setting_int(s, "retries", 3),
        .ws_size = sbx_srv_setting_str(s, "workspace_pvc_size", NULL),
        .storage_class = sbx_srv_setting_str(s, "storage_class", NULL),
        .ws_path = sbx_srv_setting_str(s, "workspace_path", "/workspace"),
        .vol_size = sbx_srv_setting_str(s, "volume_default_size", "1Gi"),
    };
    return check_values(out, err);
}

int
sbx_provider_kubernetes_check(const json_t *settings, sbx_error **err)
{
    struct settings st;
    return read_settings(settings, &st, err);
}

/* ---- the provider ---- */

struct kube {
    struct kube_client *api;
    struct kube_watch *watch; /* the pods of ns labelled managed-by=sbx, kept by a thread */
    char *ns;
    char *execd_image;
    char *sa, *runtime_class;
    json_t *node_selector, *labels, *pull_secrets, *tolerations;
    char *ws_size, *storage_class, *ws_path, *vol_size; /* ws_size NULL: no workspace PVC */
    bool pod_ip;
    long wait_ms, poll_ms;
};

static struct kube *
kd(struct sbx_provider *p)
{
    return p->data;
}

static const char *
priv_str(const struct sbx_record *sb, const char *key)
{
    const char *s = json_string_value(json_object_get(sb->priv, key));
    return s ? s : "";
}

static char *
obj_path(const char *ns, const char *res, const char *name)
{
    return sbx_xasprintf("/api/v1/namespaces/%s/%s%s%s", ns, res, name ? "/" : "",
                         name ? name : "");
}

static char *
pod_path(const char *ns, const char *name)
{
    return sbx_xasprintf("/api/v1/namespaces/%s/pods%s%s", ns, name ? "/" : "", name ? name : "");
}

/* GET the pod of sb: 0 with *pod, SBX_ENOTFOUND when there is none. */
static int
get_pod(struct kube *k, const struct sbx_record *sb, json_t **pod, sbx_error **err)
{
    sbx_autofree char *path = pod_path(priv_str(sb, "namespace"), priv_str(sb, "pod"));
    struct kube_resp r;
    if (kube_call(k->api, "GET", path, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    int rc = 0;
    if (r.status == 200 && json_is_object(r.json))
        *pod = json_incref(r.json);
    else
        rc = kube_fail(&r, "get pod", err);
    kube_resp_dispose(&r);
    return rc;
}

/* The pod of sb as the watch saw it last; when the watch does not have it (not watching now,
 * another namespace, absent: maybe not seen yet, maybe gone), as the API server answers. */
static int
look_pod(struct kube *k, const struct sbx_record *sb, json_t **pod, sbx_error **err)
{
    if (kube_watch_get(k->watch, priv_str(sb, "namespace"), priv_str(sb, "pod"), pod) ==
        KUBE_PRESENT)
        return 0;
    json_decref(*pod);
    *pod = NULL;
    return get_pod(k, sb, pod, err);
}

/* Kubernetes expands $(VAR) in command, args and env values: `$$` is its escape. */
static json_t *
escaped(const char *s)
{
    struct sbx_buf o;
    sbx_buf_init(&o, 1 << 20);
    for (const char *p = s; *p; p++) {
        if (*p == '$')
            (void)sbx_buf_append_str(&o, "$$", NULL);
        else
            (void)sbx_buf_append(&o, p, 1, NULL);
    }
    sbx_autofree char *t = sbx_buf_steal(&o);
    return json_string(t);
}

static json_t *
pod_labels(struct kube *k, const struct sbx_record *sb)
{
    json_t *l = json_object();
    const char *key = NULL;
    json_t *v = NULL;
    json_object_foreach (sb->metadata, key, v) {
        const char *s = json_string_value(v);
        if (s && sbx_kube_label_key_ok(key) && sbx_kube_label_value_ok(s))
            (void)json_object_set_new(l, key, json_string(s));
    }
    (void)json_object_update(l, k->labels);
    (void)json_object_set_new(l, SBX_KUBE_LABEL_ID, json_string(sb->id));
    (void)json_object_set_new(l, SBX_KUBE_LABEL_MANAGED, json_string("sbx"));
    return l;
}

static json_t *
resources_of(const json_t *src)
{
    json_t *o = json_object();
    const char *key = NULL;
    json_t *v = NULL;
    json_object_foreach ((json_t *)src, key, v) {
        char *q = sbx_kube_quantity(key, json_string_value(v));
        if (q)
            (void)json_object_set_new(o, key, json_string(q));
        free(q);
    }
    return o;
}

static json_t *
container_env(const struct sbx_record *sb)
{
    json_t *env = json_array();
    const char *key = NULL;
    json_t *v = NULL;
    json_object_foreach (sb->env, key, v) {
        if (!json_is_string(v) || strcmp(key, "EXECD_ACCESS_TOKEN") == 0 ||
            strncmp(key, "SBX_EXECD", 9) == 0)
            continue;
        (void)json_array_append_new(
            env, json_pack("{s:s, s:o}", "name", key, "value", escaped(json_string_value(v))));
    }
    return env;
}

/* The request's `pvc` volumes (check_create accepted them) as pod volumes and mounts.
 * Security: only claims of the sandbox's namespace are named (no hostPath or any other source
 * is ever made from a request); the API refused absolute and `..` subPaths and normalized the
 * mountPath, check_create refused mounts over execd and its token; the kubelet resolves a
 * subPath inside the volume and refuses one that leaves it through a symlink. */
static void
user_volumes(const struct sbx_record *sb, json_t *vols, json_t *mounts)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (json_object_get(sb->priv, "volumes"), i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        const char *claim =
            json_string_value(json_object_get(json_object_get(v, "pvc"), "claimName"));
        const char *mp = json_string_value(json_object_get(v, "mountPath"));
        const char *sub = json_string_value(json_object_get(v, "subPath"));
        bool ro = json_is_true(json_object_get(v, "readOnly"));
        if (!name || !claim || !mp)
            continue;
        (void)json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:b}}", "name", name,
                                                    "persistentVolumeClaim", "claimName", claim,
                                                    "readOnly", ro));
        json_t *m = json_pack("{s:s, s:s, s:b}", "name", name, "mountPath", mp, "readOnly", ro);
        if (sub && *sub)
            (void)json_object_set_new(m, "subPath", json_string(sub));
        (void)json_array_append_new(mounts, m);
    }
}

static json_t *
main_mounts(const struct sbx_record *sb)
{
    json_t *m = json_pack("[{s:s, s:s, s:b}, {s:s, s:s}]", "name", EXECD_VOL, "mountPath",
                          MOUNT_DIR, "readOnly", 1, "name", TOKEN_VOL, "mountPath", TOKEN_DIR);
    if (*priv_str(sb, "workspace"))
        (void)json_array_append_new(
            m, json_pack("{s:s, s:s}", "name", WS_VOL, "mountPath", priv_str(sb, "ws_path")));
    json_t *unused = json_array();
    user_volumes(sb, unused, m);
    json_decref(unused);
    return m;
}

static json_t *
main_container(const struct sbx_record *sb)
{
    json_t *cmd = json_pack("[s, s, s, s, s]", EXECD_PATH, "--port", "44772", "--access-token-file",
                            TOKEN_FILE);
    const char *desk = sbx_launch_desktop(sb);
    if (desk) {
        (void)json_array_append_new(cmd, json_string("--desktop"));
        (void)json_array_append_new(cmd, escaped(desk));
    }
    (void)json_array_append_new(cmd, json_string("--"));
    json_t *args = json_array();
    size_t i = 0;
    json_t *a = NULL;
    json_array_foreach (sb->entrypoint, i, a)
        (void)json_array_append_new(args,
                                    escaped(json_string_value(a) ? json_string_value(a) : ""));
    json_t *res = json_object();
    json_t *lim = resources_of(sb->limits);
    json_t *req = resources_of(json_object_get(sb->priv, REQ_PRIV));
    if (json_object_size(lim))
        (void)json_object_set(res, "limits", lim);
    if (json_object_size(req))
        (void)json_object_set(res, "requests", req);
    json_decref(lim);
    json_decref(req);
    const char *uri = json_string_value(json_object_get(sb->image, "uri"));
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "name", SBX_KUBE_CONTAINER, "image",
                     uri ? uri : "", "command", cmd, "args", args, "env", container_env(sb),
                     "resources", res, "volumeMounts", main_mounts(sb));
}

/* The init container installs execd and copies the token out of the Secret (mounted here
 * only) into the sandbox container's memory volume. */
static json_t *
init_container(struct kube *k)
{
    return json_pack("{s:s, s:s, s:[s, s, s, s, s], s:[{s:s, s:s}, {s:s, s:s}, {s:s, s:s, s:b}]}",
                     "name", "sbx-execd-install", "image", k->execd_image, "command", "/sbx-execd",
                     "--install", EXECD_PATH, "--install-token",
                     SECRET_DIR "/" TOKEN_KEY ":" TOKEN_FILE, "volumeMounts", "name", EXECD_VOL,
                     "mountPath", MOUNT_DIR, "name", TOKEN_VOL, "mountPath", TOKEN_DIR, "name",
                     SECRET_VOL, "mountPath", SECRET_DIR, "readOnly", 1);
}

static json_t *
pod_volumes(const struct sbx_record *sb)
{
    json_t *v = json_pack("[{s:s, s:{}}, {s:s, s:{s:s, s:s}}, {s:s, s:{s:s, s:i, s:[{s:s, s:s}]}}]",
                          "name", EXECD_VOL, "emptyDir", "name", TOKEN_VOL, "emptyDir", "medium",
                          "Memory", "sizeLimit", "1Mi", "name", SECRET_VOL, "secret", "secretName",
                          priv_str(sb, "secret"), "defaultMode", 0400, "items", "key", TOKEN_KEY,
                          "path", TOKEN_KEY);
    if (*priv_str(sb, "workspace"))
        (void)json_array_append_new(v, json_pack("{s:s, s:{s:s}}", "name", WS_VOL,
                                                 "persistentVolumeClaim", "claimName",
                                                 priv_str(sb, "workspace")));
    json_t *unused = json_array();
    user_volumes(sb, v, unused);
    json_decref(unused);
    return v;
}

static json_t *
pod_spec(struct kube *k, const struct sbx_record *sb)
{
    json_t *spec = json_pack("{s:s, s:b, s:b, s:o, s:[o], s:[o]}", "restartPolicy", "Never",
                             "enableServiceLinks", 0, "automountServiceAccountToken", k->sa != NULL,
                             "volumes", pod_volumes(sb), "initContainers", init_container(k),
                             "containers", main_container(sb));
    if (k->sa)
        (void)json_object_set_new(spec, "serviceAccountName", json_string(k->sa));
    if (k->runtime_class)
        (void)json_object_set_new(spec, "runtimeClassName", json_string(k->runtime_class));
    if (json_object_size(k->node_selector))
        (void)json_object_set(spec, "nodeSelector", k->node_selector);
    if (json_array_size(k->tolerations))
        (void)json_object_set(spec, "tolerations", k->tolerations);
    if (json_array_size(k->pull_secrets)) {
        json_t *ps = json_array();
        size_t i = 0;
        json_t *it = NULL;
        json_array_foreach (k->pull_secrets, i, it)
            (void)json_array_append_new(ps, json_pack("{s:O}", "name", it));
        (void)json_object_set_new(spec, "imagePullSecrets", ps);
    }
    json_t *meta = json_pack("{s:s, s:s, s:o}", "name", priv_str(sb, "pod"), "namespace",
                             priv_str(sb, "namespace"), "labels", pod_labels(k, sb));
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", meta,
                     "spec", spec);
}

/* ---- check_create ---- */

static int
refuse(const char **code, const char *c, sbx_error **err, const char *msg)
{
    *code = c;
    return sbx_error_set(err, SBX_EINVAL, 0, "%s", msg);
}

/* Is claim in the namespace? 1 yes, 0 no, <0 the API could not say. */
static int
claim_exists(struct kube *k, const char *claim, sbx_error **err)
{
    sbx_autofree char *path = obj_path(k->ns, "persistentvolumeclaims", claim);
    struct kube_resp r;
    if (kube_call(k->api, "GET", path, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    int rc = r.status == 200 ? 1 : r.status == 404 ? 0 : kube_fail(&r, "get pvc", err);
    kube_resp_dispose(&r);
    return rc;
}

static int
vol_refuse(const char **code, const char *c, sbx_error **err, size_t i, const char *msg)
{
    *code = c;
    return sbx_error_set(err, SBX_EINVAL, 0, "volumes[%zu]: %s", i, msg);
}

/* The pvc fields the API does not check (it knows no provider's quantities). */
static int
check_pvc_fields(const json_t *pvc, size_t i, const char **code, sbx_error **err)
{
    const json_t *size = json_object_get(pvc, "storage");
    if (size && !json_is_null(size) &&
        (!json_is_string(size) || !sbx_kube_size_ok(json_string_value(size))))
        return vol_refuse(code, "SANDBOX::INVALID_PARAMETER", err, i,
                          "`pvc.storage` must be a size like \"1Gi\" (Ki..Ei)");
    const json_t *sc = json_object_get(pvc, "storageClass");
    const char *scs = json_string_value(sc);
    if (sc && !json_is_null(sc) && (!scs || !dns_subdomain_ok(scs, strlen(scs))))
        return vol_refuse(code, "SANDBOX::INVALID_PARAMETER", err, i,
                          "`pvc.storageClass` is not a StorageClass name");
    static const char *const modes[] = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany",
                                        "ReadWriteOncePod"};
    const json_t *am = json_object_get(pvc, "accessModes");
    size_t j = 0;
    json_t *m = NULL;
    if (am && !json_is_null(am) && !json_is_array(am))
        return vol_refuse(code, "SANDBOX::INVALID_PARAMETER", err, i,
                          "`pvc.accessModes` must be an array");
    json_array_foreach (am, j, m) {
        bool ok = false;
        for (size_t x = 0; x < SBX_ARRAY_SIZE(modes); x++)
            ok = ok || (json_is_string(m) && strcmp(json_string_value(m), modes[x]) == 0);
        if (!ok)
            return vol_refuse(code, "SANDBOX::INVALID_PARAMETER", err, i,
                              "`pvc.accessModes` takes ReadWriteOnce, ReadOnlyMany, "
                              "ReadWriteMany, ReadWriteOncePod");
    }
    return 0;
}

/* One volume: only `pvc` (a claim in the namespace); host paths and ossfs are refused. */
static int
check_volume(struct kube *k, const json_t *v, size_t i, const char **code, sbx_error **err)
{
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *mp = json_string_value(json_object_get(v, "mountPath"));
    const json_t *pvc = json_object_get(v, "pvc");
    if (!pvc)
        return vol_refuse(code, "VOLUME::UNSUPPORTED_BACKEND", err, i,
                          json_object_get(v, "host")
                              ? "`host`: provider `kubernetes` does not bind host paths (a "
                                "node's files are not the sandbox's to see); use a `pvc`"
                              : "`ossfs`: provider `kubernetes` mounts `pvc` volumes only");
    if (name && strncmp(name, "sbx-", 4) == 0)
        return vol_refuse(code, "VOLUME::INVALID_NAME", err, i,
                          "`name`: names starting with `sbx-` are provider `kubernetes`'s own");
    if (mp &&
        (clashes_execd(mp) || (k->ws_size && strncmp(mp, k->ws_path, strlen(k->ws_path)) == 0 &&
                               (mp[strlen(k->ws_path)] == '\0' || mp[strlen(k->ws_path)] == '/'))))
        return vol_refuse(code, "VOLUME::INVALID_MOUNT_PATH", err, i,
                          "`mountPath`: provider `kubernetes` keeps execd at " MOUNT_DIR
                          " and its token at " TOKEN_DIR ", and the workspace there");
    if (check_pvc_fields(pvc, i, code, err) < 0)
        return -SBX_EINVAL;
    const char *claim = json_string_value(json_object_get(pvc, "claimName"));
    if (!json_is_false(json_object_get(pvc, "createIfNotExists")))
        return 0;
    int r = claim_exists(k, claim, err);
    if (r < 0) {
        *code = "SANDBOX::PROVIDER_UNAVAILABLE";
        return sbx_error_wrap(err, "volumes[%zu]: pvc `%s`", i, claim);
    }
    if (r == 0) {
        *code = "VOLUME::PVC_NOT_FOUND";
        return sbx_error_set(err, SBX_ENOTFOUND, 0,
                             "volumes[%zu]: pvc `%s` does not exist in namespace `%s` (and "
                             "createIfNotExists is false)",
                             i, claim, k->ns);
    }
    return 0;
}

static int
kube_check_create(struct sbx_provider *p, const json_t *req, const char **code, sbx_error **err)
{
    struct kube *k = kd(p);
    size_t vi = 0;
    json_t *vol = NULL;
    json_array_foreach (json_object_get(req, "volumes"), vi, vol) {
        if (check_volume(k, vol, vi, code, err) < 0)
            return -SBX_EINVAL;
    }
    const json_t *image = json_object_get(req, "image");
    const char *uri = json_string_value(json_object_get(image, "uri"));
    if (!uri || !*uri || strcmp(uri, "host") == 0)
        return refuse(code, "SANDBOX::INVALID_PARAMETER", err,
                      "`image.uri`: provider `kubernetes` runs container images; the built-in "
                      "`host` image does not exist in a cluster");
    if (json_object_get(image, "auth") && !json_is_null(json_object_get(image, "auth")))
        return refuse(code, "SANDBOX::API_NOT_SUPPORTED", err,
                      "`image.auth` is not supported by provider `kubernetes`: give the "
                      "cluster a pull secret (providers.kubernetes.image_pull_secrets)");
    static const char *const kinds[] = {"resourceLimits", "resourceRequests"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(kinds); i++) {
        const char *key = NULL;
        json_t *v = NULL;
        json_object_foreach (json_object_get(req, kinds[i]), key, v) {
            char *q = sbx_kube_quantity(key, json_string_value(v));
            free(q);
            if (q)
                continue;
            *code = strcmp(key, "cpu") == 0 || strcmp(key, "memory") == 0
                        ? "SANDBOX::INVALID_PARAMETER"
                        : "SANDBOX::API_NOT_SUPPORTED";
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "`%s.%.64s`: provider `kubernetes` takes cpu (\"500m\", "
                                 "\"2\") and memory (\"512Mi\", \"2g\") only",
                                 kinds[i], key);
        }
    }
    return 0;
}

/* ---- lifecycle ---- */

static int
kube_create(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    (void)err;
    struct kube *k = kd(p);
    char token[65];
    sbx_srv_random_hex(token, 32);
    (void)json_object_set_new(sb->priv, "token", json_string(token));
    (void)json_object_set_new(sb->priv, "namespace", json_string(k->ns));
    sbx_autofree char *name = sbx_xasprintf("sbx-%s", sb->id);
    (void)json_object_set_new(sb->priv, "pod", json_string(name));
    sbx_autofree char *secret = sbx_xasprintf("sbx-%s-token", sb->id);
    (void)json_object_set_new(sb->priv, "secret", json_string(secret));
    if (k->ws_size) {
        sbx_autofree char *ws = sbx_xasprintf("sbx-%s-workspace", sb->id);
        (void)json_object_set_new(sb->priv, "workspace", json_string(ws));
        (void)json_object_set_new(sb->priv, "ws_path", json_string(k->ws_path));
        (void)json_object_set_new(sb->priv, "ws_size", json_string(k->ws_size));
    }
    return 0;
}

/* Whether the object at ns/res/name carries this sandbox's id label (409 on a create: ours
 * from a retried start, or someone else's). */
static int
owned_by(struct kube *k, const struct sbx_record *sb, const char *res, const char *name,
         sbx_error **err)
{
    sbx_autofree char *path = obj_path(priv_str(sb, "namespace"), res, name);
    struct kube_resp r;
    if (kube_call(k->api, "GET", path, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    const char *id = json_string_value(json_object_get(
        json_object_get(json_object_get(r.json, "metadata"), "labels"), SBX_KUBE_LABEL_ID));
    bool ours = r.status == 200 && id && strcmp(id, sb->id) == 0;
    kube_resp_dispose(&r);
    return ours ? 0
                : sbx_error_set(err, SBX_ECONFLICT, 0,
                                "%s `%s` that sbx did not make for this sandbox exists in "
                                "namespace `%s`",
                                res, name, priv_str(sb, "namespace"));
}

/* POST an object (res: "pods", "secrets", ...) of this sandbox; an AlreadyExists of our own
 * object (a start retried) is fine. */
static int
post_owned(struct kube *k, struct sbx_record *sb, const char *res, json_t *obj, sbx_error **err)
{
    const char *n = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    sbx_autofree char *name = sbx_xstrdup(n ? n : "");
    sbx_autofree char *what = sbx_xasprintf("create %s `%s`", res, name);
    sbx_autofree char *path = obj_path(priv_str(sb, "namespace"), res, NULL);
    struct kube_resp r;
    int rc = kube_call(k->api, "POST", path, obj, &r, err);
    json_decref(obj);
    if (rc < 0)
        return rc;
    long st = r.status;
    if (st == 201 || st == 200 || st == 202)
        rc = 0;
    else if (st == 409)
        rc = owned_by(k, sb, res, name, err);
    else if (st == 404)
        rc = sbx_error_set(err, SBX_EINVAL, 0, "namespace `%s` does not exist (HTTP 404)",
                           priv_str(sb, "namespace"));
    else
        rc = kube_fail(&r, what, err);
    kube_resp_dispose(&r);
    return rc;
}

/* DELETE ns/res/name; 404 is done already. 1 when it was gone. */
static int
delete_named(struct kube *k, const char *ns, const char *res, const char *name, sbx_error **err)
{
    sbx_autofree char *path = obj_path(ns, res, name);
    sbx_autofree char *what = sbx_xasprintf("delete %s `%s`", res, name);
    struct kube_resp r;
    if (kube_call(k->api, "DELETE", path, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    int rc = r.status == 404 ? 1 : r.status >= 200 && r.status < 300 ? 0 : kube_fail(&r, what, err);
    kube_resp_dispose(&r);
    return rc;
}

static json_t *
owned_meta(const struct sbx_record *sb, const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}}", "name", name, "namespace",
                     priv_str(sb, "namespace"), "labels", SBX_KUBE_LABEL_ID, sb->id,
                     SBX_KUBE_LABEL_MANAGED, "sbx");
}

/* execd's token as an immutable Secret the pod mounts (in its init container only): not in
 * the pod spec, where anyone who may read pods would see it. */
static int
post_secret(struct kube *k, struct sbx_record *sb, sbx_error **err)
{
    json_t *sec =
        json_pack("{s:s, s:s, s:o, s:s, s:b, s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
                  "metadata", owned_meta(sb, priv_str(sb, "secret")), "type", "Opaque", "immutable",
                  1, "stringData", TOKEN_KEY, priv_str(sb, "token"));
    return post_owned(k, sb, "secrets", sec, err);
}

static json_t *
pvc_spec(const char *size, const char *storage_class, const json_t *modes)
{
    json_t *spec = json_pack("{s:O, s:{s:{s:s}}}", "accessModes", modes, "resources", "requests",
                             "storage", size);
    if (storage_class && *storage_class)
        (void)json_object_set_new(spec, "storageClassName", json_string(storage_class));
    return spec;
}

/* The workspace claim: this sandbox's own (its id label), kept over stop/start. */
static int
post_workspace(struct kube *k, struct sbx_record *sb, sbx_error **err)
{
    if (!*priv_str(sb, "workspace"))
        return 0;
    json_t *modes = json_pack("[s]", "ReadWriteOnce");
    json_t *pvc =
        json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "PersistentVolumeClaim",
                  "metadata", owned_meta(sb, priv_str(sb, "workspace")), "spec",
                  pvc_spec(priv_str(sb, "ws_size"), k->storage_class, modes));
    json_decref(modes);
    return post_owned(k, sb, "persistentvolumeclaims", pvc, err);
}

/* One `pvc` volume's claim: made when missing and createIfNotExists (the default; it is no
 * sandbox's, so delete leaves it, as OpenSandbox says for Kubernetes), else it must exist. */
static int
ensure_claim(struct kube *k, const struct sbx_record *sb, const json_t *pvc, sbx_error **err)
{
    const char *claim = json_string_value(json_object_get(pvc, "claimName"));
    const char *ns = priv_str(sb, "namespace");
    sbx_autofree char *path = obj_path(ns, "persistentvolumeclaims", claim);
    struct kube_resp r;
    if (kube_call(k->api, "GET", path, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    long st = r.status;
    int rc = st == 200 || st == 404 ? 0 : kube_fail(&r, "get persistentvolumeclaim", err);
    kube_resp_dispose(&r);
    if (rc < 0 || st == 200)
        return rc;
    if (json_is_false(json_object_get(pvc, "createIfNotExists")))
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "pvc `%s` does not exist in namespace `%s`",
                             claim, ns);
    const char *size = json_string_value(json_object_get(pvc, "storage"));
    const char *sc = json_string_value(json_object_get(pvc, "storageClass"));
    json_t *modes = json_object_get(pvc, "accessModes");
    json_t *dflt = json_pack("[s]", "ReadWriteOnce");
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:o}", "apiVersion", "v1", "kind",
                             "PersistentVolumeClaim", "metadata", "name", claim, "namespace", ns,
                             "labels", SBX_KUBE_LABEL_MANAGED, "sbx", "spec",
                             pvc_spec(size ? size : k->vol_size, sc ? sc : k->storage_class,
                                      json_array_size(modes) ? modes : dflt));
    json_decref(dflt);
    sbx_autofree char *list = obj_path(ns, "persistentvolumeclaims", NULL);
    rc = kube_call(k->api, "POST", list, body, &r, err);
    json_decref(body);
    if (rc < 0)
        return rc;
    /* 409: made meanwhile by someone else, which is what we wanted */
    rc = r.status == 201 || r.status == 200 || r.status == 409 ? 0
                                                               : kube_fail(&r, "create pvc", err);
    kube_resp_dispose(&r);
    return rc;
}

static int
ensure_claims(struct kube *k, const struct sbx_record *sb, sbx_error **err)
{
    size_t i = 0;
    json_t *v = NULL;
    json_array_foreach (json_object_get(sb->priv, "volumes"), i, v) {
        json_t *pvc = json_object_get(v, "pvc");
        if (pvc && ensure_claim(k, sb, pvc, err) < 0)
            return sbx_error_wrap(err, "volumes[%zu]", i);
    }
    return 0;
}

static int
post_pod(struct kube *k, struct sbx_record *sb, sbx_error **err)
{
    return post_owned(k, sb, "pods", pod_spec(k, sb), err);
}

/* A plain TCP connection to ip:port (pod-ip mode). */
static int
tcp_to(const char *ip, int port, int *fd, sbx_error **err)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = 0;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof *v6;
    } else {
        return sbx_error_set(err, SBX_EIO, 0, "the pod's IP `%.64s` is not an address", ip);
    }
    int s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "socket");
    int c = connect(s, (struct sockaddr *)&ss, len) == 0 ? 0 : errno;
    if (c == EINPROGRESS) {
        struct pollfd pfd = {.fd = s, .events = POLLOUT};
        socklen_t sl = sizeof c;
        c = poll(&pfd, 1, 10000) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &c, &sl) == 0
                ? c
                : ETIMEDOUT;
    }
    if (c != 0) {
        (void)close(s);
        return sbx_error_set(err, SBX_EIO, c, "connect to %s:%d", ip, port);
    }
    int fl = fcntl(s, F_GETFL);
    (void)fcntl(s, F_SETFL, fl & ~O_NONBLOCK);
    *fd = s;
    return 0;
}

static int
connect_port(struct kube *k, const struct sbx_record *sb, const char *ip, int port, int *fd,
             sbx_error **err)
{
    if (k->pod_ip)
        return tcp_to(ip, port, fd, err);
    return kube_portforward(k->api, priv_str(sb, "namespace"), priv_str(sb, "pod"), port, fd, err);
}

/* execd answers /ping through the way the router will use. */
static int
ping_execd(struct kube *k, const struct sbx_record *sb, const char *ip)
{
    int fd = -1;
    sbx_autoerror sbx_error *err = NULL;
    if (connect_port(k, sb, ip, SBX_KUBE_EXECD_PORT, &fd, &err) < 0) {
        sbx_debug("sandbox %s: ping: %s", sb->id, sbx_error_msg(err));
        return -1;
    }
    static const char req[] = "GET /ping HTTP/1.1\r\nHost: execd\r\nConnection: close\r\n\r\n";
    char buf[64] = "";
    int r = -1;
    if (sbx_write_all(fd, req, sizeof req - 1) == 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        size_t got = 0;
        uint64_t deadline = sbx_now_ms() + PING_TIMEOUT_MS;
        while (got < 12 && sbx_now_ms() < deadline &&
               poll(&pfd, 1, (int)(deadline - sbx_now_ms())) == 1) {
            ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        buf[got] = '\0';
        r = strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
    }
    (void)close(fd);
    return r;
}

static const char *
pod_ip(const json_t *pod)
{
    const char *ip = json_string_value(json_object_get(json_object_get(pod, "status"), "podIP"));
    return ip ? ip : "";
}

/* Until the pod runs and execd answers, or it fails, or wait_ms passes: the pod's state as
 * the watch reports it (each event wakes this), execd pinged every poll_ms once it runs. */
static int
wait_running(struct kube *k, struct sbx_record *sb, sbx_error **err)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)k->wait_ms;
    char last[256] = "Pending";
    for (;;) {
        json_t *pod = NULL;
        sbx_error *gerr = NULL;
        uint64_t gen = kube_watch_gen(k->watch);
        int r = look_pod(k, sb, &pod, &gerr);
        if (r == -SBX_ENOTFOUND) {
            sbx_error_clear(&gerr);
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "the pod was deleted while starting");
        }
        if (r < 0) {
            /* the API server down for a moment: ask again until the deadline */
            (void)snprintf(last, sizeof last, "%s", sbx_error_msg(gerr));
            sbx_error_clear(&gerr);
        } else {
            struct sbx_provider_status st;
            const char *msg = NULL;
            enum sbx_state_class c = sbx_kube_classify(pod, &st, &msg);
            if (c == SBX_CLASS_TERMINAL) {
                r = sbx_error_set(err, SBX_EUNAVAIL, 0, "pod %s: %s%s%s", st.state, st.reason,
                                  msg ? ": " : "", msg ? msg : "");
                json_decref(pod);
                return r;
            }
            (void)snprintf(last, sizeof last, "%.60s%s%.180s", st.reason, msg ? ": " : "",
                           msg ? msg : "");
            bool up = c == SBX_CLASS_USABLE && ping_execd(k, sb, pod_ip(pod)) == 0;
            if (up && *pod_ip(pod))
                (void)json_object_set_new(sb->priv, "ip", json_string(pod_ip(pod)));
            json_decref(pod);
            if (up)
                return 0;
            if (c == SBX_CLASS_USABLE)
                (void)snprintf(last, sizeof last, "running, sbx-execd not answering yet");
        }
        if (sbx_now_ms() >= deadline)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0, "the pod is not ready after %ld ms (%s)",
                                 k->wait_ms, last);
        /* woken early by the watch's next event; poll_ms bounds it (execd's ping, no watch) */
        kube_watch_wait(k->watch, gen, k->poll_ms);
    }
}

static int
kube_start(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct kube *k = kd(p);
    if (!*priv_str(sb, "pod"))
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "sandbox `%s` has no pod", sb->id);
    if (!*priv_str(sb, "secret")) {
        /* made before the token moved into a Secret: its pod had it in env */
        sbx_autofree char *secret = sbx_xasprintf("sbx-%s-token", sb->id);
        (void)json_object_set_new(sb->priv, "secret", json_string(secret));
    }
    if (post_secret(k, sb, err) < 0 || post_workspace(k, sb, err) < 0 ||
        ensure_claims(k, sb, err) < 0 || post_pod(k, sb, err) < 0 || wait_running(k, sb, err) < 0)
        return sbx_error_wrap(err, "kubernetes: pod %s/%s", priv_str(sb, "namespace"),
                              priv_str(sb, "pod"));
    (void)json_object_del(sb->priv, "stopped");
    sbx_info("sandbox %s: pod %s/%s running", sb->id, priv_str(sb, "namespace"),
             priv_str(sb, "pod"));
    return 0;
}

/* DELETE ns/name (404 = gone already), then wait until it is gone. */
static int
delete_pod(struct kube *k, const char *ns, const char *name, sbx_error **err)
{
    sbx_autofree char *path = pod_path(ns, name);
    sbx_autofree char *q = sbx_xasprintf("%s?gracePeriodSeconds=5", path);
    struct kube_resp r;
    if (kube_call(k->api, "DELETE", q, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    int rc = 0;
    if (r.status == 404)
        rc = 1;
    else if (r.status < 200 || r.status >= 300)
        rc = kube_fail(&r, "delete pod", err);
    kube_resp_dispose(&r);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* gone for good before a delete reports done: nothing left running or holding its IP.
     * The watch's DELETED event wakes this; the API server confirms. */
    uint64_t deadline = sbx_now_ms() + 60000;
    while (sbx_now_ms() < deadline) {
        uint64_t gen = kube_watch_gen(k->watch);
        json_t *seen = NULL;
        enum kube_seen s = kube_watch_get(k->watch, ns, name, &seen);
        json_decref(seen);
        if (s != KUBE_PRESENT) {
            if (kube_call(k->api, "GET", path, NULL, &r, err) < 0)
                return -SBX_EUNAVAIL;
            long st = r.status;
            kube_resp_dispose(&r);
            if (st == 404)
                return 0;
        }
        kube_watch_wait(k->watch, gen, s == KUBE_PRESENT ? 2000 : k->poll_ms);
    }
    return sbx_error_set(err, SBX_ETIMEDOUT, 0, "pod %s/%s still there 60 s after its delete", ns,
                         name);
}

/* Pods labelled with this sandbox's id (a create cut short before the record kept the name,
 * or a pod of another name). */
static int
list_by_id(struct kube *k, const struct sbx_record *sb, json_t **items, sbx_error **err)
{
    sbx_autofree char *path =
        pod_path(*priv_str(sb, "namespace") ? priv_str(sb, "namespace") : k->ns, NULL);
    sbx_autofree char *q =
        sbx_xasprintf("%s?labelSelector=" SBX_KUBE_LABEL_ID "%%3D%s", path, sb->id);
    struct kube_resp r;
    if (kube_call(k->api, "GET", q, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    int rc = 0;
    if (r.status == 200)
        *items = json_incref(json_object_get(r.json, "items"));
    else
        rc = kube_fail(&r, "list pods", err);
    kube_resp_dispose(&r);
    if (rc == 0 && !json_is_array(*items)) {
        json_decref(*items);
        *items = json_array();
    }
    return rc;
}

/* The pod, then any other pod labelled with the sandbox's id. */
static int
delete_pods(struct kube *k, const struct sbx_record *sb, const char *ns, sbx_error **err)
{
    if (*priv_str(sb, "pod") && delete_pod(k, ns, priv_str(sb, "pod"), err) < 0)
        return -SBX_EUNAVAIL;
    json_t *items = NULL;
    if (list_by_id(k, sb, &items, err) < 0)
        return -SBX_EUNAVAIL;
    size_t i = 0;
    json_t *it = NULL;
    int r = 0;
    json_array_foreach (items, i, it) {
        const char *name =
            json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        if (name && r == 0)
            r = delete_pod(k, ns, name, err);
    }
    json_decref(items);
    return r;
}

/* With a workspace PVC, stop deletes the pod and keeps the claim (and the token's Secret):
 * start makes a new pod on the same claim, so the workspace's files survive (the rest of the
 * pod's filesystem does not: it is the image's again). Without one a pod's filesystem does not
 * outlive it and nothing a start could resume: stop is refused rather than turned into a
 * delete. */
static int
kube_stop(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct kube *k = kd(p);
    if (!*priv_str(sb, "workspace"))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "provider `kubernetes` cannot stop sandbox `%s`: a pod's filesystem "
                             "does not outlive the pod (no workspace volume: set "
                             "providers.kubernetes.workspace_pvc_size); delete it instead",
                             sb->id);
    /* marked first: a status meanwhile (or after a crash) sees a stopped sandbox, not a lost
     * one, once its pod is gone */
    (void)json_object_set_new(sb->priv, "stopped", json_true());
    if (delete_pods(k, sb, priv_str(sb, "namespace"), err) < 0)
        return sbx_error_wrap(err, "stop sandbox `%s`", sb->id);
    sbx_info("sandbox %s: pod deleted, workspace pvc %s kept", sb->id, priv_str(sb, "workspace"));
    return 0;
}

static int
kube_delete(struct sbx_provider *p, struct sbx_record *sb, sbx_error **err)
{
    struct kube *k = kd(p);
    const char *ns = *priv_str(sb, "namespace") ? priv_str(sb, "namespace") : k->ns;
    /* the secret's name follows from the id: found even for a record that lost it */
    sbx_autofree char *secret = sbx_xasprintf("sbx-%s-token", sb->id);
    if (delete_pods(k, sb, ns, err) < 0 || delete_named(k, ns, "secrets", secret, err) < 0)
        return sbx_error_wrap(err, "delete sandbox `%s`", sb->id);
    /* the workspace after the pods are gone (pvc-protection would hold it until then) */
    if (*priv_str(sb, "workspace") &&
        delete_named(k, ns, "persistentvolumeclaims", priv_str(sb, "workspace"), err) < 0)
        return sbx_error_wrap(err, "delete sandbox `%s`", sb->id);
    return 0;
}

static int
kube_status(struct sbx_provider *p, const struct sbx_record *sb, struct sbx_provider_status *out,
            sbx_error **err)
{
    struct kube *k = kd(p);
    if (!*priv_str(sb, "pod")) {
        sbx_provider_status_set(out, "none", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    json_t *pod = NULL;
    sbx_error *gerr = NULL;
    bool stopped = json_is_true(json_object_get(sb->priv, "stopped"));
    /* a stopped one's pod is gone: the watch not having it is answer enough */
    enum kube_seen seen =
        kube_watch_get(k->watch, priv_str(sb, "namespace"), priv_str(sb, "pod"), &pod);
    int r = seen == KUBE_PRESENT             ? 0
            : seen == KUBE_ABSENT && stopped ? -SBX_ENOTFOUND
                                             : get_pod(k, sb, &pod, &gerr);
    if (r == -SBX_ENOTFOUND) {
        sbx_error_clear(&gerr);
        if (stopped)
            sbx_provider_status_set(out, "stopped", SBX_CLASS_STARTABLE, "");
        else
            sbx_provider_status_set(out, "deleted", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
        return 0;
    }
    if (r < 0) {
        sbx_error_move(err, &gerr);
        return r;
    }
    const char *msg = NULL;
    (void)sbx_kube_classify(pod, out, &msg);
    /* the pod sbx made, not one of the same name made by someone else */
    const char *id = json_string_value(json_object_get(
        json_object_get(json_object_get(pod, "metadata"), "labels"), SBX_KUBE_LABEL_ID));
    if (!id || strcmp(id, sb->id) != 0)
        sbx_provider_status_set(out, "replaced", SBX_CLASS_TERMINAL, "SANDBOX_LOST");
    json_decref(pod);
    return 0;
}

static int
kube_reconcile(struct sbx_provider *p, struct sbx_record *sb, struct sbx_provider_status *out,
               sbx_error **err)
{
    struct kube *k = kd(p);
    if (!*priv_str(sb, "pod")) {
        /* a create cut short before the record kept its pod: find it by label */
        json_t *items = NULL;
        if (list_by_id(k, sb, &items, err) < 0)
            return -SBX_EUNAVAIL;
        json_t *meta = json_object_get(json_array_get(items, 0), "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        if (name && ns) {
            (void)json_object_set_new(sb->priv, "pod", json_string(name));
            (void)json_object_set_new(sb->priv, "namespace", json_string(ns));
        }
        json_decref(items);
    }
    return kube_status(p, sb, out, err);
}

static int
kube_connect(struct sbx_provider *p, const struct sbx_record *sb, int port, int *fd,
             sbx_error **err)
{
    struct kube *k = kd(p);
    const char *ip = priv_str(sb, "ip");
    if (k->pod_ip && !*ip) {
        json_t *pod = NULL;
        if (get_pod(k, sb, &pod, err) < 0)
            return sbx_error_wrap(err, "sandbox `%s` port %d", sb->id, port);
        sbx_autofree char *cur = sbx_xstrdup(pod_ip(pod));
        json_decref(pod);
        if (connect_port(k, sb, cur, port, fd, err) < 0)
            return sbx_error_wrap(err, "sandbox `%s` port %d", sb->id, port);
        return 0;
    }
    if (connect_port(k, sb, ip, port, fd, err) < 0)
        return sbx_error_wrap(err, "sandbox `%s` port %d", sb->id, port);
    return 0;
}

static json_t *
kube_proxy_headers(struct sbx_provider *p, const struct sbx_record *sb, int port)
{
    (void)p;
    if (port != SBX_KUBE_EXECD_PORT)
        return NULL;
    return json_pack("{s:s}", "X-EXECD-ACCESS-TOKEN", priv_str(sb, "token"));
}

static void
free_data(struct kube *k)
{
    kube_watch_stop(k->watch);
    kube_client_free(k->api);
    free(k->ns);
    free(k->execd_image);
    free(k->sa);
    free(k->runtime_class);
    free(k->ws_size);
    free(k->storage_class);
    free(k->ws_path);
    free(k->vol_size);
    json_decref(k->node_selector);
    json_decref(k->labels);
    json_decref(k->pull_secrets);
    json_decref(k->tolerations);
    free(k);
}

static void
kube_free(struct sbx_provider *p)
{
    free_data(kd(p));
    free(p);
}

static const struct sbx_provider_ops kube_ops = {
    .create = kube_create,
    .start = kube_start,
    .stop = kube_stop,
    .pause = NULL, /* a pod cannot be frozen through the API */
    .resume = NULL,
    .delete = kube_delete,
    .status = kube_status,
    .connect = kube_connect,
    .reconcile = kube_reconcile,
    .proxy_headers = kube_proxy_headers,
    .check_create = kube_check_create,
    .free = kube_free,
};

/* The credentials: a kubeconfig held in the secret store, a kubeconfig file, or in-cluster. */
static int
load_cfg(const struct settings *st, const struct sbx_provider_env *env, struct kube_cfg *cfg,
         sbx_error **err)
{
    struct kube_cfg_opts o = {.context = st->context, .allow_insecure = st->allow_insecure};
    if (st->kubeconfig_secret) {
        if (!env->secrets)
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "provider `kubernetes`: no secret store");
        char *text = NULL;
        size_t len = 0;
        if (sbx_srv_secret_lookup(env->secrets, st->kubeconfig_secret, true, &text, &len, err) < 0)
            return -SBX_EUNAVAIL;
        sbx_autofree char *what = sbx_xasprintf("in secret `%s`", st->kubeconfig_secret);
        int r = kube_cfg_parse(text, len, what, &o, cfg, err);
        sbx_secret_value_free(text);
        return r;
    }
    if (st->kubeconfig)
        return kube_cfg_load(st->kubeconfig, &o, cfg, err);
    if (kube_in_cluster_available(NULL))
        return kube_cfg_in_cluster(NULL, cfg, err);
    return sbx_error_set(err, SBX_EUNAVAIL, 0,
                         "provider `kubernetes`: no kubeconfig (set providers.kubernetes."
                         "kubeconfig or kubeconfig_secret) and not running in a cluster");
}

int
sbx_provider_kubernetes_new(const json_t *settings, const struct sbx_provider_env *env,
                            struct sbx_provider **out, sbx_error **err)
{
    struct settings st;
    if (read_settings(settings, &st, err) < 0)
        return -SBX_EINVAL;
    struct kube_cfg cfg = {0};
    if (load_cfg(&st, env, &cfg, err) < 0)
        return sbx_error_wrap(err, "provider `kubernetes`");
    struct kube *k = sbx_xcalloc(1, sizeof *k);
    k->ns = sbx_xstrdup(st.namespace ? st.namespace : cfg.namespace ? cfg.namespace : "default");
    k->execd_image = sbx_xstrdup(st.execd_image);
    k->sa = st.sa ? sbx_xstrdup(st.sa) : NULL;
    k->runtime_class = st.runtime_class ? sbx_xstrdup(st.runtime_class) : NULL;
    k->node_selector = kv_list(st.node_selector);
    k->labels = kv_list(st.labels);
    k->pull_secrets = st.pull_secrets ? json_incref((json_t *)st.pull_secrets) : json_array();
    k->tolerations = st.tolerations ? json_loads(st.tolerations, 0, NULL) : json_array();
    k->pod_ip = strcmp(st.connect, "pod-ip") == 0;
    k->ws_size = st.ws_size ? sbx_xstrdup(st.ws_size) : NULL;
    k->storage_class = st.storage_class ? sbx_xstrdup(st.storage_class) : NULL;
    k->ws_path = sbx_xstrdup(st.ws_path);
    k->vol_size = sbx_xstrdup(st.vol_size);
    k->wait_ms = st.wait_ms;
    k->poll_ms = st.poll_ms;
    sbx_autofree char *server = sbx_xstrdup(cfg.server);
    sbx_autofree char *context = sbx_xstrdup(cfg.context ? cfg.context : "");
    struct kube_client_opts co = {
        .timeout_ms = st.req_ms, .retries = (int)st.retries, .backoff_ms = 200};
    if (kube_client_new(&cfg, &co, &k->api, err) < 0) {
        kube_cfg_dispose(&cfg);
        free_data(k);
        return -SBX_EUNAVAIL;
    }
    k->watch = kube_watch_start(k->api, k->ns, "app.kubernetes.io%2Fmanaged-by%3Dsbx");
    struct sbx_provider *p = sbx_xcalloc(1, sizeof *p);
    p->ops = &kube_ops;
    p->data = k;
    sbx_info("provider `kubernetes` ready (%s, context %s, namespace %s, connect %s)", server,
             context, k->ns, st.connect);
    *out = p;
    return 0;
}
