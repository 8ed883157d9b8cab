/*
 * files.c - sbx_upload() and sbx_download() through execd's /files endpoints (COMPAT 2.5).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/client_internal.h"

static int
with_endpoint_headers(sbx_client *c, const char *url, struct curl_slist *ep,
                      struct curl_slist **out)
{
    int ret = client_prepare(c, url, out);
    for (struct curl_slist *e = ep; ret == 0 && e; e = e->next) {
        struct curl_slist *n = curl_slist_append(*out, e->data);
        if (!n)
            return client_fail(c, SBX_ENOMEM, "out of memory");
        *out = n;
    }
    return ret;
}

static size_t
collect_small(char *p, size_t size, size_t nmemb, void *userdata)
{
    size_t n = size * nmemb;
    (void)client_buf_append(userdata, p, n); /* an error body; truncation is fine */
    return n;
}

static int
finish(sbx_client *c, CURLcode rc, const char *what, struct client_buf *body)
{
    if (rc != CURLE_OK)
        return client_fail(c, rc == CURLE_COULDNT_CONNECT ? SBX_EUNAVAIL : SBX_EIO, "%s: %s", what,
                           client_curl_error(c, rc));
    long status = 0;
    (void)curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299)
        return client_http_error(c, status, body ? body->data : NULL, body ? body->len : 0);
    return 0;
}

/* What an upload sends: a local file, or bytes in memory (data != NULL). */
struct upload_src {
    const char *local_path;
    const void *data;
    size_t len;
};

static curl_mime *
upload_form(sbx_client *c, const struct upload_src *src, const char *remote_path, mode_t mode)
{
    /* The mode travels as an int whose decimal digits are the octal permission (755). */
    char octal[16];
    (void)snprintf(octal, sizeof octal, "%o", (unsigned)(mode & 07777));
    json_t *meta =
        json_pack("{s:s, s:i}", "path", remote_path, "mode", (int)strtol(octal, NULL, 10));
    char *meta_s = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    curl_mime *form = meta_s ? curl_mime_init(c->curl) : NULL;
    curl_mimepart *p1 = form ? curl_mime_addpart(form) : NULL;
    curl_mimepart *p2 = form ? curl_mime_addpart(form) : NULL;
    int bad = !p1 || !p2 || curl_mime_name(p1, "metadata") != CURLE_OK ||
              curl_mime_filename(p1, "metadata") != CURLE_OK ||
              curl_mime_type(p1, "application/json") != CURLE_OK ||
              curl_mime_data(p1, meta_s, CURL_ZERO_TERMINATED) != CURLE_OK ||
              curl_mime_name(p2, "file") != CURLE_OK ||
              (src->data ? curl_mime_data(p2, src->data, src->len) != CURLE_OK ||
                               curl_mime_filename(p2, "data") != CURLE_OK
                         : curl_mime_filedata(p2, src->local_path) != CURLE_OK) ||
              curl_mime_type(p2, "application/octet-stream") != CURLE_OK;
    free(meta_s);
    if (bad) {
        curl_mime_free(form);
        (void)client_fail(c, SBX_ENOMEM, "cannot build the upload form");
        return NULL;
    }
    return form;
}

static int
do_upload(sbx_client *c, const char *base, struct curl_slist *ep, const struct upload_src *src,
          const char *remote_path, mode_t mode)
{
    char *url = NULL;
    if (asprintf(&url, "%s/files/upload", base) < 0)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    struct curl_slist *h = NULL;
    struct client_buf body;
    client_buf_init(&body, 1 << 16);
    int ret = with_endpoint_headers(c, url, ep, &h);
    curl_mime *form = ret == 0 ? upload_form(c, src, remote_path, mode) : NULL;
    if (ret == 0 && !form)
        ret = -SBX_ENOMEM;
    if (ret == 0) {
        (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
        (void)curl_easy_setopt(c->curl, CURLOPT_MIMEPOST, form);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect_small);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &body);
        ret = finish(c, curl_easy_perform(c->curl), url, &body);
    }
    curl_mime_free(form);
    curl_slist_free_all(h);
    client_buf_free(&body);
    free(url);
    return ret;
}

int
sbx_upload(sbx_client *c, const char *id, const char *local_path, const char *remote_path)
{
    if (!c || !local_path || !remote_path)
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    if (remote_path[0] != '/')
        return client_fail(c, SBX_EINVAL, "sandbox path `%s` is not absolute", remote_path);
    struct stat st;
    if (stat(local_path, &st) < 0)
        return client_fail(c, errno == ENOENT ? SBX_ENOTFOUND : SBX_EIO, "%s: %s", local_path,
                           strerror(errno)); // NOLINT(concurrency-mt-unsafe): message only
    if (!S_ISREG(st.st_mode))
        return client_fail(c, SBX_EINVAL, "%s is not a regular file", local_path);
    char *base = NULL;
    struct curl_slist *ep = NULL;
    int ret = client_execd_endpoint(c, id, &base, &ep);
    struct upload_src src = {.local_path = local_path};
    if (ret == 0)
        ret = do_upload(c, base, ep, &src, remote_path, st.st_mode);
    free(base);
    curl_slist_free_all(ep);
    return ret;
}

int
sbx_file_write(sbx_client *c, const char *id, const char *path, const void *data, size_t len,
               int mode)
{
    if (!c || !path || (!data && len))
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    if (path[0] != '/')
        return client_fail(c, SBX_EINVAL, "sandbox path `%s` is not absolute", path);
    char *base = NULL;
    struct curl_slist *ep = NULL;
    int ret = client_execd_endpoint(c, id, &base, &ep);
    struct upload_src src = {.data = data ? data : "", .len = len};
    if (ret == 0)
        ret = do_upload(c, base, ep, &src, path, (mode_t)(mode > 0 ? mode : 0644));
    free(base);
    curl_slist_free_all(ep);
    return ret;
}

struct download_sink {
    int fd;
    long status;
    CURL *curl;
    struct client_buf err_body;
    int write_failed;
};

static size_t
write_file(char *p, size_t size, size_t nmemb, void *userdata)
{
    struct download_sink *d = userdata;
    size_t n = size * nmemb;
    if (d->status == 0)
        (void)curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &d->status);
    if (d->status < 200 || d->status > 299) {
        (void)client_buf_append(&d->err_body, p, n);
        return n;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(d->fd, p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            d->write_failed = errno ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
    }
    return n;
}

/* GET url (with the endpoint headers ep, may be NULL) into fd. */
static int
fetch_to_fd(sbx_client *c, const char *url, struct curl_slist *ep, int fd)
{
    struct curl_slist *h = NULL;
    struct download_sink d = {.fd = fd, .curl = c->curl};
    client_buf_init(&d.err_body, 1 << 16);
    int ret = with_endpoint_headers(c, url, ep, &h);
    if (ret == 0) {
        (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, write_file);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &d);
        CURLcode rc = curl_easy_perform(c->curl);
        if (d.write_failed)
            ret = client_fail(c, SBX_EIO, "write: %s",
                              strerror(d.write_failed)); // NOLINT(concurrency-mt-unsafe)
        else
            ret = finish(c, rc, url, &d.err_body);
    }
    curl_slist_free_all(h);
    client_buf_free(&d.err_body);
    return ret;
}

/* The file a download goes to until it is complete: a fresh name next to local_path with a
 * random part, created with O_EXCL | O_NOFOLLOW. A predictable name opened without them let a
 * local user plant a symlink there and have whoever runs the download (often root) write the
 * sandbox's bytes through it, anywhere. Here an existing name, symlink or not, is never
 * opened: another random name is tried. Returns the fd (and *tmp, to free), or -1 with errno
 * set (*tmp NULL when out of memory). */
static int
create_partial(const char *local_path, char **tmp)
{
    for (int tries = 0; tries < 16; tries++) {
        unsigned char rnd[8];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return -1;
        free(*tmp);
        *tmp = NULL;
        if (asprintf(tmp, "%s.sbx-partial.%02x%02x%02x%02x%02x%02x%02x%02x", local_path, rnd[0],
                     rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]) < 0) {
            *tmp = NULL;
            return -1;
        }
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int
client_download(sbx_client *c, const char *url, struct curl_slist *ep, const char *local_path)
{
    char *tmp = NULL;
    int fd = create_partial(local_path, &tmp);
    if (fd < 0) {
        int ret = tmp ? client_fail(c, SBX_EIO, "create %s: %s", tmp,
                                    strerror(errno)) // NOLINT(concurrency-mt-unsafe)
                      : client_fail(c, SBX_ENOMEM, "out of memory");
        free(tmp);
        return ret;
    }
    int ret = fetch_to_fd(c, url, ep, fd);
    if (close(fd) < 0 && ret == 0)
        ret = client_fail(c, SBX_EIO, "close %s", tmp);
    /* Only a complete download replaces the destination. */
    if (ret == 0 && rename(tmp, local_path) < 0)
        ret = client_fail(c, SBX_EIO, "rename %s: %s", local_path,
                          strerror(errno)); // NOLINT(concurrency-mt-unsafe)
    if (ret < 0)
        (void)unlink(tmp);
    free(tmp);
    return ret;
}

int
sbx_download(sbx_client *c, const char *id, const char *remote_path, const char *local_path)
{
    if (!c || !remote_path || !local_path)
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    char *base = NULL;
    struct curl_slist *ep = NULL;
    int ret = client_execd_endpoint(c, id, &base, &ep);
    char *epath = ret == 0 ? client_escape(c, remote_path) : NULL;
    char *url = NULL;
    if (ret == 0 && (!epath || asprintf(&url, "%s/files/download?path=%s", base, epath) < 0)) {
        url = NULL;
        ret = client_fail(c, SBX_ENOMEM, "out of memory");
    }
    curl_free(epath);
    if (ret == 0)
        ret = client_download(c, url, ep, local_path);
    free(url);
    free(base);
    curl_slist_free_all(ep);
    return ret;
}
