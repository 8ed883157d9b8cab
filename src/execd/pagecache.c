/*
 * pagecache.c - page cache residency and drop-behind for big transfers (see pagecache.h).
 */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "execd/pagecache.h"

#ifndef SYS_cachestat
#define SYS_cachestat 451 /* the same number on every architecture (Linux 6.5) */
#endif

struct pc_range {
    uint64_t off;
    uint64_t len;
};

struct pc_stat {
    uint64_t nr_cache;
    uint64_t nr_dirty;
    uint64_t nr_writeback;
    uint64_t nr_evicted;
    uint64_t nr_recently_evicted;
};

bool
execd_pc_cached(int fd, uint64_t off, uint64_t len)
{
    struct pc_range r = {.off = off, .len = len};
    struct pc_stat st = {0};
    if (syscall(SYS_cachestat, fd, &r, &st, 0) < 0)
        return true;
    return st.nr_cache > 0;
}

void
execd_pc_drop(int fd, uint64_t off, uint64_t len)
{
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}
