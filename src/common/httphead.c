/*
 * httphead.c - parsing a sandbox's HTTP response head for the router.
 *
 * The upstream is the sandbox, i.e. hostile: its head is parsed strictly (RFC 9112), and a head
 * two parsers could read differently is refused (the router answers 502) rather than guessed
 * at. Request smuggling and response splitting need exactly such disagreements.
 */
#include "common/httphead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

int
sbx_http_status_line(const char *buf, size_t len)
{
    if (len < 13 || strncmp(buf, "HTTP/1.", 7) != 0 || !strchr("01", buf[7]) || buf[7] == '\0' ||
        buf[8] != ' ' || strspn(buf + 9, "0123456789") < 3 || (buf[12] != ' ' && buf[12] != '\r'))
        return -1;
    int status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    return status < 100 || status > 599 ? -1 : status;
}

static bool
tchar(unsigned char c)
{
    return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

static bool
content_length_ok(const char *v, int64_t *out)
{
    if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 18)
        return false;
    return sbx_parse_i64(v, out, NULL) == 0;
}

/* Lines end in CRLF, and nothing else ends or splits one: a bare CR or LF, a NUL or another
 * control in a line, obs-fold, a name that is not a token. */
static const char *
line_fault(const char *line)
{
    for (const char *c = line; *c; c++) {
        if ((unsigned char)*c < 0x20 && *c != '\t')
            return "a control character (bare CR or LF?) in a header line";
        if (*c == 0x7f)
            return "a DEL in a header line";
    }
    if (*line == ' ' || *line == '\t')
        return "obsolete line folding";
    return NULL;
}

/* A Content-Length that is not digits or disagrees with another, one next to
 * Transfer-Encoding, or a transfer coding other than chunked: refused. */
static const char *
framing_fault(const char *name, const char *v, struct sbx_http_head *h)
{
    if (strcasecmp(name, "Content-Length") == 0) {
        int64_t n = -1;
        if (!content_length_ok(v, &n) || (h->content_length >= 0 && n != h->content_length))
            return "a bad or conflicting Content-Length";
        h->content_length = n;
    }
    if (strcasecmp(name, "Transfer-Encoding") == 0) {
        if (strcasecmp(v, "chunked") != 0 || h->chunked)
            return "a transfer coding other than one `chunked`";
        h->chunked = true;
    }
    return NULL;
}

static char *
trim_value(char *v)
{
    v += strspn(v, " \t");
    size_t vl = strlen(v);
    while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        v[--vl] = '\0';
    return v;
}

int
sbx_http_head_parse(char *lines, struct sbx_http_head *h)
{
    h->n = 0;
    h->chunked = false;
    h->content_length = -1;
    for (char *line = lines; *line;) {
        char *eol = strstr(line, "\r\n");
        if (!eol)
            return h->why = "a header line does not end in CRLF", -1;
        *eol = '\0';
        char *next = eol + 2;
        if ((h->why = line_fault(line)))
            return -1;
        char *colon = strchr(line, ':');
        if (!colon || colon == line)
            return h->why = "a header line without a name", -1;
        *colon = '\0';
        for (char *c = line; *c; c++) {
            if (!tchar((unsigned char)*c))
                return h->why = "a header name that is not a token", -1;
        }
        char *v = trim_value(colon + 1);
        if ((h->why = framing_fault(line, v, h)))
            return -1;
        if (h->n == SBX_HTTP_MAX_HEADERS)
            return h->why = "too many header lines", -1;
        h->name[h->n] = line;
        h->value[h->n++] = v;
        line = next;
    }
    if (h->chunked && h->content_length >= 0)
        return h->why = "both Content-Length and Transfer-Encoding", -1;
    return 0;
}

/* The reason phrase (RFC 9112 4: HTAB, SP, VCHAR, obs-text) up to the status line's CRLF. A
 * bare CR or LF in it would end the line for another parser, which would then read the rest
 * as header lines the router never saw (a Content-Length, say). */
static bool
reason_ok(const char *buf, size_t line_len)
{
    for (size_t i = 12; i < line_len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

ssize_t
sbx_http_resp_head(char *buf, size_t len, struct sbx_http_resp *r)
{
    r->head.why = NULL;
    if (len == 0)
        return 0;
    const char *blank = memmem(buf, len, "\r\n\r\n", 4);
    if (!blank && len >= SBX_HTTP_HEAD_MAX)
        return r->head.why = "a response head longer than 64 KiB", -1;
    if (!blank)
        return 0;
    size_t end = (size_t)(blank - buf) + 4;
    /* The head is read as C strings from here on: a NUL would end a line (or all of them)
     * early and hide what follows it from the router alone. */
    if (memchr(buf, '\0', end))
        return r->head.why = "a NUL in the response head", -1;
    const char *crlf = memmem(buf, end, "\r\n", 2); /* found: the blank line has one */
    size_t line_len = (size_t)(crlf - buf);
    r->status = sbx_http_status_line(buf, end);
    if (r->status < 0 || !reason_ok(buf, line_len))
        return r->head.why = "a malformed status line", -1;
    buf[end - 2] = '\0'; /* after the last header line's CRLF (or the status line's) */
    if (sbx_http_head_parse(buf + line_len + 2, &r->head) < 0)
        return -1;
    return (ssize_t)end;
}

/* "METHOD SP target SP HTTP/1.x" (the line without its CRLF, NUL-terminated) into r. */
static int
request_line(char *line, struct sbx_http_req *r)
{
    size_t m = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    if (m == 0 || m >= sizeof r->method || line[m] != ' ')
        return -1;
    (void)snprintf(r->method, sizeof r->method, "%.*s", (int)m, line);
    char *target = line + m + 1;
    char *sp = strchr(target, ' ');
    if (!sp || sp == target)
        return -1;
    for (char *c = target; c < sp; c++) {
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return -1;
    }
    *sp = '\0';
    const char *v = sp + 1;
    if (strncmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1') || v[8] != '\0')
        return -1;
    r->target = target;
    r->minor = v[7] - '0';
    return 0;
}

ssize_t
sbx_http_req_head(char *buf, size_t len, size_t max, struct sbx_http_req *r)
{
    r->head.why = NULL;
    const char *blank = len ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
    if (!blank || (size_t)(blank - buf) + 4 > max)
        return !blank && len < max ? 0 : (r->head.why = "a request head too long", -1);
    size_t end = (size_t)(blank - buf) + 4;
    if (memchr(buf, '\0', end))
        return r->head.why = "a NUL in the request head", -1;
    char *crlf = memmem(buf, end, "\r\n", 2);
    buf[end - 2] = '\0';
    *crlf = '\0';
    if (request_line(buf, r) < 0)
        return r->head.why = "a malformed request line", -1;
    if (sbx_http_head_parse(crlf + 2, &r->head) < 0)
        return -1;
    return (ssize_t)end;
}

bool
sbx_http_interim(int status)
{
    return status >= 100 && status < 200 && status != 101;
}

enum sbx_http_body
sbx_http_body_framing(const struct sbx_http_resp *r, const char *method)
{
    if (strcmp(method, "HEAD") == 0 || r->status == 204 || r->status == 304 ||
        (r->status >= 100 && r->status < 200) ||
        (strcmp(method, "CONNECT") == 0 && r->status >= 200 && r->status < 300))
        return SBX_BODY_NONE;
    if (r->head.chunked)
        return SBX_BODY_CHUNKED;
    return r->head.content_length >= 0 ? SBX_BODY_LENGTH : SBX_BODY_CLOSE;
}
