/*
 * api_fields.h - checks of a create's platform, access and resource fields (api_fields.c).
 */
#ifndef SBX_SERVER_API_FIELDS_H
#define SBX_SERVER_API_FIELDS_H

#include <stdint.h>

#include <jansson.h>

#include "server/httpd.h"
#include "server/provider.h"

/* secureAccess: the sandbox's own token (in its record's private part) and the header that
 * carries it to the router */
#define SBX_ACCESS_TOKEN_PRIV "access_token"
#define SBX_ACCESS_HEADER     "OpenSandbox-Secure-Access"

/* OSEP-0009 renew-on-access: extensions["access.renew.extend.seconds"] */
#define SBX_RENEW_EXT "access.renew.extend.seconds"

/* 0, or -1 with a 400 in *out naming the field and the provider. */
int sbx_api_check_fields(const struct sbx_provider_factory *f, const json_t *body,
                         struct sbx_reply *out);
/* The extension's seconds (300-86400), or 0 when absent or invalid. */
int64_t sbx_api_renew_seconds(const json_t *extensions);

#endif
