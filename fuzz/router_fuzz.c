/*
 * router_fuzz.c - what a sandbox answers through the router: the input is a response head
 * (status line, header lines) and chunk-size lines. A parsed head holds only token names and
 * values without CR, LF or other controls, and never both framings (the two things response
 * splitting and smuggling need); a chunk size is what its hex digits say.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "fuzz/fuzz.h"
#include "server/httphead.h"

static void
check_head(const struct sbx_http_head *h)
{
    if (h->chunked && h->content_length >= 0)
        __builtin_trap();
    for (size_t i = 0; i < h->n; i++) {
        if (!*h->name[i] || strpbrk(h->name[i], " \t:\r\n\"(),/;<=>?@[\\]{}"))
            __builtin_trap();
        for (const unsigned char *c = (const unsigned char *)h->value[i]; *c; c++) {
            if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
                __builtin_trap();
        }
    }
}

static void
chunk_lines(const char *s)
{
    for (const char *line = s; *line;) {
        const char *eol = strstr(line, "\r\n");
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        char *one = sbx_xstrndup(line, n);
        int64_t size = sbx_http_chunk_size(one);
        if (size < -1 || size > 0xfffffffffffffffLL)
            __builtin_trap();
        free(one);
        line += n + (eol ? 2 : 0);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = sbx_xmalloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    int status = sbx_http_status_line(buf, size);
    if (status != -1 && (status < 100 || status > 599))
        __builtin_trap();
    chunk_lines(buf);
    char *lines = strstr(buf, "\r\n");
    if (lines) {
        struct sbx_http_head h = {0};
        if (sbx_http_head_parse(lines + 2, &h) == 0)
            check_head(&h);
    }
    free(buf);
    return 0;
}
