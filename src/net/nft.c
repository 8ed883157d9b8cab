/*
 * nft.c - NAT and forwarding rules through libnftables (see nft.h).
 *
 * Why libnftables and not libnftnl: the rules are written in nft's own language (reviewable,
 * one atomic transaction per call), and libnftables emits exactly what `nft` would, which is
 * also what iptables-nft can parse back. libnftnl would need each expression built by hand.
 * The cost (~1 ms per command) is paid once per process: the check is two list commands.
 */
#include "net/nft.h"

#include <errno.h>
#include <jansson.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

#define MAX_HANDLES 16

struct sbx_nft {
    pthread_mutex_t lock; /* an nft_ctx is not thread-safe */
    struct nft_ctx *ctx;
};

int
sbx_nft_new(struct sbx_nft **out, sbx_error **err)
{
    struct sbx_nft *nft = calloc(1, sizeof(*nft));
    if (!nft)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "nftables context");
    (void)pthread_mutex_init(&nft->lock, NULL);
    *out = nft;
    return 0;
}

/* The context is made on first use (~0.2 ms), which the cheap paths never reach. Caller holds
 * the lock. */
static int
ctx_ready(struct sbx_nft *nft, sbx_error **err)
{
    if (nft->ctx)
        return 0;
    nft->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!nft->ctx)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "nftables: cannot create a context");
    (void)nft_ctx_buffer_output(nft->ctx);
    (void)nft_ctx_buffer_error(nft->ctx);
    return 0;
}

void
sbx_nft_free(struct sbx_nft *nft)
{
    if (!nft)
        return;
    if (nft->ctx)
        nft_ctx_free(nft->ctx);
    (void)pthread_mutex_destroy(&nft->lock);
    free(nft);
}

/* Run cmd (caller holds the lock). json: list output as JSON into *out (parsed). */
static int
run(struct sbx_nft *nft, const char *cmd, json_t **out, sbx_error **err)
{
    int r = ctx_ready(nft, err);
    if (r < 0)
        return r;
    nft_ctx_output_set_flags(nft->ctx, out ? NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE : 0);
    if (nft_run_cmd_from_buffer(nft->ctx, cmd) != 0) {
        const char *msg = nft_ctx_get_error_buffer(nft->ctx);
        return sbx_error_set(err, SBX_EGENERIC, 0, "nftables: %.*s", (int)strcspn(msg, "\n"), msg);
    }
    if (!out)
        return 0;
    json_error_t jerr;
    *out = json_loads(nft_ctx_get_output_buffer(nft->ctx), 0, &jerr);
    if (!*out)
        return sbx_error_set(err, SBX_EIO, 0, "nftables: bad JSON output: %s", jerr.text);
    return 0;
}

/* Handles of the rules in a JSON listing whose comment is `comment` (at most max). */
static int
find_rules(const json_t *root, const char *comment, long long *handles, int max)
{
    const json_t *items = json_object_get(root, "nftables");
    const json_t *item;
    size_t i;
    int n = 0;
    json_array_foreach (items, i, item) {
        const json_t *rule = json_object_get(item, "rule");
        const char *c = json_string_value(json_object_get(rule, "comment"));
        if (c && strcmp(c, comment) == 0 && n < max)
            handles[n++] = json_integer_value(json_object_get(rule, "handle"));
    }
    return n;
}

/* Number of rules with `comment` in `list <what>`; -1 when <what> does not exist. */
static int
count_rules(struct sbx_nft *nft, const char *what, const char *comment, long long *handles)
{
    char cmd[128];
    json_t *root = NULL;
    (void)snprintf(cmd, sizeof(cmd), "list %s", what);
    if (run(nft, cmd, &root, NULL) < 0)
        return -1;
    long long dummy[MAX_HANDLES];
    int n = find_rules(root, comment, handles ? handles : dummy, MAX_HANDLES);
    json_decref(root);
    return n;
}

static void
comments(char table_c[96], char fwd_c[32], const char *bridge, const char *subnet)
{
    (void)snprintf(table_c, 96, "sbx:%s:%s", bridge, subnet);
    (void)snprintf(fwd_c, 32, "sbx:%s", bridge);
}

int
sbx_nft_check(struct sbx_nft *nft, const char *bridge, const char *subnet)
{
    char table[64];
    char table_c[96];
    char fwd_c[32];
    comments(table_c, fwd_c, bridge, subnet);
    (void)snprintf(table, sizeof(table), "table ip sbx_%s", bridge);
    (void)pthread_mutex_lock(&nft->lock);
    int ok = count_rules(nft, table, table_c, NULL) == 1;
    if (ok) {
        int n = count_rules(nft, "chain ip filter FORWARD", fwd_c, NULL);
        ok = n < 0 || n == 2;
    }
    (void)pthread_mutex_unlock(&nft->lock);
    return ok;
}

static int
setup_table(struct sbx_nft *nft, const char *bridge, const char *subnet, sbx_error **err)
{
    char cmd[1536];
    char table_c[96];
    char fwd_c[32];
    comments(table_c, fwd_c, bridge, subnet);
    /* add+delete+define is one transaction: idempotent and never half-applied. The forward
     * chain keeps hosts outside from opening connections to sandboxes (only replies and DNAT'ed
     * traffic get in); sandbox-to-sandbox traffic stays on the bridge. */
    (void)snprintf(cmd, sizeof(cmd),
                   "add table ip sbx_%1$s\n"
                   "delete table ip sbx_%1$s\n"
                   "table ip sbx_%1$s {\n"
                   " chain postrouting {\n"
                   "  type nat hook postrouting priority srcnat; policy accept;\n"
                   "  ip saddr %2$s oifname != \"%1$s\" masquerade comment \"%3$s\"\n"
                   " }\n"
                   " chain forward {\n"
                   "  type filter hook forward priority filter; policy accept;\n"
                   "  oifname \"%1$s\" iifname != \"%1$s\" ct state established,related accept\n"
                   "  oifname \"%1$s\" iifname != \"%1$s\" ct status dnat accept\n"
                   "  oifname \"%1$s\" iifname != \"%1$s\" drop\n"
                   " }\n"
                   "}\n",
                   bridge, subnet, table_c);
    return run(nft, cmd, NULL, err);
}

/* Delete our rules from `ip filter FORWARD` and, if insert, put both back at its top. */
static int
fix_filter_forward(struct sbx_nft *nft, const char *bridge, int insert, sbx_error **err)
{
    char fwd_c[32];
    char table_c[96];
    long long handles[MAX_HANDLES];
    comments(table_c, fwd_c, bridge, "");
    int n = count_rules(nft, "chain ip filter FORWARD", fwd_c, handles);
    if (n < 0 || (insert && n == 2))
        return 0; /* no such chain (no iptables user), or already right */
    sbx_autofree char *cmd = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&cmd, &len);
    if (!f)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    for (int i = 0; i < n; i++)
        fprintf(f, "delete rule ip filter FORWARD handle %lld\n", handles[i]);
    /* `counter` and a comment make these rules iptables-nft's own `-i B -j ACCEPT` form. */
    if (insert)
        fprintf(f,
                "insert rule ip filter FORWARD oifname \"%1$s\" counter accept comment \"%2$s\"\n"
                "insert rule ip filter FORWARD iifname \"%1$s\" counter accept comment \"%2$s\"\n",
                bridge, fwd_c);
    if (fclose(f) != 0)
        return sbx_error_set(err, SBX_ENOMEM, errno, "nftables command");
    return len ? run(nft, cmd, NULL, err) : 0;
}

int
sbx_nft_setup(struct sbx_nft *nft, const char *bridge, const char *subnet, sbx_error **err)
{
    (void)pthread_mutex_lock(&nft->lock);
    int r = setup_table(nft, bridge, subnet, err);
    if (r == 0)
        r = fix_filter_forward(nft, bridge, 1, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}

int
sbx_nft_teardown(struct sbx_nft *nft, const char *bridge, sbx_error **err)
{
    char cmd[128];
    (void)snprintf(cmd, sizeof(cmd), "add table ip sbx_%1$s\ndelete table ip sbx_%1$s\n", bridge);
    (void)pthread_mutex_lock(&nft->lock);
    int r = run(nft, cmd, NULL, err);
    if (r == 0)
        r = fix_filter_forward(nft, bridge, 0, err);
    (void)pthread_mutex_unlock(&nft->lock);
    return r;
}
