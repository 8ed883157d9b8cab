/*
 * dnsmsg.h - the few DNS message operations the egress resolver needs (RFC 1035), pure and
 * bounds-checked (fuzzed: fuzz/dnsmsg_fuzz.c).
 *
 * The question of a sandbox's query is parsed here by hand: c-ares has no parser for queries
 * (its ares_parse_* read replies), and the resolver must see exactly the name the upstream will
 * see, label by label, so that a label holding a '.' (legal on the wire) cannot make
 * "allowed.test" of what is really a name below another domain. Replies from the upstream are
 * parsed by c-ares (ares_parse_a_reply: the answer's CNAME chain, each address's TTL).
 */
#ifndef SBX_EGRESS_DNSMSG_H
#define SBX_EGRESS_DNSMSG_H

#include <stddef.h>
#include <stdint.h>

#define SBX_DNS_HEADER   12
#define SBX_DNS_NAME_MAX 253
#define SBX_DNS_MSG_MAX  65535

#define SBX_DNS_NOERROR  0
#define SBX_DNS_FORMERR  1
#define SBX_DNS_SERVFAIL 2
#define SBX_DNS_NXDOMAIN 3
#define SBX_DNS_NOTIMP   4
#define SBX_DNS_REFUSED  5

struct sbx_dns_question {
    char name[SBX_DNS_NAME_MAX + 1]; /* lowercase, dotted, no final dot ("" = the root) */
    uint16_t qtype, qclass;
    size_t end; /* offset just past the question in the message */
};

/* Parse the header and the only question of a query. 0, or -rcode to answer with
 * (FORMERR: malformed; NOTIMP: not a standard query; REFUSED: a name with bytes other than
 * letters, digits, '-' and '_' in a label, or a compression pointer). */
int sbx_dns_parse_query(const uint8_t *msg, size_t n, struct sbx_dns_question *q);

/* An answer with rcode and no records to the query msg (whose question ends at q_end, 0 when
 * unknown: the header only) into out (at least SBX_DNS_HEADER + q_end bytes). Its length. */
size_t sbx_dns_error_reply(uint8_t *out, size_t cap, const uint8_t *msg, size_t q_end, int rcode);

/* A recursive query for name's A records with id into out; its length, 0 when name does not
 * fit or is not a name. */
size_t sbx_dns_a_query(uint8_t *out, size_t cap, const char *name, uint16_t id);

/* The IPv4 addresses (dotted, into addrs) and TTLs of the A records of reply (the answer to
 * the question, after its CNAME chain), at most max; the number found (0 when none or
 * malformed). */
struct sbx_dns_addr {
    char addr[16];
    uint32_t ttl;
};
size_t sbx_dns_a_records(const uint8_t *reply, size_t n, struct sbx_dns_addr *addrs, size_t max);

/* The id of a message (its first two bytes); the caller checked the length. */
uint16_t sbx_dns_id(const uint8_t *msg);

#endif
