/*
 * httpresp_verdict.c - what the router makes of a sandbox's response, as JSON on stdout: the
 * bytes on stdin read as proxy.c reads an upstream answer (common/chunked.h and
 * common/httphead.h, the same functions), then the connection closed.
 *
 *   httpresp_verdict [METHOD [PIECE]] < response
 *   httpresp_verdict --batch < records     (each record: "METHOD PIECE LENGTH\n" + LENGTH bytes)
 *
 * METHOD is the request's (GET by default); PIECE > 0 feeds a chunked body in pieces of that
 * many bytes, as reads would. --batch prints one line per record (one process for a corpus). Prints
 * {"accepted": false, "why": ...} or {"accepted": true, "status", "interim": [...], "framing":
 * "none"|"length"|"chunked"|"close", "body": hex, "rest": hex} (rest: bytes after the message,
 * which the router drops with the connection). tests/integration/server/test_router_differential.py
 * runs it against h11.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/chunked.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "common/httphead.h"

struct input {
    char *p;
    size_t len;
    size_t off;
};

static int
reject(const char *why)
{
    json_t *j = json_pack("{s:b, s:s}", "accepted", 0, "why", why);
    (void)json_dumpf(j, stdout, JSON_SORT_KEYS);
    (void)putchar('\n');
    json_decref(j);
    return 0;
}

static json_t *
hex(const char *p, size_t n)
{
    char *s = sbx_xmalloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        (void)snprintf(s + 2 * i, 3, "%02x", (unsigned char)p[i]);
    s[2 * n] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* The chunked body at in->off, decoded as proxy.c's read_chunked does; -1 when refused. */
static int
dechunk(struct input *in, size_t piece, struct sbx_buf *body, const char **why)
{
    struct sbx_chunked st = {.strict = true};
    while (st.state != CH_DONE) {
        size_t n = in->len - in->off;
        if (n == 0)
            return *why = "the connection closed inside the chunked body", -1;
        const char *data = NULL;
        size_t dlen = 0;
        ssize_t used =
            sbx_chunked_step(&st, in->p + in->off, piece && piece < n ? piece : n, &data, &dlen);
        if (used < 0)
            return *why = "a malformed chunked body", -1;
        in->off += (size_t)used;
        if (dlen && sbx_buf_append(body, data, dlen, NULL) < 0)
            return *why = "a body too big for the harness", -1;
    }
    return 0;
}

static const char *const framing_name[] = {"none", "length", "chunked", "close"};

static int
verdict(struct input *in, const char *method, size_t piece)
{
    json_t *interim = json_array();
    struct sbx_http_resp r = {0};
    for (;;) {
        ssize_t n = sbx_http_resp_head(in->p + in->off, in->len - in->off, &r);
        if (n <= 0) {
            json_decref(interim);
            return reject(n < 0 ? r.head.why : "the connection closed inside a head");
        }
        in->off += (size_t)n;
        if (!sbx_http_interim(r.status))
            break;
        (void)json_array_append_new(interim, json_integer(r.status));
    }
    if (r.status == 101) { /* proxy.c: only an upgrade the client asked for, and none was */
        json_decref(interim);
        return reject("101 to a request that asked for no upgrade");
    }
    enum sbx_http_body framing = sbx_http_body_framing(&r, method);
    struct sbx_buf body;
    sbx_buf_init(&body, (size_t)1 << 30);
    const char *why = NULL;
    size_t left = in->len - in->off;
    if (framing == SBX_BODY_LENGTH && (uint64_t)r.head.content_length > left)
        why = "the connection closed inside the body";
    else if (framing == SBX_BODY_LENGTH)
        (void)sbx_buf_append(&body, in->p + in->off, (size_t)r.head.content_length, NULL);
    else if (framing == SBX_BODY_CLOSE)
        (void)sbx_buf_append(&body, in->p + in->off, left, NULL);
    else if (framing == SBX_BODY_CHUNKED)
        (void)dechunk(in, piece, &body, &why);
    if (why) {
        sbx_buf_dispose(&body);
        json_decref(interim);
        return reject(why);
    }
    if (framing != SBX_BODY_CHUNKED)
        in->off += framing == SBX_BODY_NONE ? 0 : body.len;
    json_t *j =
        json_pack("{s:b, s:i, s:o, s:s, s:o, s:o}", "accepted", 1, "status", r.status, "interim",
                  interim, "framing", framing_name[framing], "body", hex(body.data, body.len),
                  "rest", hex(in->p + in->off, in->len - in->off));
    sbx_buf_dispose(&body);
    (void)json_dumpf(j, stdout, JSON_SORT_KEYS);
    (void)putchar('\n');
    json_decref(j);
    return 0;
}

/* One verdict on p[0..len) (copied: the head is parsed in place). */
static int
verdict_of(const char *p, size_t len, const char *method, size_t piece)
{
    /* NUL-terminated for the head parser's string functions, as proxy.c's buffer need not be:
     * the parser stops at the blank line it found and refuses a NUL before it. */
    struct input in = {.p = sbx_xmalloc(len + 1), .len = len};
    if (len)
        memcpy(in.p, p, len);
    in.p[len] = '\0';
    int rc = verdict(&in, method, piece);
    free(in.p);
    (void)fflush(stdout);
    return rc;
}

static int
batch(void)
{
    char method[16];
    size_t piece = 0;
    size_t len = 0;
    while (scanf("%15s %zu %zu", method, &piece, &len) == 3 && getchar() == '\n') {
        sbx_autofree char *p = sbx_xmalloc(len + 1);
        if (fread(p, 1, len, stdin) != len || verdict_of(p, len, method, piece) < 0)
            return 1;
    }
    return feof(stdin) ? 0 : 1;
}

int
main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--batch") == 0)
        return batch();
    const char *method = argc > 1 ? argv[1] : "GET";
    size_t piece = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
    struct sbx_buf all;
    sbx_buf_init(&all, (size_t)1 << 30);
    char chunk[65536];
    size_t got = 0;
    while ((got = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (sbx_buf_append(&all, chunk, got, NULL) < 0)
            return 1;
    }
    int rc = verdict_of(all.data, all.len, method, piece);
    sbx_buf_dispose(&all);
    return rc;
}
