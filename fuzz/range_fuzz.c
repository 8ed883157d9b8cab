/*
 * range_fuzz.c - Range header parsing: an accepted range always lies inside the file.
 */
#include <string.h>

#include "execd/download.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t fsize = (uint64_t)data[0] * 257 + data[1];
    char h[512];
    size_t k = size - 2 < sizeof(h) - 1 ? size - 2 : sizeof(h) - 1;
    memcpy(h, data + 2, k);
    h[k] = '\0';
    uint64_t start = 0;
    uint64_t len = 0;
    if (execd_range_parse(h, fsize, &start, &len) == 0 &&
        (len == 0 || start >= fsize || start + len > fsize))
        __builtin_trap();
    return 0;
}
