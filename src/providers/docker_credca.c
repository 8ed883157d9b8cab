/*
 * docker_credca.c - the image's CA bundle for the credential proxy's HTTPS on docker (see
 * docker_credca.h, docs/network.md "Credential proxy" "On docker").
 *
 * The bundle is read through the engine, from a container of the image that is created, never
 * started, and removed at once (`sbx-<id>-ca`): GET /containers/{id}/archive?path=... gives a
 * tar of that one path. Why this is safe with an untrusted image:
 * - every path is resolved by the engine inside the container's root filesystem (dockerd: its
 *   symlink resolution scoped to the root; podman: its chrooted copier), never by the server on
 *   the host: a symlink to /etc/shadow names the image's /etc/shadow (absent: no bundle);
 * - the archive's entry for a symlink is followed here only by asking the engine again for its
 *   target (absolute, or relative to the link's directory), at most LINK_HOPS times; a target
 *   with characters beyond [A-Za-z0-9._/+_-] is not followed (it would go into the URL);
 * - the answer is read into memory with a hard limit (SBX_CREDCA_BUNDLE_MAX plus the archive's
 *   headers): an image's huge file is not taken (no bundle, as native), never fills the
 *   server's memory or disk;
 * - only a regular file's bytes are taken (a device, fifo or directory entry: no bundle);
 * - the archive is read by libarchive (as every tar in sbx), from memory, its sizes checked
 *   against what came.
 */
#include "providers/docker_credca.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "providers/credca.h"

#define LINK_HOPS   8
#define ARCHIVE_MAX (SBX_CREDCA_BUNDLE_MAX + (size_t)64 * 1024)
#define PATH_MAXLEN 1024

static bool
path_ok(const char *p)
{
    size_t n = strlen(p);
    return p[0] == '/' && n < PATH_MAXLEN &&
           strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/+_-") == n;
}

/* A regular file's bytes: exactly size of them, or false (an archive cut short). */
static bool
read_data(struct archive *a, struct sbx_docker_tar_entry *e, size_t size)
{
    e->data = sbx_xmalloc(size + 1);
    while (e->size < size) {
        la_ssize_t n = archive_read_data(a, e->data + e->size, size - e->size);
        if (n <= 0)
            return false;
        e->size += (size_t)n;
    }
    return true;
}

static bool
read_entry(struct archive *a, struct archive_entry *ent, struct sbx_docker_tar_entry *e)
{
    switch (archive_entry_filetype(ent)) {
    case AE_IFREG:
        if (archive_entry_hardlink(ent)) {
            e->type = '1'; /* a hard link: its bytes are another entry's */
            return true;
        }
        e->type = '0';
        /* (libarchive checks the size against what the archive holds as it reads) */
        return archive_entry_size_is_set(ent) && archive_entry_size(ent) >= 0 &&
               (uint64_t)archive_entry_size(ent) <= SBX_CREDCA_BUNDLE_MAX &&
               read_data(a, e, (size_t)archive_entry_size(ent));
    case AE_IFLNK: {
        const char *l = archive_entry_symlink(ent);
        if (!l || strlen(l) >= sizeof e->link)
            return false;
        e->type = '2';
        memcpy(e->link, l, strlen(l) + 1);
        return true;
    }
    default:
        e->type = '?'; /* a directory, device or fifo: not taken */
        return true;
    }
}

bool
sbx_docker_tar_first(const char *buf, size_t len, struct sbx_docker_tar_entry *e)
{
    *e = (struct sbx_docker_tar_entry){0};
    struct archive *a = archive_read_new();
    if (!a)
        return false;
    (void)archive_read_support_format_tar(a); /* ustar, pax (long names), GNU */
    struct archive_entry *ent = NULL;
    bool ok = archive_read_open_memory(a, buf, len) == ARCHIVE_OK &&
              archive_read_next_header(a, &ent) == ARCHIVE_OK && read_entry(a, ent, e);
    archive_read_free(a);
    if (!ok)
        sbx_docker_tar_entry_free(e);
    return ok;
}

void
sbx_docker_tar_entry_free(struct sbx_docker_tar_entry *e)
{
    free(e->data);
    *e = (struct sbx_docker_tar_entry){0};
}

/* An archive the engine answered: data (n bytes), or found false (no such path). */
struct blob {
    char *data;
    size_t n;
    bool found;
};

/* The archive of path in container cont into memory. */
static int
archive_get(const struct sbx_docker_credca *c, const char *cont, const char *path, struct blob *out,
            sbx_error **err)
{
    sbx_autoclose int fd = memfd_create("sbx-cabundle", MFD_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_EIO, errno, "memfd_create");
    sbx_autofree char *p = sbx_xasprintf("/containers/%s/archive?path=%s", cont, path);
    static const int ok[] = {404, 0};
    struct sbx_docker_req req = {.method = "GET",
                                 .path = p,
                                 .what = "read the image's CA bundle",
                                 .ok = ok,
                                 .out_fd = fd,
                                 .out_max = ARCHIVE_MAX};
    long status = 0;
    sbx_autoerror sbx_error *e = NULL;
    int r = sbx_docker_call(c->api, &req, &status, NULL, &e);
    if (r < 0 && e && e->sys_errno == EFBIG)
        r = 0; /* larger than any bundle: not taken (as native's reading of the layers) */
    out->found = r == 0 && status == 200 && !e;
    if (r < 0) {
        sbx_error_move(err, &e);
        return r;
    }
    if (!out->found)
        return 0;
    off_t size = lseek(fd, 0, SEEK_END);
    out->data = sbx_xmalloc(size > 0 ? (size_t)size + 1 : 1);
    out->n = size > 0 ? (size_t)pread(fd, out->data, (size_t)size, 0) : 0;
    if (size < 0 || out->n != (size_t)size)
        return sbx_error_set(err, SBX_EIO, errno, "read the image's CA bundle");
    return 0;
}

char *
sbx_docker_link_next(const char *from, const char *link)
{
    const char *slash = strrchr(from, '/');
    char *next = link[0] == '/' || !slash
                     ? sbx_xstrdup(link)
                     : sbx_xasprintf("%.*s/%s", (int)(slash - from), from, link);
    if (!link[0] || !path_ok(next)) {
        free(next);
        return NULL;
    }
    return next;
}

/* The bundle's bytes (*base, *n) from container cont; *base NULL when there is none. */
static int
bundle_of(const struct sbx_docker_credca *c, const char *cont, char **base, size_t *n,
          sbx_error **err)
{
    sbx_autofree char *path = sbx_xstrdup(SBX_CREDCA_BUNDLE);
    *base = NULL;
    for (int hop = 0; hop < LINK_HOPS; hop++) {
        struct blob tar = {0};
        struct sbx_docker_tar_entry e = {0};
        int r = archive_get(c, cont, path, &tar, err);
        bool ok = r == 0 && tar.found && sbx_docker_tar_first(tar.data, tar.n, &e) &&
                  (e.type == '0' || e.type == '2');
        free(tar.data);
        if (!ok) {
            sbx_docker_tar_entry_free(&e);
            return r;
        }
        char *next = e.type == '2' ? sbx_docker_link_next(path, e.link) : NULL;
        if (e.type == '0') {
            *base = e.data; /* taken over */
            *n = e.size;
            e.data = NULL;
        }
        sbx_docker_tar_entry_free(&e);
        if (!next)
            return 0; /* a file, or a link not to follow (a name not to put into a URL) */
        free(path);
        path = next;
    }
    return 0; /* too many links: no bundle */
}

static int
probe_create(const struct sbx_docker_credca *c, const char *cont, sbx_error **err)
{
    sbx_autofree char *p = sbx_xasprintf("/containers/create?name=%s", cont);
    /* never started: no entrypoint needed, no network */
    json_t *body =
        json_pack("{s:s, s:[s], s:[], s:b, s:{s:s}, s:{s:s}}", "Image", c->image, "Entrypoint",
                  "/.sbx-never-started", "Cmd", "NetworkDisabled", 1, "Labels", "io.sbx.ca-probe",
                  c->id, "HostConfig", "NetworkMode", "none");
    struct sbx_docker_req req = {
        .method = "POST", .path = p, .body = body, .what = "create the CA bundle's reader"};
    int r = sbx_docker_call(c->api, &req, NULL, NULL, err);
    json_decref(body);
    return r;
}

static void
probe_remove(const struct sbx_docker_credca *c, const char *cont)
{
    sbx_autofree char *p = sbx_xasprintf("/containers/%s?force=1&v=1", cont);
    static const int ok[] = {404, 0};
    struct sbx_docker_req req = {
        .method = "DELETE", .path = p, .what = "remove the CA bundle's reader", .ok = ok};
    sbx_autoerror sbx_error *e = NULL;
    (void)sbx_docker_call(c->api, &req, NULL, NULL, &e);
}

int
sbx_docker_credca_prepare(const struct sbx_docker_credca *c, char bundle[4096], sbx_error **err)
{
    bundle[0] = '\0';
    char cont[128];
    (void)snprintf(cont, sizeof cont, "sbx-%.64s-ca", c->id);
    probe_remove(c, cont); /* a leftover of a create that failed half-way */
    sbx_autofree char *base = NULL;
    size_t n = 0;
    int r = probe_create(c, cont, err);
    if (r == 0)
        r = bundle_of(c, cont, &base, &n, err);
    probe_remove(c, cont);
    if (r < 0)
        return sbx_error_wrap(err, "credentialProxy: the CA bundle of image `%s`", c->image);
    if (!base)
        return 0; /* no bundle in the image: nothing to add the CA to (HTTPS stays spliced) */
    struct sbx_credca_base b = {
        .vault = c->vault, .state_dir = c->state_dir, .id = c->id, .data = base, .n = n};
    return sbx_credca_prepare_with(&b, bundle, err);
}
