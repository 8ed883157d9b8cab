/*
 * credproxy_int.h - what the credential proxy's plain-HTTP side (credproxy.c) and its HTTPS
 * side (credtls.c) share; nothing outside src/egress uses it.
 */
#ifndef SBX_EGRESS_CREDPROXY_INT_H
#define SBX_EGRESS_CREDPROXY_INT_H

#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/httphead.h"
#include "egress/credproxy.h"

#define HEAD_MAX   ((size_t)16 * 1024) /* a request head longer than this is not rewritten */
#define HEAD_S     10                  /* to read it (and a TLS handshake) */
#define CONNECT_MS 5000
#define IDLE_S     60

struct sbx_credproxy {
    struct sbx_egress *e;
    struct in_addr listen;
    int fd[2]; /* port 80, port 443 */
    int stop_pipe[2];
    pthread_t accept_t;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned conns;
    bool stopping;
};

struct conn {
    struct sbx_credproxy *cp;
    int fd;
    struct in_addr src;
    bool tls;    /* accepted on port 443 */
    int netns;   /* netns mode: the sandbox's namespace (the conn's own fd); -1: the bridge's */
    char id[64]; /* the sandbox (netns mode: its listener's; bridge mode: found by src) */
};

/* One request to decide on. */
struct sbx_credproxy_req {
    struct sbx_credproxy *cp;
    const char *id;
    const json_t *bindings;
    const struct sockaddr_in *dst; /* the original destination */
    const char *sni;               /* HTTPS: the name the client's TLS is for; NULL: plain */
};

/* The head to send instead of req's (wiped and freed by the caller): with the credential when
 * a binding applies; else, on a watched connection (sbx_credproxy_watched), with only
 * `Connection: close`; else NULL: the request goes as it came. */
char *sbx_credproxy_decide(const struct sbx_credproxy_req *q, const struct sbx_http_req *req,
                           size_t *len);
/* Could an HTTPS request to host:port get a binding (scheme, port, host; method and path are
 * only known once it is decrypted)? */
bool sbx_credproxy_candidate(const json_t *bindings, const char *host, unsigned port);

/* Is a connection whose first request is req one a binding could apply to: HTTPS (sni: the
 * proxy only opens a TLS connection whose SNI name is a candidate), or plain HTTP whose Host
 * names a host some http binding has for this port (whatever the method and path)? Its
 * requests are forwarded with `Connection: close` so that each comes on a connection of its
 * own and is decided on; any other connection is relayed untouched. */
bool sbx_credproxy_watched(const json_t *bindings, const struct sbx_http_req *req, unsigned port,
                           const char *sni);

/* The binding (of bindings) that request req, received on port (HTTPS: for the TLS name sni,
 * else NULL), claims; host gets its host name (lowercase). NULL: none, the request is not
 * rewritten. Only what the request says: the destination is checked by the caller
 * (sbx_egress_answered). */
const json_t *sbx_credproxy_match(const json_t *bindings, const struct sbx_http_req *req,
                                  unsigned port, const char *sni, char host[256]);

/* The head to send instead of req's under binding b, with the credentials' values (an
 * object, name: value): req's request line, its headers but hop-by-hop ones and the sandbox's
 * copies of the injected ones, the injected ones, `Connection: close` (`Connection: upgrade,
 * close` when req asks for an upgrade: an Upgrade header and `upgrade` in its Connection).
 * b NULL: nothing injected (values unused). NULL when a value is missing. Wiped and freed by
 * the caller. */
char *sbx_credproxy_head_for(const json_t *b, const json_t *values, const struct sbx_http_req *req,
                             size_t *len);

/* Is p (n bytes) a DNS host name: labels of 1-63 letters, digits and '-', at most 253 bytes,
 * no final dot? What a Host or an SNI must name for a binding to be looked at. */
bool sbx_credproxy_dns_name(const char *p, size_t n);

/* The SNI of a ClientHello in its first TLS record (buf, n bytes; a sandbox's): true with name
 * (lowercase, NUL-terminated), false when it is no ClientHello, has no SNI or is cut short
 * (credtls.c). */
bool sbx_credtls_hello_sni(const unsigned char *buf, size_t n, char name[256]);

bool sbx_credproxy_wait_readable(const struct sbx_credproxy *cp, int fd, int ms);
bool sbx_credproxy_send_all(int fd, const char *p, size_t n);
/* A connection to dst: from the server's namespace (netns < 0), or from the sandbox's
 * namespace netns, marked SBX_CREDPROXY_MARK. */
int sbx_credproxy_connect_upstream(const struct sockaddr_in *dst, int netns);
void sbx_credproxy_relay(const struct sbx_credproxy *cp, int a, int b);

/* The HTTPS side of connection c (credtls.c). */
void sbx_credtls_serve(struct conn *c, const struct sockaddr_in *dst, const char *id,
                       const json_t *bindings);

#endif
