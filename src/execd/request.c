/*
 * request.c - RunCommandRequest validation (pure: fuzzed by fuzz/request_fuzz.c).
 */
#include <stdio.h>
#include <string.h>

#include "execd/proc.h"

static int
fail(char *msg, size_t n, const char *what)
{
    (void)snprintf(msg, n, "%s", what);
    return -1;
}

static int
opt_string(json_t *j, const char *key, const char **out)
{
    json_t *v = json_object_get(j, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

static int
opt_u32(json_t *j, const char *key, bool *has, uint32_t *out)
{
    json_t *v = json_object_get(j, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (json_int_t)UINT32_MAX)
        return -1;
    *has = true;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static int
check_envs(json_t *envs)
{
    const char *k;
    json_t *v;
    json_object_foreach (envs, k, v) {
        if (!json_is_string(v) && !json_is_null(v))
            return -1;
        if (k[0] == '\0' || strchr(k, '='))
            return -1;
    }
    return 0;
}

int
execd_cmd_req_parse(struct execd_cmd_req *out, json_t *j, char *msg, size_t msgn)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(j))
        return fail(msg, msgn, "request body must be a JSON object");
    if (opt_string(j, "command", &out->command) < 0 || !out->command || !out->command[0])
        return fail(msg, msgn, "`command` is required and must be a non-empty string");
    if (opt_string(j, "cwd", &out->cwd) < 0)
        return fail(msg, msgn, "`cwd` must be a string");
    if (out->cwd && !out->cwd[0])
        out->cwd = NULL;
    json_t *bg = json_object_get(j, "background");
    if (bg && !json_is_null(bg) && !json_is_boolean(bg))
        return fail(msg, msgn, "`background` must be a boolean");
    out->background = json_is_true(bg);
    json_t *to = json_object_get(j, "timeout");
    if (to && !json_is_null(to) && (!json_is_integer(to) || json_integer_value(to) < 0))
        return fail(msg, msgn, "`timeout` must be a non-negative integer (milliseconds)");
    out->timeout_ms = to ? (int64_t)json_integer_value(to) : 0;
    if (opt_u32(j, "uid", &out->has_uid, &out->uid) < 0 ||
        opt_u32(j, "gid", &out->has_gid, &out->gid) < 0)
        return fail(msg, msgn, "`uid` and `gid` must be integers in 0..4294967295");
    if (out->has_gid && !out->has_uid)
        return fail(msg, msgn, "`gid` requires `uid`");
    json_t *envs = json_object_get(j, "envs");
    if (envs && !json_is_null(envs) && (!json_is_object(envs) || check_envs(envs) < 0))
        return fail(msg, msgn, "`envs` must be an object of string values with valid names");
    out->envs = json_is_object(envs) ? envs : NULL;
    return 0;
}
