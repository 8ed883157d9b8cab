/*
 * chunked.c - incremental chunked transfer-coding decoder (see chunked.h).
 *
 * One byte of framing at a time, so a line split across reads needs no buffer and no line is
 * ever looked at twice. What is refused in strict mode is exactly what two parsers could read
 * differently (a bare CR or LF, controls, whitespace where a size ends); the rest is RFC 9112.
 */
#include <ctype.h>
#include <string.h>

#include "common/chunked.h"

#define MAX_FRAMING  (64u << 10) /* one chunk's size line, or the trailers */
#define MAX_DIGITS   15u         /* no chunk is bigger than 2^60: no overflow, ever */
#define TOKEN_DELIMS "\"(),/:;<=>?@[\\]{}"

static int
hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool
tchar(char c)
{
    unsigned char u = (unsigned char)c;
    return u > 0x20 && u < 0x7f && !strchr(TOKEN_DELIMS, c);
}

/* A control other than HTAB (CR and LF included), or DEL. */
static bool
ctl(char c)
{
    unsigned char u = (unsigned char)c;
    return (u < 0x20 && u != '\t') || u == 0x7f;
}

/* A size digit; 1 when c is not one (the size ended), -1 on too many digits. */
static int
size_digit(struct sbx_chunked *st, char c)
{
    if (hex(c) < 0)
        return 1;
    if (st->digits++ >= MAX_DIGITS)
        return -1;
    st->left = st->left * 16 + (uint64_t)hex(c);
    return 0;
}

/* The chunk-size line ended: data follows, or (size 0) the trailers. */
static int
size_line_done(struct sbx_chunked *st)
{
    st->state = st->left ? CH_DATA : CH_TRAILER;
    st->line = 0;
    if (st->left)
        st->framing = 0;
    return 0;
}

static int
next_chunk(struct sbx_chunked *st)
{
    st->state = CH_SIZE;
    st->digits = 0;
    st->left = 0;
    return 0;
}

static int
to(struct sbx_chunked *st, enum sbx_chunked_state s)
{
    st->state = s;
    return 0;
}

/* Strict: a size, then OWS or `;ext` (no controls), then CRLF. h11, for one, takes no
 * whitespace before the `;`, and another parser may end a line at a bare CR. */
static int
strict_size_line(struct sbx_chunked *st, char c)
{
    if (st->state == CH_SIZE) {
        int d = size_digit(st, c);
        if (d <= 0)
            return d;
        if (st->digits == 0)
            return -1;
        if (c == ';')
            return to(st, CH_EXT);
        if (c == ' ' || c == '\t')
            return to(st, CH_SIZE_WS);
        return c == '\r' ? to(st, CH_LF) : -1;
    }
    if (st->state == CH_SIZE_WS && (c == ' ' || c == '\t'))
        return 0;
    if (st->state == CH_EXT && c != '\r')
        return ctl(c) ? -1 : 0;
    if (st->state != CH_LF) /* the size's whitespace or extensions end */
        return c == '\r' ? to(st, CH_LF) : -1;
    return c == '\n' ? size_line_done(st) : -1;
}

/* Strict: trailer field lines (a token, a colon, a value without controls), each ending in
 * CRLF, then an empty line. Nothing else may end them: a parser reading a bare LF as a line
 * end would see the message end elsewhere. */
static int
strict_trailer(struct sbx_chunked *st, char c)
{
    switch (st->state) {
    case CH_TRAILER: /* a line's first byte: obs-fold and empty names are refused here */
        if (c == '\r')
            return to(st, CH_END_LF);
        return tchar(c) ? to(st, CH_TR_NAME) : -1;
    case CH_TR_NAME:
        if (c == ':')
            return to(st, CH_TR_VALUE);
        return tchar(c) ? 0 : -1;
    case CH_TR_VALUE:
        if (c == '\r')
            return to(st, CH_TR_LF);
        return ctl(c) ? -1 : 0;
    case CH_TR_LF:
        return c == '\n' ? to(st, CH_TRAILER) : -1;
    case CH_END_LF:
        return c == '\n' ? to(st, CH_DONE) : -1;
    case CH_SIZE:
    case CH_SIZE_WS:
    case CH_EXT:
    case CH_LF:
    case CH_DATA:
    case CH_DATA_CR:
    case CH_DATA_LF:
    case CH_DONE:
    default:
        return -1;
    }
}

/* Lenient (evhttp's reading): a bare LF ends a line, extensions and trailers are skipped. */
static int
lenient_size_line(struct sbx_chunked *st, char c)
{
    if (st->state == CH_EXT)
        return c == '\n' ? size_line_done(st) : 0;
    int d = size_digit(st, c);
    if (d <= 0)
        return d;
    if (st->digits == 0)
        return -1;
    if (c == '\n')
        return size_line_done(st);
    st->state = CH_EXT;
    return (c == ';' || c == ' ' || c == '\t' || c == '\r') ? 0 : -1;
}

static int
lenient_trailer(struct sbx_chunked *st, char c)
{
    if (c == '\n') {
        if (st->line == 0)
            st->state = CH_DONE;
        st->line = 0;
    } else if (c != '\r') {
        st->line++;
    }
    return 0;
}

/* The CRLF after a chunk's data (lenient: or a bare LF). */
static int
data_end(struct sbx_chunked *st, char c)
{
    if (st->state == CH_DATA_CR) {
        st->state = CH_DATA_LF;
        if (c == '\r')
            return 0;
        if (st->strict)
            return -1;
    }
    return c == '\n' ? next_chunk(st) : -1;
}

/* One framing byte; -1 when it is malformed. */
static int
framing_byte(struct sbx_chunked *st, char c)
{
    if (++st->framing > MAX_FRAMING)
        return -1;
    switch (st->state) {
    case CH_SIZE:
    case CH_SIZE_WS:
    case CH_EXT:
    case CH_LF:
        return st->strict ? strict_size_line(st, c) : lenient_size_line(st, c);
    case CH_DATA_CR:
    case CH_DATA_LF:
        return data_end(st, c);
    case CH_TRAILER:
    case CH_TR_NAME:
    case CH_TR_VALUE:
    case CH_TR_LF:
    case CH_END_LF:
        return st->strict ? strict_trailer(st, c) : lenient_trailer(st, c);
    case CH_DATA:
    case CH_DONE:
    default:
        return -1;
    }
}

ssize_t
sbx_chunked_step(struct sbx_chunked *st, const char *p, size_t n, const char **data, size_t *dlen)
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
