/*
 * cmd_net.c - `sbx net ls|gc`: the address leases of the bridge network (and the leaf bridge
 * each sandbox is on); `sbx net gc` without --bridge: of every bridge network sbx made.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/error.h"
#include "net/net.h"
#include "net/nft.h"

#define STALE_AGE_S 60

static int
print_lease(const struct sbx_net_lease *l, const char *sandbox_id, void *payload)
{
    const struct sbx_net *n = payload;
    char leaf[16] = "-";
    (void)sbx_net_leaf_of(n, l->addr, leaf, NULL);
    printf("%-15s  %-12s  %-17s  %-15s  %s\n", l->addr, l->host_ifname, l->mac, leaf, sandbox_id);
    return 0;
}

static int
net_ls(struct sbx_net *n, sbx_error **err)
{
    printf("%-15s  %-12s  %-17s  %-15s  %s\n", "ADDRESS", "HOST IF", "MAC", "LEAF BRIDGE",
           "SANDBOX");
    return sbx_net_foreach_lease(n, print_lease, n, err);
}

static int
net_gc(struct sbx_net *n, sbx_error **err)
{
    int r = sbx_net_gc_stale(n, STALE_AGE_S, err);
    if (r >= 0)
        printf("released %d stale lease%s\n", r, r == 1 ? "" : "s");
    return r;
}

struct gc_all {
    const char *state_dir;
    bool quiet;
    int failed;
};

/* One network of sbx_cli_net_gc_all: a failure is said and counted, the others still run. */
static int
gc_network(const char *bridge, void *payload)
{
    struct gc_all *g = payload;
    struct sbx_net_config cfg = {.bridge = bridge, .state_dir = g->state_dir};
    struct sbx_net *n = NULL;
    sbx_autoerror sbx_error *err = NULL;
    int r = sbx_net_open_state(&n, &cfg, &err);
    if (r == 0)
        r = sbx_net_gc_stale(n, STALE_AGE_S, &err);
    sbx_net_close(n);
    if (r < 0) {
        fprintf(stderr, "%s: bridge network `%s`: %s\n", g->quiet ? "sbx gc" : "sbx net gc", bridge,
                sbx_error_msg(err));
        g->failed++;
    } else if (!g->quiet) {
        printf("%s: released %d stale lease%s\n", bridge, r, r == 1 ? "" : "s");
    }
    return 0;
}

int
sbx_cli_net_gc_all(const char *state_dir, bool quiet)
{
    struct gc_all g = {.state_dir = state_dir, .quiet = quiet};
    sbx_autoerror sbx_error *err = NULL;
    int r = sbx_net_foreach_network(state_dir, gc_network, &g, &err);
    /* and, with the host's state dir, leaves whose long-named bridge is gone */
    if (r == 0 && (!state_dir || strcmp(state_dir, SBX_NET_DEFAULT_STATE_DIR) == 0))
        r = sbx_net_gc_orphan_leaves(&err);
    if (r > 0 && !quiet)
        printf("removed %d leaf bridge%s whose bridge is gone\n", r, r == 1 ? "" : "s");
    if (r < 0) {
        fprintf(stderr, "%s: bridge networks: %s\n", quiet ? "sbx gc" : "sbx net gc",
                sbx_error_msg(err));
        g.failed++;
    }
    return g.failed;
}

static int
parse_opts(int argc, char **argv, struct sbx_net_config *cfg)
{
    static const struct option opts[] = {
        {"bridge", required_argument, NULL, 'b'},
        {"subnet", required_argument, NULL, 's'},
        {"state-dir", required_argument, NULL, 'd'},
        {0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "b:s:d:", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            cfg->bridge = optarg;
            break;
        case 's':
            cfg->subnet = optarg;
            break;
        case 'd':
            cfg->state_dir = optarg;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

/* `sbx net nft check|setup|teardown BRIDGE SUBNET [DNS]`: internal, run by the lean `sbx` (see
 * src/net/nft_exec.c) in sbx-full, which links libnftables. DNS: the sandboxes' resolvers,
 * space-separated. check exits 0 when the rules are in place, 1 when not. */
static int
net_nft(int argc, char **argv)
{
    if (argc != 5 && argc != 6)
        return SBX_EXIT_USAGE;
    const char *dns = argc == 6 ? argv[5] : "";
    const char *op = argv[2];
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_nft *nft = NULL;
    int r = sbx_nft_new(&nft, &err);
    if (r == 0 && strcmp(op, "check") == 0)
        r = sbx_nft_check(nft, argv[3], argv[4], dns) == 1 ? 0 : 1;
    else if (r == 0 && strcmp(op, "setup") == 0)
        r = sbx_nft_setup(nft, argv[3], argv[4], dns, &err);
    else if (r == 0 && strcmp(op, "teardown") == 0)
        r = sbx_nft_teardown(nft, argv[3], &err);
    else if (r == 0)
        r = sbx_error_set(&err, SBX_EINVAL, 0, "unknown operation `%s`", op);
    sbx_nft_free(nft);
    if (r < 0)
        fprintf(stderr, "%s\n", sbx_error_msg(err));
    return r < 0 ? SBX_EXIT_FAIL : r;
}

int
sbx_cmd_net(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "nft") == 0)
        return net_nft(argc, argv);
    struct sbx_net_config cfg = {0};
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_net *n = NULL;
    if (argc < 2 || (strcmp(argv[1], "ls") != 0 && strcmp(argv[1], "gc") != 0)) {
        fputs("sbx net: expected `ls` or `gc`; see `sbx net --help`\n", stderr);
        return SBX_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (parse_opts(argc - 1, argv + 1, &cfg) < 0 || optind != argc - 1) {
        fputs("sbx net: bad arguments; see `sbx net --help`\n", stderr);
        return SBX_EXIT_USAGE;
    }
    /* gc with neither --bridge nor --subnet: every bridge network sbx made */
    if (strcmp(sub, "gc") == 0 && !cfg.bridge && !cfg.subnet)
        return sbx_cli_net_gc_all(cfg.state_dir, false) ? SBX_EXIT_FAIL : SBX_EXIT_OK;
    int r = sbx_net_open_state(&n, &cfg, &err);
    if (r == 0)
        r = strcmp(sub, "ls") == 0 ? net_ls(n, &err) : net_gc(n, &err);
    sbx_net_close(n);
    if (r < 0) {
        fprintf(stderr, "sbx net %s: %s\n", sub, sbx_error_msg(err));
        return SBX_EXIT_FAIL;
    }
    return SBX_EXIT_OK;
}
