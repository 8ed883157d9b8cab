/*
 * tlsca.c - the credential proxy's certificates (see tlsca.h): a CA per sandbox, and leaves
 * for the names whose HTTPS the proxy terminates, signed by it. EC P-256, SHA-256.
 */
#include "egress/tlsca.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"

#define CA_DAYS   3650
#define LEAF_DAYS 7

static int
ssl_fail(sbx_error **err, const char *what)
{
    return sbx_error_set(err, SBX_EGENERIC, 0, "credential proxy: %s (OpenSSL)", what);
}

static char *
bio_text(BIO *b)
{
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *out = sbx_xmalloc((size_t)n + 1);
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    return out;
}

static int
add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    int ok = ex && X509_add_ext(cert, ex, -1);
    X509_EXTENSION_free(ex);
    return ok ? 0 : -1;
}

/* A random positive serial number into c. */
static bool
set_serial(X509 *c)
{
    unsigned char serial[16];
    if (RAND_bytes(serial, sizeof serial) != 1)
        return false;
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c));
    BN_free(bn);
    return ok;
}

/* A certificate for key with subject CN=cn, valid from an hour ago for days. */
static X509 *
cert_new(EVP_PKEY *key, const char *cn, long days)
{
    X509 *c = X509_new();
    bool ok = c && set_serial(c) && X509_set_version(c, 2) &&
              X509_gmtime_adj(X509_getm_notBefore(c), -3600) &&
              X509_gmtime_adj(X509_getm_notAfter(c), days * 86400) && X509_set_pubkey(c, key) &&
              X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_UTF8,
                                         (const unsigned char *)cn, -1, -1, 0);
    if (!ok) {
        X509_free(c);
        return NULL;
    }
    return c;
}

int
sbx_tlsca_new(const char *cn, char **key_pem, char **cert_pem, sbx_error **err)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *c = key ? cert_new(key, cn, CA_DAYS) : NULL;
    BIO *kb = BIO_new(BIO_s_mem());
    BIO *cb = BIO_new(BIO_s_mem());
    int ok =
        c && kb && cb && X509_set_issuer_name(c, X509_get_subject_name(c)) &&
        add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == 0 &&
        add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") == 0 &&
        add_ext(c, c, NID_subject_key_identifier, "hash") == 0 && X509_sign(c, key, EVP_sha256()) &&
        PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) && PEM_write_bio_X509(cb, c);
    if (ok) {
        *key_pem = bio_text(kb);
        *cert_pem = bio_text(cb);
    }
    BIO_free(kb);
    BIO_free(cb);
    X509_free(c);
    EVP_PKEY_free(key);
    return ok ? 0 : ssl_fail(err, "making a CA");
}

/* The CA of PEM texts. */
static int
ca_load(const char *key_pem, const char *cert_pem, EVP_PKEY **key, X509 **cert)
{
    BIO *kb = BIO_new_mem_buf(key_pem, -1);
    BIO *cb = BIO_new_mem_buf(cert_pem, -1);
    *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    *cert = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    BIO_free(kb);
    BIO_free(cb);
    return *key && *cert ? 0 : -1;
}

int
sbx_tlsca_leaf_ctx(const char *key_pem, const char *cert_pem, const char *name, SSL_CTX **out,
                   sbx_error **err)
{
    EVP_PKEY *ca_key = NULL;
    X509 *ca = NULL;
    EVP_PKEY *key = NULL;
    X509 *c = NULL;
    SSL_CTX *ctx = NULL;
    char san[300];
    (void)snprintf(san, sizeof san, "DNS:%s", name);
    int ok = ca_load(key_pem, cert_pem, &ca_key, &ca) == 0 && (key = EVP_EC_gen("P-256")) &&
             (c = cert_new(key, name, LEAF_DAYS)) &&
             X509_set_issuer_name(c, X509_get_subject_name(ca)) &&
             add_ext(c, ca, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
             add_ext(c, ca, NID_ext_key_usage, "serverAuth") == 0 &&
             add_ext(c, ca, NID_subject_alt_name, san) == 0 &&
             add_ext(c, ca, NID_authority_key_identifier, "keyid") == 0 &&
             X509_sign(c, ca_key, EVP_sha256()) && (ctx = SSL_CTX_new(TLS_server_method())) &&
             SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) &&
             SSL_CTX_use_certificate(ctx, c) && SSL_CTX_use_PrivateKey(ctx, key) &&
             SSL_CTX_add1_chain_cert(ctx, ca);
    EVP_PKEY_free(ca_key);
    X509_free(ca);
    EVP_PKEY_free(key);
    X509_free(c);
    if (!ok) {
        SSL_CTX_free(ctx);
        return ssl_fail(err, "making a certificate");
    }
    *out = ctx;
    return 0;
}
