/*
 * chunked.h - an incremental HTTP/1.1 chunked transfer-coding decoder (pure, fuzzable).
 */
#ifndef SBX_EXECD_CHUNKED_H
#define SBX_EXECD_CHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum execd_chunked_state {
    CH_SIZE,
    CH_EXT,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER,
    CH_DONE
};

struct execd_chunked {
    enum execd_chunked_state state;
    uint64_t left;   /* data bytes left in the current chunk */
    unsigned digits; /* hex digits of the size seen */
    size_t line;     /* bytes on the current trailer line */
    size_t framing;  /* framing bytes seen, bounded against endless extensions */
};

/* Consume a prefix of p[0..n): returns bytes consumed, or -1 on malformed input. When the
 * consumed prefix ends with body data, *data and *dlen point at it (inside p), else *dlen = 0.
 * st->state == CH_DONE after the last chunk and its trailers. */
ssize_t execd_chunked_step(struct execd_chunked *st, const char *p, size_t n, const char **data,
                           size_t *dlen);

#endif
