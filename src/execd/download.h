/*
 * download.h - byte ranges for /files/download.
 */
#ifndef SBX_EXECD_DOWNLOAD_H
#define SBX_EXECD_DOWNLOAD_H

#include <stdint.h>

/* Parse the first range of a `Range: bytes=a-b | a- | -n` header against a file of size
 * bytes. 0 with [*start, *start + *len) inside the file, or -1 (answer 416). */
int execd_range_parse(const char *h, uint64_t size, uint64_t *start, uint64_t *len);

struct evbuffer;
/* Append bytes [start, start + len) of fd to b as a sendfile segment (takes fd). */
void execd_add_file_segment(struct evbuffer *b, int fd, uint64_t start, uint64_t len);

#endif
