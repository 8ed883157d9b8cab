/*
 * cmd_version.c - `sbx version` / `sbx --version`.
 */
#include <stdio.h>

#include "cli/cli.h"
#include "sbx/version.h"

int
sbx_cmd_version(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fputs("sbx version: takes no arguments\n", stderr);
        return SBX_EXIT_USAGE;
    }
    printf("sbx %s\n", sbx_version());
    return SBX_EXIT_OK;
}
