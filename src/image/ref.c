/*
 * ref.c - image references with Docker's normalisation:
 *   busybox                -> docker.io/library/busybox:latest
 *   127.0.0.1:5000/a/b:1   -> 127.0.0.1:5000/a/b:1
 *   a/b@sha256:<hex>       -> docker.io/a/b@sha256:<hex>
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define NAME_MAX_LEN 255
#define TAG_MAX_LEN  128

bool
sbx_image_digest_valid(const char *d)
{
    if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
        return false;
    for (const char *p = d + 7; *p; p++) {
        if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
            return false;
    }
    return true;
}

static bool
tag_valid(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > TAG_MAX_LEN || !(isalnum((unsigned char)t[0]) || t[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '-')
            return false;
    }
    return true;
}

static bool
is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool
component_valid(const char *c, size_t n)
{
    if (n == 0 || !is_lower_alnum(c[0]) || !is_lower_alnum(c[n - 1]))
        return false;
    for (size_t i = 1; i < n; i++) {
        if (is_lower_alnum(c[i]))
            continue;
        if (c[i] == '-' || c[i] == '.' || c[i] == '_') {
            if (c[i] == '.' && !is_lower_alnum(c[i - 1]))
                return false; /* ".." or "-." */
            if (c[i] == '_' && c[i - 1] == '_' && i >= 2 && c[i - 2] == '_')
                return false; /* "___" */
            continue;
        }
        return false;
    }
    return true;
}

static bool
repo_valid(const char *repo)
{
    if (strlen(repo) > NAME_MAX_LEN)
        return false;
    const char *p = repo;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (!component_valid(p, n))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

/* host[:port], host being letters, digits, '.', '-' or a bracketed IPv6 literal. */
static bool
registry_valid(const char *r)
{
    const char *port = NULL;
    if (r[0] == '[') {
        const char *end = strchr(r, ']');
        if (!end || end == r + 1)
            return false;
        port = end[1] == ':' ? end + 2 : NULL;
        if (!port && end[1] != '\0')
            return false;
    } else {
        const char *colon = strchr(r, ':');
        size_t n = colon ? (size_t)(colon - r) : strlen(r);
        if (n == 0)
            return false;
        for (size_t i = 0; i < n; i++) {
            if (!isalnum((unsigned char)r[i]) && r[i] != '.' && r[i] != '-')
                return false;
        }
        port = colon ? colon + 1 : NULL;
    }
    if (!port)
        return true;
    size_t np = strlen(port);
    return np > 0 && np <= 5 && strspn(port, "0123456789") == np && atol(port) <= 65535;
}

/* Docker: the first component names a registry when it has a '.' or ':' or is "localhost". */
static bool
looks_like_registry(const char *first, size_t n)
{
    if (n == 9 && strncmp(first, "localhost", 9) == 0)
        return true;
    return memchr(first, '.', n) || memchr(first, ':', n) || memchr(first, '[', n);
}

static int
split_digest(struct sbx_image_ref *out, char *s, sbx_error **err)
{
    char *at = strchr(s, '@');
    if (!at)
        return 0;
    *at = '\0';
    if (!sbx_image_digest_valid(at + 1))
        return sbx_error_set(err, SBX_EINVAL, 0, "bad digest `%s` (want sha256:<64 hex>)", at + 1);
    out->digest = sbx_xstrdup(at + 1);
    return 0;
}

static int
split_tag(struct sbx_image_ref *out, char *s, sbx_error **err)
{
    char *colon = strrchr(s, ':');
    char *slash = strrchr(s, '/');
    if (!colon || (slash && colon < slash))
        return 0;
    *colon = '\0';
    if (!tag_valid(colon + 1))
        return sbx_error_set(err, SBX_EINVAL, 0, "bad tag `%s`", colon + 1);
    out->tag = sbx_xstrdup(colon + 1);
    return 0;
}

static int
split_registry(struct sbx_image_ref *out, const char *name, sbx_error **err)
{
    const char *slash = strchr(name, '/');
    if (slash && looks_like_registry(name, (size_t)(slash - name))) {
        out->registry = sbx_xstrndup(name, (size_t)(slash - name));
        if (!registry_valid(out->registry))
            return sbx_error_set(err, SBX_EINVAL, 0, "bad registry `%s`", out->registry);
        name = slash + 1;
    } else {
        out->registry = sbx_xstrdup(SBX_IMAGE_DEFAULT_REGISTRY);
    }
    if (strcmp(out->registry, "index.docker.io") == 0) {
        free(out->registry);
        out->registry = sbx_xstrdup(SBX_IMAGE_DEFAULT_REGISTRY);
    }
    bool hub = strcmp(out->registry, SBX_IMAGE_DEFAULT_REGISTRY) == 0;
    out->repo = hub && !strchr(name, '/') ? sbx_xasprintf("library/%s", name) : sbx_xstrdup(name);
    if (!repo_valid(out->repo))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "bad repository name `%s` (lowercase letters, digits, . _ - and /)",
                             name);
    return 0;
}

static int
parse(struct sbx_image_ref *out, const char *s, sbx_error **err)
{
    if (!s || !*s)
        return sbx_error_set(err, SBX_EINVAL, 0, "empty image reference");
    if (strlen(s) > NAME_MAX_LEN + TAG_MAX_LEN + 80)
        return sbx_error_set(err, SBX_EINVAL, 0, "image reference too long");
    sbx_autofree char *copy = sbx_xstrdup(s);
    int ret = split_digest(out, copy, err);
    if (ret == 0)
        ret = split_tag(out, copy, err);
    if (ret == 0)
        ret = split_registry(out, copy, err);
    if (ret < 0)
        return ret;
    if (!out->tag && !out->digest)
        out->tag = sbx_xstrdup("latest");
    return 0;
}

int
sbx_image_ref_parse(struct sbx_image_ref *out, const char *s, sbx_error **err)
{
    *out = (struct sbx_image_ref){0};
    int ret = parse(out, s, err);
    if (ret < 0) {
        sbx_image_ref_clear(out);
        return sbx_error_wrap(err, "image reference `%s`", s ? s : "");
    }
    return 0;
}

void
sbx_image_ref_clear(struct sbx_image_ref *r)
{
    free(r->registry);
    free(r->repo);
    free(r->tag);
    free(r->digest);
    *r = (struct sbx_image_ref){0};
}

char *
sbx_image_ref_string(const struct sbx_image_ref *r)
{
    if (r->digest)
        return sbx_xasprintf("%s/%s@%s", r->registry, r->repo, r->digest);
    return sbx_xasprintf("%s/%s:%s", r->registry, r->repo, r->tag);
}
