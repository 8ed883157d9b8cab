/*
 * chunked.h - the one HTTP/1.1 chunked transfer-coding decoder: incremental, pure, fuzzed
 * (fuzz/chunked_fuzz.c). The router decodes what a sandbox answers with it (strict), execd's
 * upload hook what a client sends (lenient, see below).
 */
#ifndef SBX_COMMON_CHUNKED_H
#define SBX_COMMON_CHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum sbx_chunked_state {
    CH_SIZE,     /* the hex digits of a chunk size */
    CH_SIZE_WS,  /* strict: whitespace after the digits, before CRLF */
    CH_EXT,      /* chunk extensions, up to the line end */
    CH_LF,       /* strict: the LF of a chunk-size line's CRLF */
    CH_DATA,     /* chunk data */
    CH_DATA_CR,  /* the CRLF after the data */
    CH_DATA_LF,  /* its LF */
    CH_TRAILER,  /* the start of a trailer line (or of the final blank line) */
    CH_TR_NAME,  /* strict: a trailer field's name */
    CH_TR_VALUE, /* strict: its value */
    CH_TR_LF,    /* strict: the LF ending a trailer line */
    CH_END_LF,   /* strict: the LF of the final blank line */
    CH_DONE
};

struct sbx_chunked {
    /* RFC 9112 exactly, for a peer whose bytes another parser may read too: every line ends in
     * CRLF, a size is digits then optional whitespace or `;extensions` (no controls), trailers
     * are field lines. Otherwise (execd's upload hook) it follows what libevent's evhttp
     * accepts, since the hook must end a body exactly where evhttp does: a bare LF ends a
     * line, and extensions and trailer lines are skipped unread. */
    bool strict;
    enum sbx_chunked_state state;
    uint64_t left;   /* data bytes left in the current chunk */
    unsigned digits; /* hex digits of the size seen */
    size_t line;     /* bytes on the current trailer line */
    size_t framing;  /* framing bytes since the last data, bounded against endless extensions */
};

/* Consume a prefix of p[0..n): returns bytes consumed, or -1 on malformed input. When the
 * consumed prefix ends with body data, *data and *dlen point at it (inside p), else *dlen = 0.
 * st->state == CH_DONE after the last chunk and its trailers. */
ssize_t sbx_chunked_step(struct sbx_chunked *st, const char *p, size_t n, const char **data,
                         size_t *dlen);

#endif
