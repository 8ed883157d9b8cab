/*
 * dns.c - the egress resolver and the policed sandboxes' nftables sets (see egress.h).
 *
 * Threads: one receives UDP queries, one accepts TCP connections, one refreshes the block
 * sets; each query or connection is handled on a thread of its own, at most WORKERS_MAX at
 * once (a flood of queries from a sandbox is dropped beyond that, never queued without bound),
 * TCP connections at most TCP_MAX at once, each closed after TCP_IDLE_S without a query.
 *
 * Why a hostile sandbox cannot widen its own reach through this resolver: the querying sandbox
 * is its source address (its veth; the bridge drops spoofed sources: a sandbox cannot send as
 * another, see docs/network.md), the policy is evaluated on the name exactly as it goes
 * upstream (dnsmsg.c), and what it learns is (its own address . the answer's addresses) in
 * egress_ok4, added before the answer is sent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "egress/credproxy.h"
#include "egress/dnsmsg.h"
#include "egress/egress.h"
#include "net/nft.h"

#define WORKERS_MAX     128
#define TCP_MAX         32
#define TCP_IDLE_S      5
#define UPSTREAM_MAX    4
#define UPSTREAM_MS     2000
#define TTL_MIN_S       30
#define TTL_MAX_S       3600
#define REFRESH_S       30
#define BLOCK_NAMES_MAX 256 /* exact deny targets resolved per allow-default sandbox */
#define UDP_MAX         4096
#define APPLY_BUDGET_MS 3000
#define PAIRS_MAX       256 /* (name, address) answers kept per sandbox with a vault */

/* An address the resolver answered for a name (the credential proxy's proof that a
 * connection's destination is the name's: docs/network.md "Credential proxy"). */
struct pair {
    char name[SBX_EGRESS_NAME_MAX + 1];
    struct in_addr addr;
    uint64_t until_ms; /* sbx_now_ms */
};

struct entry {
    /* changes with every policy applied: what a query decided under an older one is not
     * learned (see learn) */
    uint64_t gen;
    char id[64];
    char addr[INET_ADDRSTRLEN];
    struct in_addr in;
    struct sbx_egress_policy *policy;
    json_t *bindings;   /* its Credential Vault's bindings; NULL: no vault */
    struct pair *pairs; /* PAIRS_MAX of them once it has a vault */
};

struct sbx_egress {
    char bridge[16];
    struct sockaddr_in listen;
    struct sockaddr_in up[UPSTREAM_MAX];
    size_t n_up;
    struct sbx_nft *nft;
    int udp, tcp;
    int stop_pipe[2];
    pthread_t udp_t, tcp_t, refresh_t;
    bool started;
    /* apply, drop and clear one at a time: a sandbox going away and another getting its
     * address never interleave their set changes (whichever runs second sees the first's
     * entry table: drop clears nothing that an apply for a new holder made) */
    pthread_mutex_t ops;
    pthread_mutex_t mu; /* entries, workers */
    pthread_cond_t cv;  /* workers went down; or stopping (the refresher waits on it) */
    struct entry *entries;
    size_t n, cap;
    unsigned workers, tcp_conns;
    uint64_t gens;
    bool stopping;
    struct sbx_egress_config cfg; /* the callbacks and upstream_ca (a copy) */
    struct sbx_credproxy *proxy;  /* NULL: port 80 of the gateway could not be had */
    char proxy_why[200];
};

static void
entry_free(struct entry *en)
{
    sbx_egress_policy_free(en->policy);
    json_decref(en->bindings);
    free(en->pairs);
    en->policy = NULL;
    en->bindings = NULL;
    en->pairs = NULL;
}

/* ---- the table of policed sandboxes ---- */

static struct entry *
find_id(struct sbx_egress *e, const char *id)
{
    for (size_t i = 0; i < e->n; i++) {
        if (strcmp(e->entries[i].id, id) == 0)
            return &e->entries[i];
    }
    return NULL;
}

/* Caller holds e->mu. */
static struct entry *
find_addr(struct sbx_egress *e, struct in_addr in)
{
    for (size_t i = 0; i < e->n; i++) {
        if (e->entries[i].in.s_addr == in.s_addr)
            return &e->entries[i];
    }
    return NULL;
}

/* What learn needs: whose answer (the sandbox, and the policy generation it was decided
 * under), into which set, how long past the TTL. */
struct learn_ctx {
    struct in_addr sandbox;
    uint64_t gen;
    bool block;
    unsigned extra_s;
};

/* The action for name from the sandbox at src; -1 when src is no policed sandbox. Fills
 * ctx (the sandbox, its policy's generation; ctx->block false). */
static int
decide(struct sbx_egress *e, struct in_addr src, const char *name, struct learn_ctx *ctx,
       bool *deny_mode)
{
    int r = -1;
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_addr(e, src);
    if (en) {
        r = (int)sbx_egress_policy_eval(en->policy, name);
        *deny_mode = en->policy->dflt == SBX_EGRESS_DENY;
        *ctx = (struct learn_ctx){.sandbox = src, .gen = en->gen};
    }
    pthread_mutex_unlock(&e->mu);
    return r;
}

/* ---- upstream ---- */

/* Send q to the upstreams in turn over UDP; the reply (same id, a response) into out. */
static ssize_t
ask_upstream(struct sbx_egress *e, const uint8_t *q, size_t qn, uint8_t *out, size_t cap)
{
    for (size_t i = 0; i < e->n_up; i++) {
        sbx_autoclose int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&e->up[i], sizeof e->up[i]) < 0 ||
            send(s, q, qn, 0) != (ssize_t)qn)
            continue;
        struct pollfd p = {.fd = s, .events = POLLIN};
        while (poll(&p, 1, UPSTREAM_MS) == 1) {
            ssize_t n = recv(s, out, cap, 0);
            if (n >= SBX_DNS_HEADER && sbx_dns_id(out) == sbx_dns_id(q) && (out[2] & 0x80))
                return n;
            if (n < 0)
                break;
        }
    }
    return -1;
}

static unsigned
clamp_ttl(uint32_t ttl)
{
    return ttl < TTL_MIN_S ? TTL_MIN_S : ttl > TTL_MAX_S ? TTL_MAX_S : ttl;
}

/* Put the A records of reply into egress_ok4 (or egress_block4) for the sandbox of ctx: only
 * while the policy it was decided under is still the sandbox's (-2 otherwise). Checked and
 * added under e->mu, which an apply holds from its new generation to the end of its forget:
 * an answer of the old policy is either added before the forget (which removes it) or not at
 * all. */
static int
learn(struct sbx_egress *e, const struct learn_ctx *ctx, const uint8_t *reply, size_t n)
{
    struct sbx_dns_addr a[64];
    size_t na = sbx_dns_a_records(reply, n, a, 64);
    if (na == 0)
        return 0;
    const char *list[64];
    unsigned ttl = 0;
    for (size_t i = 0; i < na; i++) {
        list[i] = a[i].addr;
        ttl = ttl > clamp_ttl(a[i].ttl) ? ttl : clamp_ttl(a[i].ttl);
    }
    char saddr[INET_ADDRSTRLEN];
    (void)inet_ntop(AF_INET, &ctx->sandbox, saddr, sizeof saddr);
    struct sbx_nft_egress_elems el = {.block = ctx->block,
                                      .saddr = saddr,
                                      .daddrs = list,
                                      .n = na,
                                      .timeout_s = ttl + ctx->extra_s};
    sbx_autoerror sbx_error *err = NULL;
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_addr(e, ctx->sandbox);
    int r = en && en->gen == ctx->gen ? sbx_nft_egress_add(e->nft, e->bridge, &el, &err) : -2;
    pthread_mutex_unlock(&e->mu);
    if (r == -2)
        return r;
    if (r < 0) {
        sbx_warn("egress: %s", sbx_error_msg(err));
        return -1;
    }
    return 0;
}

/* The slot of (name, in) in pairs, else the one that expires first (an empty one: 0). */
static size_t
pair_slot(const struct pair *pairs, const char *name, struct in_addr in)
{
    size_t k = 0;
    for (size_t j = 0; j < PAIRS_MAX; j++) {
        if (pairs[j].addr.s_addr == in.s_addr && strcmp(pairs[j].name, name) == 0)
            return j;
        if (pairs[j].until_ms < pairs[k].until_ms)
            k = j;
    }
    return k;
}

/* Keep (name, each A record of reply) for the sandbox of ctx if it has a vault, in deny and
 * allow mode alike, under the policy generation it was decided under (as learn). The oldest
 * pair makes room when all PAIRS_MAX are taken. */
static void
remember(struct sbx_egress *e, const struct learn_ctx *ctx, const char *name, const uint8_t *reply,
         size_t n)
{
    struct sbx_dns_addr a[64];
    size_t na = sbx_dns_a_records(reply, n, a, 64);
    uint64_t now = sbx_now_ms();
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_addr(e, ctx->sandbox);
    for (size_t i = 0; en && en->pairs && en->gen == ctx->gen && i < na; i++) {
        struct in_addr in;
        if (inet_pton(AF_INET, a[i].addr, &in) != 1)
            continue;
        size_t k = pair_slot(en->pairs, name, in);
        (void)snprintf(en->pairs[k].name, sizeof en->pairs[k].name, "%s", name);
        en->pairs[k].addr = in;
        en->pairs[k].until_ms = now + (uint64_t)clamp_ttl(a[i].ttl) * 1000;
    }
    pthread_mutex_unlock(&e->mu);
}

/* ---- answering a query ---- */

/* The answer to query q (n bytes) from src into out; its length (0: no answer). */
static size_t
answer(struct sbx_egress *e, struct in_addr src, const uint8_t *q, size_t n, uint8_t *out,
       size_t cap)
{
    struct sbx_dns_question qq;
    if (n < SBX_DNS_HEADER)
        return 0;
    int r = sbx_dns_parse_query(q, n, &qq);
    if (r < 0)
        return sbx_dns_error_reply(out, cap, q, 0, -r);
    bool deny_mode = true;
    struct learn_ctx ctx = {0};
    int act = decide(e, src, qq.name, &ctx, &deny_mode);
    if (act < 0) /* not a policed sandbox (nft lets only those in: defence in depth) */
        return sbx_dns_error_reply(out, cap, q, qq.end, SBX_DNS_REFUSED);
    /* NXDOMAIN, as OpenSandbox's egress sidecar answers a denied name */
    if (act == SBX_EGRESS_DENY)
        return sbx_dns_error_reply(out, cap, q, qq.end, SBX_DNS_NXDOMAIN);
    ssize_t got = ask_upstream(e, q, n, out, cap);
    if (got < 0)
        return sbx_dns_error_reply(out, cap, q, qq.end, SBX_DNS_SERVFAIL);
    /* Learned before the sandbox has the answer: its first connect already passes. A failure
     * to learn (or a policy changed meanwhile) is a SERVFAIL, never an answer the sandbox
     * could not use: it asks again, under the policy of now. */
    if (deny_mode && learn(e, &ctx, out, (size_t)got) < 0)
        return sbx_dns_error_reply(out, cap, q, qq.end, SBX_DNS_SERVFAIL);
    remember(e, &ctx, qq.name, out, (size_t)got);
    return (size_t)got;
}

/* ---- workers (bounded) ---- */

static bool
worker_take(struct sbx_egress *e, bool tcp)
{
    pthread_mutex_lock(&e->mu);
    bool ok = !e->stopping && e->workers < WORKERS_MAX && (!tcp || e->tcp_conns < TCP_MAX);
    if (ok) {
        e->workers++;
        e->tcp_conns += tcp;
    }
    pthread_mutex_unlock(&e->mu);
    return ok;
}

static void
worker_done(struct sbx_egress *e, bool tcp)
{
    pthread_mutex_lock(&e->mu);
    e->workers--;
    e->tcp_conns -= tcp;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

struct udp_job {
    struct sbx_egress *e;
    struct sockaddr_in from;
    size_t n;
    uint8_t q[UDP_MAX];
};

static void *
udp_worker(void *arg)
{
    struct udp_job *j = arg;
    uint8_t out[UDP_MAX];
    size_t len = answer(j->e, j->from.sin_addr, j->q, j->n, out, sizeof out);
    if (len)
        (void)sendto(j->e->udp, out, len, 0, (struct sockaddr *)&j->from, sizeof j->from);
    worker_done(j->e, false);
    free(j);
    return NULL;
}

static bool
spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t at;
    (void)pthread_attr_init(&at);
    (void)pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    (void)pthread_attr_setstacksize(&at, (size_t)256 * 1024);
    bool ok = pthread_create(&t, &at, fn, arg) == 0;
    (void)pthread_attr_destroy(&at);
    return ok;
}

static bool
stop_requested(struct sbx_egress *e, int fd)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = e->stop_pipe[0], .events = POLLIN}};
    while (poll(p, 2, -1) < 0) {
        if (errno != EINTR)
            return true;
    }
    return p[1].revents != 0;
}

static void *
udp_loop(void *arg)
{
    struct sbx_egress *e = arg;
    while (!stop_requested(e, e->udp)) {
        struct udp_job *j = sbx_xcalloc(1, sizeof *j);
        socklen_t fl = sizeof j->from;
        ssize_t n =
            recvfrom(e->udp, j->q, sizeof j->q, MSG_DONTWAIT, (struct sockaddr *)&j->from, &fl);
        j->e = e;
        j->n = n > 0 ? (size_t)n : 0;
        /* beyond the cap the query is dropped: the sandbox's resolver library retries */
        if (n <= 0 || fl != sizeof j->from || !worker_take(e, false)) {
            free(j);
            continue;
        }
        if (!spawn(udp_worker, j)) {
            worker_done(e, false);
            free(j);
        }
    }
    return NULL;
}

struct tcp_job {
    struct sbx_egress *e;
    int fd;
    struct in_addr from;
};

static bool
read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* DNS over TCP (RFC 7766): 2-byte length, message; several per connection. */
static void *
tcp_worker(void *arg)
{
    struct tcp_job *j = arg;
    struct timeval tv = {.tv_sec = TCP_IDLE_S};
    (void)setsockopt(j->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(j->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sbx_autofree uint8_t *q = sbx_xmalloc(SBX_DNS_MSG_MAX + 2);
    sbx_autofree uint8_t *out = sbx_xmalloc(SBX_DNS_MSG_MAX + 2);
    for (int k = 0; k < 64; k++) {
        uint8_t lb[2];
        if (!read_full(j->fd, lb, 2))
            break;
        size_t n = (size_t)((lb[0] << 8) | lb[1]);
        if (n < SBX_DNS_HEADER || !read_full(j->fd, q, n))
            break;
        size_t len = answer(j->e, j->from, q, n, out + 2, SBX_DNS_MSG_MAX);
        if (!len)
            break;
        out[0] = (uint8_t)(len >> 8);
        out[1] = (uint8_t)len;
        if (send(j->fd, out, len + 2, MSG_NOSIGNAL) != (ssize_t)(len + 2))
            break;
    }
    (void)close(j->fd);
    worker_done(j->e, true);
    free(j);
    return NULL;
}

static void *
tcp_loop(void *arg)
{
    struct sbx_egress *e = arg;
    while (!stop_requested(e, e->tcp)) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        /* the listener is non-blocking, the connection is not (the worker's reads wait, up
         * to TCP_IDLE_S) */
        int fd = accept4(e->tcp, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (!worker_take(e, true)) {
            (void)close(fd);
            continue;
        }
        struct tcp_job *j = sbx_xcalloc(1, sizeof *j);
        *j = (struct tcp_job){e, fd, from.sin_addr};
        if (!spawn(tcp_worker, j)) {
            worker_done(e, true);
            (void)close(fd);
            free(j);
        }
    }
    return NULL;
}

/* ---- allow-default sandboxes: their exact deny targets' addresses, blocked ---- */

struct block_job {
    struct learn_ctx ctx;
    char **names;
    size_t n;
};

static void
block_jobs_free(struct block_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < jobs[i].n; k++)
            free(jobs[i].names[k]);
        free(jobs[i].names);
    }
    free(jobs);
}

/* What to resolve for entry en (allow default): its exact deny targets (wildcards cannot be
 * enumerated; docs/network.md says so), at most BLOCK_NAMES_MAX. */
static void
block_job_of(const struct entry *en, struct block_job *j)
{
    const struct sbx_egress_policy *p = en->policy;
    j->ctx = (struct learn_ctx){
        .sandbox = en->in, .gen = en->gen, .block = true, .extra_s = 2 * REFRESH_S};
    j->names = sbx_xcalloc(BLOCK_NAMES_MAX + 1, sizeof *j->names);
    for (size_t i = 0; i < p->n && j->n < BLOCK_NAMES_MAX; i++) {
        if (p->rules[i].action == SBX_EGRESS_DENY && p->rules[i].target[0] != '*' &&
            sbx_egress_policy_eval(p, p->rules[i].target) == SBX_EGRESS_DENY)
            j->names[j->n++] = sbx_xstrdup(p->rules[i].target);
    }
}

/* Until deadline_ms (sbx_now_ms; 0: no deadline): the rest waits for the next refresh. */
static void
resolve_blocks(struct sbx_egress *e, const struct block_job *j, uint64_t deadline_ms)
{
    for (size_t k = 0; k < j->n && (!deadline_ms || sbx_now_ms() < deadline_ms); k++) {
        uint8_t q[SBX_DNS_NAME_MAX + 32];
        uint8_t out[UDP_MAX];
        uint16_t id = 0;
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = (uint16_t)k; /* a query id need not be secret: the upstream socket is ours */
        size_t qn = sbx_dns_a_query(q, sizeof q, j->names[k], id);
        ssize_t got = qn ? ask_upstream(e, q, qn, out, sizeof out) : -1;
        /* kept past the next refresh (extra_s): no gap between two of them */
        if (got > 0)
            (void)learn(e, &j->ctx, out, (size_t)got);
    }
}

/* Jobs for every allow-default sandbox (or only id's), copied under the lock. */
static struct block_job *
block_jobs(struct sbx_egress *e, const char *id, size_t *n)
{
    pthread_mutex_lock(&e->mu);
    struct block_job *jobs = sbx_xcalloc(e->n + 1, sizeof *jobs);
    *n = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (e->entries[i].policy->dflt == SBX_EGRESS_ALLOW &&
            (!id || strcmp(id, e->entries[i].id) == 0))
            block_job_of(&e->entries[i], &jobs[(*n)++]);
    }
    pthread_mutex_unlock(&e->mu);
    return jobs;
}

static void *
refresh_loop(void *arg)
{
    struct sbx_egress *e = arg;
    for (;;) {
        struct timespec until = sbx_monotonic_in(REFRESH_S * 1000ULL);
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && pthread_cond_timedwait(&e->cv, &e->mu, &until) != ETIMEDOUT)
            ;
        bool stop = e->stopping;
        pthread_mutex_unlock(&e->mu);
        if (stop)
            return NULL;
        size_t n = 0;
        struct block_job *jobs = block_jobs(e, NULL, &n);
        for (size_t i = 0; i < n; i++)
            resolve_blocks(e, &jobs[i], 0);
        block_jobs_free(jobs, n);
    }
}

/* ---- the API ---- */

/* Drop the entries at address in other than id's (stale: the address has a new holder). */
static void
drop_stale(struct sbx_egress *e, struct in_addr in, const char *id)
{
    pthread_mutex_lock(&e->mu);
    size_t kept = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (e->entries[i].in.s_addr == in.s_addr && (!id || strcmp(e->entries[i].id, id) != 0))
            entry_free(&e->entries[i]);
        else
            e->entries[kept++] = e->entries[i];
    }
    e->n = kept;
    pthread_mutex_unlock(&e->mu);
}

/* Is id at in policed by this very policy already? (A vault change enforces the unchanged
 * policy again: what the sandbox learned stays then.) Caller holds e->mu. */
static bool
same_policy(struct sbx_egress *e, const char *id, struct in_addr in,
            const struct sbx_egress_policy *policy)
{
    const struct entry *en = find_id(e, id);
    if (!en || en->in.s_addr != in.s_addr)
        return false;
    json_t *a = sbx_egress_policy_json(en->policy);
    json_t *b = sbx_egress_policy_json(policy);
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

static int
apply_locked(struct sbx_egress *e, const char *id, struct in_addr in,
             const struct sbx_egress_policy *policy, sbx_error **err)
{
    char addr[INET_ADDRSTRLEN];
    (void)inet_ntop(AF_INET, &in, addr, sizeof addr);
    enum sbx_nft_egress_mode mode =
        policy->dflt == SBX_EGRESS_DENY ? SBX_NFT_EGRESS_DENY : SBX_NFT_EGRESS_ALLOW;
    /* another sandbox's entry at this address is stale (it went while we were not told) */
    drop_stale(e, in, id);
    pthread_mutex_lock(&e->mu);
    if (same_policy(e, id, in, policy)) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    struct entry *en = find_id(e, id);
    if (!en) {
        if (e->n == e->cap) {
            e->cap = e->cap ? e->cap * 2 : 16;
            e->entries = sbx_xrealloc(e->entries, e->cap * sizeof *e->entries);
        }
        en = &e->entries[e->n++];
        memset(en, 0, sizeof *en);
        (void)snprintf(en->id, sizeof en->id, "%s", id);
    }
    (void)snprintf(en->addr, sizeof en->addr, "%s", addr);
    en->in = in;
    if (en->pairs) /* what the old policy let it resolve is no proof under the new one */
        memset(en->pairs, 0, PAIRS_MAX * sizeof *en->pairs);
    sbx_egress_policy_free(en->policy);
    en->policy = sbx_egress_policy_dup(policy);
    en->gen = ++e->gens;
    /* Still under e->mu (learn waits): the mode (the sandbox is policed from here on), then
     * what the old policy let it learn goes; answers of the old policy still in flight are
     * refused by learn from now on. No moment is looser than either policy. */
    int r = sbx_nft_egress_mode(e->nft, e->bridge, addr, mode, err);
    if (r >= 0)
        r = sbx_nft_egress_forget(e->nft, e->bridge, addr, err);
    pthread_mutex_unlock(&e->mu);
    return r < 0 ? sbx_error_wrap(err, "egress policy of `%s`", id) : 0;
}

int
sbx_egress_apply(struct sbx_egress *e, const char *id, const char *addr,
                 const struct sbx_egress_policy *policy, sbx_error **err)
{
    struct in_addr in;
    if (inet_pton(AF_INET, addr, &in) != 1 || strlen(id) >= sizeof e->entries[0].id)
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: bad sandbox `%s` at `%s`", id, addr);
    pthread_mutex_lock(&e->ops);
    int r = apply_locked(e, id, in, policy, err);
    pthread_mutex_unlock(&e->ops);
    if (r < 0)
        return r;
    /* Allow default: the exact deny targets' addresses, blocked now as far as APPLY_BUDGET_MS
     * allows (an unanswering upstream must not hold the API), the rest by the refresher. */
    size_t n = 0;
    struct block_job *jobs = block_jobs(e, id, &n);
    uint64_t deadline = sbx_now_ms() + APPLY_BUDGET_MS;
    for (size_t i = 0; i < n; i++)
        resolve_blocks(e, &jobs[i], deadline);
    block_jobs_free(jobs, n);
    return 0;
}

static int
clear_locked(struct sbx_egress *e, const char *addr, sbx_error **err)
{
    if (sbx_nft_egress_mode(e->nft, e->bridge, addr, SBX_NFT_EGRESS_NONE, err) < 0 ||
        sbx_nft_credproxy(e->nft, e->bridge, addr, false, err) < 0 ||
        sbx_nft_egress_forget(e->nft, e->bridge, addr, err) < 0)
        return sbx_error_wrap(err, "egress: clear `%s`", addr);
    return 0;
}

int
sbx_egress_clear_addr(struct sbx_egress *e, const char *addr, sbx_error **err)
{
    struct in_addr in;
    if (inet_pton(AF_INET, addr, &in) != 1)
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: bad address `%s`", addr);
    pthread_mutex_lock(&e->ops);
    drop_stale(e, in, NULL); /* a new holder without policy: any entry there is stale */
    int r = clear_locked(e, addr, err);
    pthread_mutex_unlock(&e->ops);
    return r;
}

int
sbx_egress_drop(struct sbx_egress *e, const char *id, sbx_error **err)
{
    char addr[INET_ADDRSTRLEN] = "";
    pthread_mutex_lock(&e->ops);
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_id(e, id);
    if (en) {
        (void)snprintf(addr, sizeof addr, "%s", en->addr);
        struct entry dead = *en;
        *en = e->entries[--e->n];
        entry_free(&dead);
    }
    pthread_mutex_unlock(&e->mu);
    /* not found: never policed here, or its address already has a new holder (whose apply
     * or clear removed this entry): nothing of the sets is this sandbox's any more */
    int r = addr[0] ? clear_locked(e, addr, err) : 0;
    pthread_mutex_unlock(&e->ops);
    return r;
}

/* "a.b.c.d[:port] ..." into e->up. */
static int
parse_upstream(struct sbx_egress *e, const char *list, sbx_error **err)
{
    for (const char *p = list ? list : ""; *p && e->n_up < UPSTREAM_MAX;) {
        size_t w = strcspn(p, " ,");
        char one[32];
        unsigned port = 53;
        if (w && w < sizeof one) {
            (void)snprintf(one, sizeof one, "%.*s", (int)w, p);
            char *colon = strchr(one, ':');
            if (colon) {
                *colon = '\0';
                port = (unsigned)strtoul(colon + 1, NULL, 10);
            }
            struct sockaddr_in *sa = &e->up[e->n_up];
            sa->sin_family = AF_INET;
            sa->sin_port = htons((uint16_t)port);
            if (port == 0 || port > 65535 || inet_pton(AF_INET, one, &sa->sin_addr) != 1)
                return sbx_error_set(err, SBX_EINVAL, 0,
                                     "egress upstream resolver `%.*s` is not a.b.c.d[:port]",
                                     (int)w, p);
            e->n_up++;
        }
        p += w;
        p += strspn(p, " ,");
    }
    if (e->n_up == 0)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "egress policies need an upstream resolver (none is configured or "
                             "found in the host's resolv.conf)");
    return 0;
}

static int
bind_one(struct sbx_egress *e, int type, sbx_error **err)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "egress resolver socket");
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&e->listen, sizeof e->listen) < 0) {
        int saved = errno;
        (void)close(fd);
        char a[INET_ADDRSTRLEN];
        (void)inet_ntop(AF_INET, &e->listen.sin_addr, a, sizeof a);
        return sbx_error_set(err, saved == EADDRINUSE ? SBX_EEXISTS : SBX_EGENERIC, saved,
                             "egress resolver: bind %s %s:53%s", type == SOCK_DGRAM ? "UDP" : "TCP",
                             a,
                             saved == EADDRINUSE ? " (another program, e.g. a DNS server on "
                                                   "0.0.0.0:53, has the port)"
                                                 : "");
    }
    if (type == SOCK_STREAM && listen(fd, 64) < 0) {
        (void)close(fd);
        return sbx_error_set(err, SBX_EGENERIC, errno, "egress resolver: listen");
    }
    return fd;
}

/* The credential proxy on the gateway's port 80. Without it (the port is taken) policies work
 * as before and only a sandbox's vault bindings are refused (sbx_egress_vault says why). */
static void
open_proxy(struct sbx_egress *e)
{
    sbx_autoerror sbx_error *perr = NULL;
    if (sbx_credproxy_open(&e->proxy, e, e->listen.sin_addr, &perr) < 0) {
        (void)snprintf(e->proxy_why, sizeof e->proxy_why, "%s", sbx_error_msg(perr));
        sbx_warn("egress: %s", e->proxy_why);
    }
}

int
sbx_egress_open(struct sbx_egress **out, const struct sbx_egress_config *cfg, sbx_error **err)
{
    struct sbx_egress *e = sbx_xcalloc(1, sizeof *e);
    e->udp = e->tcp = e->stop_pipe[0] = e->stop_pipe[1] = -1;
    pthread_mutex_init(&e->ops, NULL);
    pthread_mutex_init(&e->mu, NULL);
    sbx_cond_init_monotonic(&e->cv);
    (void)snprintf(e->bridge, sizeof e->bridge, "%s", cfg->bridge);
    e->listen.sin_family = AF_INET;
    e->listen.sin_port = htons(53);
    int r = inet_pton(AF_INET, cfg->listen, &e->listen.sin_addr) == 1
                ? 0
                : sbx_error_set(err, SBX_EINVAL, 0, "egress: bad gateway `%s`", cfg->listen);
    if (r == 0)
        r = parse_upstream(e, cfg->upstream, err);
    if (r == 0)
        r = sbx_nft_new(&e->nft, err);
    /* a restart: what running sandboxes learned before is forgotten; they resolve again */
    if (r == 0)
        r = sbx_nft_egress_flush(e->nft, e->bridge, err);
    if (r == 0 && (e->udp = bind_one(e, SOCK_DGRAM, err)) < 0)
        r = e->udp;
    if (r == 0 && (e->tcp = bind_one(e, SOCK_STREAM, err)) < 0)
        r = e->tcp;
    if (r == 0 && pipe2(e->stop_pipe, O_CLOEXEC) < 0)
        r = sbx_error_set(err, SBX_EGENERIC, errno, "egress: pipe");
    e->cfg = (struct sbx_egress_config){
        .values = cfg->values,
        .ca = cfg->ca,
        .values_arg = cfg->values_arg,
        .upstream_ca = cfg->upstream_ca ? sbx_xstrdup(cfg->upstream_ca) : NULL};
    if (r == 0)
        open_proxy(e);
    if (r == 0) {
        e->started = pthread_create(&e->udp_t, NULL, udp_loop, e) == 0;
        e->started = e->started && pthread_create(&e->tcp_t, NULL, tcp_loop, e) == 0;
        e->started = e->started && pthread_create(&e->refresh_t, NULL, refresh_loop, e) == 0;
        if (!e->started)
            r = sbx_error_set(err, SBX_ENOMEM, 0, "egress: threads");
    }
    if (r < 0) {
        sbx_egress_close(e);
        return sbx_error_wrap(err, "egress resolver on %s", cfg->listen);
    }
    *out = e;
    return 0;
}

void
sbx_egress_close(struct sbx_egress *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->stop_pipe[1] >= 0)
        (void)!write(e->stop_pipe[1], "x", 1);
    if (e->started) {
        (void)pthread_join(e->udp_t, NULL);
        (void)pthread_join(e->tcp_t, NULL);
        (void)pthread_join(e->refresh_t, NULL);
    }
    /* workers end within UPSTREAM_MS * UPSTREAM_MAX or TCP_IDLE_S */
    pthread_mutex_lock(&e->mu);
    while (e->workers)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    sbx_credproxy_close(e->proxy); /* (its connections end before the entries go) */
    for (size_t i = 0; i < e->n; i++)
        entry_free(&e->entries[i]);
    free(e->entries);
    for (int i = 0; i < 2; i++) {
        if (e->stop_pipe[i] >= 0)
            (void)close(e->stop_pipe[i]);
    }
    if (e->udp >= 0)
        (void)close(e->udp);
    if (e->tcp >= 0)
        (void)close(e->tcp);
    sbx_nft_free(e->nft);
    free((char *)e->cfg.upstream_ca);
    pthread_mutex_destroy(&e->ops);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

/* ---- the credential proxy's view (credproxy.h) ---- */

int
sbx_egress_vault(struct sbx_egress *e, const char *id, const json_t *bindings, sbx_error **err)
{
    bool on = bindings && json_array_size(bindings) > 0;
    if (on && !e->proxy)
        return sbx_error_set(err, SBX_EUNAVAIL, 0,
                             "the credential proxy is not running on this server (%s)",
                             e->proxy_why);
    pthread_mutex_lock(&e->ops);
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_id(e, id);
    char addr[INET_ADDRSTRLEN] = "";
    if (en) {
        json_decref(en->bindings);
        en->bindings = on ? json_deep_copy(bindings) : NULL;
        if (on && !en->pairs)
            en->pairs = sbx_xcalloc(PAIRS_MAX, sizeof *en->pairs);
        (void)snprintf(addr, sizeof addr, "%s", en->addr);
    }
    pthread_mutex_unlock(&e->mu);
    /* the redirect follows the bindings: a sandbox without any is never redirected */
    int r = addr[0] ? sbx_nft_credproxy(e->nft, e->bridge, addr, on, err) : 0;
    pthread_mutex_unlock(&e->ops);
    if (!en && on)
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "credential proxy: `%s` is not policed", id);
    return r < 0 ? sbx_error_wrap(err, "credential proxy of `%s`", id) : 0;
}

json_t *
sbx_egress_bindings_of(struct sbx_egress *e, struct in_addr src, char id[64])
{
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_addr(e, src);
    json_t *b = en && en->bindings ? json_deep_copy(en->bindings) : NULL;
    if (b)
        (void)snprintf(id, 64, "%s", en->id);
    pthread_mutex_unlock(&e->mu);
    return b;
}

bool
sbx_egress_answered(struct sbx_egress *e, struct in_addr src, const char *name, struct in_addr addr)
{
    uint64_t now = sbx_now_ms();
    bool found = false;
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_addr(e, src);
    for (size_t i = 0; en && en->pairs && !found && i < PAIRS_MAX; i++) {
        const struct pair *p = &en->pairs[i];
        found =
            p->until_ms > now && p->addr.s_addr == addr.s_addr && strcasecmp(p->name, name) == 0;
    }
    pthread_mutex_unlock(&e->mu);
    return found;
}

int
sbx_egress_values(struct sbx_egress *e, const char *id, json_t **values, sbx_error **err)
{
    if (!e->cfg.values)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "no credential values here");
    return e->cfg.values(e->cfg.values_arg, id, values, err);
}

int
sbx_egress_ca(struct sbx_egress *e, const char *id, char **key_pem, char **cert_pem,
              sbx_error **err)
{
    if (!e->cfg.ca)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "no credential proxy CA here");
    return e->cfg.ca(e->cfg.values_arg, id, key_pem, cert_pem, err);
}

const char *
sbx_egress_upstream_ca(const struct sbx_egress *e)
{
    return e->cfg.upstream_ca;
}
