/*
 * chunked.c - incremental chunked transfer-coding decoder (see chunked.h).
 */
#include <ctype.h>

#include "execd/chunked.h"

#define MAX_FRAMING (64u << 10) /* extensions and trailers together */

static int
hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One framing byte; -1 when it is malformed. */
static int
framing_byte(struct execd_chunked *st, char c)
{
    if (++st->framing > MAX_FRAMING)
        return -1;
    switch (st->state) {
    case CH_SIZE:
        if (hex(c) >= 0) {
            if (st->digits++ >= 15)
                return -1; /* no chunk is bigger than 2^60 */
            st->left = st->left * 16 + (uint64_t)hex(c);
            return 0;
        }
        if (st->digits == 0)
            return -1;
        if (c == '\n') {
            st->state = st->left ? CH_DATA : CH_TRAILER;
            st->line = 0;
            return 0;
        }
        st->state = CH_EXT;
        return (c == ';' || c == ' ' || c == '\t' || c == '\r') ? 0 : -1;
    case CH_EXT:
        if (c == '\n') {
            st->state = st->left ? CH_DATA : CH_TRAILER;
            st->line = 0;
        }
        return 0;
    case CH_DATA_CR:
        st->state = CH_DATA_LF;
        if (c == '\r')
            return 0;
        __attribute__((fallthrough)); /* a bare LF ends the chunk too */
    case CH_DATA_LF:
        if (c != '\n')
            return -1;
        st->state = CH_SIZE;
        st->digits = 0;
        st->left = 0;
        return 0;
    case CH_TRAILER:
        if (c == '\n') {
            if (st->line == 0)
                st->state = CH_DONE;
            st->line = 0;
        } else if (c != '\r') {
            st->line++;
        }
        return 0;
    case CH_DATA:
    case CH_DONE:
    default:
        return -1;
    }
}

ssize_t
execd_chunked_step(struct execd_chunked *st, const char *p, size_t n, const char **data,
                   size_t *dlen)
{
    *dlen = 0;
    size_t i = 0;
    while (i < n && st->state != CH_DONE) {
        if (st->state == CH_DATA) {
            size_t k = st->left < n - i ? (size_t)st->left : n - i;
            st->left -= k;
            if (st->left == 0)
                st->state = CH_DATA_CR;
            *data = p + i;
            *dlen = k;
            return (ssize_t)(i + k);
        }
        if (framing_byte(st, p[i]) < 0)
            return -1;
        i++;
    }
    return (ssize_t)i;
}
