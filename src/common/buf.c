#include "common/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void
sbx_buf_init(struct sbx_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void
sbx_buf_dispose(struct sbx_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void
sbx_buf_reset(struct sbx_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int
grow(struct sbx_buf *b, size_t extra, sbx_error **err)
{
    if (extra > b->max || b->len > b->max - extra) {
        size_t max = b->max;
        sbx_buf_dispose(b);
        return sbx_error_set(err, SBX_ELIMIT, 0, "buffer limit of %zu bytes exceeded", max);
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    b->data = sbx_xrealloc(b->data, cap);
    b->cap = cap;
    return 0;
}

int
sbx_buf_append(struct sbx_buf *b, const void *p, size_t n, sbx_error **err)
{
    int ret = grow(b, n, err);
    if (ret < 0)
        return ret;
    if (!b->data)
        return sbx_error_set(err, SBX_EGENERIC, 0, "buffer not allocated (bug)");
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int
sbx_buf_append_str(struct sbx_buf *b, const char *s, sbx_error **err)
{
    return sbx_buf_append(b, s, strlen(s), err);
}

int
sbx_buf_printf(struct sbx_buf *b, sbx_error **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = sbx_xvasprintf(fmt, ap);
    va_end(ap);
    int ret = sbx_buf_append(b, s, strlen(s), err);
    free(s);
    return ret;
}

char *
sbx_buf_steal(struct sbx_buf *b)
{
    char *d = b->data ? b->data : sbx_xstrdup("");
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return d;
}

const char *
sbx_buf_str(const struct sbx_buf *b)
{
    return b->data ? b->data : "";
}

int
sbx_buf_append_shell_quoted(struct sbx_buf *b, const char *s, sbx_error **err)
{
    int r = sbx_buf_append_str(b, "'", err);
    for (; r == 0 && *s; s++)
        r = *s == '\'' ? sbx_buf_append_str(b, "'\\''", err) : sbx_buf_append(b, s, 1, err);
    return r == 0 ? sbx_buf_append_str(b, "'", err) : r;
}
