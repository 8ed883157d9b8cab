/*
 * srvutil.h - small helpers of the server: ids, tokens, RFC 3339 times, URL decoding.
 */
#ifndef SBX_SERVER_SRVUTIL_H
#define SBX_SERVER_SRVUTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SBX_UUID_LEN 36

/* A random uuid4 with dashes into out[37]. */
void sbx_srv_uuid4(char out[SBX_UUID_LEN + 1]);
/* A random uuid4 as 32 hex chars into out[33] (request ids). */
void sbx_srv_uuid4_hex(char out[33]);
/* n random bytes as 2n hex chars into out (out holds 2n+1). */
void sbx_srv_random_hex(char *out, size_t nbytes);
/* True when s is a lowercase or uppercase uuid with dashes (8-4-4-4-12 hex). */
bool sbx_srv_is_uuid(const char *s);

/* Format ms since the epoch as "2026-06-12T03:04:05.123Z" into out[32]. */
void sbx_srv_format_time(int64_t ms, char out[32]);
/* Parse an RFC 3339 timestamp (Z or +hh:mm offset, optional fraction) into ms since the epoch. */
int sbx_srv_parse_time(const char *s, int64_t *ms, sbx_error **err);

/* Percent-decode s (and '+' as space when plus_space) into a new string; NULL when s holds a
 * bad escape or decodes to a NUL byte. */
char *sbx_srv_url_decode(const char *s, size_t n, bool plus_space);

/* Constant-time comparison of two NUL-terminated secrets. */
bool sbx_srv_secret_equal(const char *a, const char *b);
/* A provider's setting (its config group as JSON, checked at startup): the string or integer
 * at key, or def when it is absent. */
const char *sbx_srv_setting_str(const json_t *s, const char *key, const char *def);
long sbx_srv_setting_int(const json_t *s, const char *key, long def);

#endif
