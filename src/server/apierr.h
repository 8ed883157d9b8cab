/*
 * apierr.h - the one table mapping sbx_errc to an HTTP status and a `{code,message}` code.
 */
#ifndef SBX_SERVER_APIERR_H
#define SBX_SERVER_APIERR_H

/* HTTP status and namespaced error code for an sbx_errc (unknown codes map to 500). */
void sbx_apierr_lookup(int errc, int *status, const char **code);

#endif
