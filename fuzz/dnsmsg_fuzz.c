/*
 * dnsmsg_fuzz.c - the egress resolver's DNS parsing (src/egress/dnsmsg.c): a sandbox's query
 * (parsed by hand) and an upstream's reply (c-ares). A parsed name is only letters, digits,
 * '-', '_' and '.', never longer than a name can be; an error reply is never longer than the
 * query; every address found is a dotted IPv4 address.
 */
#include <arpa/inet.h>
#include <string.h>

#include "egress/dnsmsg.h"
#include "fuzz/fuzz.h"

static void
check_query(const uint8_t *data, size_t size)
{
    struct sbx_dns_question q;
    uint8_t out[SBX_DNS_MSG_MAX];
    int r = sbx_dns_parse_query(data, size, &q);
    if (r == 0) {
        size_t n = strlen(q.name);
        if (n > SBX_DNS_NAME_MAX ||
            strspn(q.name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != n || q.end > size)
            __builtin_trap();
    }
    if (size >= SBX_DNS_HEADER) {
        size_t len = sbx_dns_error_reply(out, sizeof out, data, r == 0 ? q.end : 0, 3);
        if (len > size || len < SBX_DNS_HEADER)
            __builtin_trap();
    }
}

static void
check_reply(const uint8_t *data, size_t size)
{
    struct sbx_dns_addr a[16];
    size_t n = sbx_dns_a_records(data, size, a, 16);
    struct in_addr in;
    if (n > 16)
        __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        if (inet_pton(AF_INET, a[i].addr, &in) != 1)
            __builtin_trap();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > SBX_DNS_MSG_MAX)
        return 0;
    check_query(data, size);
    check_reply(data, size);
    /* a name made of the input: a query, if any, parses back to the same name */
    char name[64];
    size_t k = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, k);
    name[k] = '\0';
    uint8_t q[512];
    struct sbx_dns_question qq;
    size_t qn = sbx_dns_a_query(q, sizeof q, name, 1);
    size_t nl = strlen(name);
    if (nl && name[nl - 1] == '.') /* a final dot is the root's: the same name */
        name[--nl] = '\0';
    if (qn && sbx_dns_parse_query(q, qn, &qq) == 0 && strcasecmp(qq.name, name) != 0)
        __builtin_trap();
    return 0;
}
