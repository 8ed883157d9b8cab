/*
 * path_fuzz.c - path normalisation: the result is canonical and normalising is idempotent.
 */
#include <stdlib.h>
#include <string.h>

#include "execd/path.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out = NULL;
    const char *why = NULL;
    if (execd_path_clean((const char *)data, size, &out, &why) < 0)
        return 0;
    size_t n = strlen(out);
    if (out[0] != '/' || strstr(out, "//") || strstr(out, "/./") || strstr(out, "/../") ||
        (n > 1 && out[n - 1] == '/') || (n >= 3 && strcmp(out + n - 3, "/..") == 0) ||
        (n >= 2 && strcmp(out + n - 2, "/.") == 0) || n > size + 1)
        __builtin_trap();
    char *again = NULL;
    if (execd_path_clean(out, n, &again, &why) < 0 || strcmp(again, out) != 0)
        __builtin_trap();
    free(again);
    free(out);
    return 0;
}
