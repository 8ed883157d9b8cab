/*
 * jmsg.h - Jupyter messaging protocol 5.3 over ZMTP: signing, building, parsing.
 *
 *   [routing ids / topic ...] "<IDS|MSG>" hmac header parent_header metadata content [buffers]
 *
 * hmac = hex HMAC-SHA256 over the four JSON frames, keyed with the connection file's `key`.
 * Pure (no I/O): unit tested, and fuzzed together with the ZMTP decoder.
 */
#ifndef SBX_EXECD_JMSG_H
#define SBX_EXECD_JMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "execd/zmtp.h"

#define JMSG_DELIM   "<IDS|MSG>"
#define JMSG_SIG_HEX 64

/* A received message; the JSON objects are owned (jmsg_clear). */
struct jmsg {
    json_t *header;
    json_t *parent;
    json_t *metadata;
    json_t *content;
    const char *msg_type;  /* header.msg_type */
    const char *parent_id; /* parent_header.msg_id, "" when none */
};

/* hex HMAC-SHA256 of the four frames into out (65 bytes, NUL-terminated). */
void jmsg_sign(const uint8_t *key, size_t keylen, const struct iovec frames[4],
               char out[JMSG_SIG_HEX + 1]);

/* Parse m: find the delimiter, check the signature (constant time; an empty key disables
 * signing as in Jupyter), decode the four JSON objects. 0, or -1 with *why. */
int jmsg_parse(const struct zmtp_msg *m, const uint8_t *key, size_t keylen, struct jmsg *out,
               const char **why);
void jmsg_clear(struct jmsg *j);

/* An outgoing request: the six frames to send (delimiter, signature, header, parent,
 * metadata, content), owned by the struct (jmsg_out_clear). msg_id is returned in id. */
struct jmsg_out {
    char *frames[6];
    struct iovec iov[6];
    char id[40];
};
void jmsg_build(struct jmsg_out *o, const uint8_t *key, size_t keylen, const char *session,
                const char *msg_type, json_t *content /* stolen */);
void jmsg_out_clear(struct jmsg_out *o);

#endif
