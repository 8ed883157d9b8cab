/*
 * launch.c - argv/envp of the execd launcher shared by the providers.
 *
 * The launcher shell only moves the settings out of the environment and execs execd, which
 * starts the entrypoint itself (`-- ENTRYPOINT`): so the entrypoint's output is in execd's log
 * ring (GET /logs) on every provider, as on native.
 */
#include "providers/launch.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "common/xalloc.h"

static const char launcher[] =
    "t=$SBX_EXECD_TOKEN; e=$SBX_EXECD; l=$SBX_EXECD_LISTEN; sd=$SBX_EXECD_STATE;"
    " dk=$SBX_EXECD_DESKTOP;"
    " unset SBX_EXECD_TOKEN SBX_EXECD SBX_EXECD_LISTEN SBX_EXECD_STATE SBX_EXECD_DESKTOP;"
    " if [ $# -gt 0 ]; then set -- -- \"$@\"; fi;"
    " if [ -n \"$dk\" ]; then set -- --desktop \"$dk\" \"$@\"; fi;"
    " EXECD_ACCESS_TOKEN=\"$t\" exec \"$e\" --listen \"$l\" --state-dir \"$sd\" \"$@\"";

const char *
sbx_launch_desktop(const struct sbx_record *sb)
{
    return json_string_value(json_object_get(sb->extensions, SBX_DESKTOP_EXT));
}

const char *
sbx_launch_script(void)
{
    return launcher;
}

char **
sbx_launch_argv(const struct sbx_record *sb)
{
    size_t n = json_array_size(sb->entrypoint);
    char **argv = sbx_xcalloc(n + 5, sizeof(char *));
    argv[0] = sbx_xstrdup("/bin/sh");
    argv[1] = sbx_xstrdup("-c");
    argv[2] = sbx_xstrdup(launcher);
    argv[3] = sbx_xstrdup("sbx-launch");
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(sb->entrypoint, i));
        argv[4 + i] = sbx_xstrdup(s ? s : "");
    }
    return argv;
}

/* The variables the server sets for execd and its launcher: a request's env never sets them,
 * so no environment holds two copies of a name (which one wins depends on the reader: getenv
 * takes the first, a shell the last) and the token is always the server's. */
static bool
reserved_env(const char *key)
{
    return strncmp(key, "SBX_EXECD", 9) == 0 || strcmp(key, "EXECD_ACCESS_TOKEN") == 0;
}

/* envp with room for `extra` more entries after PATH, HOME (unless l->home is NULL) and the
 * request's env; *n is the number filled. */
static char **
env_base(const struct sbx_record *sb, const struct sbx_launch *l, size_t extra, size_t *n)
{
    size_t cap = json_object_size(sb->env) + 2 + extra + 1;
    char **envp = sbx_xcalloc(cap, sizeof(char *));
    size_t i = 0;
    if (l->home) {
        envp[i++] =
            sbx_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        envp[i++] = sbx_xasprintf("HOME=%s", l->home);
    }
    const char *key = NULL;
    json_t *val = NULL;
    json_object_foreach (sb->env, key, val) {
        if (json_is_string(val) && !reserved_env(key))
            envp[i++] = sbx_xasprintf("%s=%s", key, json_string_value(val));
    }
    *n = i;
    return envp;
}

char **
sbx_launch_env(const struct sbx_record *sb, const struct sbx_launch *l)
{
    size_t i = 0;
    char **envp = env_base(sb, l, 5, &i);
    const char *desk = sbx_launch_desktop(sb);
    if (desk)
        envp[i++] = sbx_xasprintf("SBX_EXECD_DESKTOP=%s", desk);
    envp[i++] = sbx_xasprintf("SBX_EXECD=%s", l->execd);
    envp[i++] = sbx_xasprintf("SBX_EXECD_LISTEN=%s:%d",
                              l->listen_host ? l->listen_host : "127.0.0.1", l->port);
    envp[i++] = sbx_xasprintf("SBX_EXECD_TOKEN=%s", l->token);
    envp[i++] = sbx_xasprintf("SBX_EXECD_STATE=%s", l->state_dir);
    return envp;
}

char **
sbx_launch_execd_argv(const struct sbx_record *sb, const struct sbx_launch *l)
{
    size_t n = json_array_size(sb->entrypoint);
    char **argv = sbx_xcalloc(n + 12, sizeof(char *)); /* 9 options, "--", the NULL */
    size_t i = 0;
    argv[i++] = sbx_xstrdup(l->execd);
    argv[i++] = sbx_xstrdup("--listen");
    argv[i++] = sbx_xasprintf("%s:%d", l->listen_host ? l->listen_host : "127.0.0.1", l->port);
    argv[i++] = sbx_xstrdup("--state-dir");
    argv[i++] = sbx_xstrdup(l->state_dir);
    if (l->ready_fd > 2) {
        argv[i++] = sbx_xstrdup("--ready-fd");
        argv[i++] = sbx_xasprintf("%d", l->ready_fd);
    }
    const char *desk = sbx_launch_desktop(sb);
    if (desk) {
        argv[i++] = sbx_xstrdup("--desktop");
        argv[i++] = sbx_xstrdup(desk);
    }
    if (n > 0)
        argv[i++] = sbx_xstrdup("--");
    for (size_t k = 0; k < n; k++) {
        const char *s = json_string_value(json_array_get(sb->entrypoint, k));
        argv[i++] = sbx_xstrdup(s ? s : "");
    }
    return argv;
}

char **
sbx_launch_execd_env(const struct sbx_record *sb, const struct sbx_launch *l)
{
    size_t i = 0;
    /* execd reads the token from here and unsets it before anything else runs. */
    char **envp = env_base(sb, l, 1, &i);
    envp[i++] = sbx_xasprintf("EXECD_ACCESS_TOKEN=%s", l->token);
    return envp;
}

void
sbx_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

char *
sbx_launch_installed_execd(const char *exe_dir)
{
    /* <prefix>/bin/sbx -> <prefix>/lib/sbx/sbx-execd; "/" or a relative dir has no parent. */
    const char *slash = strrchr(exe_dir, '/');
    size_t n = slash ? (size_t)(slash - exe_dir) : 0;
    return sbx_xasprintf("%.*s/lib/sbx/sbx-execd", (int)n, exe_dir);
}

char *
sbx_launch_default_execd(const char *exe_dir)
{
    static const char *const next_to[] = {"sbx-execd-static", "sbx-execd"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(next_to); i++) {
        char *path = sbx_xasprintf("%s/%s", exe_dir, next_to[i]);
        if (access(path, X_OK) == 0)
            return path;
        free(path);
    }
    char *installed = sbx_launch_installed_execd(exe_dir);
    if (access(installed, X_OK) == 0)
        return installed;
    free(installed);
    /* Neither: the name an error message will show (the provider warns or fails on it). */
    return sbx_xasprintf("%s/sbx-execd", exe_dir);
}
