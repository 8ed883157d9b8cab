/*
 * util.h - small helpers for numbers, sizes, files and fds used across sbx.
 */
#ifndef SBX_COMMON_UTIL_H
#define SBX_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h"

#define SBX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Parse a whole decimal unsigned number (no sign, no junk, no overflow). */
int sbx_parse_u64(const char *s, uint64_t *out, sbx_error **err);
/* Parse a whole decimal signed number. */
int sbx_parse_i64(const char *s, int64_t *out, sbx_error **err);
/* Parse a size: "512", "256k", "256m", "1g", "512Mi", "2Gi", "1.5g" (k = 1024). */
int sbx_parse_size(const char *s, uint64_t *out, sbx_error **err);

/* write(2) all of buf, retrying on EINTR and short writes. 0 or -1 with errno. */
int sbx_write_all(int fd, const void *buf, size_t n);
/* read(2) until n bytes or EOF; returns bytes read or -1 with errno. */
ssize_t sbx_read_full(int fd, void *buf, size_t n);

/* Read a whole file (at most max bytes, else -SBX_ELIMIT). *out is NUL-terminated; caller frees. */
int sbx_read_file(const char *path, size_t max, char **out, size_t *len, sbx_error **err);
/* Write a file atomically: temp file in the same dir, fsync, rename. */
int sbx_write_file_atomic(const char *path, const void *data, size_t n, mode_t mode,
                          sbx_error **err);
/* mkdir -p (existing dirs are fine). */
int sbx_mkdir_p(const char *path, mode_t mode, sbx_error **err);
/* rm -rf that never crosses into another filesystem (mount points are left alone and make
 * the call fail with EBUSY) and never follows symlinks. Missing path is success. */
int sbx_rm_rf(const char *path, sbx_error **err);

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t sbx_now_ns(void);
uint64_t sbx_now_ms(void);
/* Wall clock in milliseconds since the epoch. */
int64_t sbx_wall_ms(void);
/* A condition variable whose timed waits run on CLOCK_MONOTONIC, and the deadline ms from now
 * on that clock for pthread_cond_timedwait on it. The default (CLOCK_REALTIME) would make a
 * wall-clock step (NTP, `date -s`) stall a backwards-jumped wait for as long as the jump, or
 * cut it short forwards: the server's reaper, connection deadlines and refreshers would stop. */
void sbx_cond_init_monotonic(pthread_cond_t *cv);
struct timespec sbx_monotonic_in(uint64_t ms);

/* path is on a tmpfs. */
bool sbx_on_tmpfs(const char *path);
/* This boot's id (/proc/sys/kernel/random/boot_id, without the newline): 0, or -1 with out "". */
#define SBX_BOOT_ID_SIZE 40
int sbx_boot_id(char out[SBX_BOOT_ID_SIZE]);
/* The file at path holds exactly text (false when it cannot be read). */
bool sbx_file_is(const char *path, const char *text);

/* True when s starts with prefix. */
bool sbx_str_starts(const char *s, const char *prefix);
/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not valid (overlong,
 * surrogate, past U+10FFFF, cut short by n). */
size_t sbx_utf8_len(const unsigned char *s, size_t n);

#endif

/* RLIMIT_NOFILE: a server holds a few descriptors per sandbox, more than the usual soft limit
 * (1024) allows. sbx_nofile_raise lifts the soft limit to the hard one (and, with
 * CAP_SYS_RESOURCE, both to fs.nr_open); returns the new soft limit. The processes a sandbox
 * starts get the limit the caller had before (sbx_nofile_restore, in a child before its exec:
 * async-signal-safe), not the server's. */
unsigned long sbx_nofile_raise(void);
void sbx_nofile_restore(void);

/* Parked descriptors: a server keeps one descriptor per live sandbox for as long as it
 * lives (pidfds), and every new sandbox's init starts with a copy of the server's fd table that
 * it must close fd by fd: a cost per create that grows with the count. sbx_nofile_raise also
 * sets a park base (a quarter of the raised soft limit, at most 65536; 0 when that is below
 * 1024); sbx_fd_park moves a long-lived fd to the lowest free number at or above it
 * (close-on-exec) and returns the new fd, or returns fd unchanged when it cannot (no base, no
 * free number). A sandbox's init shares the table at its clone and unshares it at once without
 * the parked range (close_range(CLOSE_RANGE_UNSHARE): never copied, never closed one by one,
 * runtime/child.c). Transient descriptors stay below the base; should one the init needs be
 * above it (the low range full), its table is copied as before (runtime.c). */
int sbx_fd_park(int fd);
/* The base (0: parking is off). */
unsigned sbx_fd_park_base(void);
