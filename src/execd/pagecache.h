/*
 * pagecache.h - how big transfers use the page cache (see docs/execd.md, "Uploads" and
 * "Downloads").
 *
 * A file streamed through execd passes through a bounded window of the page cache instead of
 * leaving its whole size behind: an upload starts the writeback of each window as it is
 * written and drops it once it is on the disk; a download drops each window it read from the
 * disk itself once it was sent (windows that were cached before are left alone). On a VM whose
 * host takes free guest memory back (free page reporting, balloon), every page of fresh page
 * cache costs a host fault, so a transfer that recycles a few windows is several times faster
 * than one that grows the cache by its size; in a sandbox with a memory cgroup it also keeps
 * the transfer's cache from counting against the sandbox's memory.
 */
#ifndef SBX_EXECD_PAGECACHE_H
#define SBX_EXECD_PAGECACHE_H

#include <stdbool.h>
#include <stdint.h>

#define EXECD_PC_WINDOW (8u << 20)

/* Whether any page of [off, off+len) of fd is in the page cache. True when the kernel cannot
 * tell (cachestat(2) is Linux 6.5+, and a seccomp filter may refuse it): unknown counts as
 * cached, so nothing is dropped that might have been there before. */
bool execd_pc_cached(int fd, uint64_t off, uint64_t len);

/* Drop [off, off+len) of fd from the page cache (clean pages only; a hint). */
void execd_pc_drop(int fd, uint64_t off, uint64_t len);

#endif
