/*
 * dnsmsg.c - DNS messages for the egress resolver (see dnsmsg.h).
 */
#include "egress/dnsmsg.h"

#include <arpa/inet.h>
#include <ares.h>
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

uint16_t
sbx_dns_id(const uint8_t *msg)
{
    return (uint16_t)((msg[0] << 8) | msg[1]);
}

static uint16_t
get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static bool
label_byte_ok(uint8_t c)
{
    return isalnum(c) || c == '-' || c == '_';
}

/* The name at msg[*off], uncompressed, into q->name; *off moves past it. */
static int
parse_name(const uint8_t *msg, size_t n, size_t *off, struct sbx_dns_question *q)
{
    size_t len = 0;
    for (;;) {
        if (*off >= n)
            return -SBX_DNS_FORMERR;
        uint8_t l = msg[(*off)++];
        if (l == 0)
            break;
        if (l & 0xc0) /* a pointer (or the reserved 0x40/0x80 forms): never in a query */
            return -SBX_DNS_REFUSED;
        if (*off + l > n)
            return -SBX_DNS_FORMERR;
        if (len + (len ? 1 : 0) + l > SBX_DNS_NAME_MAX)
            return -SBX_DNS_REFUSED;
        if (len)
            q->name[len++] = '.';
        for (uint8_t i = 0; i < l; i++) {
            uint8_t c = msg[*off + i];
            if (!label_byte_ok(c))
                return -SBX_DNS_REFUSED;
            q->name[len++] = (char)tolower(c);
        }
        *off += l;
    }
    q->name[len] = '\0';
    return 0;
}

int
sbx_dns_parse_query(const uint8_t *msg, size_t n, struct sbx_dns_question *q)
{
    memset(q, 0, sizeof *q);
    if (n < SBX_DNS_HEADER)
        return -SBX_DNS_FORMERR;
    uint8_t flags = msg[2];
    if (flags & 0x80) /* QR: a response, not a query */
        return -SBX_DNS_FORMERR;
    if (((flags >> 3) & 0x0f) != 0) /* opcode other than QUERY */
        return -SBX_DNS_NOTIMP;
    if (get16(msg + 4) != 1) /* exactly one question */
        return -SBX_DNS_FORMERR;
    size_t off = SBX_DNS_HEADER;
    int r = parse_name(msg, n, &off, q);
    if (r < 0)
        return r;
    if (off + 4 > n)
        return -SBX_DNS_FORMERR;
    q->qtype = get16(msg + off);
    q->qclass = get16(msg + off + 2);
    q->end = off + 4;
    return 0;
}

size_t
sbx_dns_error_reply(uint8_t *out, size_t cap, const uint8_t *msg, size_t q_end, int rcode)
{
    if (q_end < SBX_DNS_HEADER)
        q_end = 0;
    size_t len = q_end ? q_end : SBX_DNS_HEADER;
    if (cap < len)
        return 0;
    memset(out, 0, SBX_DNS_HEADER);
    out[0] = msg[0];
    out[1] = msg[1];
    /* QR, the query's opcode and RD; RA; the rcode */
    out[2] = (uint8_t)(0x80 | (msg[2] & 0x79));
    out[3] = (uint8_t)(0x80 | (rcode & 0x0f));
    if (q_end) {
        out[5] = 1; /* QDCOUNT 1: the question, copied; no other section */
        memcpy(out + SBX_DNS_HEADER, msg + SBX_DNS_HEADER, q_end - SBX_DNS_HEADER);
    }
    return len;
}

size_t
sbx_dns_a_query(uint8_t *out, size_t cap, const char *name, uint16_t id)
{
    size_t nl = strlen(name);
    size_t len = SBX_DNS_HEADER + nl + 2 + 4;
    if (nl == 0 || nl > SBX_DNS_NAME_MAX || cap < len)
        return 0;
    memset(out, 0, SBX_DNS_HEADER);
    out[0] = (uint8_t)(id >> 8);
    out[1] = (uint8_t)id;
    out[2] = 0x01; /* RD */
    out[5] = 1;
    size_t off = SBX_DNS_HEADER;
    for (const char *p = name; *p;) {
        size_t l = strcspn(p, ".");
        if (l == 0 || l > 63)
            return 0;
        out[off++] = (uint8_t)l;
        memcpy(out + off, p, l);
        off += l;
        p += l;
        p += *p == '.';
    }
    out[off++] = 0;
    out[off++] = 0;
    out[off++] = 1; /* A */
    out[off++] = 0;
    out[off++] = 1; /* IN */
    return off;
}

size_t
sbx_dns_a_records(const uint8_t *reply, size_t n, struct sbx_dns_addr *addrs, size_t max)
{
    struct ares_addrttl at[64];
    int nat = (int)(max < 64 ? max : 64);
    if (n < SBX_DNS_HEADER || n > SBX_DNS_MSG_MAX || nat == 0)
        return 0;
    if (ares_parse_a_reply(reply, (int)n, NULL, at, &nat) != ARES_SUCCESS || nat < 0)
        return 0;
    for (int i = 0; i < nat; i++) {
        (void)inet_ntop(AF_INET, &at[i].ipaddr, addrs[i].addr, sizeof addrs[i].addr);
        addrs[i].ttl = at[i].ttl > 0 ? (uint32_t)at[i].ttl : 0;
    }
    return (size_t)nat;
}
