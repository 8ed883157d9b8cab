/*
 * httphead.h - the router's parsers of what a sandbox answers (and of the request heads the
 * credential proxy of src/egress reads) (RFC 9112, strict): a response
 * head (status line, header lines) and how its body is framed; the body's chunked coding is
 * common/chunked.h's (strict mode). Pure functions on buffers (fuzz/router_fuzz.c, and
 * tests/helpers/httpresp_verdict.c, which a differential test runs against h11); proxy.c does
 * the I/O.
 */
#ifndef SBX_COMMON_HTTPHEAD_H
#define SBX_COMMON_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SBX_HTTP_MAX_HEADERS 128
#define SBX_HTTP_HEAD_MAX    ((size_t)64 * 1024) /* a longer head is refused */

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

/* A response head: its status and header lines. */
struct sbx_http_resp {
    int status;
    struct sbx_http_head head;
};

/* The response head at the start of buf[0..len), through its blank line: its length, with r
 * parsed in place (buf is changed only then); 0 while incomplete (no blank line yet, fewer than
 * SBX_HTTP_HEAD_MAX bytes); -1 with r->head.why when malformed or too long. */
ssize_t sbx_http_resp_head(char *buf, size_t len, struct sbx_http_resp *r);

/* A request head (the credential proxy's: what a sandbox sends out). */
struct sbx_http_req {
    char method[17]; /* upper-case letters */
    char *target;    /* as sent (in the parsed buffer) */
    int minor;       /* HTTP/1.<minor> */
    struct sbx_http_head head;
};

/* The request head at the start of buf[0..len), through its blank line: its length, with r
 * parsed in place (buf is changed once its blank line is there); 0 while incomplete (fewer
 * than max bytes without
 * a blank line); -1 with r->head.why when malformed or longer than max. Strict as the
 * response's: `METHOD SP target SP HTTP/1.x CRLF`, a target of visible ASCII. */
ssize_t sbx_http_req_head(char *buf, size_t len, size_t max, struct sbx_http_req *r);

/* An interim (1xx) response other than 101: dropped, the final one follows. */
bool sbx_http_interim(int status);

enum sbx_http_body {
    SBX_BODY_NONE,    /* HEAD, 1xx, 204, 304: whatever the headers say */
    SBX_BODY_LENGTH,  /* Content-Length bytes */
    SBX_BODY_CHUNKED, /* Transfer-Encoding: chunked */
    SBX_BODY_CLOSE,   /* until the connection closes */
};

/* How the body of a parsed response to a request with this method is framed (RFC 9112 6.3). */
enum sbx_http_body sbx_http_body_framing(const struct sbx_http_resp *r, const char *method);

#endif
