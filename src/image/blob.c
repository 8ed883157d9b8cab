/*
 * blob.c - content-addressed blobs. A blob is written to a temp file in <root>/tmp while its
 * sha256 is computed, checked against the digest it was asked for (never trust the sender), and
 * only then renamed to blobs/sha256/<hex>. Two writers of one blob both rename identical bytes,
 * so concurrent pulls cannot corrupt each other, and a crash leaves only a temp file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

#define JSON_BLOB_MAX (4u << 20)
#define LOG_EVERY     (8u << 20)

static char *
hex_digest(const unsigned char hash[crypto_hash_sha256_BYTES])
{
    char hex[crypto_hash_sha256_BYTES * 2 + 1];
    sodium_bin2hex(hex, sizeof(hex), hash, crypto_hash_sha256_BYTES);
    return sbx_xasprintf("sha256:%s", hex);
}

char *
sbx_image_sha256(const void *data, size_t n)
{
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(hash, data, n);
    return hex_digest(hash);
}

char *
sbx_image_blob_path(const struct sbx_image_store *s, const char *digest)
{
    return sbx_xasprintf("%s/%s", s->blobs, digest + strlen("sha256:"));
}

bool
sbx_image_blob_exists(const struct sbx_image_store *s, const char *digest)
{
    sbx_autofree char *path = sbx_image_blob_path(s, digest);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int
sbx_blob_writer_open(struct sbx_blob_writer *w, const struct sbx_image_store *s, const char *expect,
                     sbx_error **err)
{
    *w = (struct sbx_blob_writer){.fd = -1, .next_log = LOG_EVERY};
    w->tmp_path = sbx_xasprintf("%s/blob-XXXXXX", s->tmp);
    w->fd = mkostemp(w->tmp_path, O_CLOEXEC);
    if (w->fd < 0) {
        int e = errno;
        free(sbx_steal_ptr(&w->tmp_path));
        return sbx_error_set(err, SBX_EGENERIC, e, "create temp blob in `%s`", s->tmp);
    }
    crypto_hash_sha256_init(&w->sha);
    w->expect = expect ? sbx_xstrdup(expect) : NULL;
    return 0;
}

int
sbx_blob_writer_write(struct sbx_blob_writer *w, const void *data, size_t n, sbx_error **err)
{
    if (sbx_write_all(w->fd, data, n) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "write `%s`", w->tmp_path);
    crypto_hash_sha256_update(&w->sha, data, n);
    w->size += n;
    if (w->size >= w->next_log) {
        sbx_debug("blob %s: %llu MiB", w->expect ? w->expect : "(import)",
                  (unsigned long long)(w->size >> 20));
        w->next_log += LOG_EVERY;
    }
    return 0;
}

int
sbx_blob_writer_commit(struct sbx_blob_writer *w, const struct sbx_image_store *s,
                       char **out_digest, sbx_error **err)
{
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&w->sha, hash);
    sbx_autofree char *got = hex_digest(hash);
    if (w->expect && strcmp(got, w->expect) != 0)
        return sbx_error_set(err, SBX_EIO, 0, "digest mismatch: expected %s, got %s", w->expect,
                             got);
    if (fsync(w->fd) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "fsync `%s`", w->tmp_path);
    sbx_autofree char *dst = sbx_image_blob_path(s, got);
    if (fchmod(w->fd, 0644) < 0 || rename(w->tmp_path, dst) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "store blob `%s`", dst);
    free(sbx_steal_ptr(&w->tmp_path));
    sbx_debug("blob %s stored (%llu bytes)", got, (unsigned long long)w->size);
    if (out_digest)
        *out_digest = sbx_steal_ptr(&got);
    return 0;
}

void
sbx_blob_writer_abort(struct sbx_blob_writer *w)
{
    if (w->fd >= 0)
        (void)close(w->fd);
    if (w->tmp_path)
        (void)unlink(w->tmp_path);
    free(w->tmp_path);
    free(w->expect);
    *w = (struct sbx_blob_writer){.fd = -1};
}

int
sbx_image_blob_put(const struct sbx_image_store *s, const void *data, size_t n, const char *expect,
                   char **out_digest, sbx_error **err)
{
    struct sbx_blob_writer w;
    int ret = sbx_blob_writer_open(&w, s, expect, err);
    if (ret < 0)
        return ret;
    ret = sbx_blob_writer_write(&w, data, n, err);
    if (ret == 0)
        ret = sbx_blob_writer_commit(&w, s, out_digest, err);
    sbx_blob_writer_abort(&w);
    return ret;
}

int
sbx_image_blob_read(const struct sbx_image_store *s, const char *digest, char **out, size_t *len,
                    sbx_error **err)
{
    if (!sbx_image_digest_valid(digest))
        return sbx_error_set(err, SBX_EINVAL, 0, "bad digest `%s`", digest);
    sbx_autofree char *path = sbx_image_blob_path(s, digest);
    sbx_autofree char *data = NULL;
    size_t n = 0;
    int ret = sbx_read_file(path, JSON_BLOB_MAX, &data, &n, err);
    if (ret == -SBX_ENOTFOUND)
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "blob %s is not in the store", digest);
    if (ret < 0)
        return ret;
    /* A blob file could have been damaged on disk since it was verified. */
    sbx_autofree char *got = sbx_image_sha256(data, n);
    if (strcmp(got, digest) != 0)
        return sbx_error_set(err, SBX_EIO, 0, "blob %s is corrupt (content is %s)", digest, got);
    *out = sbx_steal_ptr(&data);
    if (len)
        *len = n;
    return 0;
}
