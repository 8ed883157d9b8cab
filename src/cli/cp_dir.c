/*
 * cp_dir.c - `sbx cp` of directories and tar streams, as `docker cp`: a tar stream between
 * libarchive here and `tar` in the sandbox (as `kubectl cp`), carried by execd's pipe mode
 * (term.c), byte for byte and with backpressure both ways.
 *
 * Into the sandbox: a thread walks the local directory (symlinks stored, not followed) and
 * writes a pax archive into a pipe whose other end is the command's stdin (`tar -x -C DST`).
 * Entries carry uid/gid 0 and no names, so the files belong to the sandbox's user (docker's
 * rule: ownership is the destination's). Out of it: `tar -c` in the sandbox writes to its
 * stdout, which a pipe takes to a thread that extracts with libarchive, refusing `..`, absolute
 * names, anything outside the copied directory, and writing through symlinks.
 *
 * Where it lands, as docker cp: a destination that is a directory gets SRC's base name in it;
 * one that does not exist becomes the copy of SRC. `-` as the local side is a tar stream on
 * stdin or stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "cli/cli.h"
#include "cli/cp_dir.h"
#include "cli/term.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

#define CP_CHUNK (64u << 10)

/* A shell command: fmt with each %s replaced by the next argument, quoted. */
static char *
shell_cmd(const char *fmt, const char *a, const char *b)
{
    struct sbx_buf out;
    sbx_buf_init(&out, 1 << 20);
    const char *args[] = {a, b};
    size_t k = 0;
    for (const char *p = fmt; *p; p++) {
        if (p[0] == '%' && p[1] == 's' && k < 2) {
            (void)sbx_buf_append_shell_quoted(&out, args[k++], NULL);
            p++;
        } else {
            (void)sbx_buf_append(&out, p, 1, NULL);
        }
    }
    return sbx_buf_steal(&out);
}

/* The last component of a path ("" for "/"), trailing slashes ignored. */
static char *
base_of(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *start = path;
    for (size_t i = 0; i < n; i++) {
        if (path[i] == '/')
            start = path + i + 1;
    }
    return sbx_xstrndup(start, (size_t)(path + n - start));
}

/* The directory part of a path, as dirname(1): "/a/b/" -> "/a", "b" -> ".", "/a" -> "/". */
static char *
dir_of(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0)
        return sbx_xstrdup(".");
    return sbx_xstrndup(path, n);
}

/* Run `cmd` in the sandbox with stdin from in_fd and stdout to out_fd (0: ours). The command's
 * exit code, or -1 after printing when sbx failed. */
static int
run_remote(sbx_client *c, const char *id, const char *cmd, int in_fd, int out_fd)
{
    struct sbx_cli_pipe_opts o = {
        .command = cmd, .stdin_open = in_fd >= 0, .in_fd = in_fd, .out_fd = out_fd};
    int rc = sbx_cli_pipe(c, "cp", id, &o);
    if (rc == SBX_TERM_FAILED)
        return -1;
    if (rc == 127)
        fprintf(stderr, "sbx cp: the sandbox has no `tar` (copying directories needs one, as "
                        "kubectl cp does)\n");
    else if (rc != 0)
        fprintf(stderr, "sbx cp: tar in the sandbox exited with %d\n", rc);
    return rc;
}

/* ---- into the sandbox ---- */

struct writer {
    const char *local;  /* the directory (or file) to send */
    const char *prefix; /* its name in the archive ("." for its contents) */
    int fd;             /* the pipe to the command's stdin; closed at the end */
    char err[512];
};

static int
send_data(struct archive *disk, struct archive *w)
{
    char *buf = sbx_xmalloc(CP_CHUNK);
    la_ssize_t n = 0;
    while ((n = archive_read_data(disk, buf, CP_CHUNK)) > 0) {
        if (archive_write_data(w, buf, (size_t)n) != n)
            break;
    }
    free(buf);
    return n == 0 ? 0 : -1;
}

/* e's path below w->local, renamed below w->prefix. */
static void
rename_entry(const struct writer *wr, struct archive_entry *e)
{
    const char *p = archive_entry_pathname(e);
    size_t ln = strlen(wr->local);
    const char *rest = strncmp(p, wr->local, ln) == 0 ? p + ln : p;
    while (*rest == '/')
        rest++;
    sbx_autofree char *name =
        *rest ? sbx_xasprintf("%s/%s", wr->prefix, rest) : sbx_xstrdup(wr->prefix);
    archive_entry_set_pathname(e, name);
    archive_entry_set_uid(e, 0); /* the destination's user owns what it gets */
    archive_entry_set_gid(e, 0);
    archive_entry_set_uname(e, NULL);
    archive_entry_set_gname(e, NULL);
}

static int
walk(struct writer *wr, struct archive *disk, struct archive *w)
{
    int r = archive_read_disk_open(disk, wr->local);
    while (r == ARCHIVE_OK) {
        struct archive_entry *e = archive_entry_new();
        r = archive_read_next_header2(disk, e);
        if (r == ARCHIVE_OK || r == ARCHIVE_WARN) {
            (void)archive_read_disk_descend(disk);
            rename_entry(wr, e);
            r = archive_write_header(w, e);
            if (r == ARCHIVE_OK && archive_entry_filetype(e) == AE_IFREG &&
                archive_entry_size(e) > 0 && send_data(disk, w) < 0)
                r = ARCHIVE_FATAL;
        }
        archive_entry_free(e);
    }
    if (r != ARCHIVE_EOF) {
        const char *why =
            archive_error_string(disk) ? archive_error_string(disk) : archive_error_string(w);
        (void)snprintf(wr->err, sizeof wr->err, "%s: %s", wr->local,
                       why ? why : "the sandbox stopped reading");
        return -1;
    }
    return 0;
}

static void *
writer_main(void *arg)
{
    struct writer *wr = arg;
    struct archive *disk = archive_read_disk_new();
    struct archive *w = archive_write_new();
    (void)archive_read_disk_set_symlink_physical(disk); /* symlinks as symlinks */
    (void)archive_write_set_format_pax_restricted(w);
    (void)archive_write_set_bytes_in_last_block(w, 1);
    if (archive_write_open_fd(w, wr->fd) == ARCHIVE_OK && walk(wr, disk, w) == 0)
        (void)archive_write_close(w);
    archive_write_free(w);
    archive_read_free(disk);
    close(wr->fd); /* EOF: the command's tar finishes */
    return NULL;
}

static int
send_tree(sbx_client *c, const char *id, const char *local, const char *prefix, const char *dst)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        fprintf(stderr, "sbx cp: pipe: %s\n", strerrordesc_np(errno));
        return -1;
    }
    struct writer wr = {.local = local, .prefix = prefix, .fd = p[1]};
    pthread_t th;
    if (pthread_create(&th, NULL, writer_main, &wr) != 0) {
        close(p[0]);
        close(p[1]);
        fprintf(stderr, "sbx cp: cannot start a thread\n");
        return -1;
    }
    sbx_autofree char *cmd = shell_cmd("mkdir -p %s && tar -xf - -C %s", dst, dst);
    int rc = run_remote(c, id, cmd, p[0], 0);
    close(p[0]); /* a writer still writing gets EPIPE */
    (void)pthread_join(th, NULL);
    if (wr.err[0]) {
        fprintf(stderr, "sbx cp: %s\n", wr.err);
        return -1;
    }
    return rc == 0 ? 0 : -1;
}

/* A local directory (or `-`: a tar stream on stdin) to remote path dst. */
int
sbx_cli_cp_up(sbx_client *c, const char *id, const char *local, const char *dst)
{
    if (strcmp(local, "-") == 0) {
        sbx_autofree char *cmd = shell_cmd("mkdir -p %s && tar -xf - -C %s", dst, dst);
        return run_remote(c, id, cmd, STDIN_FILENO, 0) == 0 ? 0 : -1;
    }
    int dir = sbx_cli_remote_is_dir(c, id, dst);
    if (dir < 0)
        return -1;
    /* docker cp: into an existing directory under SRC's name (its contents for `DIR/.`);
     * else DST becomes the copy */
    sbx_autofree char *base = base_of(local);
    bool contents = !strcmp(base, ".") || !strcmp(base, "..") || !*base || !dir;
    return send_tree(c, id, local, contents ? "." : base, dst);
}

/* ---- out of the sandbox ---- */

struct reader {
    int fd;           /* the pipe from the command's stdout */
    const char *base; /* the name of the copied tree in the archive */
    const char *root; /* where it lands here */
    char err[512];
};

/* The path here of archive name `name` (NULL when it lies outside the copied tree or has a
 * `..`): root + what follows base. */
static char *
local_name(const struct reader *rd, const char *name)
{
    size_t bn = strlen(rd->base);
    if (strncmp(name, rd->base, bn) != 0 || (name[bn] != '\0' && name[bn] != '/'))
        return NULL;
    const char *rest = name + bn;
    for (const char *p = rest; *p; p++) {
        if (p[0] == '/' && p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\0'))
            return NULL;
    }
    while (*rest == '/')
        rest++;
    return *rest ? sbx_xasprintf("%s/%s", rd->root, rest) : sbx_xstrdup(rd->root);
}

static int
extract_one(struct reader *rd, struct archive *a, struct archive *disk, struct archive_entry *e)
{
    sbx_autofree char *path = local_name(rd, archive_entry_pathname(e));
    const char *link = archive_entry_hardlink(e);
    sbx_autofree char *lpath = link ? local_name(rd, link) : NULL;
    if (!path || (link && !lpath)) {
        (void)snprintf(rd->err, sizeof rd->err, "refused `%s`: outside the copied directory",
                       archive_entry_pathname(e));
        return -1;
    }
    archive_entry_set_pathname(e, path);
    if (lpath)
        archive_entry_set_hardlink(e, lpath);
    if (archive_write_header(disk, e) != ARCHIVE_OK) {
        (void)snprintf(rd->err, sizeof rd->err, "%s: %s", path, archive_error_string(disk));
        return -1;
    }
    const void *buf = NULL;
    size_t n = 0;
    la_int64_t off = 0;
    int r = ARCHIVE_OK;
    while ((r = archive_read_data_block(a, &buf, &n, &off)) == ARCHIVE_OK) {
        if (archive_write_data_block(disk, buf, n, off) != ARCHIVE_OK)
            break;
    }
    if (r != ARCHIVE_EOF || archive_write_finish_entry(disk) != ARCHIVE_OK) {
        (void)snprintf(rd->err, sizeof rd->err, "%s: %s", path,
                       archive_error_string(r != ARCHIVE_EOF ? a : disk));
        return -1;
    }
    return 0;
}

static void *
reader_main(void *arg)
{
    struct reader *rd = arg;
    struct archive *a = archive_read_new();
    struct archive *disk = archive_write_disk_new();
    (void)archive_read_support_format_tar(a);
    (void)archive_write_disk_set_options(disk, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                   ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                   ARCHIVE_EXTRACT_SECURE_SYMLINKS);
    int r = archive_read_open_fd(a, rd->fd, CP_CHUNK);
    struct archive_entry *e = NULL;
    while (r == ARCHIVE_OK && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        if (extract_one(rd, a, disk, e) < 0)
            break;
    }
    if (r != ARCHIVE_EOF && !rd->err[0])
        (void)snprintf(rd->err, sizeof rd->err, "reading the archive: %s",
                       archive_error_string(a) ? archive_error_string(a) : "no tar stream");
    (void)archive_write_close(disk);
    archive_write_free(disk);
    archive_read_free(a);
    /* drain what is left, so that the session is not stuck on a full pipe */
    char sink[4096];
    while (read(rd->fd, sink, sizeof sink) > 0) {
    }
    close(rd->fd);
    return NULL;
}

static int
receive_tree(sbx_client *c, const char *id, const char *src, const char *root)
{
    sbx_autofree char *dir = dir_of(src);
    sbx_autofree char *base = base_of(src);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        fprintf(stderr, "sbx cp: pipe: %s\n", strerrordesc_np(errno));
        return -1;
    }
    struct reader rd = {.fd = p[0], .base = *base ? base : ".", .root = root};
    pthread_t th;
    if (pthread_create(&th, NULL, reader_main, &rd) != 0) {
        close(p[0]);
        close(p[1]);
        fprintf(stderr, "sbx cp: cannot start a thread\n");
        return -1;
    }
    sbx_autofree char *cmd = shell_cmd("tar -cf - -C %s %s", *base ? dir : src, rd.base);
    int rc = run_remote(c, id, cmd, -1, p[1]);
    close(p[1]); /* EOF for the reader */
    (void)pthread_join(th, NULL);
    if (rd.err[0]) {
        fprintf(stderr, "sbx cp: %s\n", rd.err);
        return -1;
    }
    return rc == 0 ? 0 : -1;
}

int
sbx_cli_cp_down(sbx_client *c, const char *id, const char *src, const char *local)
{
    if (strcmp(local, "-") == 0) { /* docker cp ID:SRC -: a tar stream on stdout */
        sbx_autofree char *dir = dir_of(src);
        sbx_autofree char *base = base_of(src);
        sbx_autofree char *cmd =
            shell_cmd("tar -cf - -C %s %s", *base ? dir : src, *base ? base : ".");
        return run_remote(c, id, cmd, -1, 0) == 0 ? 0 : -1;
    }
    struct stat st;
    bool exists = stat(local, &st) == 0;
    if (exists && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sbx cp: %s: cannot copy a directory onto a file\n", local);
        return -1;
    }
    sbx_autofree char *base = base_of(src);
    /* docker cp: into an existing directory under SRC's name; else LOCAL becomes the copy */
    sbx_autofree char *root =
        exists && *base ? sbx_xasprintf("%s/%s", local, base) : sbx_xstrdup(local);
    return receive_tree(c, id, src, root);
}

int
sbx_cli_remote_is_dir(sbx_client *c, const char *id, const char *path)
{
    int code = 0;
    sbx_autofree char *probe = shell_cmd("test -d %s", path, NULL);
    if (sbx_exec(&code, c, id, probe, NULL) < 0) {
        fprintf(stderr, "sbx cp: %s: %s\n", id, sbx_client_last_error(c));
        return -1;
    }
    return code == 0;
}
