/*
 * error.h - the error object passed up with context (crun's error + libgit2's discipline).
 *
 *   if (mount(...) < 0)
 *       return sbx_error_set(err, SBX_EGENERIC, errno, "mount overlay `%s`", target);
 *   ...
 *   if (ret < 0)
 *       return sbx_error_wrap(err, "create sandbox `%s`", id);
 *   => "create sandbox `x`: mount overlay `/y`: Permission denied"
 *
 * A function that can fail takes `sbx_error **err` last and returns a negative sbx_errc on
 * failure (and sets *err), >= 0 on success (and leaves *err alone). Only the layer that handles
 * an error logs or reports it; lower layers wrap.
 */
#ifndef SBX_COMMON_ERROR_H
#define SBX_COMMON_ERROR_H

#include <stdarg.h>

#include "sbx/error.h"

typedef struct sbx_error {
    int code;      /* sbx_errc, > 0 */
    int sys_errno; /* errno at the failure, or 0 */
    char *msg;     /* "outer: inner: strerror" (owned) */
} sbx_error;

/* Set *err (if err is not NULL) and return -code. A set *err is replaced (and freed).
 * When sys_errno is not 0, ": strerror(sys_errno)" is appended to the message. */
int sbx_error_set(sbx_error **err, int code, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int sbx_error_setv(sbx_error **err, int code, int sys_errno, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Prefix context to *err ("context: old message") and return -(*err)->code.
 * If *err was never set (a bug in the callee), a generic error is made. With err == NULL the
 * code is unknown here and -SBX_EGENERIC is returned: where callers may pass NULL, write
 * `(void)sbx_error_wrap(err, ...); return ret;` to keep the callee's code. */
int sbx_error_wrap(sbx_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The code stored in *err, or SBX_EGENERIC when err/ *err is NULL. */
int sbx_error_code(const sbx_error *err);

/* Message of err, or "unknown error" when NULL. Borrowed from err. */
const char *sbx_error_msg(const sbx_error *err);

/* Free *err and set it to NULL. Accepts NULL and unset errors. */
void sbx_error_clear(sbx_error **err);

/* Move *src into *dst (freeing any previous *dst); with dst NULL, *src is freed. */
void sbx_error_move(sbx_error **dst, sbx_error **src);

#define sbx_autoerror __attribute__((cleanup(sbx_error_clear)))

#endif
