/*
 * httphead.h - the router's parsers of what a sandbox answers (RFC 9112, strict): the status
 * line, the header lines and a chunk-size line. Pure functions on buffers (fuzz/router_fuzz.c);
 * proxy.c does the I/O.
 */
#ifndef SBX_SERVER_HTTPHEAD_H
#define SBX_SERVER_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBX_HTTP_MAX_HEADERS 128

/* The upstream's header lines, checked. */
struct sbx_http_head {
    char *name[SBX_HTTP_MAX_HEADERS];
    char *value[SBX_HTTP_MAX_HEADERS];
    size_t n;
    bool chunked;           /* Transfer-Encoding: chunked */
    int64_t content_length; /* -1 when absent */
    const char *why;        /* set when the head is refused */
};

/* "HTTP/1.x NNN" followed by a space or CR at the start of buf (at least 13 bytes): the
 * status (100-599) or -1. */
int sbx_http_status_line(const char *buf, size_t len);

/* Parse the header lines (each ending in CRLF, NUL-terminated after the last CRLF) in place:
 * names and values are NUL-terminated where they stand. -1 with h->why on a head two parsers
 * could read differently. */
int sbx_http_head_parse(char *lines, struct sbx_http_head *h);

/* A chunk-size line (without its CRLF): 1-15 hex digits, then nothing or `;extensions`. The
 * size, or -1. */
int64_t sbx_http_chunk_size(const char *line);

#endif
