/*
 * buf.h - a growable byte buffer with a hard maximum (curl's dynbuf).
 *
 * Every buffer fed by a peer has a maximum set at init; appending past it fails with
 * -SBX_ELIMIT and frees the contents, so a hostile peer cannot grow memory without bound.
 * The data is always NUL-terminated (the NUL is not counted in len).
 */
#ifndef SBX_COMMON_BUF_H
#define SBX_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "common/error.h"

struct sbx_buf {
    char *data; /* NULL until the first append */
    size_t len;
    size_t cap;
    size_t max; /* longest allowed content, in bytes */
};

void sbx_buf_init(struct sbx_buf *b, size_t max);
/* Free the contents; the buffer can be reused (same max). */
void sbx_buf_dispose(struct sbx_buf *b);
/* Drop the contents but keep the allocation. */
void sbx_buf_reset(struct sbx_buf *b);

int sbx_buf_append(struct sbx_buf *b, const void *p, size_t n, sbx_error **err);
int sbx_buf_append_str(struct sbx_buf *b, const char *s, sbx_error **err);
int sbx_buf_printf(struct sbx_buf *b, sbx_error **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Append s as one POSIX shell word: in single quotes, each ' written as '\'' . */
int sbx_buf_append_shell_quoted(struct sbx_buf *b, const char *s, sbx_error **err);

/* Take the contents (caller frees; never NULL: "" for an empty buffer). Resets the buffer. */
char *sbx_buf_steal(struct sbx_buf *b);

/* Content as a string; "" when empty. Borrowed. */
const char *sbx_buf_str(const struct sbx_buf *b);

#define sbx_autobuf __attribute__((cleanup(sbx_buf_dispose)))

#endif
