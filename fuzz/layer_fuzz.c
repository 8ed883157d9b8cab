/*
 * layer_fuzz.c - an image layer as a registry or an image archive sends it (a tar, plain, gzip
 * or zstd): unpacked into a fresh directory (sbx_image_unpack), which must never write outside
 * it - a sibling directory stays empty whatever the entries' names, links and whiteouts say -
 * and whatever it unpacked is written back as a layer (sbx_image_layer_write, what a snapshot
 * does with a sandbox's files) without an error. Works under $TMPDIR (default /tmp).
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "fuzz/fuzz.h"
#include "image/image.h"
#include "image/internal.h"

static char *base; /* <tmp>/sbx-layer-fuzz-XXXXXX: holds `in` (the layer) and `out` (a sibling) */

static void
setup(void)
{
    if (base)
        return;
    /* $TMPDIR on a tmpfs (/dev/shm) runs it ~2x faster than a disk's /tmp. */
    const char *tmp = getenv("TMPDIR"); /* NOLINT(concurrency-mt-unsafe): single-threaded */
    base = sbx_xasprintf("%s/sbx-layer-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base))
        abort();
    sbx_autofree char *out = sbx_xasprintf("%s/out", base);
    if (mkdir(out, 0755) < 0)
        abort();
}

static bool
empty_dir(const char *path)
{
    sbx_autoclosedir DIR *d = opendir(path);
    if (!d)
        return false;
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded fuzz target */
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return false;
    }
    return true;
}

static int
input_fd(const uint8_t *data, size_t size)
{
    int fd = memfd_create("layer", MFD_CLOEXEC);
    if (fd < 0 || sbx_write_all(fd, data, size) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        abort();
    return fd;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    sbx_autofree char *in = sbx_xasprintf("%s/in", base);
    sbx_autofree char *out = sbx_xasprintf("%s/out", base);
    if (mkdir(in, 0755) < 0)
        abort();
    sbx_autoclose int fd = input_fd(data, size);
    sbx_error *err = NULL;
    int r = sbx_image_unpack(in, fd, &err);
    sbx_error_clear(&err);
    if (!empty_dir(out))
        __builtin_trap(); /* something was written beside the layer */
    if (r == 0) {
        sbx_autoclose int tar = memfd_create("back", MFD_CLOEXEC);
        char *diff_id = NULL;
        if (tar < 0 || sbx_image_layer_write(in, tar, &diff_id, NULL, &err) < 0)
            __builtin_trap(); /* an unpacked layer must always write back */
        free(diff_id);
    }
    if (sbx_rm_rf(in, &err) < 0)
        abort();
    return 0;
}
