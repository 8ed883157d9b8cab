/*
 * launch.h - how a provider starts execd and the entrypoint: `/bin/sh -c LAUNCHER` runs the
 * entrypoint in the background and then execs execd, so both live in the same session (or pid
 * namespace) and the recorded pid is execd's (the process provider). The native provider execs
 * execd directly and execd starts the entrypoint (`-- ENTRYPOINT`): one shell less.
 */
#ifndef SBX_PROVIDERS_LAUNCH_H
#define SBX_PROVIDERS_LAUNCH_H

#include "server/sandbox.h"

struct sbx_launch {
    const char *execd;       /* execd's path as the launched shell sees it */
    const char *listen_host; /* execd listens on listen_host:port (NULL = 127.0.0.1) */
    int port;
    const char *token;     /* execd's access token */
    const char *state_dir; /* execd's --state-dir */
    const char *home;      /* HOME; NULL: neither HOME nor PATH (an image's config has them) */
    int ready_fd;          /* execd's --ready-fd (> 2; sbx_launch_execd_argv only), 0: none */
};

/* argv for posix_spawn/the runtime: /bin/sh -c LAUNCHER sbx-launch ENTRYPOINT... (NULL-ended). */
char **sbx_launch_argv(const struct sbx_record *sb);
/* envp: PATH, HOME (unless l->home is NULL), the request's env, then the SBX_EXECD* values the
 * launcher consumes and unsets (a request's own SBX_EXECD* / EXECD_ACCESS_TOKEN are dropped in
 * both env builders). The token reaches execd as EXECD_ACCESS_TOKEN (execd unsets it at
 * once), never in argv where `ps` would show it. */
char **sbx_launch_env(const struct sbx_record *sb, const struct sbx_launch *l);
/* Without the launcher shell, for a provider whose execd starts the entrypoint itself (execd
 * `-- ENTRYPOINT`): argv = execd --listen HOST:PORT --state-dir DIR [--ready-fd N]
 * [-- ENTRYPOINT...]; envp = PATH, HOME (unless l->home is NULL), the request's env,
 * EXECD_ACCESS_TOKEN (execd unsets it before anything else runs, so the entrypoint and commands
 * never see it). */
char **sbx_launch_execd_argv(const struct sbx_record *sb, const struct sbx_launch *l);
char **sbx_launch_execd_env(const struct sbx_record *sb, const struct sbx_launch *l);
void sbx_strv_free(char **v);
/* The execd binary for the running sbx (exe_dir: its directory): next to it, sbx-execd-static
 * when present (a sanitizer build's sbx-execd is dynamic and cannot run in an image of another
 * libc), else sbx-execd (a build tree); else <exe_dir>/../lib/sbx/sbx-execd (the installed
 * layout: /usr/bin/sbx, /usr/lib/sbx/sbx-execd; docs/install.md). The caller frees. */
char *sbx_launch_default_execd(const char *exe_dir);
/* <exe_dir>/../lib/sbx/sbx-execd, with the `..` resolved textually. The caller frees. */
char *sbx_launch_installed_execd(const char *exe_dir);
/* The launcher shell script: reads SBX_EXECD, SBX_EXECD_LISTEN (host:port), SBX_EXECD_TOKEN and
 * SBX_EXECD_STATE from its environment, unsets them, starts "$@" in the background and execs
 * execd. Run as `sh -c SCRIPT sbx-launch ENTRYPOINT...`. */
const char *sbx_launch_script(void);
/* extensions["sbx.desktop"] (server/sandbox.h: SBX_DESKTOP_EXT): a desktop started with execd
 * (`--desktop SPEC`), or NULL. */
const char *sbx_launch_desktop(const struct sbx_record *sb);

#endif
