/*
 * server.c - wiring of `sbx serve`: config, state dir, API key, store, providers, manager,
 * HTTP, signals.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/api.h"
#include "server/api_egress.h"
#include "server/config.h"
#include "server/console.h"
#include "server/desktop_view.h"
#include "server/httpd.h"
#include "server/manager.h"
#include "server/metrics.h"
#include "server/provider.h"
#include "server/proxy.h"
#include "server/publish.h"
#include "server/secretsrv.h"
#include "server/credvault.h"
#include "server/srvutil.h"
#include "server/pool.h"
#include "server/snapshot.h"
#include "server/store.h"

int
sbx_server_read_api_key(const char *state_dir, char **key, sbx_error **err)
{
    sbx_autofree char *path = sbx_xasprintf("%s/%s", state_dir, SBX_SERVER_KEY_FILE);
    char *text = NULL;
    if (sbx_read_file(path, 4096, &text, NULL, err) < 0)
        return sbx_error_wrap(err, "read API key");
    text[strcspn(text, "\r\n")] = '\0';
    if (!*text) {
        free(text);
        return sbx_error_set(err, SBX_EINVAL, 0, "API key file `%s` is empty", path);
    }
    *key = text;
    return 0;
}

int
sbx_server_ensure_api_key(const char *state_dir, char **key, sbx_error **err)
{
    sbx_autofree char *path = sbx_xasprintf("%s/%s", state_dir, SBX_SERVER_KEY_FILE);
    if (access(path, F_OK) == 0)
        return sbx_server_read_api_key(state_dir, key, err);
    char hex[65];
    sbx_srv_random_hex(hex, 32);
    char line[80];
    int n = snprintf(line, sizeof line, "%s\n", hex);
    /* 0600: the key grants full control of every sandbox. */
    if (sbx_write_file_atomic(path, line, (size_t)n, 0600, err) < 0)
        return sbx_error_wrap(err, "write API key");
    sbx_info("generated a new API key in %s", path);
    *key = sbx_xstrdup(hex);
    return 0;
}

static char *
exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return sbx_xstrdup(".");
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    return slash && slash != buf ? sbx_xstrndup(buf, (size_t)(slash - buf)) : sbx_xstrdup("/");
}

/* One server per state dir: the store and the sandboxes' processes are not shared. A POSIX
 * record lock (not flock) because it belongs to this process only: children that inherit the
 * fd (a sandbox being set up when the server dies) do not keep the state dir locked. */
static int
lock_state_dir(const char *dir, int *fd_out, sbx_error **err)
{
    sbx_autofree char *path = sbx_xasprintf("%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_EIO, errno, "open `%s`", path);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) < 0) {
        (void)close(fd);
        return sbx_error_set(err, SBX_EEXISTS, 0, "another `sbx serve` is using the state dir `%s`",
                             dir);
    }
    *fd_out = fd;
    return 0;
}

static int
load_config(const struct sbx_server_opts *opts, struct sbx_server_config *cfg, sbx_error **err)
{
    sbx_server_config_defaults(cfg, opts->factories);
    if (opts->config_path && sbx_server_config_load(cfg, opts->config_path, err) < 0)
        return -SBX_EINVAL;
    if (opts->listen) {
        free(cfg->listen);
        cfg->listen = sbx_xstrdup(opts->listen);
    }
    if (opts->state_dir) {
        free(cfg->state_dir);
        cfg->state_dir = sbx_xstrdup(opts->state_dir);
    }
    return 0;
}

/* The router, with the egress API claiming its sandbox's port-18080 `/policy` requests. */
static struct sbx_http_handler router;

/* The server's one table of handlers: which code answers each route of route.c. The JSON
 * API answers whatever is not listed (its own 404/405/501 included). */
static void
set_handlers(struct sbx_srv *srv)
{
    static const struct {
        enum sbx_route_id id;
        const struct sbx_http_handler *h;
    } table[] = {
        {SBX_ROUTE_PROXY, &router},
        {SBX_ROUTE_EGRESS_POLICY, &sbx_egress_handler},
        {SBX_ROUTE_METRICS, &sbx_metrics_handler},
        {SBX_ROUTE_SNAPSHOT_IMPORT, &sbx_api_import_handler},
        {SBX_ROUTE_DESKTOP_VNC, &sbx_view_handler},
        {SBX_ROUTE_DESKTOP_PAGE, &sbx_view_handler},
        {SBX_ROUTE_DESKTOP_STATIC, &sbx_view_handler},
        {SBX_ROUTE_NOVNC, &sbx_view_handler},
        {SBX_ROUTE_CONSOLE_PAGE, &sbx_console_handler},
        {SBX_ROUTE_CONSOLE_STATIC, &sbx_console_handler},
    };
    router = sbx_proxy_handler;
    router.reroute = sbx_api_egress_reroute;
    for (size_t i = 0; i < SBX_ROUTE__COUNT; i++)
        srv->handlers[i] = &sbx_api_handler;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(table); i++)
        srv->handlers[table[i].id] = table[i].h;
}

struct parts {
    struct sbx_server_config cfg;
    int lock_fd;
    char *exe_dir;
    struct sbx_srv_secrets *secrets;
    struct sbx_credvault *vault;
    struct sbx_store *store;
    struct sbx_registry *reg;
    struct sbx_mgr *mgr;
    struct sbx_snaps *snaps;
    struct sbx_pools *pools;
    struct sbx_srv srv;
    size_t fd_cap; /* check_nofile */
    unsigned long fd_limit;
};

static int
open_parts(struct parts *p, sbx_error **err)
{
    const char *dir = p->cfg.state_dir;
    if (sbx_mkdir_p(dir, 0700, err) < 0 || lock_state_dir(dir, &p->lock_fd, err) < 0)
        return sbx_error_wrap(err, "state dir");
    /* The store holds every sandbox's execd token: nobody else may read the state dir. */
    if (chmod(dir, 0700) < 0)
        return sbx_error_set(err, SBX_EPERM, errno, "chmod 0700 `%s`", dir);
    sbx_autofree char *key = NULL;
    if (sbx_server_ensure_api_key(dir, &key, err) < 0)
        return -SBX_EIO;
    (void)snprintf(p->srv.api_key, sizeof p->srv.api_key, "%s", key);
    sbx_autofree char *db = sbx_xasprintf("%s/sbx.db", dir);
    if (sbx_store_open(db, &p->store, err) < 0)
        return -SBX_EIO;
    /* Only the location: nothing of the secret store is read until a provider or the admin API
     * needs it. */
    sbx_autofree char *secrets_dir = sbx_xasprintf("%s/secrets", dir);
    p->secrets = sbx_srv_secrets_new(secrets_dir, p->cfg.secrets_key_file);
    sbx_autofree char *vault_dir = sbx_xasprintf("%s/credvault", dir);
    p->vault = sbx_credvault_new(vault_dir);
    struct sbx_provider_env env = {
        .state_dir = dir, .exe_dir = p->exe_dir, .secrets = p->secrets, .vault = p->vault};
    if (sbx_registry_build(&p->cfg, &env, &p->reg, err) < 0)
        return sbx_error_wrap(err, "providers");
    struct sbx_mgr_opts mo = {.store = p->store,
                              .registry = p->reg,
                              .max_sandboxes = (size_t)p->cfg.max_sandboxes,
                              .fd_cap = p->fd_cap,
                              .fd_limit = p->fd_limit,
                              .workers = (size_t)p->cfg.create_workers,
                              .wait_usable_ms = p->cfg.wait_usable_s * 1000,
                              .vault = p->vault,
                              .unlisted = sbx_pool_is_warm};
    if (sbx_mgr_new(&mo, &p->mgr, err) < 0)
        return -SBX_EGENERIC;
    if (sbx_snaps_open(&p->snaps, p->store, p->mgr, dir, err) < 0)
        return -SBX_EGENERIC;
    p->srv.snaps = p->snaps;
    p->srv.cfg = &p->cfg;
    p->srv.mgr = p->mgr;
    p->srv.reg = p->reg;
    p->srv.secrets = p->secrets;
    p->srv.vault = p->vault;
    /* the refiller creates through the API's checks and the manager: after both exist */
    if (sbx_pools_open(&p->srv, p->store, &p->pools, err) < 0)
        return -SBX_EGENERIC;
    p->srv.pools = p->pools;
    set_handlers(&p->srv);
    if (sbx_http_start(&p->srv, err) < 0)
        return -SBX_EGENERIC;
    return sbx_publish_start(&p->srv, err);
}

static void
close_parts(struct parts *p)
{
    sbx_publish_stop(&p->srv);
    sbx_http_stop(&p->srv);
    sbx_pools_close(p->pools);
    sbx_snaps_close(p->snaps);
    sbx_mgr_free(p->mgr);
    sbx_registry_free(p->reg);
    sbx_srv_secrets_free(p->secrets);
    sbx_credvault_free(p->vault);
    sbx_store_close(p->store);
    if (p->lock_fd >= 0)
        (void)close(p->lock_fd);
    free(p->exe_dir);
    sbx_server_config_dispose(&p->cfg);
}

static int
wait_for_signal(const sigset_t *set)
{
    int sig = 0;
    while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    return sig;
}

/* The server keeps one descriptor per idle sandbox (native: the runtime's pidfd of its init,
 * which the reaper's watch polls too; docker and process: the watch's pidfd; the newest 64
 * native ones also hold two spare sockets, runtime/netns.c), and some for requests in flight:
 * raise RLIMIT_NOFILE, say so when limits.max_sandboxes cannot fit, and return how many
 * sandboxes fit (0: all that limits.max_sandboxes allows), which the manager enforces with a
 * 429. */
#define SBX_FDS_PER_SANDBOX 1
#define SBX_FDS_BASE        1024

static size_t
check_nofile(const struct sbx_server_config *cfg, unsigned long *limit)
{
    unsigned long lim = sbx_nofile_raise();
    unsigned long need = (unsigned long)cfg->max_sandboxes * SBX_FDS_PER_SANDBOX + SBX_FDS_BASE;
    *limit = lim;
    if (!lim || lim >= need)
        return 0;
    unsigned long fit = lim > SBX_FDS_BASE ? (lim - SBX_FDS_BASE) / SBX_FDS_PER_SANDBOX : 1;
    sbx_warn("sbx serve: open files limit (RLIMIT_NOFILE) is %lu; limits.max_sandboxes = %lld "
             "needs about %lu: creates are refused (429) beyond %lu sandboxes (raise the hard "
             "limit: ulimit -Hn, systemd LimitNOFILE=)",
             lim, (long long)cfg->max_sandboxes, need, fit);
    return fit ? (size_t)fit : 1;
}

int
sbx_server_run(const struct sbx_server_opts *opts, sbx_error **err)
{
    if (sodium_init() < 0)
        return sbx_error_set(err, SBX_EGENERIC, 0, "libsodium init failed");
    /* Block the stop signals before any thread exists so only sigwait sees them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    (void)signal(SIGPIPE, SIG_IGN);
    struct parts p = {.lock_fd = -1, .exe_dir = exe_dir()};
    int r = load_config(opts, &p.cfg, err);
    /* Everything that can be checked is checked before anything is created or mounted. */
    if (r >= 0)
        r = sbx_http_check_listen(p.cfg.listen, err);
    if (r >= 0)
        p.fd_cap = check_nofile(&p.cfg, &p.fd_limit);
    if (r >= 0)
        r = open_parts(&p, err);
    if (r >= 0) {
        sbx_info("sbx serve: listening on http://%s (state %s, providers: %s, default %s)",
                 p.cfg.listen, p.cfg.state_dir, sbx_registry_names(p.reg), p.cfg.default_provider);
        sbx_info("sbx serve: web console at http://%s/console/ (sign in with %s/api-key)",
                 p.cfg.public_addr ? p.cfg.public_addr : p.cfg.listen, p.cfg.state_dir);
        int sig = wait_for_signal(&set);
        sbx_info("sbx serve: signal %d, stopping (sandboxes keep running)", sig);
    }
    close_parts(&p);
    return r;
}
