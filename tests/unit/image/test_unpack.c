#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/internal.h"

/* One tar member for the canned archives below. */
struct member {
    const char *path;
    int type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR; 0 = hard link */
    const char *data_or_target;
    int mode;
    int uid;
    const char *xattr; /* "name=value" or NULL */
};

enum compress {
    PLAIN,
    GZIP,
    ZSTD
};

static void
add_member(struct archive *a, const struct member *m)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, m->path);
    archive_entry_set_perm(e, (mode_t)(m->mode ? m->mode : 0644));
    archive_entry_set_uid(e, (la_int64_t)m->uid);
    archive_entry_set_gid(e, (la_int64_t)m->uid);
    size_t len = 0;
    if (m->type == 0) {
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, m->data_or_target);
    } else {
        archive_entry_set_filetype(e, (unsigned)m->type);
    }
    if (m->type == AE_IFLNK)
        archive_entry_set_symlink(e, m->data_or_target);
    if (m->type == AE_IFCHR)
        archive_entry_set_rdev(e, makedev(1, 3));
    if (m->type == AE_IFREG && m->data_or_target)
        len = strlen(m->data_or_target);
    archive_entry_set_size(e, (la_int64_t)len);
    if (m->xattr) {
        const char *eq = strchr(m->xattr, '=');
        sbx_autofree char *name = sbx_xstrndup(m->xattr, (size_t)(eq - m->xattr));
        archive_entry_xattr_add_entry(e, name, eq + 1, strlen(eq + 1));
    }
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    if (len)
        assert_int_equal(archive_write_data(a, m->data_or_target, len), (la_ssize_t)len);
    archive_entry_free(e);
}

/* Write the members as a tar file and return an fd open on it. */
static int
make_tar(const char *dir, const struct member *ms, size_t n, enum compress c)
{
    sbx_autofree char *path = sbx_xasprintf("%s/layer.tar", dir);
    struct archive *a = archive_write_new();
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    if (c == GZIP)
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    if (c == ZSTD)
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++)
        add_member(a, &ms[i]);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    (void)unlink(path);
    return fd;
}

struct fixture {
    char *top;     /* private temp dir */
    char *layer;   /* top/layer: the unpack target */
    char *outside; /* top/outside: must stay empty */
};

static int
setup(void **state)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skip: unpacking needs root (chown, mknod, trusted xattrs)\n");
        return -1;
    }
    struct fixture *f = sbx_xcalloc(1, sizeof(*f));
    f->top = sbx_xasprintf("/tmp/sbx-unpack-test.%d.XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(f->top));
    f->layer = sbx_xasprintf("%s/layer", f->top);
    f->outside = sbx_xasprintf("%s/outside", f->top);
    assert_int_equal(mkdir(f->layer, 0755), 0);
    assert_int_equal(mkdir(f->outside, 0755), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    if (!f)
        return 0;
    assert_int_equal(sbx_rm_rf(f->top, NULL), 0);
    free(f->top);
    free(f->layer);
    free(f->outside);
    free(f);
    return 0;
}

static int
unpack(struct fixture *f, const struct member *ms, size_t n, enum compress c, sbx_error **err)
{
    sbx_autoclose int fd = make_tar(f->top, ms, n, c);
    return sbx_image_unpack(f->layer, fd, err);
}

static char *
at(const struct fixture *f, const char *rel)
{
    return sbx_xasprintf("%s/%s", f->layer, rel);
}

static void
assert_whiteout(const struct fixture *f, const char *rel)
{
    sbx_autofree char *p = at(f, rel);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_rdev, makedev(0, 0));
}

static void
assert_missing(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        fail_msg("`%s` exists", path);
}

static void
test_whiteouts(void **state)
{
    struct fixture *f = *state;
    const struct member ms[] = {
        {"./", AE_IFDIR, NULL, 0755, 0, NULL},
        {"./d/", AE_IFDIR, NULL, 0750, 0, NULL},
        {"./d/.wh..wh..opq", AE_IFREG, NULL, 0, 0, NULL},
        {"./d/kept", AE_IFREG, "kept\n", 0, 0, NULL},
        {"./.wh.gone", AE_IFREG, NULL, 0, 0, NULL},
        {"implicit/dir/.wh.victim", AE_IFREG, NULL, 0, 0, NULL},
        {"./.wh..wh.plnk", AE_IFREG, NULL, 0, 0, NULL},
    };
    sbx_autoerror sbx_error *err = NULL;
    if (unpack(f, ms, SBX_ARRAY_SIZE(ms), GZIP, &err) != 0)
        fail_msg("%s", sbx_error_msg(err));
    assert_whiteout(f, "gone");
    assert_whiteout(f, "implicit/dir/victim");
    sbx_autofree char *d = at(f, "d");
    char val[8] = {0};
    assert_int_equal(getxattr(d, "trusted.overlay.opaque", val, sizeof(val)), 1);
    assert_string_equal(val, "y");
    sbx_autofree char *opq = at(f, "d/.wh..wh..opq");
    sbx_autofree char *wh = at(f, ".wh.gone");
    sbx_autofree char *plnk = at(f, ".wh..wh.plnk");
    assert_missing(opq);
    assert_missing(wh);
    assert_missing(plnk);
    sbx_autofree char *kept = at(f, "d/kept");
    sbx_autofree char *data = NULL;
    assert_int_equal(sbx_read_file(kept, 100, &data, NULL, NULL), 0);
    assert_string_equal(data, "kept\n");
}

static void
test_modes_owners_xattrs(void **state)
{
    struct fixture *f = *state;
    const struct member ms[] = {
        {"bin/suid", AE_IFREG, "x", 04755, 1234, NULL},
        {"bin/link", AE_IFLNK, "suid", 0777, 1234, NULL},
        {"bin/hard", 0, "bin/suid", 0, 0, NULL},
        {"dev/null", AE_IFCHR, NULL, 0666, 0, NULL},
        {"f", AE_IFREG, "f", 0600, 0, "user.note=hi"},
        {"g", AE_IFREG, "g", 0600, 0, "trusted.overlay.redirect=/etc"},
    };
    sbx_autoerror sbx_error *err = NULL;
    if (unpack(f, ms, SBX_ARRAY_SIZE(ms), ZSTD, &err) != 0)
        fail_msg("%s", sbx_error_msg(err));
    sbx_autofree char *suid = at(f, "bin/suid");
    sbx_autofree char *hard = at(f, "bin/hard");
    sbx_autofree char *link = at(f, "bin/link");
    struct stat st;
    struct stat st2;
    assert_int_equal(lstat(suid, &st), 0);
    assert_int_equal(st.st_mode & 07777, 04755);
    assert_int_equal(st.st_uid, 1234);
    assert_int_equal(lstat(hard, &st2), 0);
    assert_int_equal(st.st_ino, st2.st_ino);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(st.st_uid, 1234);
    sbx_autofree char *dev = at(f, "dev/null");
    assert_missing(dev); /* a real device node is never created from a layer */
    sbx_autofree char *fp = at(f, "f");
    sbx_autofree char *gp = at(f, "g");
    char val[16] = {0};
    assert_int_equal(getxattr(fp, "user.note", val, sizeof(val)), 2);
    assert_true(getxattr(gp, "trusted.overlay.redirect", val, sizeof(val)) < 0);
}

/* Each hostile tar must fail and leave nothing outside the layer dir. */
static void
expect_rejected(struct fixture *f, const struct member *ms, size_t n, const char *escape)
{
    sbx_autoerror sbx_error *err = NULL;
    assert_int_equal(unpack(f, ms, n, PLAIN, &err), -SBX_EINVAL);
    assert_non_null(err);
    sbx_autofree char *p = sbx_xasprintf("%s/%s", f->top, escape);
    assert_missing(p);
    sbx_autoclosedir DIR *d = opendir(f->outside);
    assert_non_null(d);
    int n_entries = 0;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded test */
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n_entries += de->d_name[0] != '.';
    assert_int_equal(n_entries, 0);
}

static void
test_rejects_dotdot(void **state)
{
    const struct member ms[] = {{"a/../../evil", AE_IFREG, "evil", 0, 0, NULL}};
    expect_rejected(*state, ms, 1, "evil");
}

static void
test_rejects_absolute(void **state)
{
    struct fixture *f = *state;
    sbx_autofree char *abs = sbx_xasprintf("%s/evil", f->outside);
    const struct member ms[] = {{abs, AE_IFREG, "evil", 0, 0, NULL}};
    expect_rejected(f, ms, 1, "outside/evil");
}

static void
test_rejects_write_through_symlink(void **state)
{
    struct fixture *f = *state;
    const struct member ms[] = {
        {"link", AE_IFLNK, f->outside, 0777, 0, NULL},
        {"link/evil", AE_IFREG, "evil", 0, 0, NULL},
    };
    expect_rejected(f, ms, SBX_ARRAY_SIZE(ms), "outside/evil");
}

static void
test_rejects_relative_symlink_escape(void **state)
{
    const struct member ms[] = {
        {"up", AE_IFLNK, "../outside", 0777, 0, NULL},
        {"up/sub/evil", AE_IFREG, "evil", 0, 0, NULL},
    };
    expect_rejected(*state, ms, SBX_ARRAY_SIZE(ms), "outside/sub");
}

static void
test_rejects_hardlink_escape(void **state)
{
    const struct member ms[] = {{"h", 0, "../outside/x", 0, 0, NULL}};
    expect_rejected(*state, ms, 1, "layer/h");
}

static void
test_symlink_is_replaced_not_followed(void **state)
{
    struct fixture *f = *state;
    /* A later regular file with the symlink's name replaces the link, never writes through. */
    sbx_autofree char *target = sbx_xasprintf("%s/victim", f->outside);
    const struct member ms[] = {
        {"s", AE_IFLNK, target, 0777, 0, NULL},
        {"s", AE_IFREG, "data", 0644, 0, NULL},
    };
    sbx_autoerror sbx_error *err = NULL;
    if (unpack(f, ms, SBX_ARRAY_SIZE(ms), PLAIN, &err) != 0)
        fail_msg("%s", sbx_error_msg(err));
    assert_missing(target);
    sbx_autofree char *s = at(f, "s");
    struct stat st;
    assert_int_equal(lstat(s, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_whiteouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes_owners_xattrs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_dotdot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_absolute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_write_through_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_relative_symlink_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_hardlink_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_is_replaced_not_followed, setup, teardown),
    };
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: unpack tests need root\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
