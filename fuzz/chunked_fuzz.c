/*
 * chunked_fuzz.c - the chunked transfer-coding decoder (common/chunked.c: the router's, strict,
 * and execd's upload hook's, lenient), fed in pieces; data spans stay inside the input and never
 * add up to more than it, and a strict decode never accepts what a lenient one refuses.
 */
#include "common/chunked.h"
#include "fuzz/fuzz.h"

/* Decode p[0..n) in pieces: 1 when it ended (CH_DONE), 0 when it wants more, -1 refused. */
static int
decode(bool strict, size_t piece, const char *p, size_t n, size_t *total)
{
    struct sbx_chunked st = {.strict = strict};
    size_t off = 0;
    *total = 0;
    while (off < n && st.state != CH_DONE) {
        size_t k = n - off < piece ? n - off : piece;
        const char *d = NULL;
        size_t dl = 0;
        ssize_t used = sbx_chunked_step(&st, p + off, k, &d, &dl);
        if (used < 0)
            return -1;
        if ((size_t)used > k || (dl && (d < p + off || d + dl > p + off + k)) ||
            (used == 0 && st.state != CH_DONE))
            __builtin_trap();
        *total += dl;
        off += (size_t)used;
    }
    if (*total > n)
        __builtin_trap();
    return st.state == CH_DONE;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = data[0] % 13 + 1;
    const char *p = (const char *)data + 1;
    size_t strict_total = 0;
    size_t lenient_total = 0;
    int strict = decode(true, piece, p, size - 1, &strict_total);
    int lenient = decode(false, piece, p, size - 1, &lenient_total);
    /* CRLF framing read strictly reads the same leniently: same end, same data */
    if (strict == 1 && (lenient != 1 || strict_total != lenient_total))
        __builtin_trap();
    return 0;
}
