/*
 * standalone.c - replay fuzz corpora without libFuzzer (libgit2's driver): every file named on
 * the command line, or inside a directory named there, is run through the target once. CTest
 * runs this under the sanitizer build so the corpora are regression tests.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "fuzz/fuzz.h"

static int
run_file(const char *path)
{
    sbx_autofree char *data = NULL;
    size_t len = 0;
    if (sbx_read_file(path, 64u << 20, &data, &len, NULL) < 0) {
        fprintf(stderr, "fuzz: cannot read %s\n", path);
        return -1;
    }
    (void)LLVMFuzzerTestOneInput((const uint8_t *)data, len);
    return 0;
}

static int
run_dir(const char *dir, int *count)
{
    sbx_autoclosedir DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): single-threaded driver */
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        sbx_autofree char *p = sbx_xasprintf("%s/%s", dir, e->d_name);
        if (run_file(p) < 0)
            return -1;
        (*count)++;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "fuzz: no such file %s\n", argv[i]);
            return 1;
        }
        int r = S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) : run_file(argv[i]);
        if (r < 0)
            return 1;
        count += !S_ISDIR(st.st_mode);
    }
    printf("fuzz: %d inputs replayed\n", count);
    return count > 0 ? 0 : 1;
}
