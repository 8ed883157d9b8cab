/*
 * secrets.c - the encrypted secret store (see secrets.h for the format).
 *
 * Security notes (why this is safe):
 * - XChaCha20-Poly1305 (IETF AEAD) with a fresh 24-byte random nonce per write: random nonces
 *   of this size never repeat in practice, so one key can encrypt any number of values.
 * - The plaintext header (name, dates) is the AEAD's associated data: moving a ciphertext to
 *   another name or editing its dates makes decryption fail instead of returning a value
 *   under the wrong name.
 * - The master key file must be exactly 32 bytes and not accessible to group/other; it is
 *   read into sodium_malloc'd (mlock'd, guard-paged) memory and wiped on close.
 * - Files are written to a temp file with 0600, fsync'd and renamed, so a crash never leaves a
 *   half-written secret, and readers see the old or the new value.
 * - Error messages name secrets and files, never values.
 */
#include "secrets/secrets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"

#define MAGIC           "SBXS"
#define KEY_BYTES       crypto_aead_xchacha20poly1305_ietf_KEYBYTES
#define NONCE_BYTES     crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define TAG_BYTES       crypto_aead_xchacha20poly1305_ietf_ABYTES
#define HEADER_MAX      1024
#define SECRET_FILE_MAX (8 + HEADER_MAX + NONCE_BYTES + SBX_SECRET_VALUE_MAX + TAG_BYTES)

struct sbx_secret_store {
    char *dir;
    unsigned char *key; /* sodium_malloc'd, KEY_BYTES */
};

int
sbx_secret_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > SBX_SECRET_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        int alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
        int other = (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
        if (!alpha && (i == 0 || !other))
            return 0;
    }
    return 1;
}

static int
check_name(const char *name, sbx_error **err)
{
    if (sbx_secret_name_valid(name))
        return 0;
    return sbx_error_set(err, SBX_EINVAL, 0,
                         "invalid secret name `%.64s` (use letters, digits, _ . -; start with a "
                         "letter or _; at most %d characters)",
                         name ? name : "", SBX_SECRET_NAME_MAX);
}

static int
read_key(unsigned char *key, const char *path, sbx_error **err)
{
    sbx_autoclose int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, errno == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC, errno,
                             "open master key `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "stat `%s`", path);
    if (!S_ISREG(st.st_mode) || st.st_size != KEY_BYTES)
        return sbx_error_set(err, SBX_EINVAL, 0, "master key `%s` must be a file of %d bytes", path,
                             KEY_BYTES);
    if (st.st_mode & 077)
        return sbx_error_set(err, SBX_EPERM, 0,
                             "master key `%s` is accessible to others (mode %03o); chmod 600 it",
                             path, (unsigned)(st.st_mode & 0777));
    if (sbx_read_full(fd, key, KEY_BYTES) != KEY_BYTES)
        return sbx_error_set(err, SBX_EGENERIC, errno, "read `%s`", path);
    return 0;
}

/* Make a new random key file without ever replacing one another process made first: write a
 * temp file, then link() it into place (fails with EEXIST if someone won the race). */
static int
create_key(const char *path, sbx_error **err)
{
    unsigned char fresh[KEY_BYTES];
    randombytes_buf(fresh, sizeof fresh);
    sbx_autofree char *tmp = sbx_xasprintf("%s.new.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        sodium_memzero(fresh, sizeof fresh);
        return sbx_error_set(err, SBX_EGENERIC, errno, "create `%s`", tmp);
    }
    int ok = sbx_write_all(fd, fresh, sizeof fresh) == 0 && fsync(fd) == 0;
    int saved = errno;
    (void)close(fd);
    sodium_memzero(fresh, sizeof fresh);
    if (ok && link(tmp, path) < 0 && errno != EEXIST) {
        saved = errno;
        ok = 0;
    }
    (void)unlink(tmp);
    return ok ? 0 : sbx_error_set(err, SBX_EGENERIC, saved, "write master key `%s`", path);
}

static int
load_key(struct sbx_secret_store *s, const char *key_file, sbx_error **err)
{
    sbx_autofree char *def = sbx_xasprintf("%s/master.key", s->dir);
    const char *path = key_file ? key_file : def;
    int ret = read_key(s->key, path, err);
    if (ret == -SBX_ENOTFOUND && !key_file) {
        sbx_error_clear(err);
        ret = create_key(path, err);
        if (ret == 0)
            ret = read_key(s->key, path, err);
    }
    return ret;
}

int
sbx_secret_store_open(struct sbx_secret_store **out, const char *dir, const char *key_file,
                      sbx_error **err)
{
    if (sodium_init() < 0)
        return sbx_error_set(err, SBX_EGENERIC, 0, "libsodium failed to initialise");
    int ret = sbx_mkdir_p(dir, 0700, err);
    if (ret < 0)
        return sbx_error_wrap(err, "open secret store");
    struct sbx_secret_store *s = sbx_xcalloc(1, sizeof *s);
    s->dir = sbx_xstrdup(dir);
    s->key = sodium_malloc(KEY_BYTES);
    if (!s->key) {
        sbx_secret_store_close(s);
        return sbx_error_set(err, SBX_EGENERIC, ENOMEM, "allocate key memory");
    }
    ret = load_key(s, key_file, err);
    if (ret < 0) {
        sbx_secret_store_close(s);
        (void)sbx_error_wrap(err, "open secret store `%s`", dir);
        return ret; /* keep the code even when the caller passed no error object */
    }
    *out = s;
    return 0;
}

void
sbx_secret_store_close(struct sbx_secret_store *s)
{
    if (!s)
        return;
    sodium_free(s->key); /* wipes before freeing */
    free(s->dir);
    free(s);
}

static char *
secret_path(const struct sbx_secret_store *s, const char *name)
{
    return sbx_xasprintf("%s/%s.secret", s->dir, name);
}

/* A parsed secret file: pointers into `data`. */
struct secret_file {
    char *data;
    size_t len;
    const unsigned char *header;
    size_t header_len;
    const unsigned char *nonce;
    const unsigned char *cipher;
    size_t cipher_len;
    json_t *hdr; /* parsed header */
};

static void
secret_file_dispose(struct secret_file *f)
{
    free(f->data);
    json_decref(f->hdr);
    memset(f, 0, sizeof *f);
}

static int
parse_file(struct secret_file *f, const char *name, sbx_error **err)
{
    if (f->len < 8 || memcmp(f->data, MAGIC, 4) != 0)
        return sbx_error_set(err, SBX_EIO, 0, "secret `%s`: not a secret file", name);
    uint32_t hl = (uint32_t)(unsigned char)f->data[4] << 24 |
                  (uint32_t)(unsigned char)f->data[5] << 16 |
                  (uint32_t)(unsigned char)f->data[6] << 8 | (unsigned char)f->data[7];
    if (hl == 0 || hl > HEADER_MAX || f->len < 8 + hl + NONCE_BYTES + TAG_BYTES)
        return sbx_error_set(err, SBX_EIO, 0, "secret `%s`: corrupt file", name);
    f->header = (const unsigned char *)f->data + 8;
    f->header_len = hl;
    f->nonce = f->header + hl;
    f->cipher = f->nonce + NONCE_BYTES;
    f->cipher_len = f->len - 8 - hl - NONCE_BYTES;
    f->hdr = json_loadb((const char *)f->header, hl, 0, NULL);
    const char *hname = json_string_value(json_object_get(f->hdr, "name"));
    /* The name inside must be the name asked for (the file name is not authenticated). */
    if (!hname || strcmp(hname, name) != 0)
        return sbx_error_set(err, SBX_EIO, 0, "secret `%s`: header names another secret", name);
    return 0;
}

static int
load_file(struct secret_file *f, const struct sbx_secret_store *s, const char *name,
          sbx_error **err)
{
    memset(f, 0, sizeof *f);
    sbx_autofree char *path = secret_path(s, name);
    int ret = sbx_read_file(path, SECRET_FILE_MAX, &f->data, &f->len, err);
    if (ret == -SBX_ENOTFOUND) {
        sbx_error_clear(err);
        return sbx_error_set(err, SBX_ENOTFOUND, 0,
                             "secret `%s` is not set (set it with `sbx secret set %s`)", name,
                             name);
    }
    return ret < 0 ? ret : parse_file(f, name, err);
}

static char *
make_header(const char *name, int64_t created, int64_t updated)
{
    json_t *h = json_pack("{s:s, s:I, s:I}", "name", name, "createdAt", (json_int_t)created,
                          "updatedAt", (json_int_t)updated);
    char *out = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(h);
    if (!out)
        abort(); /* jansson only fails on OOM; daemons abort on OOM */
    return out;
}

static int64_t
existing_created(const struct sbx_secret_store *s, const char *name, int64_t now)
{
    struct secret_file f;
    sbx_autoerror sbx_error *ignored = NULL;
    int64_t created = now;
    if (load_file(&f, s, name, &ignored) == 0) {
        json_t *c = json_object_get(f.hdr, "createdAt");
        if (json_is_integer(c))
            created = (int64_t)json_integer_value(c);
    }
    secret_file_dispose(&f);
    return created;
}

static char *
seal(const struct sbx_secret_store *s, const char *header, const void *value, size_t len,
     size_t *out_len)
{
    size_t hl = strlen(header);
    size_t total = 8 + hl + NONCE_BYTES + len + TAG_BYTES;
    char *buf = sbx_xmalloc(total);
    /* A binary record, not a C string: no terminator is wanted in these copies. */
    memcpy(buf, MAGIC, 4); // NOLINT(bugprone-not-null-terminated-result)
    buf[4] = (char)(hl >> 24);
    buf[5] = (char)(hl >> 16);
    buf[6] = (char)(hl >> 8);
    buf[7] = (char)hl;
    memcpy(buf + 8, header, hl); // NOLINT(bugprone-not-null-terminated-result)
    unsigned char *nonce = (unsigned char *)buf + 8 + hl;
    randombytes_buf(nonce, NONCE_BYTES);
    unsigned long long clen = 0;
    (void)crypto_aead_xchacha20poly1305_ietf_encrypt(nonce + NONCE_BYTES, &clen, value, len,
                                                     (const unsigned char *)header, hl, NULL, nonce,
                                                     s->key);
    *out_len = 8 + hl + NONCE_BYTES + (size_t)clen;
    return buf;
}

int
sbx_secret_set(struct sbx_secret_store *s, const char *name, const void *value, size_t len,
               sbx_error **err)
{
    int ret = check_name(name, err);
    if (ret < 0)
        return ret;
    if (len > SBX_SECRET_VALUE_MAX)
        return sbx_error_set(err, SBX_ELIMIT, 0, "secret `%s` is larger than %u bytes", name,
                             SBX_SECRET_VALUE_MAX);
    int64_t now = sbx_wall_ms();
    sbx_autofree char *header = make_header(name, existing_created(s, name, now), now);
    size_t n = 0;
    sbx_autofree char *blob = seal(s, header, value, len, &n);
    sbx_autofree char *path = secret_path(s, name);
    ret = sbx_write_file_atomic(path, blob, n, 0600, err);
    if (ret < 0)
        (void)sbx_error_wrap(err, "store secret `%s`", name);
    return ret;
}

int
sbx_secret_get(struct sbx_secret_store *s, const char *name, char **value, size_t *len,
               sbx_error **err)
{
    int ret = check_name(name, err);
    struct secret_file f;
    if (ret < 0)
        return ret;
    ret = load_file(&f, s, name, err);
    if (ret < 0) {
        secret_file_dispose(&f);
        return ret;
    }
    size_t plain_len = f.cipher_len - TAG_BYTES;
    char *plain = sodium_malloc(plain_len + 1);
    unsigned long long got = 0;
    if (!plain)
        ret = sbx_error_set(err, SBX_EGENERIC, ENOMEM, "secret `%s`: allocate", name);
    else if (crypto_aead_xchacha20poly1305_ietf_decrypt((unsigned char *)plain, &got, NULL,
                                                        f.cipher, f.cipher_len, f.header,
                                                        f.header_len, f.nonce, s->key) != 0)
        ret = sbx_error_set(err, SBX_EIO, 0,
                            "secret `%s` does not decrypt (tampered with, or another master key)",
                            name);
    secret_file_dispose(&f);
    if (ret < 0) {
        sodium_free(plain);
        return ret;
    }
    plain[got] = '\0';
    *value = plain;
    if (len)
        *len = (size_t)got;
    return 0;
}

void
sbx_secret_value_free(char *value)
{
    sodium_free(value); /* wipes the value; NULL is fine */
}

int
sbx_secret_remove(struct sbx_secret_store *s, const char *name, sbx_error **err)
{
    int ret = check_name(name, err);
    if (ret < 0)
        return ret;
    sbx_autofree char *path = secret_path(s, name);
    if (unlink(path) < 0)
        return sbx_error_set(err, errno == ENOENT ? SBX_ENOTFOUND : SBX_EGENERIC,
                             errno == ENOENT ? 0 : errno, "remove secret `%s`%s", name,
                             errno == ENOENT ? ": not set" : "");
    return 0;
}

static int
info_of(struct sbx_secret_info *info, const struct sbx_secret_store *s, const char *name)
{
    struct secret_file f;
    sbx_autoerror sbx_error *ignored = NULL;
    int ret = load_file(&f, s, name, &ignored);
    if (ret == 0) {
        (void)snprintf(info->name, sizeof info->name, "%s", name);
        info->created_ms = (int64_t)json_integer_value(json_object_get(f.hdr, "createdAt"));
        info->updated_ms = (int64_t)json_integer_value(json_object_get(f.hdr, "updatedAt"));
    }
    secret_file_dispose(&f);
    return ret;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(((const struct sbx_secret_info *)a)->name,
                  ((const struct sbx_secret_info *)b)->name);
}

int
sbx_secret_list(struct sbx_secret_store *s, struct sbx_secret_info **out, size_t *n,
                sbx_error **err)
{
    sbx_autoclosedir DIR *d = opendir(s->dir);
    if (!d)
        return sbx_error_set(err, SBX_EGENERIC, errno, "list secrets in `%s`", s->dir);
    struct sbx_secret_info *items = NULL;
    size_t count = 0;
    struct dirent *de;
    /* readdir() shares state only per DIR stream, and this stream is ours alone. */
    while ((de = readdir(d)) != NULL) { // NOLINT(concurrency-mt-unsafe)
        size_t len = strlen(de->d_name);
        if (len <= 7 || strcmp(de->d_name + len - 7, ".secret") != 0)
            continue;
        char name[SBX_SECRET_NAME_MAX + 1];
        if (len - 7 > SBX_SECRET_NAME_MAX)
            continue;
        memcpy(name, de->d_name, len - 7);
        name[len - 7] = '\0';
        items = sbx_xrealloc(items, (count + 1) * sizeof *items);
        if (sbx_secret_name_valid(name) && info_of(&items[count], s, name) == 0)
            count++;
    }
    if (count > 1)
        qsort(items, count, sizeof *items, by_name);
    *out = items;
    *n = count;
    return 0;
}
