/*
 * multipart_fuzz.c - the streaming multipart parser, fed in pieces whose sizes come from the
 * first input byte; the body bytes handed out never exceed the input.
 */
#include <string.h>

#include "execd/multipart.h"
#include "fuzz/fuzz.h"

struct count {
    size_t data;
    int open;
};

static int
on_begin(void *ctx, const struct execd_mp_part *part)
{
    struct count *c = ctx;
    if (c->open)
        __builtin_trap(); /* begin twice without end */
    c->open = 1;
    return part->name[0] == '!' ? -1 : 0;
}

static int
on_data(void *ctx, const char *p, size_t n)
{
    struct count *c = ctx;
    if (!c->open || (n && !p))
        __builtin_trap();
    c->data += n;
    return 0;
}

static int
on_end(void *ctx)
{
    struct count *c = ctx;
    if (!c->open)
        __builtin_trap();
    c->open = 0;
    return 0;
}

static const struct execd_mp_callbacks cbs = {.begin = on_begin, .data = on_data, .end = on_end};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = data[0] % 17 + 1;
    data++;
    size--;
    static struct execd_mp mp; /* 16 KiB of header buffer: not on the stack */
    struct count c = {0};
    execd_mp_init(&mp, "XyZ", &cbs, &c);
    for (size_t off = 0; off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        if (execd_mp_feed(&mp, (const char *)data + off, n) < 0)
            break;
    }
    (void)execd_mp_finish(&mp);
    if (c.data > size)
        __builtin_trap();
    char ct[256];
    char b[80];
    size_t k = size < sizeof(ct) - 1 ? size : sizeof(ct) - 1;
    memcpy(ct, data, k);
    ct[k] = '\0';
    if (execd_mp_boundary(ct, b, sizeof(b)) == 0 && (strlen(b) == 0 || strlen(b) > 70))
        __builtin_trap();
    return 0;
}
