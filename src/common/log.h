/*
 * log.h - leveled logging with one pluggable sink.
 *
 * The level is checked before anything is formatted. The default sink writes text lines to
 * stderr ("sbx: warning: ..."); servers switch to JSON lines (one object per line with ts,
 * level, msg, and src when debugging). libsbx never logs.
 */
#ifndef SBX_COMMON_LOG_H
#define SBX_COMMON_LOG_H

#include <stdarg.h>

#include "sbx/error.h"

enum sbx_log_level {
    SBX_LOG_ERROR = 0,
    SBX_LOG_WARN = 1,
    SBX_LOG_INFO = 2,
    SBX_LOG_DEBUG = 3,
    SBX_LOG_TRACE = 4,
};

enum sbx_log_format {
    SBX_LOG_TEXT = 0,
    SBX_LOG_JSON = 1,
};

/* A sink gets one finished line (no trailing newline) and its level. */
typedef void (*sbx_log_sink_fn)(enum sbx_log_level level, const char *line, void *payload);

extern enum sbx_log_level sbx_log_level_current;

/* Set program name (borrowed; must outlive logging), level and format. */
void sbx_log_init(const char *prog, enum sbx_log_level level, enum sbx_log_format format);
void sbx_log_set_level(enum sbx_log_level level);
/* Parse "error|warn|info|debug|trace" (or a digit). Returns 0 or -SBX_EINVAL. */
int sbx_log_parse_level(const char *s, enum sbx_log_level *out);
/* Replace the sink (NULL restores stderr). */
void sbx_log_set_sink(sbx_log_sink_fn fn, void *payload);
/* The request this thread works for now: every line it logs carries the id ("rid" in JSON,
 * "[rid]" in text) until it is set again or cleared with NULL. Copied (at most 128 bytes). */
void sbx_log_set_request_id(const char *rid);
/* This thread's request id, or NULL. */
const char *sbx_log_request_id(void);
/* "text" or "json" into *out; -SBX_EINVAL otherwise. */
int sbx_log_parse_format(const char *s, enum sbx_log_format *out);

void sbx_log_write(enum sbx_log_level level, const char *file, int line, int errnum,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define sbx_log(lvl, ...)                                             \
    do {                                                              \
        if ((lvl) <= sbx_log_level_current)                           \
            sbx_log_write((lvl), __FILE__, __LINE__, 0, __VA_ARGS__); \
    } while (0)

/* Like sbx_log, and appends ": strerror(errno)". */
#define sbx_log_errno(lvl, ...)                                           \
    do {                                                                  \
        if ((lvl) <= sbx_log_level_current)                               \
            sbx_log_write((lvl), __FILE__, __LINE__, errno, __VA_ARGS__); \
    } while (0)

#define sbx_error_log(...) sbx_log(SBX_LOG_ERROR, __VA_ARGS__)
#define sbx_warn(...)      sbx_log(SBX_LOG_WARN, __VA_ARGS__)
#define sbx_info(...)      sbx_log(SBX_LOG_INFO, __VA_ARGS__)
#define sbx_debug(...)     sbx_log(SBX_LOG_DEBUG, __VA_ARGS__)

#endif
