/*
 * tlshello_fuzz.c - the credential proxy's reading of a sandbox's TLS ClientHello for its SNI
 * (sbx_credtls_hello_sni, src/egress/credtls.c; hand-written, on bytes peeked from the
 * sandbox's connection). A name found is NUL-terminated, a DNS host name (labels of 1-63
 * letters, digits and '-', at most 253 bytes, no empty label, no final dot), lowercase, and
 * the input holds it (case aside); only the first record is read: bytes after it never change
 * the answer, and a record cut short has no name.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "egress/credproxy_int.h"
#include "fuzz/fuzz.h"

/* Does the input hold name, case aside? */
static bool
holds(const uint8_t *data, size_t size, const char *name)
{
    char *low = sbx_xmalloc(size + 1);
    for (size_t i = 0; i < size; i++)
        low[i] = (char)(data[i] >= 'A' && data[i] <= 'Z' ? data[i] + 32 : data[i]);
    bool found = memmem(low, size, name, strlen(name)) != NULL;
    free(low);
    return found;
}

/* The answer for the first k bytes, on a copy of exactly k bytes (so ASan sees any overread). */
static bool
sni_of(const uint8_t *data, size_t k, char name[256])
{
    unsigned char *copy = sbx_xmalloc(k ? k : 1);
    memcpy(copy, data, k);
    memset(name, 'X', 256);
    bool ok = sbx_credtls_hello_sni(copy, k, name);
    free(copy);
    return ok;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[256];
    bool ok = sni_of(data, size, name);
    if (ok &&
        (!memchr(name, '\0', sizeof name) || !fuzz_dns_name(name) || !holds(data, size, name)))
        __builtin_trap();
    size_t rec = size >= 5 ? 5 + ((size_t)data[3] << 8 | data[4]) : 0;
    char again[256];
    if (rec && size > rec) { /* bytes after the first record are not looked at */
        bool ok2 = sni_of(data, rec, again);
        if (ok2 != ok || (ok && strcmp(name, again) != 0))
            __builtin_trap();
    }
    if (ok && size <= rec && sni_of(data, size - 1, again)) /* the record cut short */
        __builtin_trap();
    return 0;
}
