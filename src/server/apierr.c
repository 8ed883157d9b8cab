/*
 * apierr.c - sbx_errc -> HTTP status + OpenSandbox-style error code.
 *
 * Handlers that know a more precise code (SANDBOX_NOT_RUNNING, INVALID_EXPIRATION...) pass it
 * explicitly; everything else goes through this table so one errc always means one status.
 */
#include "server/apierr.h"

#include "common/util.h"
#include "sbx/error.h"

static const struct {
    int errc;
    int status;
    const char *code;
} table[] = {
    {SBX_EINVAL, 400, "SANDBOX::INVALID_PARAMETER"},
    {SBX_ENOTFOUND, 404, "SANDBOX::SANDBOX_NOT_FOUND"},
    {SBX_EEXISTS, 409, "SANDBOX::ALREADY_EXISTS"},
    {SBX_ELIMIT, 429, "SANDBOX::LIMIT_EXCEEDED"},
    {SBX_ETIMEDOUT, 504, "SANDBOX::TIMEOUT"},
    {SBX_EPERM, 403, "GENERAL::FORBIDDEN"},
    {SBX_ENOMEM, 500, "GENERAL::OUT_OF_MEMORY"},
    {SBX_ECONFLICT, 409, "SANDBOX::INVALID_STATE"},
    {SBX_EUNAVAIL, 503, "SANDBOX::UNAVAILABLE"},
    {SBX_EIO, 502, "SANDBOX::UPSTREAM_ERROR"},
    {SBX_EGENERIC, 500, "GENERAL::INTERNAL_ERROR"},
};

void
sbx_apierr_lookup(int errc, int *status, const char **code)
{
    if (errc < 0)
        errc = -errc;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(table); i++) {
        if (table[i].errc == errc) {
            *status = table[i].status;
            *code = table[i].code;
            return;
        }
    }
    *status = 500;
    *code = "GENERAL::INTERNAL_ERROR";
}
