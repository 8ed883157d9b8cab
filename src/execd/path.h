/*
 * path.h - path normalisation for the files endpoints.
 */
#ifndef SBX_EXECD_PATH_H
#define SBX_EXECD_PATH_H

#include <stddef.h>

/* Normalise an absolute path lexically (no symlink resolution). Returns 0 and *out (caller
 * frees), or -1 with *why (static text) for empty, relative, NUL-containing or overlong
 * input. */
int execd_path_clean(const char *in, size_t inlen, char **out, const char **why);

#endif
