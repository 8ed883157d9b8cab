/*
 * chunked_fuzz.c - the chunked transfer-coding decoder, fed in pieces; data spans stay inside
 * the input and never add up to more than it.
 */
#include "execd/chunked.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = data[0] % 13 + 1;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    struct execd_chunked st = {0};
    size_t total = 0;
    size_t off = 0;
    while (off < n && st.state != CH_DONE) {
        size_t k = n - off < piece ? n - off : piece;
        const char *d = NULL;
        size_t dl = 0;
        ssize_t used = execd_chunked_step(&st, p + off, k, &d, &dl);
        if (used < 0)
            return 0;
        if ((size_t)used > k || (dl && (d < p + off || d + dl > p + off + k)) ||
            (used == 0 && st.state != CH_DONE))
            __builtin_trap();
        total += dl;
        off += (size_t)used;
    }
    if (total > n)
        __builtin_trap();
    return 0;
}
