/*
 * format.c - `--format` of `sbx ls` and `sbx inspect`: docker's Go-template-like
 * `{{.ID}}\t{{.State}}` over a sandbox's JSON (the fields are in format.h), or `json`.
 *
 * Not Go's template language: text with actions `{{.Field}}`, `{{.Metadata.KEY}}`,
 * `{{json .}}`, `{{json .Field}}`; `\t`, `\n` and `\\` in the text are escapes (as docker
 * turns `\t` into a tab); a `table ` prefix prints a header of the field names first.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "cli/format.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#define ACTION_MAX 256

struct field {
    const char *name; /* as in the template */
    const char *key;  /* top-level key of the server's JSON */
    const char *sub;  /* key inside it, or NULL */
};

static const struct field fields[] = {
    {"ID", "id", NULL},
    {"Name", "metadata", "sbx/name"},
    {"State", "status", "state"},
    {"Reason", "status", "reason"},
    {"Message", "status", "message"},
    {"Image", "image", "uri"},
    {"Provider", "provider", NULL},
    {"Created", "createdAt", NULL},
    {"Expires", "expiresAt", NULL},
    {"Entrypoint", "entrypoint", NULL},
    {"Metadata", "metadata", NULL},
};

static const struct field *
find_field(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (strlen(fields[i].name) == n && strncmp(fields[i].name, name, n) == 0)
            return &fields[i];
    }
    return NULL;
}

/* One action, parsed: `.` (the whole object), `.Field`, `.Metadata.KEY`; `json` before. */
struct action {
    bool json;
    bool whole;
    const struct field *f;
    char meta_key[ACTION_MAX]; /* .Metadata.KEY */
};

static int
parse_action(const char *s, size_t n, struct action *a, char **err)
{
    *a = (struct action){0};
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n > 5 && strncmp(s, "json ", 5) == 0) {
        a->json = true;
        s += 5;
        n -= 5;
        while (n && *s == ' ')
            s++, n--;
    }
    if (n == 1 && *s == '.') {
        a->whole = true;
        return 0;
    }
    const char *dot = n > 1 && *s == '.' ? memchr(s + 1, '.', n - 1) : NULL;
    size_t fn = dot ? (size_t)(dot - s - 1) : n - 1;
    a->f = n > 1 && *s == '.' ? find_field(s + 1, fn) : NULL;
    if (a->f && dot && strcmp(a->f->name, "Metadata") == 0 && (size_t)(s + n - dot - 1) > 0 &&
        (size_t)(s + n - dot - 1) < sizeof(a->meta_key)) {
        memcpy(a->meta_key, dot + 1, (size_t)(s + n - dot - 1));
        return 0;
    }
    if (a->f && !dot)
        return 0;
    *err = sbx_xasprintf("can't evaluate `{{%.*s}}`: the fields are .ID .Name .State .Reason "
                         ".Message .Image .Provider .Created .Expires .Entrypoint .Metadata "
                         ".Metadata.KEY, `.` and `json` before one",
                         (int)n, s);
    return -1;
}

static json_t *
action_value(const struct action *a, json_t *obj)
{
    if (a->whole)
        return obj;
    json_t *v = json_object_get(obj, a->f->key);
    if (a->f->sub)
        v = json_object_get(v, a->f->sub);
    if (a->meta_key[0])
        v = json_object_get(v, a->meta_key);
    return v;
}

/* Plain text of a value: strings as they are, arrays joined by spaces, objects as k=v,k=v
 * (docker's .Labels), nothing for null/missing. */
static void
put_plain(struct sbx_buf *b, json_t *v)
{
    if (json_is_string(v)) {
        (void)sbx_buf_append(b, json_string_value(v), json_string_length(v), NULL);
    } else if (json_is_array(v)) {
        size_t i = 0;
        json_t *e = NULL;
        json_array_foreach (v, i, e) {
            if (i)
                (void)sbx_buf_append_str(b, " ", NULL);
            put_plain(b, e);
        }
    } else if (json_is_object(v)) {
        const char *k = NULL;
        json_t *e = NULL;
        bool first = true;
        json_object_foreach (v, k, e) {
            (void)sbx_buf_printf(b, NULL, "%s%s=", first ? "" : ",", k);
            put_plain(b, e);
            first = false;
        }
    } else if (v && !json_is_null(v)) {
        sbx_autofree char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        (void)sbx_buf_append_str(b, s ? s : "", NULL);
    }
}

static void
put_action(struct sbx_buf *b, const struct action *a, json_t *obj, bool header)
{
    if (header) {
        const char *name = a->whole ? "JSON" : a->meta_key[0] ? a->meta_key : a->f->name;
        for (const char *p = name; *p; p++) {
            char up = (char)toupper((unsigned char)*p);
            (void)sbx_buf_append(b, &up, 1, NULL);
        }
        return;
    }
    json_t *v = action_value(a, obj);
    if (a->json) {
        sbx_autofree char *s =
            v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        (void)sbx_buf_append_str(b, s ? s : "null", NULL);
    } else {
        put_plain(b, v);
    }
}

/* A backslash escape in the text: the bytes it stands for, and how long it is. */
static size_t
escape(const char *p, char *out)
{
    switch (p[1]) {
    case 't':
        *out = '\t';
        return 2;
    case 'n':
        *out = '\n';
        return 2;
    case '\\':
        *out = '\\';
        return 2;
    default:
        *out = '\\';
        return 1;
    }
}

/* Render tmpl for obj (obj NULL: only check it; header: the field names instead of values). */
static int
render(const char *tmpl, json_t *obj, bool header, struct sbx_buf *b, char **err)
{
    for (const char *p = tmpl; *p;) {
        if (p[0] == '{' && p[1] == '{') {
            const char *end = strstr(p + 2, "}}");
            struct action a;
            if (!end) {
                *err = sbx_xasprintf("unclosed action `%.20s`", p);
                return -1;
            }
            if (parse_action(p + 2, (size_t)(end - p - 2), &a, err) < 0)
                return -1;
            if (obj || header)
                put_action(b, &a, obj, header);
            p = end + 2;
        } else if (*p == '\\') {
            char c = 0;
            p += escape(p, &c);
            (void)sbx_buf_append(b, &c, 1, NULL);
        } else {
            (void)sbx_buf_append(b, p, 1, NULL);
            p++;
        }
    }
    return 0;
}

int
sbx_cli_format_check(const char *fmt, char **err)
{
    if (strcmp(fmt, "json") == 0)
        return 0;
    if (strncmp(fmt, "table ", 6) == 0)
        fmt += 6;
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    int r = render(fmt, NULL, false, &b, err);
    sbx_buf_dispose(&b);
    return r;
}

void
sbx_cli_format_header(FILE *out, const char *fmt)
{
    if (strncmp(fmt, "table ", 6) != 0)
        return;
    struct sbx_buf b;
    sbx_buf_init(&b, 1 << 20);
    char *err = NULL;
    if (render(fmt + 6, NULL, true, &b, &err) == 0) {
        (void)fwrite(b.data, 1, b.len, out);
        (void)fputc('\n', out);
    }
    free(err);
    sbx_buf_dispose(&b);
}

void
sbx_cli_format_one(FILE *out, const char *fmt, const char *sandbox_json)
{
    json_t *obj = json_loads(sandbox_json, 0, NULL);
    if (!obj)
        obj = json_object();
    if (strcmp(fmt, "json") == 0) {
        sbx_autofree char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(out, "%s\n", s ? s : "{}");
        json_decref(obj);
        return;
    }
    if (strncmp(fmt, "table ", 6) == 0)
        fmt += 6;
    struct sbx_buf b;
    sbx_buf_init(&b, 64u << 20);
    char *err = NULL;
    if (render(fmt, obj, false, &b, &err) == 0) {
        (void)fwrite(b.data, 1, b.len, out);
        (void)fputc('\n', out);
    }
    free(err);
    sbx_buf_dispose(&b);
    json_decref(obj);
}
