/*
 * router_fuzz.c - what a sandbox answers through the router: the input is a response (interim
 * heads, the final head, a body). A parsed head holds only token names and values without CR,
 * LF or other controls, and never both framings (the two things response splitting and
 * smuggling need); its length is inside the input; the body is then framed and, when chunked,
 * decoded as proxy.c does. The same input is also read as a request head (the credential
 * proxy's, sbx_http_req_head): an upper-case method, a target of visible ASCII, the same
 * header checks.
 */
#include <stdlib.h>
#include <string.h>

#include "common/chunked.h"
#include "common/httphead.h"
#include "common/xalloc.h"
#include "fuzz/fuzz.h"

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

/* The body after the head: a chunked one decoded in one go, data inside the input. */
static void
chunked_body(const char *p, size_t n)
{
    struct sbx_chunked st = {.strict = true};
    size_t off = 0;
    while (off < n && st.state != CH_DONE) {
        const char *d = NULL;
        size_t dl = 0;
        ssize_t used = sbx_chunked_step(&st, p + off, n - off, &d, &dl);
        if (used < 0)
            return;
        if ((size_t)used > n - off || (dl && (d < p + off || d + dl > p + n)))
            __builtin_trap();
        off += (size_t)used;
    }
}

static void
request(const uint8_t *data, size_t size)
{
    char *buf = sbx_xmalloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    struct sbx_http_req r = {0};
    ssize_t n = sbx_http_req_head(buf, size, SBX_HTTP_HEAD_MAX, &r);
    if (n > (ssize_t)size)
        __builtin_trap();
    if (n > 0) {
        if (!r.method[0] || strspn(r.method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(r.method))
            __builtin_trap();
        for (const unsigned char *c = (const unsigned char *)r.target; *c; c++) {
            if (*c <= 0x20 || *c >= 0x7f)
                __builtin_trap();
        }
        check_head(&r.head);
    }
    free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    request(data, size);
    char *buf = sbx_xmalloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    int status = sbx_http_status_line(buf, size);
    if (status != -1 && (status < 100 || status > 599))
        __builtin_trap();
    size_t off = 0;
    for (;;) {
        struct sbx_http_resp r = {0};
        ssize_t n = sbx_http_resp_head(buf + off, size - off, &r);
        if (n <= 0)
            break;
        if ((size_t)n > size - off || r.status < 100 || r.status > 599)
            __builtin_trap();
        check_head(&r.head);
        off += (size_t)n;
        if (sbx_http_interim(r.status))
            continue;
        if (sbx_http_body_framing(&r, "GET") == SBX_BODY_CHUNKED)
            chunked_body(buf + off, size - off);
        break;
    }
    free(buf);
    return 0;
}
