/*
 * procutil.h - host process and socket helpers of the providers.
 */
#ifndef SBX_PROVIDERS_PROCUTIL_H
#define SBX_PROVIDERS_PROCUTIL_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct sbx_proc_info {
    char state; /* R, S, D, T, t, Z, X ... */
    pid_t sid;
    uint64_t start_time; /* field 22 of /proc/PID/stat (clock ticks since boot) */
};

/* Read /proc/PID/stat. -SBX_ENOTFOUND when the process does not exist. */
int sbx_proc_info(pid_t pid, struct sbx_proc_info *out, sbx_error **err);
/* True when pid is alive (not a zombie) and started at start_time. */
int sbx_proc_same(pid_t pid, uint64_t start_time);
/* A pidfd of pid (readable once it has exited) when pid is alive and started at start_time
 * (checked after the pidfd is made, so it is of that very process), else -1. */
int sbx_proc_watch(pid_t pid, uint64_t start_time);
/* Send sig to every live (non-zombie) process of session sid; returns how many got it (sig 0
 * counts them). */
int sbx_proc_signal_session(pid_t sid, int sig);
/* Send sig to the session of every process whose cwd is dir; returns how many got it. */
int sbx_proc_signal_cwd(const char *dir, int sig);
/* GET /ping on a connected socket with execd's token; 0 when execd answers 200 within 1 s. */
int sbx_execd_ping_fd(int fd, const char *token);
/* A free TCP port on 127.0.0.1 (bind to port 0, read it back). */
int sbx_net_free_port(int *port, sbx_error **err);
/* Connect to 127.0.0.1:port within timeout_ms; CLOEXEC stream socket into *fd. */
int sbx_net_connect_local(int port, int timeout_ms, int *fd, sbx_error **err);
/* The same to ip (dotted IPv4):port. */
int sbx_net_connect_ip4(const char *ip, int port, int timeout_ms, int *fd, sbx_error **err);
/* A TCP socket connected to 127.0.0.1:port inside the network namespace of pid (which must
 * still have start_time), made by a short-lived thread that setns()es there. Refused ->
 * SBX_EUNAVAIL; pid gone -> SBX_ECONFLICT. */
int sbx_netns_connect(pid_t pid, uint64_t start_time, int port, int *fd, sbx_error **err);

#endif
