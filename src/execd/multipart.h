/*
 * multipart.h - a streaming multipart/form-data parser (RFC 7578) with bounded memory.
 *
 * Bytes go in as they arrive, in pieces of any size; part headers (bounded) are parsed and
 * part bodies are handed to callbacks without being buffered. Pure: fuzzed by
 * fuzz/multipart_fuzz.c.
 */
#ifndef SBX_EXECD_MULTIPART_H
#define SBX_EXECD_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define EXECD_MP_MAX_BOUNDARY 70
#define EXECD_MP_MAX_HEADERS  (16u << 10)

struct execd_mp_part {
    char name[128];
    char filename[1024];
    char content_type[128];
};

/* Callbacks return 0 to go on, -1 to stop the parse (execd_mp_feed then returns -1). */
struct execd_mp_callbacks {
    int (*begin)(void *ctx, const struct execd_mp_part *part);
    int (*data)(void *ctx, const char *p, size_t n);
    int (*end)(void *ctx);
};

enum execd_mp_state {
    MP_DATA,  /* preamble or part body: looking for the delimiter */
    MP_AFTER, /* just after a delimiter: "--" or CRLF follows */
    MP_AFTER_DASH,
    MP_AFTER_CR,
    MP_HEADERS,
    MP_DONE, /* after the close delimiter: the epilogue is ignored */
    MP_ERROR,
};

struct execd_mp {
    enum execd_mp_state state;
    char delim[EXECD_MP_MAX_BOUNDARY + 5]; /* "\r\n--" + boundary */
    size_t delim_len;
    size_t match; /* delimiter bytes matched so far */
    bool in_part; /* a part is open (begin called, end not yet) */
    char hdr[EXECD_MP_MAX_HEADERS];
    size_t hdr_len;
    const char *error;
    const struct execd_mp_callbacks *cb;
    void *ctx;
};

/* Take the boundary from a Content-Type header value ("multipart/form-data; boundary=x").
 * Returns 0, or -1 when the header is not multipart or the boundary is invalid. */
int execd_mp_boundary(const char *ct, char *out, size_t outn);

void execd_mp_init(struct execd_mp *mp, const char *boundary, const struct execd_mp_callbacks *cb,
                   void *ctx);
/* Feed bytes; -1 on a syntax error or when a callback stopped the parse (mp->error says). */
int execd_mp_feed(struct execd_mp *mp, const char *p, size_t n);
/* End of the body: -1 unless the close delimiter was seen. */
int execd_mp_finish(struct execd_mp *mp);

#endif
