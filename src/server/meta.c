/*
 * meta.c - metadata label rules, merge patch, pagination, metadata filters.
 */
#include "server/meta.h"

#include <ctype.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "server/sandbox.h"
#include "server/srvutil.h"

#define LABEL_MAX      63
#define DNS_PREFIX_MAX 253

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 chars; empty allowed for values. */
static bool
label_ok(const char *s, size_t n, bool allow_empty)
{
    if (n == 0)
        return allow_empty;
    if (n > LABEL_MAX || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '_' && c != '.')
            return false;
    }
    return true;
}

/* A DNS subdomain: lowercase labels of [a-z0-9-] separated by dots, <= 253 chars. */
static bool
dns_subdomain_ok(const char *s, size_t n)
{
    if (n == 0 || n > DNS_PREFIX_MAX)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            unsigned char c = (unsigned char)s[i];
            if (!(islower(c) || isdigit(c) || c == '-'))
                return false;
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > LABEL_MAX || s[start] == '-' || s[i - 1] == '-')
            return false;
        start = i + 1;
    }
    return true;
}

static int
key_check(const char *key, sbx_error **err)
{
    const char *slash = strchr(key, '/');
    const char *name = slash ? slash + 1 : key;
    if (slash && !dns_subdomain_ok(key, (size_t)(slash - key)))
        return sbx_error_set(err, SBX_EINVAL, 0, "metadata key `%s`: bad prefix", key);
    if (!label_ok(name, strlen(name), false))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "metadata key `%s`: name must be 1-63 alphanumerics, `-`, `_`, `.`, "
                             "starting and ending with an alphanumeric",
                             key);
    if (sbx_str_starts(key, "opensandbox.io/"))
        return sbx_error_set(err, SBX_EINVAL, 0, "metadata key `%s`: prefix is reserved", key);
    return 0;
}

int
sbx_meta_validate(const json_t *meta, sbx_error **err)
{
    if (!json_is_object(meta))
        return sbx_error_set(err, SBX_EINVAL, 0, "metadata must be an object of strings");
    const char *key = NULL;
    json_t *val = NULL;
    json_object_foreach ((json_t *)meta, key, val) {
        if (key_check(key, err) < 0)
            return -SBX_EINVAL;
        if (!json_is_string(val))
            return sbx_error_set(err, SBX_EINVAL, 0, "metadata `%s`: value must be a string", key);
        if (strcmp(key, SBX_NAME_LABEL) == 0 && json_string_length(val) == 0)
            return sbx_error_set(err, SBX_EINVAL, 0, "metadata `%s`: a name cannot be empty", key);
        if (!label_ok(json_string_value(val), json_string_length(val), true))
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "metadata `%s`: value must be at most 63 alphanumerics, `-`, "
                                 "`_`, `.`, starting and ending with an alphanumeric",
                                 key);
    }
    return 0;
}

void
sbx_merge_patch(json_t *target, const json_t *patch)
{
    const char *key = NULL;
    json_t *val = NULL;
    json_object_foreach ((json_t *)patch, key, val) {
        if (json_is_null(val)) {
            (void)json_object_del(target, key);
            continue;
        }
        json_t *cur = json_object_get(target, key);
        if (json_is_object(val) && json_is_object(cur)) {
            sbx_merge_patch(cur, val);
            continue;
        }
        if (json_is_object(val)) {
            json_t *fresh = json_object();
            sbx_merge_patch(fresh, val);
            (void)json_object_set_new(target, key, fresh);
            continue;
        }
        (void)json_object_set(target, key, val);
    }
}

void
sbx_page_calc(size_t total, size_t page, size_t page_size, struct sbx_page *out)
{
    if (page < 1)
        page = 1;
    if (page_size < 1)
        page_size = 1;
    out->total_pages = total / page_size + (total % page_size ? 1 : 0);
    out->has_next = page < out->total_pages;
    out->start = 0;
    out->count = 0;
    if ((page - 1) >= out->total_pages)
        return;
    out->start = (page - 1) * page_size;
    out->count = total - out->start < page_size ? total - out->start : page_size;
}

static int
filter_part(json_t *obj, const char *part, size_t n, sbx_error **err)
{
    const char *eq = memchr(part, '=', n);
    if (!eq)
        return sbx_error_set(err, SBX_EINVAL, 0, "metadata filter part `%.*s` has no `=`", (int)n,
                             part);
    sbx_autofree char *key = sbx_srv_url_decode(part, (size_t)(eq - part), true);
    sbx_autofree char *val = sbx_srv_url_decode(eq + 1, n - (size_t)(eq - part) - 1, true);
    if (!key || !val || !*key)
        return sbx_error_set(err, SBX_EINVAL, 0, "metadata filter part `%.*s` is malformed", (int)n,
                             part);
    if (*val) /* parse_qsl drops blank values */
        (void)json_object_set_new(obj, key, json_string(val));
    return 0;
}

int
sbx_meta_filter_parse(const char *s, json_t **out, sbx_error **err)
{
    json_t *obj = json_object();
    const char *p = s;
    while (*p) {
        size_t n = strcspn(p, "&;");
        if (n > 0 && filter_part(obj, p, n, err) < 0) {
            json_decref(obj);
            return -SBX_EINVAL;
        }
        p += n;
        if (*p)
            p++;
    }
    *out = obj;
    return 0;
}

bool
sbx_meta_matches(const json_t *meta, const json_t *filter)
{
    const char *key = NULL;
    json_t *val = NULL;
    json_object_foreach ((json_t *)filter, key, val) {
        json_t *have = json_object_get(meta, key);
        if (!json_is_string(have) || strcmp(json_string_value(have), json_string_value(val)) != 0)
            return false;
    }
    return true;
}
