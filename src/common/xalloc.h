/*
 * xalloc.h - allocation that aborts on out-of-memory, for the daemons and the CLI.
 * (libsbx does not use these: it returns SBX_ENOMEM instead and never aborts its host.)
 */
#ifndef SBX_COMMON_XALLOC_H
#define SBX_COMMON_XALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *sbx_xmalloc(size_t n) __attribute__((malloc, returns_nonnull));
void *sbx_xcalloc(size_t nmemb, size_t size) __attribute__((malloc, returns_nonnull));
void *sbx_xrealloc(void *p, size_t n) __attribute__((returns_nonnull));
char *sbx_xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
char *sbx_xstrndup(const char *s, size_t n) __attribute__((malloc, returns_nonnull));
char *sbx_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2), returns_nonnull));
char *sbx_xvasprintf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0), returns_nonnull));

#endif
