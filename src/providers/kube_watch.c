/*
 * kube_watch.c - one watch on the provider's pods (see kube_watch.h).
 *
 * The thread owns the connection; the view (name -> pod) is shared under one mutex, and a
 * condition variable wakes whoever waits for a change (a start waiting for its pod to run, a
 * delete waiting for it to go). Nothing here decides a sandbox's state: the provider reads the
 * pods and classifies them as it would a GET's answer.
 */
#include "providers/kube_watch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"

#define BACKOFF_MIN_MS 200L
#define BACKOFF_MAX_MS 5000L
#define WATCH_SECONDS  240
#define LIST_PAGE      500

struct kube_watch {
    struct kube_client *api;
    char *ns;
    char *selector;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *pods;    /* name -> pod, as last seen */
    bool live;       /* listed, and a watch is open now */
    bool stop;       /* kube_watch_stop: end the thread */
    bool expired;    /* the current stream ended with 410 Expired */
    bool failed;     /* the current stream ended with another ERROR event */
    long status;     /* the current stream's HTTP status */
    char rv[64];     /* the resourceVersion to watch from */
    uint64_t gen;    /* bumped on every change of the view or of live */
    bool down_noted; /* the API server's absence was logged */
    struct kube_watch_stats st;
};

static void
changed_locked(struct kube_watch *w)
{
    w->gen++;
    pthread_cond_broadcast(&w->cv);
}

static void
set_live(struct kube_watch *w, bool live)
{
    pthread_mutex_lock(&w->mu);
    if (w->live != live) {
        w->live = live;
        changed_locked(w);
    }
    pthread_mutex_unlock(&w->mu);
}

static bool
stopping(struct kube_watch *w)
{
    pthread_mutex_lock(&w->mu);
    bool s = w->stop;
    pthread_mutex_unlock(&w->mu);
    return s;
}

static void
deadline_in(struct timespec *ts, long ms)
{
    (void)clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Sleep ms, or less when stopped. */
static void
nap(struct kube_watch *w, long ms)
{
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&w->mu);
    while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&w->mu);
}

/* ---- list ---- */

static char *
list_path(const struct kube_watch *w, const char *cont)
{
    return sbx_xasprintf("/api/v1/namespaces/%s/pods?labelSelector=%s&limit=%d%s%s", w->ns,
                         w->selector, LIST_PAGE, cont ? "&continue=" : "", cont ? cont : "");
}

/* One page into pods; *cont the next page's token (or NULL), rv the list's version. */
static int
list_page(struct kube_watch *w, json_t *pods, char **cont, char *rv, sbx_error **err)
{
    sbx_autofree char *path = list_path(w, *cont);
    free(*cont);
    *cont = NULL;
    struct kube_resp r;
    if (kube_call(w->api, "GET", path, NULL, &r, err) < 0)
        return -SBX_EUNAVAIL;
    if (r.status != 200) {
        int e = kube_fail(&r, "list pods", err);
        kube_resp_dispose(&r);
        return e;
    }
    json_t *meta = json_object_get(r.json, "metadata");
    const char *v = json_string_value(json_object_get(meta, "resourceVersion"));
    const char *c = json_string_value(json_object_get(meta, "continue"));
    (void)snprintf(rv, 64, "%s", v ? v : "");
    *cont = c && *c ? sbx_xstrdup(c) : NULL;
    size_t i = 0;
    json_t *pod = NULL;
    json_array_foreach (json_object_get(r.json, "items"), i, pod) {
        const char *name =
            json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
        if (name)
            (void)json_object_set(pods, name, pod);
    }
    kube_resp_dispose(&r);
    return 0;
}

/* The whole view afresh: every page, then one swap. */
static int
relist(struct kube_watch *w, sbx_error **err)
{
    json_t *pods = json_object();
    char *cont = NULL;
    char rv[64] = "";
    do {
        if (list_page(w, pods, &cont, rv, err) < 0) {
            json_decref(pods);
            free(cont);
            return -SBX_EUNAVAIL;
        }
    } while (cont);
    pthread_mutex_lock(&w->mu);
    json_decref(w->pods);
    w->pods = pods;
    (void)snprintf(w->rv, sizeof w->rv, "%s", rv);
    w->st.lists++;
    changed_locked(w);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* ---- watch ---- */

static void
on_status(void *ud, long status)
{
    struct kube_watch *w = ud;
    w->status = status;
    if (status == 200)
        set_live(w, true);
}

/* One event into the view (under the lock). */
static void
apply_locked(struct kube_watch *w, const char *type, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (rv)
        (void)snprintf(w->rv, sizeof w->rv, "%s", rv);
    if (!name || strcmp(type, "BOOKMARK") == 0)
        return;
    if (strcmp(type, "DELETED") == 0)
        (void)json_object_del(w->pods, name);
    else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)
        (void)json_object_set(w->pods, name, obj);
    w->st.events++;
    changed_locked(w);
}

static int
on_line(void *ud, const char *line, size_t n)
{
    struct kube_watch *w = ud;
    json_t *ev = json_loadb(line, n, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    int r = 0;
    if (!type || !json_is_object(obj)) {
        sbx_warn("kubernetes: a watch event that is not one: %.200s", line);
        r = -1;
        w->failed = true;
    } else if (strcmp(type, "ERROR") == 0) {
        /* 410 Expired: the version is older than the server keeps; anything else: retry */
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        w->expired = code == 410;
        w->failed = code != 410;
        if (code != 410)
            sbx_warn("kubernetes: watch: %.300s",
                     json_string_value(json_object_get(obj, "message")));
        r = -1;
    } else {
        pthread_mutex_lock(&w->mu);
        apply_locked(w, type, obj);
        pthread_mutex_unlock(&w->mu);
    }
    json_decref(ev);
    return r;
}

static bool
on_stopped(void *ud)
{
    return stopping(ud);
}

enum watch_end {
    WATCH_RESUME,
    WATCH_RELIST,
    WATCH_RETRY
};

/* One watch stream from w->rv until it ends. */
static enum watch_end
watch_once(struct kube_watch *w, sbx_error **err)
{
    pthread_mutex_lock(&w->mu);
    sbx_autofree char *path =
        sbx_xasprintf("/api/v1/namespaces/%s/pods?watch=1&labelSelector=%s&resourceVersion=%s&"
                      "allowWatchBookmarks=true&timeoutSeconds=%d",
                      w->ns, w->selector, w->rv, WATCH_SECONDS);
    w->st.watches++;
    pthread_mutex_unlock(&w->mu);
    w->expired = false;
    w->failed = false;
    w->status = 0;
    struct kube_stream_ops o = {
        .on_status = on_status, .on_line = on_line, .stopped = on_stopped, .ud = w};
    int r = kube_stream(w->api, path, &o, (WATCH_SECONDS + 30) * 1000L, err);
    set_live(w, false);
    if (w->expired || w->status == 410) {
        sbx_error_clear(err);
        pthread_mutex_lock(&w->mu);
        w->st.expired++;
        pthread_mutex_unlock(&w->mu);
        return WATCH_RELIST;
    }
    if (r < 0 || w->failed)
        return WATCH_RETRY;
    return WATCH_RESUME;
}

/* ---- the thread ---- */

static void
note_down(struct kube_watch *w, const sbx_error *err)
{
    if (w->down_noted)
        return;
    w->down_noted = true;
    sbx_warn("kubernetes: the watch on pods of namespace %s is down (%s): states are asked of "
             "the API server meanwhile; retrying",
             w->ns, err ? sbx_error_msg(err) : "the server ended it");
}

static void
note_up(struct kube_watch *w)
{
    if (!w->down_noted)
        return;
    w->down_noted = false;
    sbx_info("kubernetes: watching the pods of namespace %s again", w->ns);
}

static void *
watch_main(void *arg)
{
    struct kube_watch *w = arg;
    long backoff = BACKOFF_MIN_MS;
    bool need_list = true;
    while (!stopping(w)) {
        sbx_error *err = NULL;
        uint64_t t0 = sbx_now_ms();
        enum watch_end end = WATCH_RETRY;
        if (!need_list || relist(w, &err) == 0) {
            need_list = false;
            end = watch_once(w, &err);
        }
        if (end == WATCH_RELIST) {
            need_list = true;
        } else if (end == WATCH_RETRY) {
            if (!stopping(w))
                note_down(w, err);
            nap(w, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
        } else {
            note_up(w);
            backoff = BACKOFF_MIN_MS;
            /* a server that ends every watch at once must not make this spin */
            if (sbx_now_ms() - t0 < 1000)
                nap(w, BACKOFF_MIN_MS);
        }
        sbx_error_clear(&err);
    }
    return NULL;
}

struct kube_watch *
kube_watch_start(struct kube_client *api, const char *ns, const char *selector)
{
    struct kube_watch *w = sbx_xcalloc(1, sizeof *w);
    w->api = api;
    w->ns = sbx_xstrdup(ns);
    w->selector = sbx_xstrdup(selector);
    w->pods = json_object();
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&w->thr, NULL, watch_main, w);
    if (e != 0) {
        /* no watch: every caller asks the API server itself (KUBE_UNSURE) */
        sbx_warn("kubernetes: cannot start the watch thread (error %d): polling instead", e);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        json_decref(w->pods);
        free(w->ns);
        free(w->selector);
        free(w);
        return NULL;
    }
    return w;
}

void
kube_watch_stop(struct kube_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    (void)pthread_join(w->thr, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    json_decref(w->pods);
    free(w->ns);
    free(w->selector);
    free(w);
}

enum kube_seen
kube_watch_get(struct kube_watch *w, const char *ns, const char *name, json_t **pod)
{
    if (!w || strcmp(ns, w->ns) != 0)
        return KUBE_UNSURE;
    pthread_mutex_lock(&w->mu);
    enum kube_seen r = KUBE_UNSURE;
    if (w->live) {
        json_t *p = json_object_get(w->pods, name);
        r = p ? KUBE_PRESENT : KUBE_ABSENT;
        *pod = json_incref(p);
    }
    pthread_mutex_unlock(&w->mu);
    return r;
}

uint64_t
kube_watch_gen(struct kube_watch *w)
{
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    uint64_t g = w->gen;
    pthread_mutex_unlock(&w->mu);
    return g;
}

void
kube_watch_wait(struct kube_watch *w, uint64_t gen, long ms)
{
    if (!w) {
        (void)usleep((useconds_t)ms * 1000);
        return;
    }
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&w->mu);
    while (!w->stop && w->gen == gen && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&w->mu);
}

void
kube_watch_stats(struct kube_watch *w, struct kube_watch_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    *out = w->st;
    pthread_mutex_unlock(&w->mu);
}
