/*
 * kube_watch.h - the kubernetes provider's view of its pods: one watch on the pods of a
 * namespace that match a label selector, kept by a thread (an informer without client-go).
 *
 * List, then watch from the list's resourceVersion, tracking it through every event and
 * BOOKMARK; a watch the server ends is resumed from the last resourceVersion; a 410 Expired
 * (the version is older than the server keeps) is answered by a fresh list; an API server that
 * cannot be reached is retried with a doubling backoff (200 ms to 5 s), and meanwhile the view
 * says it cannot answer (callers ask the API server themselves, and fail soft as before).
 */
#ifndef SBX_PROVIDERS_KUBE_WATCH_H
#define SBX_PROVIDERS_KUBE_WATCH_H

#include <jansson.h>
#include <stdint.h>

#include "providers/kube_api.h"

struct kube_watch;

/* Start the thread: pods of ns matching selector (a labelSelector, URL-encoded). */
struct kube_watch *kube_watch_start(struct kube_client *api, const char *ns, const char *selector);
/* End the thread (within about a second) and free everything. NULL is fine. */
void kube_watch_stop(struct kube_watch *w);

enum kube_seen {
    KUBE_UNSURE = -1, /* not watching now (starting, the API server away): ask it yourself */
    KUBE_ABSENT = 0,  /* no such pod in the view (it may be about to appear: confirm a create) */
    KUBE_PRESENT = 1, /* *pod: the latest version seen (new reference) */
};

/* The pod ns/name as the watch last saw it. */
enum kube_seen kube_watch_get(struct kube_watch *w, const char *ns, const char *name, json_t **pod);
/* A number that changes with every event (and with the view's health). */
uint64_t kube_watch_gen(struct kube_watch *w);
/* Until the number is no longer gen, or ms pass. */
void kube_watch_wait(struct kube_watch *w, uint64_t gen, long ms);

/* What the watch did, for logs and tests: lists (the first and every relist), watches opened,
 * 410s answered by a relist, events applied. */
struct kube_watch_stats {
    unsigned lists, watches, expired, events;
};
void kube_watch_stats(struct kube_watch *w, struct kube_watch_stats *out);

#endif
