/*
 * forward.c - run a heavy verb in the companion binary sbx-full (see main.c, HEAVY()).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/xalloc.h"

int
sbx_cli_forward(int argc, char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "sbx %s: cannot find my own binary: %s\n", argv[0],
                strerror(errno)); // NOLINT(concurrency-mt-unsafe): single-threaded CLI
        return SBX_EXIT_FAIL;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    char *full = sbx_xasprintf("%s/sbx-full", self);
    /* sbx-full gets the same command line: "sbx VERB ARGS..." */
    char **args = sbx_xcalloc((size_t)argc + 2, sizeof *args);
    args[0] = (char *)"sbx";
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    execv(full, args);
    fprintf(stderr, "sbx %s: cannot run %s: %s\n", argv[0], full,
            strerror(errno)); // NOLINT(concurrency-mt-unsafe): single-threaded CLI
    return SBX_EXIT_FAIL;
}
