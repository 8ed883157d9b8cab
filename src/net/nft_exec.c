/*
 * nft_exec.c - nft.h for the lean `sbx` binary: each call runs `sbx-full net nft OP BRIDGE
 * SUBNET` (next to sbx), which has libnftables.
 *
 * libnftables (with libnftnl, libxtables, libgmp) costs every process that links it ~0.5 ms of
 * loading, and `sbx run` needs it only when the host's rules must be checked or put in place:
 * when the ruleset generation changed since they were last verified (net.c), i.e. on the first
 * bridge sandbox after a boot or after someone else changed the rules. Everything else on the
 * bridge path (netlink, leases, the generation stamp) stays in process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "net/nft.h"

extern char **environ;

struct sbx_nft {
    char helper[PATH_MAX]; /* sbx-full next to our own binary */
};

int
sbx_nft_new(struct sbx_nft **out, sbx_error **err)
{
    struct sbx_nft *nft = calloc(1, sizeof(*nft));
    if (!nft)
        return sbx_error_set(err, SBX_ENOMEM, ENOMEM, "nftables helper");
    ssize_t n = readlink("/proc/self/exe", nft->helper, sizeof(nft->helper) - 16);
    char *slash = n > 0 ? memrchr(nft->helper, '/', (size_t)n) : NULL;
    if (!slash) {
        free(nft);
        return sbx_error_set(err, SBX_EGENERIC, errno, "find my own binary");
    }
    memcpy(slash + 1, "sbx-full", sizeof("sbx-full"));
    *out = nft;
    return 0;
}

void
sbx_nft_free(struct sbx_nft *nft)
{
    free(nft);
}

/* Run the helper; its exit status, or -errno. Its stderr (the error message) goes to msg. */
/* The helper's operands: op, bridge, subnet, dns. */
struct nft_args {
    const char *op, *bridge, *subnet, *dns;
};

static int
run_helper(struct sbx_nft *nft, const struct nft_args *a, char *msg, size_t msg_size)
{
    int pipefd[2];
    msg[0] = '\0';
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return -errno;
    posix_spawn_file_actions_t fa;
    (void)posix_spawn_file_actions_init(&fa);
    (void)posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    (void)posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    char *argv[] = {
        "sbx",          "net", "nft", (char *)a->op, (char *)a->bridge, (char *)a->subnet,
        (char *)a->dns, NULL};
    pid_t pid = 0;
    int r = posix_spawn(&pid, nft->helper, &fa, NULL, argv, environ);
    (void)posix_spawn_file_actions_destroy(&fa);
    (void)close(pipefd[1]);
    size_t len = 0;
    ssize_t n = 0;
    while (r == 0 && len + 1 < msg_size &&
           ((n = read(pipefd[0], msg + len, msg_size - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
        len += n > 0 ? (size_t)n : 0;
    msg[len] = '\0';
    msg[strcspn(msg, "\n")] = '\0';
    (void)close(pipefd[0]);
    if (r != 0)
        return -r;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int
run_or_fail(struct sbx_nft *nft, const struct nft_args *a, sbx_error **err)
{
    char msg[512];
    int r = run_helper(nft, a, msg, sizeof(msg));
    if (r < 0)
        return sbx_error_set(err, SBX_EUNAVAIL, -r, "nftables: run `%s`", nft->helper);
    if (r != 0)
        return sbx_error_set(err, SBX_EGENERIC, 0, "%s", msg[0] ? msg : "nftables helper failed");
    return 0;
}

int
sbx_nft_check(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns)
{
    char msg[512];
    struct nft_args a = {"check", bridge, subnet, dns};
    return run_helper(nft, &a, msg, sizeof(msg)) == 0;
}

int
sbx_nft_setup(struct sbx_nft *nft, const char *bridge, const char *subnet, const char *dns,
              sbx_error **err)
{
    struct nft_args a = {"setup", bridge, subnet, dns};
    return run_or_fail(nft, &a, err);
}

int
sbx_nft_teardown(struct sbx_nft *nft, const char *bridge, sbx_error **err)
{
    struct nft_args a = {"teardown", bridge, "-", ""};
    return run_or_fail(nft, &a, err);
}

/* The lean `sbx` (sbx run) has no allow-list or groups: those belong to the server. */
int
sbx_nft_allow(struct sbx_nft *nft, const char *bridge, const char *const *cidrs, size_t n,
              sbx_error **err)
{
    (void)nft;
    (void)bridge;
    (void)cidrs;
    (void)n;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "network allow-lists need sbx-full");
}

int
sbx_nft_group(struct sbx_nft *nft, const char *bridge, uint32_t group, sbx_error **err)
{
    (void)nft;
    (void)bridge;
    (void)group;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "network groups need sbx-full");
}

/* Egress policies belong to the server (sbx-full), never to `sbx run`. */
int
sbx_nft_egress_mode(struct sbx_nft *nft, const char *bridge, const char *addr,
                    enum sbx_nft_egress_mode mode, sbx_error **err)
{
    (void)nft;
    (void)bridge;
    (void)addr;
    (void)mode;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}

int
sbx_nft_egress_forget(struct sbx_nft *nft, const char *bridge, const char *addr, sbx_error **err)
{
    (void)nft;
    (void)bridge;
    (void)addr;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}

int
sbx_nft_egress_add(struct sbx_nft *nft, const char *bridge, const struct sbx_nft_egress_elems *e,
                   sbx_error **err)
{
    (void)nft;
    (void)bridge;
    (void)e;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}

int
sbx_nft_egress_flush(struct sbx_nft *nft, const char *bridge, sbx_error **err)
{
    (void)nft;
    (void)bridge;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}

int
sbx_nft_ns_egress(struct sbx_nft *nft, enum sbx_nft_egress_mode mode, sbx_error **err)
{
    (void)nft;
    (void)mode;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}

int
sbx_nft_ns_egress_add(struct sbx_nft *nft, const struct sbx_nft_egress_elems *e, sbx_error **err)
{
    (void)nft;
    (void)e;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}

int
sbx_nft_ns_credproxy(struct sbx_nft *nft, unsigned port, unsigned tls_port, sbx_error **err)
{
    (void)nft;
    (void)port;
    (void)tls_port;
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "egress policies need sbx-full");
}
