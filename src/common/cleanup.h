/*
 * cleanup.h - scope-bound cleanup for C (gcc/clang `cleanup` attribute).
 *
 *   sbx_autofree char *buf = NULL;      freed when it goes out of scope
 *   sbx_autoclose int fd = -1;          closed when it goes out of scope
 *   *out = sbx_steal_ptr(&buf);         ownership leaves; buf becomes NULL
 *   return sbx_steal_fd(&fd);           ownership leaves; fd becomes -1
 *
 * Rules: initialise at declaration; never `return` a cleanup variable directly (it is freed
 * before the caller sees it) - steal it; never jump over a cleanup declaration.
 */
#ifndef SBX_COMMON_CLEANUP_H
#define SBX_COMMON_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void
sbx_freep(void *p)
{
    free(*(void **)p);
}

static inline void
sbx_closep(const int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd);
        errno = saved;
    }
}

static inline void
sbx_fclosep(FILE **f)
{
    if (*f)
        (void)fclose(*f);
}

static inline void
sbx_closedirp(DIR **d)
{
    if (*d)
        (void)closedir(*d);
}

/* Kill and reap a child that was not handed off (crun's cleanup_pid). */
static inline void
sbx_killpidp(const pid_t *pid)
{
    if (*pid > 0) {
        int saved = errno;
        (void)kill(*pid, SIGKILL);
        while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
            ;
        errno = saved;
    }
}

#define sbx_autofree     __attribute__((cleanup(sbx_freep)))
#define sbx_autoclose    __attribute__((cleanup(sbx_closep)))
#define sbx_autofclose   __attribute__((cleanup(sbx_fclosep)))
#define sbx_autoclosedir __attribute__((cleanup(sbx_closedirp)))
#define sbx_autopid      __attribute__((cleanup(sbx_killpidp)))

/* Take ownership out of a cleanup pointer variable. `pp` must be the variable's address. */
#define sbx_steal_ptr(pp)                         \
    ({                                            \
        __typeof__(*(pp)) sbx_steal_tmp_ = *(pp); \
        *(pp) = NULL;                             \
        sbx_steal_tmp_;                           \
    })

static inline int
sbx_steal_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}

static inline pid_t
sbx_steal_pid(pid_t *pid)
{
    pid_t r = *pid;
    *pid = -1;
    return r;
}

#endif
