/*
 * meta.h - pure helpers of the lifecycle API: metadata label rules, JSON merge patch, list
 * pagination and the double-encoded metadata filter.
 */
#ifndef SBX_SERVER_META_H
#define SBX_SERVER_META_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Check a metadata object: string values, Kubernetes label syntax for keys and values, and the
 * reserved `opensandbox.io/` prefix. */
int sbx_meta_validate(const json_t *meta, sbx_error **err);

/* Apply an RFC 7396 merge patch to the object target (in place). patch must be an object. */
void sbx_merge_patch(json_t *target, const json_t *patch);

struct sbx_page {
    size_t start;       /* index of the first item on the page */
    size_t count;       /* items on the page */
    size_t total_pages; /* ceil(total / page_size) */
    bool has_next;
};
/* Page math for 1-based page numbers; a page past the end is empty. */
void sbx_page_calc(size_t total, size_t page, size_t page_size, struct sbx_page *out);

/* Parse the metadata filter (the query parameter's value after the HTTP layer's one decode,
 * "k1=v1&k2=v2", each part decoded once more) into an object. Strict: a part without `=`
 * fails. */
int sbx_meta_filter_parse(const char *s, json_t **out, sbx_error **err);

/* True when every key of filter is in meta with the same string value. */
bool sbx_meta_matches(const json_t *meta, const json_t *filter);

#endif
