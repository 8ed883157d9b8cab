/*
 * cmd_gc.c - `sbx gc`: remove what crashed sandboxes left behind.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "runtime/native.h"
#include "runtime/runtime.h"

int
sbx_cmd_gc(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"all", no_argument, NULL, 'a'},
        {"state-dir", required_argument, NULL, 's'},
        {0},
    };
    bool all = false;
    const char *state = getenv("SBX_STATE_DIR"); /* NOLINT(concurrency-mt-unsafe): no threads */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'a')
            all = true;
        else if (c == 's')
            state = optarg;
        else
            return SBX_EXIT_USAGE;
    }
    if (optind != argc) {
        fputs("sbx gc: takes no arguments\n", stderr);
        return SBX_EXIT_USAGE;
    }
    /* Records holding a bridge lease are released through the net module. */
    struct sbx_native_bridge *bridge = NULL;
    struct sbx_rt_net_ops net_ops;
    (void)sbx_native_bridge_new(&bridge, state, NULL);
    sbx_native_bridge_ops(&net_ops, bridge);
    struct sbx_rt_config cfg = {.state_dir = state, .net_ops = &net_ops};
    struct sbx_rt *rt = NULL;
    struct sbx_rt_gc_stats st = {0};
    sbx_autoerror sbx_error *err = NULL;
    int ret = sbx_rt_open(&rt, &cfg, &err);
    if (ret == 0)
        ret = sbx_rt_gc(&st, rt, all, &err);
    sbx_rt_close(rt);
    sbx_native_bridge_free(bridge);
    /* The host's gc (its own state dir): stale leases and empty leaf bridges of every bridge
     * network, not only of the default one the records' leases were released through (a
     * server may use a bridge of its own). Not with another state dir (a test's, a second
     * server's): that gc is of its sandboxes, and sweeping the host's networks from there
     * would clean up under other users' feet (`sbx net gc` does it when asked). A failure is
     * said, as the runtime's gc of the default one is: only a warning. */
    if (!state)
        (void)sbx_cli_net_gc_all(NULL, true);
    if (ret < 0) {
        fprintf(stderr, "sbx gc: %s\n", sbx_error_msg(err));
        return SBX_EXIT_FAIL;
    }
    printf("removed %u sandbox%s, %u still running\n", st.removed, st.removed == 1 ? "" : "es",
           st.kept);
    return SBX_EXIT_OK;
}
