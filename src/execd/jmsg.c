/*
 * jmsg.c - Jupyter wire messages (jupyter-client.readthedocs.io, "Messaging in Jupyter").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"
#include "execd/jmsg.h"

void
jmsg_sign(const uint8_t *key, size_t keylen, const struct iovec frames[4],
          char out[JMSG_SIG_HEX + 1])
{
    crypto_auth_hmacsha256_state st;
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_init(&st, key, keylen);
    for (int i = 0; i < 4; i++)
        crypto_auth_hmacsha256_update(&st, frames[i].iov_base, frames[i].iov_len);
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_bin2hex(out, JMSG_SIG_HEX + 1, mac, sizeof(mac));
}

static json_t *
load_object(const struct zmtp_part *p)
{
    json_t *j = json_loadb((const char *)p->data, p->len, 0, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

void
jmsg_clear(struct jmsg *j)
{
    json_decref(j->header);
    json_decref(j->parent);
    json_decref(j->metadata);
    json_decref(j->content);
    memset(j, 0, sizeof(*j));
}

int
jmsg_parse(const struct zmtp_msg *m, const uint8_t *key, size_t keylen, struct jmsg *out,
           const char **why)
{
    memset(out, 0, sizeof(*out));
    size_t d = 0;
    while (d < m->n && !(m->parts[d].len == strlen(JMSG_DELIM) &&
                         memcmp(m->parts[d].data, JMSG_DELIM, strlen(JMSG_DELIM)) == 0))
        d++;
    if (m->n - d < 6) {
        *why = d == m->n ? "no <IDS|MSG> delimiter" : "too few frames after the delimiter";
        return -1;
    }
    const struct zmtp_part *sig = &m->parts[d + 1];
    const struct zmtp_part *f = &m->parts[d + 2];
    if (keylen > 0) {
        struct iovec iov[4];
        for (int i = 0; i < 4; i++)
            iov[i] = (struct iovec){.iov_base = f[i].data, .iov_len = f[i].len};
        char want[JMSG_SIG_HEX + 1];
        jmsg_sign(key, keylen, iov, want);
        /* constant time: a peer must not learn the signature byte by byte */
        if (sig->len != JMSG_SIG_HEX || sodium_memcmp(sig->data, want, JMSG_SIG_HEX) != 0) {
            *why = "bad message signature";
            return -1;
        }
    }
    out->header = load_object(&f[0]);
    out->parent = load_object(&f[1]);
    out->metadata = load_object(&f[2]);
    out->content = load_object(&f[3]);
    if (!out->header || !out->parent || !out->metadata || !out->content) {
        jmsg_clear(out);
        *why = "a message frame is not a JSON object";
        return -1;
    }
    out->msg_type = json_string_value(json_object_get(out->header, "msg_type"));
    if (!out->msg_type) {
        jmsg_clear(out);
        *why = "header without msg_type";
        return -1;
    }
    out->parent_id = json_string_value(json_object_get(out->parent, "msg_id"));
    if (!out->parent_id)
        out->parent_id = "";
    return 0;
}

void
jmsg_build(struct jmsg_out *o, const uint8_t *key, size_t keylen, const char *session,
           const char *msg_type, json_t *content)
{
    memset(o, 0, sizeof(*o));
    execd_uuid4(o->id, false);
    char date[40];
    execd_rfc3339(date, sizeof(date), sbx_wall_ms());
    json_t *header =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", o->id, "session", session, "username",
                  "sbx-execd", "date", date, "msg_type", msg_type, "version", "5.3");
    o->frames[0] = sbx_xstrdup(JMSG_DELIM);
    o->frames[1] = sbx_xcalloc(1, JMSG_SIG_HEX + 1);
    o->frames[2] = json_dumps(header, JSON_COMPACT);
    o->frames[3] = sbx_xstrdup("{}");
    o->frames[4] = sbx_xstrdup("{}");
    o->frames[5] = json_dumps(content, JSON_COMPACT);
    json_decref(header);
    json_decref(content);
    for (int i = 0; i < 6; i++) {
        if (!o->frames[i])
            o->frames[i] = sbx_xstrdup("{}"); /* json_dumps only fails out of memory */
        o->iov[i] = (struct iovec){.iov_base = o->frames[i], .iov_len = strlen(o->frames[i])};
    }
    if (keylen > 0)
        jmsg_sign(key, keylen, o->iov + 2, o->frames[1]);
    o->iov[1].iov_len = strlen(o->frames[1]);
}

void
jmsg_out_clear(struct jmsg_out *o)
{
    for (int i = 0; i < 6; i++)
        free(o->frames[i]);
    memset(o, 0, sizeof(*o));
}
