/*
 * kernel.h - a Jupyter (ipykernel) kernel process and execd's client connection to it.
 *
 * execd starts `PYTHON -m ipykernel_launcher -f CONN` itself (no Jupyter server): CONN is a
 * connection file in the state dir with the ipc transport (unix sockets beside it, so only
 * the state dir's owner can reach the kernel) and a random HMAC key. The kernel runs in its
 * own process group with PR_SET_PDEATHSIG, so it never outlives execd. Ready means: the
 * shell (DEALER) and iopub (SUB) connections finished their handshakes and a
 * kernel_info_request was answered while iopub already delivered a message (the
 * subscription is in place, no output can be lost).
 *
 * PYTHON: --python / EXECD_PYTHON, else every `python3` on PATH then /usr/local/bin/python3,
 * /usr/bin/python3: the first that starts a kernel wins and is remembered. One without
 * ipykernel exits at once (`No module named ipykernel_launcher`) and the next is tried.
 */
#ifndef SBX_EXECD_KERNEL_H
#define SBX_EXECD_KERNEL_H

#include <stdbool.h>
#include <sys/types.h>

#include "execd/execd.h"
#include "execd/jmsg.h"

#define EXECD_KERNEL_START_SEC 60 /* start to ready */

struct execd_kernel;

struct execd_kernel_ops {
    void (*ready)(struct execd_kernel *k, void *arg);
    /* Start failed, or the ready kernel died or broke the protocol: k is dead, the owner
     * frees it (execd_kernel_free) once the callback returned. */
    void (*failed)(struct execd_kernel *k, const char *why, void *arg);
    void (*iopub)(struct execd_kernel *k, const struct jmsg *m, void *arg);
    void (*shell)(struct execd_kernel *k, const struct jmsg *m, void *arg);
};

/* Start a kernel for context id in cwd (NULL: execd's). Never NULL: a failure to even spawn
 * is reported through ops->failed from the event loop. */
struct execd_kernel *execd_kernel_start(struct execd *ex, const char *id, const char *cwd,
                                        const struct execd_kernel_ops *ops, void *arg);
/* Start the warm kernel (once): a kernel for the first Python context to take. */
void execd_kernel_warm(struct execd *ex);
/* The warm kernel, now reporting to ops/arg, when there is one and cwd is unset; else NULL.
 * It may still be starting: its ready (or failed) callback comes to the new owner. */
struct execd_kernel *execd_kernel_take_warm(struct execd *ex, const char *cwd,
                                            const struct execd_kernel_ops *ops, void *arg);
bool execd_kernel_is_ready(const struct execd_kernel *k);
/* Send an execute_request for code; its msg_id goes to msg_id (>= 40 bytes). */
void execd_kernel_execute(struct execd_kernel *k, const char *code, char *msg_id);
/* SIGINT to the kernel's process group (ipykernel raises KeyboardInterrupt in running code,
 * ignores it when idle). */
void execd_kernel_interrupt(struct execd_kernel *k);
/* SIGKILL to the process group, close the connections, remove its files, free. */
void execd_kernel_free(struct execd_kernel *k);

/* SIGCHLD: pid was reaped; true when it was a kernel of ex (then it is dead now). */
bool execd_kernel_reaped(struct execd *ex, pid_t pid, int status);
/* execd is stopping: signal every kernel's process group. */
void execd_kernel_signal_all(struct execd *ex, int sig);
bool execd_kernel_any_alive(const struct execd *ex);
/* At exit: kill and free whatever kernels are left, remove the short socket dir. */
void execd_kernel_cleanup(struct execd *ex);

#endif
