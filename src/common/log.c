#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

enum sbx_log_level sbx_log_level_current = SBX_LOG_INFO;

static const char *log_prog = "sbx";
static enum sbx_log_format log_format = SBX_LOG_TEXT;
static sbx_log_sink_fn log_sink;
static void *log_sink_payload;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void
sbx_log_init(const char *prog, enum sbx_log_level level, enum sbx_log_format format)
{
    if (prog)
        log_prog = prog;
    sbx_log_level_current = level;
    log_format = format;
}

void
sbx_log_set_level(enum sbx_log_level level)
{
    sbx_log_level_current = level;
}

int
sbx_log_parse_level(const char *s, enum sbx_log_level *out)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcasecmp(s, level_names[i]) == 0 || (s[0] == (char)('0' + i) && s[1] == '\0')) {
            *out = (enum sbx_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = SBX_LOG_WARN;
        return 0;
    }
    return -SBX_EINVAL;
}

void
sbx_log_set_sink(sbx_log_sink_fn fn, void *payload)
{
    log_sink = fn;
    log_sink_payload = payload;
}

static __thread char request_id[129]; /* X-Request-ID: 1-128 visible characters */

void
sbx_log_set_request_id(const char *rid)
{
    (void)snprintf(request_id, sizeof request_id, "%s", rid ? rid : "");
}

const char *
sbx_log_request_id(void)
{
    return request_id[0] ? request_id : NULL;
}

int
sbx_log_parse_format(const char *s, enum sbx_log_format *out)
{
    if (s && strcmp(s, "text") == 0)
        *out = SBX_LOG_TEXT;
    else if (s && strcmp(s, "json") == 0)
        *out = SBX_LOG_JSON;
    else
        return -SBX_EINVAL;
    return 0;
}

static char *
format_json(enum sbx_log_level level, const char *file, int line, const char *msg)
{
    struct timeval tv;
    struct tm tm;
    char ts[64];
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(ts + n, sizeof ts - n, ".%03ldZ", (long)(tv.tv_usec / 1000));

    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "level", level_names[level], "prog",
                          log_prog, "msg", msg);
    if (o && request_id[0])
        json_object_set_new(o, "rid", json_string(request_id));
    if (o && sbx_log_level_current >= SBX_LOG_DEBUG)
        json_object_set_new(o, "src", json_sprintf("%s:%d", file, line));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s ? s : sbx_xstrdup(msg);
}

void
sbx_log_write(enum sbx_log_level level, const char *file, int line, int errnum, const char *fmt,
              ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    sbx_autofree char *msg = sbx_xvasprintf(fmt, ap);
    va_end(ap);
    if (errnum) {
        char buf[128];
        char *full = sbx_xasprintf("%s: %s", msg, strerror_r(errnum, buf, sizeof buf));
        free(msg);
        msg = full;
    }
    if (level > SBX_LOG_TRACE)
        level = SBX_LOG_TRACE;

    sbx_autofree char *out = NULL;
    if (log_format == SBX_LOG_JSON)
        out = format_json(level, file, line, msg);
    else if (level == SBX_LOG_INFO)
        out = sbx_xasprintf("%s: %s%s%s%s", log_prog, request_id[0] ? "[" : "", request_id,
                            request_id[0] ? "] " : "", msg);
    else
        out = sbx_xasprintf("%s: %s: %s%s%s%s", log_prog, level_names[level],
                            request_id[0] ? "[" : "", request_id, request_id[0] ? "] " : "", msg);

    if (log_sink) {
        log_sink(level, out, log_sink_payload);
    } else {
        /* One write per line so concurrent threads do not interleave within a line. */
        sbx_autofree char *line_nl = sbx_xasprintf("%s\n", out);
        (void)!write(STDERR_FILENO, line_nl, strlen(line_nl));
    }
    errno = saved;
}
