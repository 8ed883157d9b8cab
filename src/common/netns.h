/*
 * netns.h - a TCP connection to 127.0.0.1:port inside another network namespace.
 */
#ifndef SBX_COMMON_NETNS_H
#define SBX_COMMON_NETNS_H

#include <stdint.h>

/* Connect to 127.0.0.1:port in the network namespace netns_fd refers to, from a short-lived
 * thread that setns()es into it (the caller's threads never change namespace). On success 0
 * and *fd is a connected, close-on-exec socket usable from any thread; on failure a negative
 * errno and *what names the step that failed ("setns", "socket", "connect"). */
int sbx_netns_connect_fd(int netns_fd, uint16_t port, int *fd, const char **what);

#endif
