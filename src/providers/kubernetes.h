/*
 * kubernetes.h - pieces of the kubernetes provider that tests look at directly.
 */
#ifndef SBX_PROVIDERS_KUBERNETES_H
#define SBX_PROVIDERS_KUBERNETES_H

#include <jansson.h>

#include "server/provider.h"

/* Labels on every pod sbx makes. */
#define SBX_KUBE_LABEL_ID      "sbx.dev/sandbox-id"
#define SBX_KUBE_LABEL_MANAGED "app.kubernetes.io/managed-by"
#define SBX_KUBE_CONTAINER     "sandbox"
#define SBX_KUBE_EXECD_PORT    44772

/*
 * A Pod (the API's JSON) in sbx's classes, with the provider's word (the phase, lower case)
 * and a reason:
 *   usable     Running (and not being deleted)
 *   transient  Pending: waiting to be scheduled, for its image or its init container; the
 *              reason is the container's waiting reason (ContainerCreating, PodInitializing)
 *              or Unschedulable
 *   terminal   Succeeded, Failed (reason: the pod's own - Evicted, DeadlineExceeded - else the
 *              sandbox container's terminated reason - OOMKilled, Error, Completed), Unknown
 *              (NodeLost), a pod being deleted (SANDBOX_LOST), and a Pending one whose image
 *              cannot be pulled or whose container cannot be made (ImagePullBackOff,
 *              ErrImagePull, InvalidImageName, CreateContainerConfigError, ...)
 * message (may be NULL) gets the waiting/terminated message that goes with the reason
 * (borrowed from pod).
 */
enum sbx_state_class sbx_kube_classify(const json_t *pod, struct sbx_provider_status *out,
                                       const char **message);

/* A label key / value as the API accepts them (metadata become labels only when valid). */
bool sbx_kube_label_key_ok(const char *k);
bool sbx_kube_label_value_ok(const char *v);

/* A resourceLimits/resourceRequests value as a Kubernetes quantity: cpu as given when it is
 * a number or millicores ("0.5", "500m", "2"); memory through sbx's size syntax ("512m" is
 * 512 MiB for sbx, not 0.512 bytes) as bytes ("536870912"). NULL when it does not parse
 * (caller frees). */
char *sbx_kube_quantity(const char *resource, const char *value);

/* A storage size as OpenSandbox's PVC.storage and the workspace setting take it:
 * digits[.digits][Ki|Mi|Gi|Ti|Pi|Ei]. */
bool sbx_kube_size_ok(const char *s);

#endif
