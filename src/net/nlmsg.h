/*
 * nlmsg.h - building and parsing netlink messages: the few helpers nl.c needs (what libmnl
 * offered), inline, so that `sbx` links no netlink library at all.
 *
 * Building: the caller's buffer must be large enough for the message (callers use fixed-size
 * buffers sized for their request). Parsing: every attribute is bounds-checked against its
 * message before it is read.
 */
#ifndef SBX_NET_NLMSG_H
#define SBX_NET_NLMSG_H

#include <linux/netlink.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The first byte past the message. */
static inline void *
sbx_nlmsg_tail(struct nlmsghdr *nlh)
{
    return (char *)nlh + NLMSG_ALIGN(nlh->nlmsg_len);
}

/* A zeroed header at buf; nlmsg_len covers it. */
static inline struct nlmsghdr *
sbx_nlmsg_put_header(void *buf)
{
    struct nlmsghdr *nlh = buf;
    memset(nlh, 0, NLMSG_HDRLEN);
    nlh->nlmsg_len = NLMSG_HDRLEN;
    return nlh;
}

/* Append a zeroed family header (ifinfomsg, rtmsg...) of size bytes. */
static inline void *
sbx_nlmsg_put_extra(struct nlmsghdr *nlh, size_t size)
{
    void *p = sbx_nlmsg_tail(nlh);
    memset(p, 0, NLMSG_ALIGN(size));
    nlh->nlmsg_len = NLMSG_ALIGN(nlh->nlmsg_len) + (uint32_t)NLMSG_ALIGN(size);
    return p;
}

static inline void *
sbx_nlmsg_payload(const struct nlmsghdr *nlh)
{
    return (char *)nlh + NLMSG_HDRLEN;
}

static inline void
sbx_nlattr_put(struct nlmsghdr *nlh, uint16_t type, size_t len, const void *data)
{
    struct nlattr *a = sbx_nlmsg_tail(nlh);
    a->nla_type = type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    if (len)
        memcpy((char *)a + NLA_HDRLEN, data, len);
    size_t pad = NLA_ALIGN(a->nla_len) - a->nla_len;
    memset((char *)a + a->nla_len, 0, pad);
    nlh->nlmsg_len = NLMSG_ALIGN(nlh->nlmsg_len) + (uint32_t)NLA_ALIGN(a->nla_len);
}

static inline void
sbx_nlattr_put_u32(struct nlmsghdr *nlh, uint16_t type, uint32_t v)
{
    sbx_nlattr_put(nlh, type, sizeof v, &v);
}

static inline void
sbx_nlattr_put_strz(struct nlmsghdr *nlh, uint16_t type, const char *s)
{
    sbx_nlattr_put(nlh, type, strlen(s) + 1, s);
}

/* Open a nested attribute; close it with sbx_nlattr_nest_end once its content is in. */
static inline struct nlattr *
sbx_nlattr_nest_start(struct nlmsghdr *nlh, uint16_t type)
{
    struct nlattr *a = sbx_nlmsg_tail(nlh);
    a->nla_type = (uint16_t)(type | NLA_F_NESTED);
    a->nla_len = NLA_HDRLEN;
    nlh->nlmsg_len = NLMSG_ALIGN(nlh->nlmsg_len) + NLA_HDRLEN;
    return a;
}

static inline void
sbx_nlattr_nest_end(struct nlmsghdr *nlh, struct nlattr *nest)
{
    nest->nla_len = (uint16_t)((char *)sbx_nlmsg_tail(nlh) - (char *)nest);
}

static inline uint16_t
sbx_nlattr_type(const struct nlattr *a)
{
    return a->nla_type & NLA_TYPE_MASK;
}

static inline const void *
sbx_nlattr_data(const struct nlattr *a)
{
    return (const char *)a + NLA_HDRLEN;
}

static inline size_t
sbx_nlattr_len(const struct nlattr *a)
{
    return a->nla_len - NLA_HDRLEN;
}

/* True when an attribute header and its payload fit in the len bytes left at a. */
static inline bool
sbx_nlattr_ok(const struct nlattr *a, size_t len)
{
    return len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len;
}

static inline const struct nlattr *
sbx_nlattr_next(const struct nlattr *a, size_t *len)
{
    size_t step = NLA_ALIGN(a->nla_len);
    *len = step < *len ? *len - step : 0;
    return (const struct nlattr *)((const char *)a + step);
}

/* Iterate the attributes in [start, start + len). `rest` is a size_t the loop updates. */
#define sbx_nlattr_for_each(a, start, len, rest)                                           \
    for ((rest) = (len), (a) = (const struct nlattr *)(start); sbx_nlattr_ok((a), (rest)); \
         (a) = sbx_nlattr_next((a), &(rest)))

/* The attributes of a message after its family header of hdrlen bytes. */
static inline const void *
sbx_nlmsg_attrs(const struct nlmsghdr *nlh, size_t hdrlen, size_t *len)
{
    size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(hdrlen);
    *len = nlh->nlmsg_len > off ? nlh->nlmsg_len - off : 0;
    return (const char *)nlh + off;
}

/* Typed reads: false when the payload does not have the type's size (or, for a string, is not
 * NUL-terminated within the attribute). */
static inline bool
sbx_nlattr_u32(const struct nlattr *a, uint32_t *v)
{
    if (sbx_nlattr_len(a) < sizeof *v)
        return false;
    memcpy(v, sbx_nlattr_data(a), sizeof *v);
    return true;
}

static inline bool
sbx_nlattr_u8(const struct nlattr *a, uint8_t *v)
{
    if (sbx_nlattr_len(a) < 1)
        return false;
    *v = *(const uint8_t *)sbx_nlattr_data(a);
    return true;
}

static inline const char *
sbx_nlattr_str(const struct nlattr *a)
{
    size_t n = sbx_nlattr_len(a);
    const char *s = sbx_nlattr_data(a);
    return n > 0 && memchr(s, '\0', n) ? s : NULL;
}

#endif
