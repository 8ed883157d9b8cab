/*
 * credproxy.h - the credential proxy of sandboxes with a Credential Vault (docs/network.md
 * "Credential proxy"), inside sbx_egress. Bridge mode: listeners on the bridge's gateway, ports
 * 80 and 443, that the nftables rules DNAT those sandboxes' traffic to (net/nft.c,
 * credproxy4); netns mode (docker): listeners inside each sandbox's own namespace that its
 * table redirects its ports 80 and 443 to (sbx_nft_ns_credproxy; 443 only with a CA callback),
 * accepted through dns.c's poll loop
 * (sbx_credproxy_accept). It adds a
 * binding's credential to a request only when the binding matches the request's host, port,
 * method and path AND the connection's original destination is an address sbx's resolver
 * answered to this sandbox for that very host name; anything else passes untouched.
 *
 * What it asks of the resolver's side (dns.c), by the sandbox's id: bridge mode finds it by the
 * connection's source address (the bridge drops spoofed sources), netns mode by the listener
 * the connection came in on:
 */
#ifndef SBX_EGRESS_CREDPROXY_H
#define SBX_EGRESS_CREDPROXY_H

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>

#include "common/error.h"
#include "net/nft.h"

struct sbx_egress;
struct sbx_credproxy;

/* Bridge mode: the bindings of the sandbox at src (a copy) and its id; NULL when it has no
 * vault. */
json_t *sbx_egress_bindings_of(struct sbx_egress *e, struct in_addr src, char id[64]);
/* The bindings of sandbox id (a copy); NULL when it has no vault (netns mode: the listener a
 * connection came in on says whose it is). */
json_t *sbx_egress_bindings_id(struct sbx_egress *e, const char *id);
/* Did the resolver answer addr for name to sandbox id (within the answer's TTL, under its
 * current policy)? */
bool sbx_egress_answered(struct sbx_egress *e, const char *id, const char *name,
                         struct in_addr addr);
/* Sandbox id's credential values (sbx_egress_config.values). */
int sbx_egress_values(struct sbx_egress *e, const char *id, json_t **values, sbx_error **err);
/* Sandbox id's CA (sbx_egress_config.ca). */
int sbx_egress_ca(struct sbx_egress *e, const char *id, char **key_pem, char **cert_pem,
                  sbx_error **err);
/* sbx_egress_config.upstream_ca, or NULL. */
const char *sbx_egress_upstream_ca(const struct sbx_egress *e);

/* The mark of the proxy's own connections made inside a sandbox's namespace (netns mode): the
 * namespace's redirect lets them pass (nft.h: sbx_nft_ns_credproxy). Setting a mark needs
 * CAP_NET_ADMIN or CAP_NET_RAW, which a policed container never has (docker_egress.c). */
#define SBX_CREDPROXY_MARK SBX_NFT_CREDPROXY_MARK

/* Bridge mode: bind listen:80 and listen:443 and start accepting. */
int sbx_credproxy_open(struct sbx_credproxy **out, struct sbx_egress *e, struct in_addr listen,
                       sbx_error **err);
/* Netns mode: a proxy without listeners of its own: the resolver's poll loop hands it each
 * connection waiting on a sandbox's listener (sbx_credproxy_accept). */
int sbx_credproxy_new(struct sbx_credproxy **out, struct sbx_egress *e, sbx_error **err);
/* Accept one connection waiting on lfd, a listener made inside the network namespace netns_fd
 * (dup'ed for the connection) of sandbox id; tls: port 443's. Its upstream connection is made
 * in that namespace too (marked SBX_CREDPROXY_MARK), so it meets the sandbox's own rules and
 * whatever its network enforces beyond them. */
void sbx_credproxy_accept(struct sbx_credproxy *cp, int lfd, bool tls, const char *id,
                          int netns_fd);
/* Stop accepting; wait for the connections in flight (each ends within its idle time). */
void sbx_credproxy_close(struct sbx_credproxy *cp);

#endif
