/*
 * ipam.h - address pool of a bridge network: one lease per address in a directory.
 *
 *   <dir>/leases/<a.b.c.d>  symlink whose target is the sandbox id (the lease itself)
 *   <dir>/ids/<sandbox id>  symlink whose target is "a.b.c.d" (index for detach)
 *
 * symlink(2) creates a name exclusively (EEXIST, like O_CREAT|O_EXCL) and sets its content in
 * the same step, so concurrent processes never share an address and a lease is never seen
 * without its owner, even after a crash at any point. Addresses are in host byte order.
 */
#ifndef SBX_NET_IPAM_H
#define SBX_NET_IPAM_H

#include <stdint.h>

#include "common/error.h"

/* The largest window (a leaf bridge's ports but its uplink: BR_MAX_PORTS - 1). */
#define SBX_IPAM_WINDOW_MAX 1023

struct sbx_ipam {
    uint32_t network; /* first address of the subnet */
    int prefix;       /* 8 .. 30 */
    uint32_t gateway; /* network + 1, never leased */
    int leases_fd;    /* O_PATH dir fds */
    int ids_fd;
    /* Windows of `window` addresses each (a leaf bridge's; 0: one window, the whole pool),
     * at most max_windows of them (0: no limit): a lease is taken in the lowest window with
     * room. hint: the lowest window this process last saw with room (only a hint). */
    uint32_t window;
    uint32_t max_windows;
    uint32_t hint;
};

/* Parse "a.b.c.d/n" with 8 <= n <= 30 and no host bits set. */
int sbx_net_parse_subnet(const char *s, uint32_t *network, int *prefix, sbx_error **err);
/* "a.b.c.d" (buf of 16 bytes). */
void sbx_net_addr_str(char buf[16], uint32_t addr);
/* A sandbox id usable as a file name: 1-128 of [A-Za-z0-9_.-], not starting with '.'. */
int sbx_net_check_id(const char *id, sbx_error **err);

/* Create (if needed) and open the lease directories under dir. */
int sbx_ipam_open(struct sbx_ipam *ipam, const char *subnet, const char *dir, sbx_error **err);
void sbx_ipam_close(struct sbx_ipam *ipam);

/* Lease a free address to id, in the lowest window with room (from a random start in it).
 * SBX_ELIMIT when every window is full, SBX_EEXISTS when id holds a lease already. */
int sbx_ipam_alloc(uint32_t *addr, struct sbx_ipam *ipam, const char *id, sbx_error **err);
/* Number of addresses of the pool (all but the network, gateway and broadcast addresses). */
uint32_t sbx_ipam_count(const struct sbx_ipam *ipam);
/* The address leased to id: 0, or -SBX_ENOTFOUND. */
int sbx_ipam_find(uint32_t *addr, const struct sbx_ipam *ipam, const char *id, sbx_error **err);
/* Release the lease of addr if it belongs to id, and id's index entry. Idempotent. */
int sbx_ipam_release(const struct sbx_ipam *ipam, uint32_t addr, const char *id, sbx_error **err);
/* Hand the lease of addr from `from` to `to` (one atomic rename of the lease). SBX_ENOTFOUND
 * when addr is not leased to `from`. */
int sbx_ipam_transfer(const struct sbx_ipam *ipam, uint32_t addr, const char *from, const char *to,
                      sbx_error **err);
/* Visit every lease; fn returns < 0 to stop (that value is returned). */
int sbx_ipam_foreach(const struct sbx_ipam *ipam,
                     int (*fn)(uint32_t addr, const char *id, void *payload), void *payload,
                     sbx_error **err);
/* Remove index entries whose lease is gone or belongs to another id. */
int sbx_ipam_prune_ids(const struct sbx_ipam *ipam, sbx_error **err);

#endif
