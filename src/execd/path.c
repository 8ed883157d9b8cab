/*
 * path.c - lexical path normalisation (pure: fuzzed by fuzz/path_fuzz.c).
 *
 * execd may touch any path the sandbox user can (that is its job), so this is not a jail: it
 * makes paths canonical ("/a//b/./c/../d" -> "/a/b/d"), insists on absolute paths and bounds
 * their length, so every handler sees one clean spelling.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "execd/path.h"

int
execd_path_clean(const char *in, size_t inlen, char **out, const char **why)
{
    if (inlen == 0 || memchr(in, '\0', inlen)) {
        *why = inlen == 0 ? "empty path" : "path contains a NUL byte";
        return -1;
    }
    if (in[0] != '/') {
        *why = "path must be absolute";
        return -1;
    }
    if (inlen >= PATH_MAX) {
        *why = "path too long";
        return -1;
    }
    char *r = sbx_xmalloc(inlen + 2);
    size_t o = 0;
    size_t i = 0;
    while (i < inlen) {
        while (i < inlen && in[i] == '/')
            i++;
        size_t start = i;
        while (i < inlen && in[i] != '/')
            i++;
        size_t n = i - start;
        if (n == 0 || (n == 1 && in[start] == '.'))
            continue;
        if (n == 2 && in[start] == '.' && in[start + 1] == '.') {
            while (o > 0 && r[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* drop the slash too; ".." of "/" is "/" */
            continue;
        }
        r[o++] = '/';
        memcpy(r + o, in + start, n);
        o += n;
    }
    if (o == 0)
        r[o++] = '/';
    r[o] = '\0';
    *out = r;
    return 0;
}
