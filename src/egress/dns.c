/*
 * dns.c - the egress resolver and the policed sandboxes' nftables sets (see egress.h).
 *
 * The resolver answers on listeners: UDP + TCP sockets on port 53. Bridge mode has one, on the
 * bridge's gateway, shared by every sandbox (the querying sandbox is its source address). Netns
 * mode gives each sandbox its own, made inside its network namespace (a socket stays in the
 * namespace it was made in), so the listener itself says whose query it is; the sets are that
 * namespace's own, and so is the nftables context that fills them (made and used only by
 * threads inside it, sbx_netns_run). The answering core (policy, upstream, learning, the
 * block refresher) is one for both: only where a decision is written differs (sink_*).
 *
 * Threads: one polls every listener (and, in netns mode, each sandbox's init through a pidfd:
 * when it exits, its listener is closed at once, so nothing of ours keeps its namespace
 * alive), one refreshes the block sets; each query or connection is handled on a thread of its
 * own, at most WORKERS_MAX at once (a flood of queries from a sandbox is dropped beyond that,
 * never queued without bound), TCP connections at most TCP_MAX at once, each closed after
 * TCP_IDLE_S without a query.
 *
 * Why a hostile sandbox cannot widen its own reach through this resolver: the querying sandbox
 * is its source address (bridge: its veth; the bridge drops spoofed sources: a sandbox cannot
 * send as another, see docs/network.md) or the listener in its own namespace (netns: no other
 * sandbox can reach it), the policy is evaluated on the name exactly as it goes upstream
 * (dnsmsg.c), and what it learns is the answer's addresses for itself only (bridge: (its own
 * address . address) in egress_ok4; netns: its own table's ok4), added before the answer is
 * sent. Upstream queries are made from the server's own namespace, never the sandbox's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/netns.h"
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
#define UDP_BURST       64 /* datagrams read from one listener per poll round */
#define APPLY_BUDGET_MS 3000
#define PAIRS_MAX       256 /* (name, address) answers kept per sandbox with a vault */

/* An address the resolver answered for a name (the credential proxy's proof that a
 * connection's destination is the name's: docs/network.md "Credential proxy"). */
struct pair {
    char name[SBX_EGRESS_NAME_MAX + 1];
    struct in_addr addr;
    uint64_t until_ms; /* sbx_now_ms */
};

/* Where queries arrive. Reference-counted: the poll loop, each query's worker and the entry
 * that owns it hold references; the sockets close with the last. */
struct listener {
    atomic_int refs;
    int udp, tcp;
    int cp[2]; /* netns mode: the credential proxy's listeners, [0] port 80 redirected to it,
                * [1] port 443 (only with a CA callback: HTTPS); -1: none */
    unsigned cp_port[2];
    int netns;           /* netns mode: its namespace (nft commands run there); -1: the bridge's */
    int pidfd;           /* netns mode: the sandbox's init; readable once it exited; -1: none */
    struct sbx_nft *nft; /* netns mode: made and used only inside netns */
    dev_t ns_dev;
    ino_t ns_ino;
};

struct entry {
    /* changes with every policy applied: what a query decided under an older one is not
     * learned (see learn) */
    uint64_t gen;
    char id[64];
    char addr[INET_ADDRSTRLEN];
    struct in_addr in;
    struct sbx_egress_policy *policy;
    json_t *bindings;    /* its Credential Vault's bindings; NULL: no vault */
    struct pair *pairs;  /* PAIRS_MAX of them once it has a vault */
    bool netns;          /* netns mode: known by ln, not by address */
    struct listener *ln; /* netns mode: its own (a reference); NULL once its init exited */
};

struct sbx_egress {
    char bridge[16]; /* "": netns mode */
    struct sockaddr_in listen;
    struct sockaddr_in up[UPSTREAM_MAX];
    size_t n_up;
    struct sbx_nft *nft;     /* bridge mode */
    struct listener *shared; /* bridge mode: the gateway's */
    int wake[2];             /* the poll loop: listeners changed, or stopping */
    pthread_t serve_t, refresh_t;
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

/* ---- listeners ---- */

static struct listener *
listener_new(void)
{
    struct listener *ln = sbx_xcalloc(1, sizeof *ln);
    atomic_init(&ln->refs, 1);
    ln->udp = ln->tcp = ln->cp[0] = ln->cp[1] = ln->netns = ln->pidfd = -1;
    return ln;
}

static struct listener *
listener_ref(struct listener *ln)
{
    if (ln)
        atomic_fetch_add(&ln->refs, 1);
    return ln;
}

static void
listener_unref(struct listener *ln)
{
    if (!ln || atomic_fetch_sub(&ln->refs, 1) != 1)
        return;
    const int fds[] = {ln->udp, ln->tcp, ln->cp[0], ln->cp[1], ln->netns, ln->pidfd};
    for (size_t i = 0; i < 6; i++) {
        if (fds[i] >= 0)
            (void)close(fds[i]);
    }
    sbx_nft_free(ln->nft);
    free(ln);
}

static void
wake_loop(struct sbx_egress *e)
{
    if (e->wake[1] >= 0)
        (void)!write(e->wake[1], "x", 1);
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

/* Caller holds e->mu. Bridge entries only. */
static struct entry *
find_addr(struct sbx_egress *e, struct in_addr in)
{
    for (size_t i = 0; i < e->n; i++) {
        if (!e->entries[i].netns && e->entries[i].in.s_addr == in.s_addr)
            return &e->entries[i];
    }
    return NULL;
}

/* Caller holds e->mu. */
static struct entry *
find_gen(struct sbx_egress *e, uint64_t gen)
{
    for (size_t i = 0; i < e->n; i++) {
        if (e->entries[i].gen == gen)
            return &e->entries[i];
    }
    return NULL;
}

/* Who asked: the listener the query came in on, and its source (what tells sandboxes apart
 * on the bridge's shared listener). */
struct asker {
    const struct listener *ln;
    struct in_addr src;
};

/* Caller holds e->mu: the entry of the sandbox that asked. */
static struct entry *
find_asker(struct sbx_egress *e, const struct asker *who)
{
    if (who->ln == e->shared)
        return find_addr(e, who->src);
    for (size_t i = 0; i < e->n; i++) {
        if (e->entries[i].ln == who->ln)
            return &e->entries[i];
    }
    return NULL;
}

static void
entry_free(struct entry *en)
{
    sbx_egress_policy_free(en->policy);
    listener_unref(en->ln);
    json_decref(en->bindings);
    free(en->pairs);
    en->policy = NULL;
    en->ln = NULL;
    en->bindings = NULL;
    en->pairs = NULL;
}

/* ---- sinks: where a decision is written (the bridge's sets, or the sandbox's own) ---- */

struct ns_call {
    struct listener *ln;
    enum sbx_nft_egress_mode mode;            /* ns_mode_fn */
    const struct sbx_nft_egress_elems *elems; /* ns_add_fn */
    unsigned port, tls_port;                  /* ns_proxy_fn */
    int r;
    sbx_error *err;
};

/* Inside the sandbox's namespace: the context is made here on first use, so its netlink
 * socket is this namespace's. */
static void
ns_mode_fn(void *arg)
{
    struct ns_call *c = arg;
    c->r = c->ln->nft ? 0 : sbx_nft_new(&c->ln->nft, &c->err);
    if (c->r == 0)
        c->r = sbx_nft_ns_egress(c->ln->nft, c->mode, &c->err);
}

static void
ns_add_fn(void *arg)
{
    struct ns_call *c = arg;
    c->r = c->ln->nft ? 0 : sbx_nft_new(&c->ln->nft, &c->err);
    if (c->r == 0)
        c->r = sbx_nft_ns_egress_add(c->ln->nft, c->elems, &c->err);
}

static void
ns_proxy_fn(void *arg)
{
    struct ns_call *c = arg;
    c->r = c->ln->nft ? 0 : sbx_nft_new(&c->ln->nft, &c->err);
    if (c->r == 0)
        c->r = sbx_nft_ns_credproxy(c->ln->nft, c->port, c->tls_port, &c->err);
}

static int
ns_call(struct ns_call *c, void (*fn)(void *), sbx_error **err)
{
    int r = sbx_netns_run(c->ln->netns, fn, c);
    if (r < 0) {
        sbx_error_clear(&c->err);
        return sbx_error_set(err, SBX_EGENERIC, -r, "egress: enter the sandbox's network");
    }
    if (c->r < 0)
        sbx_error_move(err, &c->err);
    return c->r;
}

/* Caller holds e->mu. The sandbox's mode, and what it learned before forgotten. */
static int
sink_mode(struct sbx_egress *e, const struct entry *en, enum sbx_nft_egress_mode mode,
          sbx_error **err)
{
    if (en->netns) {
        struct ns_call c = {.ln = en->ln, .mode = mode};
        return en->ln ? ns_call(&c, ns_mode_fn, err) : 0;
    }
    int r = sbx_nft_egress_mode(e->nft, e->bridge, en->addr, mode, err);
    return r < 0 ? r : sbx_nft_egress_forget(e->nft, e->bridge, en->addr, err);
}

/* Caller holds e->mu. */
static int
sink_add(struct sbx_egress *e, const struct entry *en, struct sbx_nft_egress_elems *el,
         sbx_error **err)
{
    if (en->netns) {
        struct ns_call c = {.ln = en->ln, .elems = el};
        return en->ln ? ns_call(&c, ns_add_fn, err) : 0;
    }
    el->saddr = en->addr;
    return sbx_nft_egress_add(e->nft, e->bridge, el, err);
}

/* What learn needs: whose answer (the policy generation it was decided under: one sandbox's
 * one policy), into which set, how long past the TTL. */
struct learn_ctx {
    uint64_t gen;
    bool block;
    unsigned extra_s;
};

/* The action for name from who; -1 when it is no policed sandbox. Fills ctx (its policy's
 * generation; ctx->block false). */
static int
decide(struct sbx_egress *e, const struct asker *who, const char *name, struct learn_ctx *ctx,
       bool *deny_mode)
{
    int r = -1;
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_asker(e, who);
    if (en) {
        r = (int)sbx_egress_policy_eval(en->policy, name);
        *deny_mode = en->policy->dflt == SBX_EGRESS_DENY;
        *ctx = (struct learn_ctx){.gen = en->gen};
    }
    pthread_mutex_unlock(&e->mu);
    return r;
}

/* ---- upstream ---- */

/* Send q to the upstreams in turn over UDP; the reply (same id, a response) into out. The
 * sockets are the server's own (its namespace), whoever asked. */
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

/* Put the A records of reply into the sandbox's allowed (or blocked) addresses: only while the
 * policy it was decided under is still the sandbox's (-2 otherwise). Checked and added under
 * e->mu, which an apply holds from its new generation to the end of its forget: an answer of
 * the old policy is either added before the forget (which removes it) or not at all. */
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
    struct sbx_nft_egress_elems el = {
        .block = ctx->block, .daddrs = list, .n = na, .timeout_s = ttl + ctx->extra_s};
    sbx_autoerror sbx_error *err = NULL;
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_gen(e, ctx->gen);
    int r = en ? sink_add(e, en, &el, &err) : -2;
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
    struct entry *en = find_gen(e, ctx->gen);
    for (size_t i = 0; en && en->pairs && i < na; i++) {
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

/* The answer to who's query q (n bytes) into out; its length (0: no answer). */
static size_t
answer(struct sbx_egress *e, const struct asker *who, const uint8_t *q, size_t n, uint8_t *out,
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
    int act = decide(e, who, qq.name, &ctx, &deny_mode);
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
    struct listener *ln; /* a reference: its socket answers */
    struct sockaddr_in from;
    size_t n;
    uint8_t q[UDP_MAX];
};

static void *
udp_worker(void *arg)
{
    struct udp_job *j = arg;
    uint8_t out[UDP_MAX];
    struct asker who = {j->ln, j->from.sin_addr};
    size_t len = answer(j->e, &who, j->q, j->n, out, sizeof out);
    if (len)
        (void)sendto(j->ln->udp, out, len, 0, (struct sockaddr *)&j->from, sizeof j->from);
    worker_done(j->e, false);
    listener_unref(j->ln);
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

/* Up to UDP_BURST queries waiting on ln, each to a worker. */
static void
on_udp(struct sbx_egress *e, struct listener *ln)
{
    for (int k = 0; k < UDP_BURST; k++) {
        struct udp_job *j = sbx_xcalloc(1, sizeof *j);
        socklen_t fl = sizeof j->from;
        ssize_t n =
            recvfrom(ln->udp, j->q, sizeof j->q, MSG_DONTWAIT, (struct sockaddr *)&j->from, &fl);
        j->e = e;
        j->n = n > 0 ? (size_t)n : 0;
        if (n < 0) {
            free(j);
            return;
        }
        /* beyond the cap the query is dropped: the sandbox's resolver library retries */
        if (n == 0 || fl != sizeof j->from || !worker_take(e, false)) {
            free(j);
            continue;
        }
        j->ln = listener_ref(ln);
        if (!spawn(udp_worker, j)) {
            worker_done(e, false);
            listener_unref(ln);
            free(j);
        }
    }
}

struct tcp_job {
    struct sbx_egress *e;
    struct listener *ln; /* a reference: who asks */
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
        struct asker who = {j->ln, j->from};
        size_t len = answer(j->e, &who, q, n, out + 2, SBX_DNS_MSG_MAX);
        if (!len)
            break;
        out[0] = (uint8_t)(len >> 8);
        out[1] = (uint8_t)len;
        if (send(j->fd, out, len + 2, MSG_NOSIGNAL) != (ssize_t)(len + 2))
            break;
    }
    (void)close(j->fd);
    worker_done(j->e, true);
    listener_unref(j->ln);
    free(j);
    return NULL;
}

static void
on_tcp(struct sbx_egress *e, struct listener *ln)
{
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    /* the listener is non-blocking, the connection is not (the worker's reads wait, up to
     * TCP_IDLE_S) */
    int fd = accept4(ln->tcp, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (!worker_take(e, true)) {
        (void)close(fd);
        return;
    }
    struct tcp_job *j = sbx_xcalloc(1, sizeof *j);
    *j = (struct tcp_job){e, listener_ref(ln), fd, from.sin_addr};
    if (!spawn(tcp_worker, j)) {
        worker_done(e, true);
        listener_unref(ln);
        (void)close(fd);
        free(j);
    }
}

/* A connection redirected to the credential proxy's listener in ln's namespace (tls: the
 * port-443 one): the listener says whose it is (a process of the sandbox can reach no other
 * sandbox's namespace). */
static void
on_proxy(struct sbx_egress *e, struct listener *ln, bool tls)
{
    char id[64] = "";
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->n && !id[0]; i++) {
        if (e->entries[i].ln == ln)
            (void)snprintf(id, sizeof id, "%s", e->entries[i].id);
    }
    pthread_mutex_unlock(&e->mu);
    if (id[0])
        sbx_credproxy_accept(e->proxy, ln->cp[tls], tls, id, ln->netns);
    else { /* its sandbox went: nobody's connection */
        int fd = accept4(ln->cp[tls], NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            (void)close(fd);
    }
}

/* The init of ln's sandbox exited: its listener goes now (its sockets would keep the dead
 * namespace alive). The entry and its policy stay until the provider drops it (or applies it
 * again in a new namespace). */
static void
on_exit_of(struct sbx_egress *e, struct listener *ln)
{
    struct listener *gone = NULL;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->n && !gone; i++) {
        if (e->entries[i].ln == ln) {
            gone = ln;
            e->entries[i].ln = NULL;
        }
    }
    pthread_mutex_unlock(&e->mu);
    listener_unref(gone);
}

/* ---- the poll loop ---- */

#define LN_FDS 5 /* polled per listener */

struct pollset {
    struct listener **ls;
    size_t n;
    struct pollfd *p; /* [0] the wake pipe, then udp, tcp, pidfd, cp[0], cp[1] of each */
};

static void
pollset_free(struct pollset *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        listener_unref(ps->ls[i]);
    free(ps->ls);
    free(ps->p);
}

/* Caller holds e->mu. */
static void
pollset_of(struct sbx_egress *e, struct pollset *ps)
{
    ps->ls = sbx_xcalloc(e->n + 1, sizeof(struct listener *));
    ps->n = 0;
    if (e->shared)
        ps->ls[ps->n++] = listener_ref(e->shared);
    for (size_t i = 0; i < e->n; i++) {
        if (e->entries[i].ln && e->entries[i].ln->udp >= 0)
            ps->ls[ps->n++] = listener_ref(e->entries[i].ln);
    }
    ps->p = sbx_xcalloc(1 + LN_FDS * ps->n, sizeof *ps->p);
    ps->p[0] = (struct pollfd){.fd = e->wake[0], .events = POLLIN};
    for (size_t i = 0; i < ps->n; i++) {
        const struct listener *ln = ps->ls[i];
        const int fds[] = {ln->udp, ln->tcp, ln->pidfd, ln->cp[0], ln->cp[1]};
        for (size_t k = 0; k < LN_FDS; k++) /* poll ignores a negative fd */
            ps->p[1 + LN_FDS * i + k] = (struct pollfd){.fd = fds[k], .events = POLLIN};
    }
}

static void
serve_round(struct sbx_egress *e, struct pollset *ps)
{
    while (poll(ps->p, 1 + LN_FDS * ps->n, -1) < 0) {
        if (errno != EINTR)
            return;
    }
    if (ps->p[0].revents) {
        char buf[64];
        while (read(e->wake[0], buf, sizeof buf) > 0)
            ;
    }
    for (size_t i = 0; i < ps->n; i++) {
        const struct pollfd *p = &ps->p[1 + LN_FDS * i];
        if (p[0].revents & POLLIN)
            on_udp(e, ps->ls[i]);
        if (p[1].revents & POLLIN)
            on_tcp(e, ps->ls[i]);
        if (p[3].revents & POLLIN)
            on_proxy(e, ps->ls[i], false);
        if (p[4].revents & POLLIN)
            on_proxy(e, ps->ls[i], true);
        if (p[2].revents)
            on_exit_of(e, ps->ls[i]);
    }
}

static void *
serve_loop(void *arg)
{
    struct sbx_egress *e = arg;
    for (;;) {
        struct pollset ps = {0};
        pthread_mutex_lock(&e->mu);
        bool stop = e->stopping;
        if (!stop)
            pollset_of(e, &ps);
        pthread_mutex_unlock(&e->mu);
        if (stop)
            return NULL;
        serve_round(e, &ps);
        pollset_free(&ps);
    }
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
    j->ctx = (struct learn_ctx){.gen = en->gen, .block = true, .extra_s = 2 * REFRESH_S};
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
        const struct entry *en = &e->entries[i];
        /* (a netns sandbox whose init exited has nowhere to put them) */
        if (en->policy->dflt == SBX_EGRESS_ALLOW && (!en->netns || en->ln) &&
            (!id || strcmp(id, en->id) == 0))
            block_job_of(en, &jobs[(*n)++]);
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

/* Drop the bridge entries at address in other than id's (stale: the address has a new
 * holder). */
static void
drop_stale(struct sbx_egress *e, struct in_addr in, const char *id)
{
    pthread_mutex_lock(&e->mu);
    size_t kept = 0;
    for (size_t i = 0; i < e->n; i++) {
        struct entry *en = &e->entries[i];
        if (!en->netns && en->in.s_addr == in.s_addr && (!id || strcmp(en->id, id) != 0))
            entry_free(en);
        else
            e->entries[kept++] = *en;
    }
    e->n = kept;
    pthread_mutex_unlock(&e->mu);
}

/* The same policy? (A vault change enforces the unchanged policy again: what the sandbox
 * learned stays then.) */
static bool
policy_equal(const struct sbx_egress_policy *x, const struct sbx_egress_policy *y)
{
    if (!x || !y)
        return false;
    json_t *a = sbx_egress_policy_json(x);
    json_t *b = sbx_egress_policy_json(y);
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

/* Is id at in policed by this very policy already? Caller holds e->mu. */
static bool
same_policy(struct sbx_egress *e, const char *id, struct in_addr in,
            const struct sbx_egress_policy *policy)
{
    const struct entry *en = find_id(e, id);
    return en && en->in.s_addr == in.s_addr && policy_equal(en->policy, policy);
}

/* Caller holds e->mu: id's entry, made when missing. */
static struct entry *
entry_of(struct sbx_egress *e, const char *id)
{
    struct entry *en = find_id(e, id);
    if (en)
        return en;
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->entries = sbx_xrealloc(e->entries, e->cap * sizeof *e->entries);
    }
    en = &e->entries[e->n++];
    memset(en, 0, sizeof *en);
    (void)snprintf(en->id, sizeof en->id, "%s", id);
    return en;
}

/* Caller holds e->mu (learn waits): the new policy and generation, then the sink: the mode
 * (the sandbox is policed from here on), and what the old policy let it learn goes; answers of
 * the old policy still in flight are refused by learn from now on. No moment is looser than
 * either policy. */
static int
enforce(struct sbx_egress *e, struct entry *en, const struct sbx_egress_policy *policy,
        sbx_error **err)
{
    sbx_egress_policy_free(en->policy);
    en->policy = sbx_egress_policy_dup(policy);
    en->gen = ++e->gens;
    enum sbx_nft_egress_mode mode =
        policy->dflt == SBX_EGRESS_DENY ? SBX_NFT_EGRESS_DENY : SBX_NFT_EGRESS_ALLOW;
    return sink_mode(e, en, mode, err);
}

static int
apply_locked(struct sbx_egress *e, const char *id, struct in_addr in,
             const struct sbx_egress_policy *policy, sbx_error **err)
{
    /* another sandbox's entry at this address is stale (it went while we were not told) */
    drop_stale(e, in, id);
    pthread_mutex_lock(&e->mu);
    if (same_policy(e, id, in, policy)) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    struct entry *en = entry_of(e, id);
    (void)inet_ntop(AF_INET, &in, en->addr, sizeof en->addr);
    en->in = in;
    if (en->pairs) /* what the old policy let it resolve is no proof under the new one */
        memset(en->pairs, 0, PAIRS_MAX * sizeof *en->pairs);
    int r = enforce(e, en, policy, err);
    pthread_mutex_unlock(&e->mu);
    return r < 0 ? sbx_error_wrap(err, "egress policy of `%s`", id) : 0;
}

/* Allow default: the exact deny targets' addresses, blocked now as far as APPLY_BUDGET_MS
 * allows (an unanswering upstream must not hold the API), the rest by the refresher. */
static void
block_now(struct sbx_egress *e, const char *id)
{
    size_t n = 0;
    struct block_job *jobs = block_jobs(e, id, &n);
    uint64_t deadline = sbx_now_ms() + APPLY_BUDGET_MS;
    for (size_t i = 0; i < n; i++)
        resolve_blocks(e, &jobs[i], deadline);
    block_jobs_free(jobs, n);
}

int
sbx_egress_apply(struct sbx_egress *e, const char *id, const char *addr,
                 const struct sbx_egress_policy *policy, sbx_error **err)
{
    struct in_addr in;
    if (!e->shared)
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: not a bridge's resolver");
    if (inet_pton(AF_INET, addr, &in) != 1 || strlen(id) >= sizeof e->entries[0].id)
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: bad sandbox `%s` at `%s`", id, addr);
    pthread_mutex_lock(&e->ops);
    int r = apply_locked(e, id, in, policy, err);
    pthread_mutex_unlock(&e->ops);
    if (r < 0)
        return r;
    block_now(e, id);
    return 0;
}

/* ---- netns mode: a listener inside the sandbox's namespace ---- */

struct bind_call {
    const struct sockaddr_in *at;
    int udp, tcp;
    int err;
    const char *what;
};

/* Inside the sandbox's namespace. No SO_REUSEADDR on the UDP socket: with it on both, a
 * process of the sandbox could bind the same address and port and take queries (which would
 * gain it nothing: only sbx's answers fill its sets, but its DNS would be its own). */
static void
bind_fn(void *arg)
{
    struct bind_call *c = arg;
    int one = 1;
    c->what = "socket";
    c->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    c->tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->udp < 0 || c->tcp < 0) {
        c->err = errno;
        return;
    }
    (void)setsockopt(c->tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    c->what = "bind";
    if (bind(c->udp, (const struct sockaddr *)c->at, sizeof *c->at) < 0 ||
        bind(c->tcp, (const struct sockaddr *)c->at, sizeof *c->at) < 0) {
        c->err = errno;
        return;
    }
    c->what = "listen";
    if (listen(c->tcp, 64) < 0)
        c->err = errno;
}

static int
listener_bind(struct sbx_egress *e, struct listener *ln, sbx_error **err)
{
    struct bind_call c = {.at = &e->listen, .udp = -1, .tcp = -1, .what = "setns"};
    int r = sbx_netns_run(ln->netns, bind_fn, &c);
    if (r < 0)
        c.err = -r;
    if (c.err) {
        if (c.udp >= 0)
            (void)close(c.udp);
        if (c.tcp >= 0)
            (void)close(c.tcp);
        char a[INET_ADDRSTRLEN];
        (void)inet_ntop(AF_INET, &e->listen.sin_addr, a, sizeof a);
        return sbx_error_set(err, SBX_EGENERIC, c.err,
                             "egress resolver in the sandbox's network: %s %s:53%s", c.what, a,
                             c.err == EADDRINUSE ? " (a process of the sandbox has the port)" : "");
    }
    /* under e->mu: the poll loop reads them there */
    pthread_mutex_lock(&e->mu);
    ln->udp = c.udp;
    ln->tcp = c.tcp;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* A listener (no sockets yet) for the namespace netns_fd of the process pidfd (both dup'ed). */
static int
listener_for(int netns_fd, int pidfd, struct listener **out, sbx_error **err)
{
    struct listener *ln = listener_new();
    struct stat st;
    ln->netns = fcntl(netns_fd, F_DUPFD_CLOEXEC, 3);
    ln->pidfd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
    if (ln->netns < 0 || ln->pidfd < 0 || fstat(ln->netns, &st) < 0) {
        int saved = errno;
        listener_unref(ln);
        return sbx_error_set(err, SBX_EGENERIC, saved, "egress: the sandbox's namespace");
    }
    ln->ns_dev = st.st_dev;
    ln->ns_ino = st.st_ino;
    *out = ln;
    return 0;
}

static bool
same_ns(const struct listener *ln, int netns_fd)
{
    struct stat st;
    return ln && fstat(netns_fd, &st) == 0 && st.st_dev == ln->ns_dev && st.st_ino == ln->ns_ino;
}

/* Caller holds e->ops. */
static int
apply_netns_locked(struct sbx_egress *e, const char *id, const struct sbx_egress_netns *ns,
                   const struct sbx_egress_policy *policy, sbx_error **err)
{
    pthread_mutex_lock(&e->mu);
    struct entry *en = entry_of(e, id);
    en->netns = true;
    struct listener *old = NULL;
    int r = 0;
    /* the same policy in the same namespace (a vault change enforces it again): what the
     * sandbox learned stays, as on the bridge */
    if (same_ns(en->ln, ns->netns_fd) && en->ln->udp >= 0 && policy_equal(en->policy, policy)) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    if (en->pairs) /* what the old policy let it resolve is no proof under the new one */
        memset(en->pairs, 0, PAIRS_MAX * sizeof *en->pairs);
    /* a new namespace (a first start, a start after a stop, a server restart): a listener of
     * its own; the same one (a PATCH): the same listener */
    if (!same_ns(en->ln, ns->netns_fd)) {
        struct listener *ln = NULL;
        r = listener_for(ns->netns_fd, ns->pidfd, &ln, err);
        old = en->ln;
        en->ln = ln;
    }
    /* the rules first: a sandbox whose resolver cannot be made still reaches nothing its
     * policy does not allow */
    if (r == 0)
        r = enforce(e, en, policy, err);
    else if (!en->policy) /* a new entry that never got a policy */
        *en = e->entries[--e->n];
    struct listener *ln = r == 0 ? listener_ref(en->ln) : NULL;
    bool bound = ln && ln->udp >= 0;
    pthread_mutex_unlock(&e->mu);
    listener_unref(old);
    if (r == 0 && !bound)
        r = listener_bind(e, ln, err);
    listener_unref(ln);
    wake_loop(e);
    return r < 0 ? sbx_error_wrap(err, "egress policy of `%s`", id) : 0;
}

int
sbx_egress_apply_netns(struct sbx_egress *e, const char *id, const struct sbx_egress_netns *ns,
                       const struct sbx_egress_policy *policy, sbx_error **err)
{
    if (e->shared)
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: a bridge's resolver");
    if (strlen(id) >= sizeof e->entries[0].id)
        return sbx_error_set(err, SBX_EINVAL, 0, "egress: bad sandbox `%s`", id);
    pthread_mutex_lock(&e->ops);
    int r = apply_netns_locked(e, id, ns, policy, err);
    pthread_mutex_unlock(&e->ops);
    if (r < 0)
        return r;
    block_now(e, id);
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
    if (!e->shared || inet_pton(AF_INET, addr, &in) != 1)
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
        if (!en->netns)
            (void)snprintf(addr, sizeof addr, "%s", en->addr);
        /* netns: its table goes with its namespace; its listener goes now */
        struct entry dead = *en;
        *en = e->entries[--e->n];
        entry_free(&dead);
    }
    pthread_mutex_unlock(&e->mu);
    wake_loop(e);
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

/* Bridge mode: the gateway's listener, and the learned sets emptied (a restart: sandboxes
 * resolve again). */
static int
open_bridge(struct sbx_egress *e, sbx_error **err)
{
    int r = sbx_nft_new(&e->nft, err);
    if (r == 0)
        r = sbx_nft_egress_flush(e->nft, e->bridge, err);
    if (r < 0)
        return r;
    e->shared = listener_new();
    if ((e->shared->udp = bind_one(e, SOCK_DGRAM, err)) < 0)
        return e->shared->udp;
    if ((e->shared->tcp = bind_one(e, SOCK_STREAM, err)) < 0)
        return e->shared->tcp;
    return 0;
}

static int
start_threads(struct sbx_egress *e, sbx_error **err)
{
    if (pipe2(e->wake, O_CLOEXEC | O_NONBLOCK) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "egress: pipe");
    e->started = pthread_create(&e->serve_t, NULL, serve_loop, e) == 0;
    if (e->started && pthread_create(&e->refresh_t, NULL, refresh_loop, e) != 0) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_mutex_unlock(&e->mu);
        wake_loop(e);
        (void)pthread_join(e->serve_t, NULL);
        e->started = false;
    }
    return e->started ? 0 : sbx_error_set(err, SBX_ENOMEM, 0, "egress: threads");
}

int
sbx_egress_open(struct sbx_egress **out, const struct sbx_egress_config *cfg, sbx_error **err)
{
    struct sbx_egress *e = sbx_xcalloc(1, sizeof *e);
    e->wake[0] = e->wake[1] = -1;
    pthread_mutex_init(&e->ops, NULL);
    pthread_mutex_init(&e->mu, NULL);
    sbx_cond_init_monotonic(&e->cv);
    (void)snprintf(e->bridge, sizeof e->bridge, "%s", cfg->bridge ? cfg->bridge : "");
    e->listen.sin_family = AF_INET;
    e->listen.sin_port = htons(53);
    int r = inet_pton(AF_INET, cfg->listen, &e->listen.sin_addr) == 1
                ? 0
                : sbx_error_set(err, SBX_EINVAL, 0, "egress: bad listen address `%s`", cfg->listen);
    if (r == 0)
        r = parse_upstream(e, cfg->upstream, err);
    if (r == 0 && e->bridge[0])
        r = open_bridge(e, err);
    e->cfg = (struct sbx_egress_config){
        .values = cfg->values,
        .ca = cfg->ca,
        .values_arg = cfg->values_arg,
        .upstream_ca = cfg->upstream_ca ? sbx_xstrdup(cfg->upstream_ca) : NULL};
    if (r == 0 && e->bridge[0])
        open_proxy(e);
    else if (r == 0 && cfg->values) /* netns mode: listeners in each sandbox's namespace */
        r = sbx_credproxy_new(&e->proxy, e, err);
    if (r == 0)
        r = start_threads(e, err);
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
    wake_loop(e);
    if (e->started) {
        (void)pthread_join(e->serve_t, NULL);
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
        if (e->wake[i] >= 0)
            (void)close(e->wake[i]);
    }
    listener_unref(e->shared);
    sbx_nft_free(e->nft);
    free((char *)e->cfg.upstream_ca);
    pthread_mutex_destroy(&e->ops);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

/* ---- the credential proxy's view (credproxy.h) ---- */

/* Inside the sandbox's namespace: the proxy's listener on 127.0.0.1, on a port the kernel
 * picks, so it is one no process of the sandbox holds (a fixed port could have been taken
 * first, e.g. while the server restarted); no SO_REUSEADDR or SO_REUSEPORT, so none can bind
 * it beside ours either. A connection straight to it has no original destination and is
 * closed (credproxy.c). */
struct cp_bind {
    int fd;
    unsigned port;
    int err;
};

static void
cp_bind_fn(void *arg)
{
    struct cp_bind *c = arg;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(c->fd, 64) < 0 ||
        getsockname(c->fd, (struct sockaddr *)&sa, &sl) < 0) {
        c->err = errno;
        return;
    }
    c->port = ntohs(sa.sin_port);
}

/* Listener i (0: for port 80, 1: for port 443) of the proxy in ln's namespace. */
static int
proxy_bind(struct sbx_egress *e, struct listener *ln, int i, sbx_error **err)
{
    struct cp_bind c = {.fd = -1};
    int r = sbx_netns_run(ln->netns, cp_bind_fn, &c);
    if (r < 0 || c.err) {
        if (c.fd >= 0)
            (void)close(c.fd);
        return sbx_error_set(err, SBX_EGENERIC, r < 0 ? -r : c.err,
                             "credential proxy: its listener in the sandbox's network");
    }
    pthread_mutex_lock(&e->mu); /* the poll loop reads it there */
    ln->cp[i] = c.fd;
    ln->cp_port[i] = c.port;
    pthread_mutex_unlock(&e->mu);
    wake_loop(e);
    return 0;
}

/* Netns mode, caller holds e->ops: with bindings (on), the proxy's listeners in the sandbox's
 * namespace (made once per namespace; the port-443 one only when the caller gave a CA
 * callback, i.e. HTTPS can be intercepted) and the namespace's redirect of port 80 (and 443) to
 * them; without, no redirect. When a listener cannot be made, no redirect either (fail closed:
 * nothing is ever redirected to a port that is not the server's). */
static int
vault_netns(struct sbx_egress *e, struct listener *ln, bool on, sbx_error **err)
{
    int r = on && ln->cp[0] < 0 ? proxy_bind(e, ln, 0, err) : 0;
    if (r == 0 && on && e->cfg.ca && ln->cp[1] < 0)
        r = proxy_bind(e, ln, 1, err);
    sbx_autoerror sbx_error *rerr = NULL;
    pthread_mutex_lock(&e->mu);
    struct ns_call c = {.ln = ln,
                        .port = on && r == 0 ? ln->cp_port[0] : 0,
                        .tls_port = on && r == 0 && e->cfg.ca ? ln->cp_port[1] : 0};
    int r2 = ns_call(&c, ns_proxy_fn, &rerr);
    pthread_mutex_unlock(&e->mu);
    if (r == 0 && r2 < 0) {
        sbx_error_move(err, &rerr);
        r = r2;
    }
    return r;
}

int
sbx_egress_vault(struct sbx_egress *e, const char *id, const json_t *bindings, sbx_error **err)
{
    bool on = bindings && json_array_size(bindings) > 0;
    if (on && !e->proxy)
        return sbx_error_set(err, SBX_EUNAVAIL, 0,
                             "the credential proxy is not running on this server (%s)",
                             e->proxy_why[0] ? e->proxy_why : "no credential store");
    pthread_mutex_lock(&e->ops);
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_id(e, id);
    char addr[INET_ADDRSTRLEN] = "";
    struct listener *ln = NULL;
    if (en) {
        json_decref(en->bindings);
        en->bindings = on ? json_deep_copy(bindings) : NULL;
        if (on && !en->pairs)
            en->pairs = sbx_xcalloc(PAIRS_MAX, sizeof *en->pairs);
        if (!en->netns)
            (void)snprintf(addr, sizeof addr, "%s", en->addr);
        else
            ln = listener_ref(en->ln); /* NULL: its init exited */
    }
    bool known = en && (!en->netns || ln);
    pthread_mutex_unlock(&e->mu);
    /* the redirect follows the bindings: a sandbox without any is never redirected */
    int r = 0;
    if (addr[0])
        r = sbx_nft_credproxy(e->nft, e->bridge, addr, on, err);
    else if (ln)
        r = vault_netns(e, ln, on, err);
    pthread_mutex_unlock(&e->ops);
    listener_unref(ln);
    if (!known && on)
        return sbx_error_set(err, SBX_ENOTFOUND, 0,
                             "credential proxy: `%s` is no running policed sandbox here", id);
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

json_t *
sbx_egress_bindings_id(struct sbx_egress *e, const char *id)
{
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_id(e, id);
    json_t *b = en && en->bindings ? json_deep_copy(en->bindings) : NULL;
    pthread_mutex_unlock(&e->mu);
    return b;
}

bool
sbx_egress_answered(struct sbx_egress *e, const char *id, const char *name, struct in_addr addr)
{
    uint64_t now = sbx_now_ms();
    bool found = false;
    pthread_mutex_lock(&e->mu);
    struct entry *en = find_id(e, id);
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
