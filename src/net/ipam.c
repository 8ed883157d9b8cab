/*
 * ipam.c - address pool: one symlink per leased address (see ipam.h for the layout).
 */
#include "net/ipam.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

#define ID_MAX 128

int
sbx_net_parse_subnet(const char *s, uint32_t *network, int *prefix, sbx_error **err)
{
    const char *slash = strchr(s, '/');
    char ip[INET_ADDRSTRLEN];
    struct in_addr in;
    uint64_t bits = 0;

    if (!slash || (size_t)(slash - s) >= sizeof(ip))
        return sbx_error_set(err, SBX_EINVAL, 0, "subnet `%s`: expected a.b.c.d/len", s);
    memcpy(ip, s, (size_t)(slash - s));
    ip[slash - s] = '\0';
    if (inet_pton(AF_INET, ip, &in) != 1)
        return sbx_error_set(err, SBX_EINVAL, 0, "subnet `%s`: bad IPv4 address", s);
    if (sbx_parse_u64(slash + 1, &bits, NULL) < 0 || bits < 8 || bits > 30)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "subnet `%s`: prefix length must be 8..30 (a /30 holds one sandbox)",
                             s);
    uint32_t addr = ntohl(in.s_addr);
    uint32_t mask = ~0U << (32 - bits);
    if (addr & ~mask) {
        char net[16];
        sbx_net_addr_str(net, addr & mask);
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "subnet `%s` has host bits set (did you mean %s/%d?)", s, net,
                             (int)bits);
    }
    *network = addr;
    *prefix = (int)bits;
    return 0;
}

void
sbx_net_addr_str(char buf[16], uint32_t addr)
{
    snprintf(buf, 16, "%u.%u.%u.%u", (addr >> 24) & 0xff, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
             addr & 0xff);
}

int
sbx_net_check_id(const char *id, sbx_error **err)
{
    size_t n = strlen(id);
    if (n == 0 || n > ID_MAX || id[0] == '.')
        return sbx_error_set(err, SBX_EINVAL, 0, "bad sandbox id `%.*s`", ID_MAX, id);
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok)
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "bad sandbox id `%.*s` (allowed: A-Za-z0-9_.-)", ID_MAX, id);
    }
    return 0;
}

static int
open_subdir(int *out, const char *dir, const char *name, sbx_error **err)
{
    sbx_autofree char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "lease dir");
    /* 0700: the lease names reveal sandbox ids; only the runtime (root) reads them. */
    int r = sbx_mkdir_p(path, 0700, err);
    if (r < 0)
        return r;
    *out = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*out < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open lease dir `%s`", path);
    return 0;
}

int
sbx_ipam_open(struct sbx_ipam *ipam, const char *subnet, const char *dir, sbx_error **err)
{
    *ipam = (struct sbx_ipam){.leases_fd = -1, .ids_fd = -1};
    int r = sbx_net_parse_subnet(subnet, &ipam->network, &ipam->prefix, err);
    if (r < 0)
        return r;
    ipam->gateway = ipam->network + 1;
    r = open_subdir(&ipam->leases_fd, dir, "leases", err);
    if (r == 0)
        r = open_subdir(&ipam->ids_fd, dir, "ids", err);
    if (r < 0)
        sbx_ipam_close(ipam);
    return r;
}

void
sbx_ipam_close(struct sbx_ipam *ipam)
{
    sbx_closep(&ipam->leases_fd);
    sbx_closep(&ipam->ids_fd);
    ipam->leases_fd = ipam->ids_fd = -1;
}

/* Target of dirfd/name into buf (NUL-terminated): length, or -errno. */
static int
read_link(char *buf, size_t size, int dirfd, const char *name)
{
    ssize_t n = readlinkat(dirfd, name, buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return (int)n;
}

/* 1 when the lease of addr names id, 0 when not (or there is none). */
static int
lease_owned_by(const struct sbx_ipam *ipam, uint32_t addr, const char *id)
{
    char name[16];
    char owner[ID_MAX + 2];
    sbx_net_addr_str(name, addr);
    return read_link(owner, sizeof(owner), ipam->leases_fd, name) >= 0 && strcmp(owner, id) == 0;
}

int
sbx_ipam_find(uint32_t *addr, const struct sbx_ipam *ipam, const char *id, sbx_error **err)
{
    char target[32];
    struct in_addr in;
    int r = sbx_net_check_id(id, err);
    if (r < 0)
        return r;
    if (read_link(target, sizeof(target), ipam->ids_fd, id) < 0 ||
        inet_pton(AF_INET, target, &in) != 1 || !lease_owned_by(ipam, ntohl(in.s_addr), id))
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` holds no address lease", id);
    *addr = ntohl(in.s_addr);
    return 0;
}

/* Point ids/<id> at addr. A stale entry (its lease gone or someone else's) is replaced. */
static int
write_index(const struct sbx_ipam *ipam, uint32_t addr, const char *id, sbx_error **err)
{
    char name[16];
    uint32_t old = 0;
    sbx_net_addr_str(name, addr);
    for (int attempt = 0; attempt < 3; attempt++) {
        if (symlinkat(name, ipam->ids_fd, id) == 0)
            return 0;
        if (errno != EEXIST)
            return sbx_error_set(err, SBX_EGENERIC, errno, "lease index of `%s`", id);
        if (sbx_ipam_find(&old, ipam, id, NULL) == 0 && old == addr)
            return 0;
        if (sbx_ipam_find(&old, ipam, id, NULL) == 0)
            return sbx_error_set(err, SBX_EEXISTS, 0, "sandbox `%s` already holds address lease",
                                 id);
        if (unlinkat(ipam->ids_fd, id, 0) < 0 && errno != ENOENT)
            return sbx_error_set(err, SBX_EGENERIC, errno, "remove stale lease index of `%s`", id);
    }
    return sbx_error_set(err, SBX_ECONFLICT, 0, "lease index of `%s` keeps changing", id);
}

static uint32_t
random_u32(void)
{
    uint32_t x = 0;
    if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != sizeof(x))
        x = (uint32_t)sbx_now_ns();
    return x;
}

uint32_t
sbx_ipam_count(const struct sbx_ipam *ipam)
{
    return (1U << (32 - ipam->prefix)) - 3;
}

/* Try the addresses of window [lo, lo + n) from a random start, so that parallel allocators
 * rarely collide and a freed address is not handed out again at once (stale ARP entries in
 * peers). 1: leased, 0: the window is full. */
static int
lease_in_window(uint32_t *addr, const struct sbx_ipam *ipam, uint32_t lo, uint32_t n,
                const char *id, sbx_error **err)
{
    uint32_t first = ipam->network + 2 + lo; /* skip the network address and the gateway */
    uint32_t start = random_u32() % n;
    char name[16];

    for (uint32_t i = 0; i < n; i++) {
        uint32_t a = first + (start + i) % n;
        sbx_net_addr_str(name, a);
        if (symlinkat(id, ipam->leases_fd, name) == 0) {
            *addr = a;
            return 1;
        }
        if (errno != EEXIST)
            return sbx_error_set(err, SBX_EGENERIC, errno, "create address lease %s", name);
    }
    return 0;
}

static int
pool_full(const struct sbx_ipam *ipam, uint32_t windows, sbx_error **err)
{
    char net[16];
    uint32_t count = sbx_ipam_count(ipam);
    sbx_net_addr_str(net, ipam->network);
    if (ipam->window && (uint64_t)windows * ipam->window < count)
        return sbx_error_set(err, SBX_ELIMIT, 0,
                             "bridge network %s/%d is full: all %u leaf bridges of %u sandboxes "
                             "each are (a Linux bridge takes at most %u leaves: the kernel's "
                             "BR_MAX_PORTS); raise providers.native.leaf_size (at most %u) or "
                             "use another bridge and subnet",
                             net, ipam->prefix, windows, ipam->window, ipam->max_windows,
                             SBX_IPAM_WINDOW_MAX);
    return sbx_error_set(err, SBX_ELIMIT, 0,
                         "address pool %s/%d is exhausted: all %u addresses are leased (run `sbx "
                         "net gc` to release leases of dead sandboxes, or use a larger subnet: "
                         "providers.native.subnet)",
                         net, ipam->prefix, count);
}

/* The lowest window with room, starting at the hint (a window below it is tried last: it
 * was full, and may have room again). */
static int
lease_free_address(uint32_t *addr, struct sbx_ipam *ipam, const char *id, sbx_error **err)
{
    uint32_t count = sbx_ipam_count(ipam);
    uint32_t size = ipam->window && ipam->window < count ? ipam->window : count;
    uint32_t windows = (count + size - 1) / size;
    if (ipam->max_windows && windows > ipam->max_windows)
        windows = ipam->max_windows;
    uint32_t hint = ipam->hint < windows ? ipam->hint : 0;
    for (uint32_t i = 0; i < windows; i++) {
        uint32_t w = (hint + i) % windows;
        uint32_t lo = w * size;
        int r = lease_in_window(addr, ipam, lo, count - lo < size ? count - lo : size, id, err);
        if (r < 0)
            return r;
        if (r == 1) {
            ipam->hint = w;
            return 0;
        }
    }
    return pool_full(ipam, windows, err);
}

int
sbx_ipam_alloc(uint32_t *addr, struct sbx_ipam *ipam, const char *id, sbx_error **err)
{
    uint32_t a = 0;
    int r = sbx_net_check_id(id, err);
    if (r < 0)
        return r;
    if (sbx_ipam_find(&a, ipam, id, NULL) == 0)
        return sbx_error_set(err, SBX_EEXISTS, 0, "sandbox `%s` already holds address lease", id);
    r = lease_free_address(&a, ipam, id, err);
    if (r < 0)
        return r;
    r = write_index(ipam, a, id, err);
    if (r < 0) {
        char name[16];
        sbx_net_addr_str(name, a);
        (void)unlinkat(ipam->leases_fd, name, 0);
        return r;
    }
    *addr = a;
    return 0;
}

int
sbx_ipam_release(const struct sbx_ipam *ipam, uint32_t addr, const char *id, sbx_error **err)
{
    char name[16];
    char target[32];
    sbx_net_addr_str(name, addr);
    if (lease_owned_by(ipam, addr, id) && unlinkat(ipam->leases_fd, name, 0) < 0 && errno != ENOENT)
        return sbx_error_set(err, SBX_EGENERIC, errno, "release address lease %s", name);
    /* The index entry goes last: a crash in between leaves an entry that find() ignores. */
    if (read_link(target, sizeof(target), ipam->ids_fd, id) >= 0 && strcmp(target, name) == 0 &&
        unlinkat(ipam->ids_fd, id, 0) < 0 && errno != ENOENT)
        return sbx_error_set(err, SBX_EGENERIC, errno, "remove lease index of `%s`", id);
    return 0;
}

int
sbx_ipam_transfer(const struct sbx_ipam *ipam, uint32_t addr, const char *from, const char *to,
                  sbx_error **err)
{
    char name[16];
    char tmp[64];
    int r = sbx_net_check_id(to, err);
    if (r < 0)
        return r;
    sbx_net_addr_str(name, addr);
    if (!lease_owned_by(ipam, addr, from))
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "address %s is not leased to `%s`", name, from);
    /* The new owner's index first: a crash leaves at most an index entry find() ignores (its
     * lease names someone else) or a lease whose old index entry prune_ids removes. The lease
     * itself changes owner in one rename (a new symlink over the old one). */
    r = write_index(ipam, addr, to, err);
    if (r < 0)
        return r;
    snprintf(tmp, sizeof tmp, ".%s.%u", name, (unsigned)getpid());
    (void)unlinkat(ipam->leases_fd, tmp, 0);
    if (symlinkat(to, ipam->leases_fd, tmp) < 0 ||
        renameat(ipam->leases_fd, tmp, ipam->leases_fd, name) < 0) {
        int e = errno;
        (void)unlinkat(ipam->leases_fd, tmp, 0);
        (void)unlinkat(ipam->ids_fd, to, 0);
        return sbx_error_set(err, SBX_EGENERIC, e, "hand address lease %s to `%s`", name, to);
    }
    (void)unlinkat(ipam->ids_fd, from, 0);
    return 0;
}

/* A DIR stream of dirfd, or NULL with errno set. */
static DIR *
open_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

int
sbx_ipam_foreach(const struct sbx_ipam *ipam,
                 int (*fn)(uint32_t addr, const char *id, void *payload), void *payload,
                 sbx_error **err)
{
    sbx_autoclosedir DIR *d = open_dir(ipam->leases_fd);
    struct dirent *de;
    char owner[ID_MAX + 2];
    struct in_addr in;
    int r = 0;
    if (!d)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open lease dir");
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): the DIR stream is private to this call */
    while ((de = readdir(d))) {
        if (inet_pton(AF_INET, de->d_name, &in) != 1 ||
            read_link(owner, sizeof(owner), ipam->leases_fd, de->d_name) < 0)
            continue;
        r = fn(ntohl(in.s_addr), owner, payload);
        if (r < 0)
            return r;
    }
    return 0;
}

int
sbx_ipam_prune_ids(const struct sbx_ipam *ipam, sbx_error **err)
{
    sbx_autoclosedir DIR *d = open_dir(ipam->ids_fd);
    struct dirent *de;
    uint32_t addr = 0;
    if (!d)
        return sbx_error_set(err, SBX_EGENERIC, errno, "open lease index dir");
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): the DIR stream is private to this call */
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || sbx_ipam_find(&addr, ipam, de->d_name, NULL) == 0)
            continue;
        if (unlinkat(ipam->ids_fd, de->d_name, 0) < 0 && errno != ENOENT)
            return sbx_error_set(err, SBX_EGENERIC, errno, "remove lease index `%s`", de->d_name);
    }
    return 0;
}
