/*
 * multipart.c - streaming multipart/form-data parser (see multipart.h).
 *
 * The delimiter is "\r\n--boundary"; the body is parsed as if it started with "\r\n" so the
 * first boundary line needs no special case. A boundary never contains CR, so after a
 * partial match fails, the only place a new match can start is the current byte.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "execd/multipart.h"

static int
fail(struct execd_mp *mp, const char *why)
{
    mp->state = MP_ERROR;
    if (!mp->error)
        mp->error = why;
    return -1;
}

static bool
bchar_ok(unsigned char c)
{
    return isalnum(c) || strchr("'()+_,-./:=? ", c) != NULL;
}

int
execd_mp_boundary(const char *ct, char *out, size_t outn)
{
    if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
        return -1;
    const char *b = strcasestr(ct, "boundary=");
    if (!b)
        return -1;
    b += 9;
    size_t n;
    if (*b == '"') {
        b++;
        const char *q = strchr(b, '"');
        if (!q)
            return -1;
        n = (size_t)(q - b);
    } else {
        n = strcspn(b, "; \t");
    }
    if (n == 0 || n > EXECD_MP_MAX_BOUNDARY || n >= outn)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!bchar_ok((unsigned char)b[i]))
            return -1;
    }
    memcpy(out, b, n);
    out[n] = '\0';
    return 0;
}

void
execd_mp_init(struct execd_mp *mp, const char *boundary, const struct execd_mp_callbacks *cb,
              void *ctx)
{
    memset(mp, 0, sizeof(*mp));
    mp->delim_len = (size_t)snprintf(mp->delim, sizeof(mp->delim), "\r\n--%s", boundary);
    mp->match = 2; /* as if the body began with CRLF */
    mp->cb = cb;
    mp->ctx = ctx;
}

static int
emit(struct execd_mp *mp, const char *p, size_t n)
{
    if (n == 0 || !mp->in_part)
        return 0; /* preamble bytes are dropped */
    if (mp->cb->data(mp->ctx, p, n) < 0)
        return fail(mp, "upload aborted");
    return 0;
}

/* Copy a header parameter (name="x" / filename="x") into out; quotes and backslash escapes
 * of the quoted form are handled, an unquoted value ends at ';'. */
static void
header_param(const char *hdr, const char *key, char *out, size_t outn)
{
    out[0] = '\0';
    size_t kl = strlen(key);
    for (const char *p = hdr; (p = strcasestr(p, key)) != NULL; p += kl) {
        if (p != hdr && p[-1] != ';' && p[-1] != ' ' && p[-1] != '\t')
            continue;
        const char *v = p + kl;
        size_t o = 0;
        if (*v == '"') {
            for (v++; *v && *v != '"' && o + 1 < outn; v++) {
                if (*v == '\\' && v[1])
                    v++;
                out[o++] = *v;
            }
        } else {
            for (; *v && *v != ';' && *v != '\r' && o + 1 < outn; v++)
                out[o++] = *v;
        }
        out[o] = '\0';
        return;
    }
}

static int
parse_headers(struct execd_mp *mp)
{
    struct execd_mp_part part;
    memset(&part, 0, sizeof(part));
    mp->hdr[mp->hdr_len] = '\0';
    bool disposition = false;
    for (char *line = mp->hdr; *line;) {
        char *eol = strstr(line, "\r\n");
        if (eol)
            *eol = '\0';
        if (strncasecmp(line, "Content-Disposition:", 20) == 0) {
            disposition = true;
            header_param(line + 20, "name=", part.name, sizeof(part.name));
            header_param(line + 20, "filename=", part.filename, sizeof(part.filename));
        } else if (strncasecmp(line, "Content-Type:", 13) == 0) {
            const char *v = line + 13;
            v += strspn(v, " \t");
            (void)snprintf(part.content_type, sizeof(part.content_type), "%s", v);
        }
        if (!eol)
            break;
        line = eol + 2;
    }
    if (!disposition)
        return fail(mp, "part without Content-Disposition");
    mp->in_part = true;
    if (mp->cb->begin(mp->ctx, &part) < 0)
        return fail(mp, "part rejected");
    return 0;
}

/* Header bytes up to the blank line; returns bytes consumed or -1. */
static ssize_t
feed_headers(struct execd_mp *mp, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (mp->hdr_len + 1 >= sizeof(mp->hdr))
            return fail(mp, "part headers too long");
        mp->hdr[mp->hdr_len++] = p[i];
        size_t l = mp->hdr_len;
        bool blank = l == 2 && memcmp(mp->hdr, "\r\n", 2) == 0;
        if (blank || (l >= 4 && memcmp(mp->hdr + l - 4, "\r\n\r\n", 4) == 0)) {
            mp->hdr_len = blank ? 0 : l - 2;
            if (parse_headers(mp) < 0)
                return -1;
            mp->state = MP_DATA;
            mp->match = 0;
            return (ssize_t)(i + 1);
        }
    }
    return (ssize_t)n;
}

static int
delimiter_done(struct execd_mp *mp)
{
    if (mp->in_part) {
        mp->in_part = false;
        if (mp->cb->end(mp->ctx) < 0)
            return fail(mp, "part rejected");
    }
    mp->state = MP_AFTER;
    mp->match = 0;
    return 0;
}

/* A delimiter prefix held from the previous piece (mp->match > 0): go on matching it byte by
 * byte. Returns bytes consumed (the delimiter's end when it completes), or -1. */
static ssize_t
feed_held(struct execd_mp *mp, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && mp->match > 0) {
        if (p[i] != mp->delim[mp->match]) {
            /* mismatch: the held prefix was data after all; p[i] is looked at again */
            if (emit(mp, mp->delim, mp->match) < 0)
                return -1;
            mp->match = 0;
            break;
        }
        i++;
        if (++mp->match == mp->delim_len)
            return delimiter_done(mp) < 0 ? -1 : (ssize_t)i;
    }
    return (ssize_t)i;
}

/* Part body / preamble: returns bytes consumed or -1. Data runs go out in one piece up to a
 * delimiter (found with memmem, which skips ahead by the delimiter's length on data that does
 * not match) or the end of p. A delimiter cut by the end of p can only begin in its last
 * delim_len - 1 bytes, at a CR (the only CR in a delimiter is its first byte); it is held in
 * mp->match (its bytes are mp->delim's, so they need no copy). */
static ssize_t
feed_data(struct execd_mp *mp, const char *p, size_t n)
{
    ssize_t held = mp->match > 0 ? feed_held(mp, p, n) : 0;
    if (held < 0 || mp->match > 0 || mp->state != MP_DATA)
        return held;
    size_t start = (size_t)held;
    const char *hit = memmem(p + start, n - start, mp->delim, mp->delim_len);
    if (hit) {
        size_t i = (size_t)(hit - p);
        if (emit(mp, p + start, i - start) < 0)
            return -1;
        return delimiter_done(mp) < 0 ? -1 : (ssize_t)(i + mp->delim_len);
    }
    size_t from = n - start >= mp->delim_len ? n - (mp->delim_len - 1) : start;
    for (const char *cr; (cr = memchr(p + from, '\r', n - from)) != NULL;) {
        size_t i = (size_t)(cr - p);
        if (memcmp(cr, mp->delim, n - i) == 0) {
            if (emit(mp, p + start, i - start) < 0)
                return -1;
            mp->match = n - i; /* the rest of the delimiter may come in the next piece */
            return (ssize_t)n;
        }
        from = i + 1;
    }
    if (emit(mp, p + start, n - start) < 0)
        return -1;
    return (ssize_t)n;
}

static ssize_t
feed_after(struct execd_mp *mp, char c)
{
    switch (mp->state) {
    case MP_AFTER:
        if (c == '-')
            mp->state = MP_AFTER_DASH;
        else if (c == '\r')
            mp->state = MP_AFTER_CR;
        else if (c != ' ' && c != '\t')
            return fail(mp, "garbage after boundary");
        return 1;
    case MP_AFTER_DASH:
        if (c != '-')
            return fail(mp, "garbage after boundary");
        mp->state = MP_DONE;
        return 1;
    case MP_AFTER_CR:
        if (c != '\n')
            return fail(mp, "garbage after boundary");
        mp->state = MP_HEADERS;
        mp->hdr_len = 0;
        return 1;
    case MP_DATA:
    case MP_HEADERS:
    case MP_DONE:
    case MP_ERROR:
    default:
        return fail(mp, "internal state");
    }
}

int
execd_mp_feed(struct execd_mp *mp, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t used;
        switch (mp->state) {
        case MP_DATA:
            used = feed_data(mp, p, n);
            break;
        case MP_HEADERS:
            used = feed_headers(mp, p, n);
            break;
        case MP_DONE:
            return 0;
        case MP_ERROR:
            return -1;
        case MP_AFTER:
        case MP_AFTER_DASH:
        case MP_AFTER_CR:
        default:
            used = feed_after(mp, *p);
            break;
        }
        if (used < 0)
            return -1;
        p += used;
        n -= (size_t)used;
    }
    return 0;
}

int
execd_mp_finish(struct execd_mp *mp)
{
    if (mp->state == MP_DONE)
        return 0;
    if (mp->state != MP_ERROR)
        (void)fail(mp, "multipart body ends before the closing boundary");
    return -1;
}
