/*
 * api_diag.c - the diagnostics API (diagnostic-api.yml): a sandbox's logs and events as
 * display text, inline in a JSON descriptor.
 *
 *   logs?scope=container   execd's log ring: its own lines and what the entrypoint printed
 *   logs?scope=lifecycle   the server's record of the sandbox's transitions
 *   events?scope=lifecycle the same transitions, one event a line
 *   events?scope=runtime   what the provider sees now (its state and reason)
 *   scope=all              each of its kind's scopes, under a heading each
 *
 * The text comes partly from the sandbox (execd's answer, the entrypoint's output): it is
 * read with a deadline and a size cap, made valid UTF-8 (U+FFFD for the rest), and the newest
 * DIAG_MAX bytes are kept (`truncated` says so). Nothing of it is interpreted.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/api_diag.h"
#include "server/provider.h"
#include "server/srvutil.h"

#define DIAG_MAX       (1u << 20) /* bytes of text in an answer (the newest kept) */
#define DIAG_READ_MAX  (4u << 20) /* bytes read from execd at most */
#define DIAG_EXECD     44772
#define DIAG_TIMEOUT_S 3

/* Append text to out as valid UTF-8 (a byte that starts no valid sequence becomes U+FFFD);
 * control characters other than newline and tab become U+FFFD too. */
static void
append_text(struct sbx_buf *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t len = sbx_utf8_len(p + i, n - i);
        bool ctl = len == 1 && p[i] < 0x20 && p[i] != '\n' && p[i] != '\t';
        if (len == 0 || ctl || p[i] == 0x7f) {
            (void)sbx_buf_append(out, "\xef\xbf\xbd", 3, NULL);
            i++;
            continue;
        }
        (void)sbx_buf_append(out, s + i, len, NULL);
        i += len;
    }
}

static void
lifecycle_text(const struct sbx_record *sb, struct sbx_buf *out)
{
    size_t i = 0;
    json_t *ev = NULL;
    json_array_foreach (sb->events, i, ev) {
        char at[32];
        sbx_srv_format_time((int64_t)json_integer_value(json_object_get(ev, "at")), at);
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        const char *msg = json_string_value(json_object_get(ev, "message"));
        (void)sbx_buf_printf(out, NULL, "%s lifecycle %s", at,
                             json_string_value(json_object_get(ev, "state")));
        if (reason)
            (void)sbx_buf_printf(out, NULL, " %s", reason);
        if (msg) {
            (void)sbx_buf_append_str(out, ": ", NULL);
            append_text(out, msg, strlen(msg));
        }
        (void)sbx_buf_append_str(out, "\n", NULL);
    }
}

static void
runtime_text(struct sbx_mgr *mgr, const struct sbx_record *sb, struct sbx_buf *out)
{
    struct sbx_provider_status st;
    sbx_autoerror sbx_error *err = NULL;
    char at[32];
    sbx_srv_format_time(sbx_wall_ms(), at);
    if (sbx_mgr_provider_status(mgr, sb->id, &st, &err) < 0) {
        (void)sbx_buf_printf(out, NULL, "%s runtime provider %s: no answer: ", at, sb->provider);
        append_text(out, sbx_error_msg(err), strlen(sbx_error_msg(err)));
        (void)sbx_buf_append_str(out, "\n", NULL);
        return;
    }
    (void)sbx_buf_printf(out, NULL, "%s runtime provider %s: %s", at, sb->provider, st.state);
    if (st.reason[0]) {
        (void)sbx_buf_append_str(out, " (", NULL);
        append_text(out, st.reason, strlen(st.reason));
        (void)sbx_buf_append_str(out, ")", NULL);
    }
    (void)sbx_buf_printf(out, NULL, "; the server's record: %s\n", sb->state);
}

/* GET /logs from the sandbox's execd over the provider's connection (HTTP/1.0: the answer
 * ends with the connection). The body, or why there is none. */
/* execd's X-Sbx-Log-Dropped: how many older bytes its ring let go (0 when none or absent). */
static uint64_t
dropped_of(const char *head, size_t n)
{
    static const char name[] = "\r\nx-sbx-log-dropped:";
    for (size_t i = 0; i + sizeof name - 1 < n; i++) {
        if (strncasecmp(head + i, name, sizeof name - 1) != 0)
            continue;
        char num[24];
        const char *v = head + i + sizeof name - 1;
        size_t len = strspn(v + strspn(v, " "), "0123456789");
        (void)snprintf(num, sizeof num, "%.*s", (int)(len < 20 ? len : 20), v + strspn(v, " "));
        uint64_t d = 0;
        return sbx_parse_u64(num, &d, NULL) == 0 ? d : 0;
    }
    return 0;
}

static void
container_text(struct sbx_mgr *mgr, const char *id, struct sbx_buf *out, bool *dropped)
{
    int fd = -1;
    json_t *hdrs = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_mgr_connect(mgr, id, DIAG_EXECD, &fd, &hdrs, &err) < 0) {
        (void)sbx_buf_printf(out, NULL, "(container logs unavailable: %s)\n", sbx_error_msg(err));
        return;
    }
    sbx_autoclose int cfd = fd;
    struct sbx_buf req;
    sbx_buf_init(&req, 64u << 10);
    (void)sbx_buf_append_str(&req, "GET /logs HTTP/1.0\r\n", NULL);
    if (!json_object_get(hdrs, "Host"))
        (void)sbx_buf_append_str(&req, "Host: 127.0.0.1\r\n", NULL);
    const char *k = NULL;
    json_t *v = NULL;
    json_object_foreach (hdrs, k, v)
        (void)sbx_buf_printf(&req, NULL, "%s: %s\r\n", k, json_string_value(v));
    (void)sbx_buf_append_str(&req, "\r\n", NULL);
    json_decref(hdrs);
    struct timeval tv = {.tv_sec = DIAG_TIMEOUT_S};
    (void)setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int w = sbx_write_all(cfd, req.data, req.len);
    sbx_buf_dispose(&req);
    struct sbx_buf in;
    sbx_buf_init(&in, DIAG_READ_MAX);
    char chunk[16384];
    ssize_t got = 0;
    while (w == 0 && in.len < DIAG_READ_MAX && (got = read(cfd, chunk, sizeof chunk)) > 0)
        (void)sbx_buf_append(&in, chunk, (size_t)got, NULL);
    const char *body = in.data ? memmem(in.data, in.len, "\r\n\r\n", 4) : NULL;
    bool ok = body && in.len > 12 && memcmp(in.data + 8, " 200", 4) == 0;
    uint64_t lost = ok ? dropped_of(in.data, (size_t)(body - in.data) + 2) : 0;
    if (lost) {
        *dropped = true;
        (void)sbx_buf_printf(out, NULL, "(%llu older bytes were dropped by execd's log ring)\n",
                             (unsigned long long)lost);
    }
    if (ok)
        append_text(out, body + 4, in.len - (size_t)(body + 4 - in.data));
    else
        (void)sbx_buf_printf(out, NULL, "(container logs unavailable: execd %s)\n",
                             w < 0 || got < 0 ? "did not answer in time" : "refused the request");
    sbx_buf_dispose(&in);
}

static bool
scope_known(bool logs, const char *scope)
{
    static const char *const log_scopes[] = {"container", "lifecycle", "all"};
    static const char *const event_scopes[] = {"lifecycle", "runtime", "all"};
    const char *const *list = logs ? log_scopes : event_scopes;
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(scope, list[i]) == 0)
            return true;
    }
    return false;
}

static void
collect(struct sbx_mgr *mgr, const struct sbx_record *sb, bool logs, const char *scope,
        struct sbx_buf *text, bool *dropped)
{
    bool all = strcmp(scope, "all") == 0;
    if (logs && (all || strcmp(scope, "container") == 0)) {
        if (all)
            (void)sbx_buf_append_str(text, "== container (execd and the entrypoint)\n", NULL);
        container_text(mgr, sb->id, text, dropped);
    }
    if (all || strcmp(scope, "lifecycle") == 0) {
        if (all)
            (void)sbx_buf_append_str(text, "== lifecycle\n", NULL);
        lifecycle_text(sb, text);
    }
    if (!logs && (all || strcmp(scope, "runtime") == 0)) {
        if (all)
            (void)sbx_buf_append_str(text, "== runtime\n", NULL);
        runtime_text(mgr, sb, text);
    }
}

/* The newest DIAG_MAX bytes, cut at a line (or at a character) boundary. */
static const char *
tail_of(const struct sbx_buf *text, size_t *n, bool *truncated)
{
    const char *p = text->data ? text->data : "";
    *n = text->len;
    *truncated = *n > DIAG_MAX;
    if (!*truncated)
        return p;
    const char *start = p + *n - DIAG_MAX;
    const char *nl = memchr(start, '\n', DIAG_MAX);
    if (nl)
        start = nl + 1;
    while (start < p + *n && (*(const unsigned char *)start & 0xc0) == 0x80)
        start++; /* not in the middle of a character */
    *n -= (size_t)(start - p);
    return start;
}

void
sbx_api_diagnostics(struct sbx_mgr *mgr, const char *id, bool logs, const char *scope,
                    struct sbx_reply *out)
{
    if (!scope || !*scope || !scope_known(logs, scope)) {
        sbx_reply_error(
            out, 400, "SANDBOX::INVALID_PARAMETER", "`scope` must be one of %s (got `%.32s`)",
            logs ? "container, lifecycle, all" : "lifecycle, runtime, all", scope ? scope : "");
        return;
    }
    struct sbx_record *sb = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_mgr_get(mgr, id, &sb, &err) < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    struct sbx_buf text;
    sbx_buf_init(&text, DIAG_READ_MAX + (64u << 10));
    bool dropped = false;
    collect(mgr, sb, logs, scope, &text, &dropped);
    size_t n = 0;
    bool truncated = false;
    const char *s = tail_of(&text, &n, &truncated);
    truncated = truncated || dropped;
    out->status = 200;
    out->body =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s%, s:b}", "sandboxId", sb->id, "kind",
                  logs ? "logs" : "events", "scope", scope, "delivery", "inline", "contentType",
                  "text/plain; charset=utf-8", "content", s, n, "truncated", truncated);
    sbx_buf_dispose(&text);
    sbx_record_free(sb);
}
