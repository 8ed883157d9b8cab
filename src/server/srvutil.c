/*
 * srvutil.c - ids, tokens, times and URL decoding for the server.
 */
#include "server/srvutil.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/xalloc.h"

void
sbx_srv_random_hex(char *out, size_t nbytes)
{
    unsigned char raw[64];
    if (nbytes > sizeof raw)
        nbytes = sizeof raw;
    randombytes_buf(raw, nbytes);
    sodium_bin2hex(out, nbytes * 2 + 1, raw, nbytes);
}

static void
uuid4_bytes(unsigned char b[16])
{
    randombytes_buf(b, 16);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
}

void
sbx_srv_uuid4(char out[SBX_UUID_LEN + 1])
{
    unsigned char b[16];
    char hex[33];
    uuid4_bytes(b);
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    (void)snprintf(out, SBX_UUID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
                   hex + 16, hex + 20);
}

void
sbx_srv_uuid4_hex(char out[33])
{
    unsigned char b[16];
    uuid4_bytes(b);
    sodium_bin2hex(out, 33, b, sizeof b);
}

bool
sbx_srv_is_uuid(const char *s)
{
    if (!s || strlen(s) != SBX_UUID_LEN)
        return false;
    for (int i = 0; i < SBX_UUID_LEN; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]) || !s[i])
            return false;
    }
    return true;
}

void
sbx_srv_format_time(int64_t ms, char out[32])
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

static int
parse_offset(const char *p, int64_t *off_s)
{
    if (*p == 'Z' || *p == 'z')
        return p[1] ? -1 : 0;
    int hh = 0;
    int mm = 0;
    char sign = *p;
    if ((sign != '+' && sign != '-') || sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || strlen(p) != 6 ||
        hh > 23 || mm > 59)
        return -1;
    *off_s = (int64_t)(hh * 3600 + mm * 60) * (sign == '+' ? 1 : -1);
    return 0;
}

int
sbx_srv_parse_time(const char *s, int64_t *ms, sbx_error **err)
{
    struct tm tm = {0};
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an RFC 3339 time", s ? s : "");
    int64_t frac_ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits < 3)
                frac_ms = frac_ms * 10 + (*p - '0');
        }
        for (; digits < 3; digits++)
            frac_ms *= 10;
    }
    int64_t off = 0;
    if (parse_offset(p, &off) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "`%s` is not an RFC 3339 time", s);
    *ms = ((int64_t)timegm(&tm) - off) * 1000 + frac_ms;
    return 0;
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *
sbx_srv_url_decode(const char *s, size_t n, bool plus_space)
{
    char *out = sbx_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

bool
sbx_srv_secret_equal(const char *a, const char *b)
{
    size_t la = strlen(a);
    /* The key length is not secret; the contents are compared in constant time. */
    if (la != strlen(b) || la == 0)
        return false;
    return sodium_memcmp(a, b, la) == 0;
}

const char *
sbx_srv_setting_str(const json_t *s, const char *key, const char *def)
{
    const char *v = json_string_value(json_object_get(s, key));
    return v ? v : def;
}

long
sbx_srv_setting_int(const json_t *s, const char *key, long def)
{
    json_t *v = json_object_get(s, key);
    return v ? (long)json_integer_value(v) : def;
}
