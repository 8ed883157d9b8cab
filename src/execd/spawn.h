/*
 * spawn.h - fork+exec a command into its own process group.
 */
#ifndef SBX_EXECD_SPAWN_H
#define SBX_EXECD_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <pwd.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/util.h"

#define EXECD_MAX_GROUPS 64

struct execd_spawn {
    const char *path; /* the program; NULL: argv[0] */
    char **argv;
    char **envp;
    const char *cwd; /* NULL: inherit */
    bool has_fd_in;  /* stdin is fd_in; else /dev/null */
    int fd_in;
    int fd_out;
    int fd_err;
    bool die_with_parent; /* PR_SET_PDEATHSIG: gone with execd, even if execd is killed */
    bool has_uid;
    bool has_gid;
    uid_t uid;
    gid_t gid;
    gid_t groups[EXECD_MAX_GROUPS];
    size_t ngroups;
};

/* The /etc/passwd entry (no NSS: execd is static) named `want`, or of uid N for "#N" (sudo's
 * form); its strings live in buf. */
bool execd_find_user(const char *want, struct passwd *pw, char *buf, size_t n);
/* Run as uid (gid given, or the passwd entry's, or uid), with the user's groups. */
void execd_spawn_set_user(struct execd_spawn *sp, uint32_t uid, bool has_gid, uint32_t gid);

/* Start the child (stdin /dev/null unless has_fd_in, own process group). Returns the pid, or
 * a negative code with *err set when the exec (or chdir, or setuid) failed: the caller can
 * still answer with a plain JSON error. */
pid_t execd_spawn(const struct execd_spawn *sp, sbx_error **err);

/* Our children are the OOM killer's choice before we are (spawn.c says why): child = true sets
 * this process's oom_score_adj to EXECD_CHILD_OOM_ADJ (in a child, or around a spawn), false
 * back to 0. */
#define EXECD_CHILD_OOM_ADJ "500"
void execd_oom_self(bool child);

#endif
