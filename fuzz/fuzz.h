/*
 * fuzz.h - the libFuzzer entry point every fuzz target defines.
 */
#ifndef SBX_FUZZ_FUZZ_H
#define SBX_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
