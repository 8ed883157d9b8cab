/*
 * fuzz.h - the libFuzzer entry point every fuzz target defines, and the reference checks
 * shared by targets.
 */
#ifndef SBX_FUZZ_FUZZ_H
#define SBX_FUZZ_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A host name as DNS has it, written independently of the code under test (the credential
 * proxy's Host and SNI readers): lowercase letters, digits and '-', labels of 1-63, at most
 * 253 in all, no empty label, no final dot. */
static inline bool
fuzz_dns_name(const char *s)
{
    size_t n = 0;
    size_t label = 0;
    while (s[n])
        n++;
    if (n == 0 || n > 253 || s[0] == '.' || s[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-') {
            if (++label > 63)
                return false;
        } else {
            return false;
        }
    }
    return true;
}

#endif
