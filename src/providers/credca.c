/*
 * credca.c - the providers' side of the credential proxy's HTTPS (native, docker) (docs/network.md
 * "Credential proxy"): each sandbox with `credentialProxy` gets a CA of its own (made at its
 * first start, kept encrypted in the server's credvault as "<id>.ca": the key never enters the
 * sandbox) and a CA bundle, its image's bundle plus that CA's certificate, bound read-only over
 * the image's /etc/ssl/certs/ca-certificates.crt; SSL_CERT_FILE, REQUESTS_CA_BUNDLE and
 * NODE_EXTRA_CA_CERTS name it for clients that keep a bundle of their own.
 *
 * The image's bundle is read from its layers (top first) with openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS: an image is untrusted, and a symlink there must not make the server
 * copy a host file into a file the sandbox can read.
 */
#include "providers/credca.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "egress/tlsca.h"
#include "server/credvault.h"

#define BUNDLE_REL "etc/ssl/certs/ca-certificates.crt"
#define BUNDLE_MAX ((off_t)SBX_CREDCA_BUNDLE_MAX)

static void
ca_name(const char *id, char out[64])
{
    (void)snprintf(out, 64, "%.48s.ca", id);
}

int
sbx_credca_get(void *vault, const char *id, char **key_pem, char **cert_pem, sbx_error **err)
{
    char name[64];
    ca_name(id, name);
    json_t *v = NULL;
    if (!vault || sbx_credvault_get(vault, name, &v, err) < 0)
        return vault ? -SBX_EGENERIC : sbx_error_set(err, SBX_EUNAVAIL, 0, "no credvault");
    const char *k = json_string_value(json_object_get(v, "key"));
    const char *c = json_string_value(json_object_get(v, "cert"));
    int r = k && c ? 0 : sbx_error_set(err, SBX_ENOTFOUND, 0, "sandbox `%s` has no CA", id);
    if (r == 0) {
        *key_pem = sbx_xstrdup(k);
        *cert_pem = sbx_xstrdup(c);
    }
    json_decref(v);
    return r;
}

/* The sandbox's CA certificate, made and stored first if it has none. */
static char *
ensure_ca(struct sbx_credvault *vault, const char *id, sbx_error **err)
{
    char *key = NULL;
    char *cert = NULL;
    sbx_autoerror sbx_error *e = NULL;
    if (sbx_credca_get(vault, id, &key, &cert, &e) == 0 && key) {
        explicit_bzero(key, strlen(key));
        free(key);
        return cert;
    }
    char cn[96];
    (void)snprintf(cn, sizeof cn, "sbx credential proxy %.48s", id);
    if (sbx_tlsca_new(cn, &key, &cert, err) < 0)
        return NULL;
    char name[64];
    ca_name(id, name);
    json_t *v = json_pack("{s:s, s:s}", "key", key, "cert", cert);
    int r = sbx_credvault_put(vault, name, v, err);
    json_decref(v);
    explicit_bzero(key, strlen(key));
    free(key);
    if (r < 0) {
        free(cert);
        return NULL;
    }
    return cert;
}

/* The bundle file under dir, symlinks refused all the way; -1 when there is none. */
static int
open_beneath(const char *dir, const char *rel)
{
    sbx_autoclose int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    if (dfd < 0)
        return -1;
    return (int)syscall(SYS_openat2, dfd, rel, &how, sizeof how);
}

/* The image's CA bundle (a regular file of at most BUNDLE_MAX), or NULL. */
static char *
image_bundle(const struct sbx_rt_spec *spec, size_t *len)
{
    int fd = -1;
    if (spec->n_layers == 0)
        fd = open_beneath("/", BUNDLE_REL); /* the `host` image: the host's own */
    for (size_t i = spec->n_layers; fd < 0 && i-- > 0;)
        fd = open_beneath(spec->layers[i], BUNDLE_REL);
    sbx_autoclose int f = fd;
    struct stat st;
    if (f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > BUNDLE_MAX)
        return NULL;
    char *buf = sbx_xmalloc((size_t)st.st_size + 1);
    ssize_t n = read(f, buf, (size_t)st.st_size);
    if (n != st.st_size) {
        free(buf);
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

static void
bundle_path(const char *state_dir, const char *id, char out[4096])
{
    (void)snprintf(out, 4096, "%s/credproxy/%.64s.pem", state_dir, id);
}

static int
write_bundle(const char *path, const char *base, size_t n, const char *cert, sbx_error **err)
{
    char tmp[4200];
    (void)snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return sbx_error_set(err, SBX_EIO, errno, "credential proxy bundle `%s`", tmp);
    bool ok = fwrite(base, 1, n, f) == n &&
              (n == 0 || base[n - 1] == '\n' || fputc('\n', f) >= 0) && fputs(cert, f) >= 0;
    ok = fclose(f) == 0 && ok && chmod(tmp, 0644) == 0 && rename(tmp, path) == 0;
    if (!ok) {
        (void)unlink(tmp);
        return sbx_error_set(err, SBX_EIO, errno, "credential proxy bundle `%s`", path);
    }
    return 0;
}

int
sbx_credca_prepare(struct sbx_credvault *vault, const char *state_dir, const char *id,
                   const struct sbx_rt_spec *spec, char bundle[4096], sbx_error **err)
{
    bundle[0] = '\0';
    size_t n = 0;
    sbx_autofree char *base = image_bundle(spec, &n);
    if (!base)
        return 0; /* no bundle in the image: nothing to add the CA to (HTTPS stays spliced) */
    struct sbx_credca_base b = {
        .vault = vault, .state_dir = state_dir, .id = id, .data = base, .n = n};
    return sbx_credca_prepare_with(&b, bundle, err);
}

int
sbx_credca_prepare_with(const struct sbx_credca_base *b, char bundle[4096], sbx_error **err)
{
    bundle[0] = '\0';
    sbx_autofree char *cert = ensure_ca(b->vault, b->id, err);
    if (!cert)
        return sbx_error_wrap(err, "credential proxy CA of `%s`", b->id);
    sbx_autofree char *dir = sbx_xasprintf("%s/credproxy", b->state_dir);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_EIO, errno, "mkdir `%s`", dir);
    char path[4096];
    bundle_path(b->state_dir, b->id, path);
    if (write_bundle(path, b->data, b->n, cert, err) < 0)
        return -SBX_EIO;
    (void)snprintf(bundle, 4096, "%s", path);
    return 0;
}

void
sbx_credca_remove(struct sbx_credvault *vault, const char *state_dir, const char *id)
{
    char name[64];
    char path[4096];
    ca_name(id, name);
    bundle_path(state_dir, id, path);
    if (vault)
        sbx_credvault_remove(vault, name);
    (void)unlink(path);
}
