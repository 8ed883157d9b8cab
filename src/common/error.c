#include "common/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

const char *
sbx_strerror(int code)
{
    if (code < 0)
        code = -code;
    switch ((sbx_errc)code) {
    case SBX_OK:
        return "success";
    case SBX_EGENERIC:
        return "error";
    case SBX_EINVAL:
        return "invalid argument";
    case SBX_ENOTFOUND:
        return "not found";
    case SBX_EEXISTS:
        return "already exists";
    case SBX_ELIMIT:
        return "limit exceeded";
    case SBX_ETIMEDOUT:
        return "timed out";
    case SBX_EPERM:
        return "permission denied";
    case SBX_ENOMEM:
        return "out of memory";
    case SBX_ECONFLICT:
        return "conflicting state";
    case SBX_EUNAVAIL:
        return "unavailable";
    case SBX_EIO:
        return "I/O error";
    }
    return "unknown error";
}

int
sbx_error_setv(sbx_error **err, int code, int sys_errno, const char *fmt, va_list ap)
{
    if (code <= 0)
        code = SBX_EGENERIC;
    if (!err)
        return -code;
    char *msg = sbx_xvasprintf(fmt, ap);
    if (sys_errno != 0) {
        char buf[128];
        char *full = sbx_xasprintf("%s: %s", msg, strerror_r(sys_errno, buf, sizeof buf));
        free(msg);
        msg = full;
    }
    sbx_error_clear(err);
    sbx_error *e = sbx_xcalloc(1, sizeof *e);
    e->code = code;
    e->sys_errno = sys_errno;
    e->msg = msg;
    *err = e;
    return -code;
}

int
sbx_error_set(sbx_error **err, int code, int sys_errno, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int ret = sbx_error_setv(err, code, sys_errno, fmt, ap);
    va_end(ap);
    return ret;
}

int
sbx_error_wrap(sbx_error **err, const char *fmt, ...)
{
    if (!err)
        return -SBX_EGENERIC;
    if (!*err)
        return sbx_error_set(err, SBX_EGENERIC, 0, "error without a message (bug)");
    va_list ap;
    va_start(ap, fmt);
    char *ctx = sbx_xvasprintf(fmt, ap);
    va_end(ap);
    char *msg = sbx_xasprintf("%s: %s", ctx, (*err)->msg);
    free(ctx);
    free((*err)->msg);
    (*err)->msg = msg;
    return -(*err)->code;
}

int
sbx_error_code(const sbx_error *err)
{
    return err ? err->code : SBX_EGENERIC;
}

const char *
sbx_error_msg(const sbx_error *err)
{
    return err && err->msg ? err->msg : "unknown error";
}

void
sbx_error_clear(sbx_error **err)
{
    if (!err || !*err)
        return;
    free((*err)->msg);
    free(*err);
    *err = NULL;
}

void
sbx_error_move(sbx_error **dst, sbx_error **src)
{
    if (!dst) { /* the caller does not want the error: drop it */
        sbx_error_clear(src);
        return;
    }
    sbx_error_clear(dst);
    *dst = *src;
    *src = NULL;
}
