/*
 * netns.h - work inside another network namespace without moving the caller: a TCP connection
 * to 127.0.0.1:port there, or any function run on a short-lived thread that setns()es there
 * (sockets it makes stay in that namespace and work from any thread afterwards).
 */
#ifndef SBX_COMMON_NETNS_H
#define SBX_COMMON_NETNS_H

#include <stdint.h>

/* Connect to 127.0.0.1:port in the network namespace netns_fd refers to, from a short-lived
 * thread that setns()es into it (the caller's threads never change namespace). On success 0
 * and *fd is a connected, close-on-exec socket usable from any thread; on failure a negative
 * errno and *what names the step that failed ("setns", "socket", "connect"). */
int sbx_netns_connect_fd(int netns_fd, uint16_t port, int *fd, const char **what);

/* Run fn(arg) on a short-lived thread inside the network namespace netns_fd refers to, and
 * wait for it. 0, or a negative errno when the thread or its setns() failed (fn did not run). */
int sbx_netns_run(int netns_fd, void (*fn)(void *arg), void *arg);

#endif
