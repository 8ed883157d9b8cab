/*
 * cmd_cp.c - `sbx cp SRC DST`: copy a file or a directory into or out of a sandbox, as docker
 * cp. One side is ID:/absolute/path, the other a local path or `-` (a tar stream). Files go
 * through execd's files API; directories and `-` as tar streams (cp_dir.c).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/client_util.h"
#include "cli/cp_dir.h"
#include "common/xalloc.h"

/* "ID:/path" → id and path (id allocated); a local path (no ':' before a '/') → 0. */
static int
split_remote(const char *arg, char **id, const char **path)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    if (!colon || colon == arg || (slash && slash < colon))
        return 0;
    *id = sbx_xstrndup(arg, (size_t)(colon - arg));
    *path = colon + 1;
    return 1;
}

static bool
local_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A directory or a tar stream (cp_dir.c): 0, or 2 when it said why. */
static int
copy_tree(sbx_client *c, const char *id, bool down, const char *path, const char *local)
{
    int r = down ? sbx_cli_cp_down(c, id, path, local) : sbx_cli_cp_up(c, id, local, path);
    return r < 0 ? 2 : 0;
}

static int
copy(sbx_client *c, const char *src, const char *dst)
{
    char *arg = NULL;
    const char *path = NULL;
    char id[37];
    int ret;
    bool down = split_remote(src, &arg, &path);
    if (!down && !split_remote(dst, &arg, &path))
        return 1;
    const char *local = down ? dst : src;
    int tree = 0;
    if (sbx_cli_resolve_id(c, "cp", arg, id) < 0)
        ret = 2;
    else if (strcmp(local, "-") == 0 || (!down && local_dir(local)))
        ret = copy_tree(c, id, down, path, local);
    else if (down && (tree = sbx_cli_remote_is_dir(c, id, path)) != 0)
        ret = tree < 0 ? 2 : copy_tree(c, id, down, path, local);
    else if (down)
        ret = sbx_download(c, id, path, dst);
    else
        ret = sbx_upload(c, id, src, path);
    free(arg);
    return ret;
}

int
sbx_cmd_cp(int argc, char **argv)
{
    struct sbx_cli_conn conn = {0};
    if (sbx_cli_parse_conn(&conn, argc, argv) < 0)
        return SBX_EXIT_USAGE;
    if (sbx_cli_positional(argc, optind, 2, "cp", "SRC DST") < 0)
        return SBX_EXIT_USAGE;
    sbx_client *c = sbx_cli_connect(&conn, "cp");
    if (!c)
        return SBX_EXIT_FAIL;
    int ret = copy(c, argv[optind], argv[optind + 1]);
    int rc = SBX_EXIT_OK;
    if (ret == 1) {
        fprintf(stderr, "sbx cp: one of SRC and DST must be ID:/path in a sandbox\n");
        rc = SBX_EXIT_USAGE;
    } else if (ret == 2) {
        rc = SBX_EXIT_FAIL; /* the id: said why */
    } else if (ret < 0) {
        rc = sbx_cli_fail(c, "cp", "copy", ret);
    }
    sbx_client_free(c);
    return rc;
}
