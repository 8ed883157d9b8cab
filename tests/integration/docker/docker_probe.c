/*
 * docker_probe.c - the docker provider's operations on a real engine, below the API: stop keeps
 * the container and its filesystem and start runs it again, status classes for each state
 * (running, paused, stopped by us, died, gone), reconcile, resume of a stopped container,
 * idempotent delete, an unreachable daemon, and the liveness watch (a pidfd of the container's
 * init: quiet while it runs or is paused, fired by stop and by death, never handed out for a
 * record whose pid or start time is not the live init's).
 *
 *   docker_probe SOCKET IMAGE CGROUP_PARENT EXECD STATE_DIR
 * Run by test_docker.py with a private engine (exit 0 ok, 1 with FAIL lines).
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "providers/providers.h"
#include "server/provider.h"
#include "server/srvutil.h"

static int failures;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
            failures++;                                          \
            return;                                              \
        }                                                        \
    } while (0)

static const char *sock, *image, *cgroup, *execd, *state_dir;

static struct sbx_provider *
provider_with(const char *socket_path, const char *execd_path)
{
    json_t *settings = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i}", "socket", socket_path, "network",
                                 "none", "cgroup_parent", cgroup, "execd", execd_path,
                                 "stop_timeout_s", 5, "ping_timeout_ms", 5000);
    struct sbx_provider_env env = {.state_dir = state_dir, .exe_dir = "/nonexistent"};
    struct sbx_provider *p = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_provider_docker_new(settings, &env, &p, &err) < 0) {
        fprintf(stderr, "provider: %s\n", sbx_error_msg(err));
        exit(1);
    }
    json_decref(settings);
    return p;
}

static struct sbx_provider *
provider(const char *socket_path)
{
    return provider_with(socket_path, execd);
}

static struct sbx_record *
record(void)
{
    struct sbx_record *sb = sbx_record_new();
    sbx_srv_uuid4(sb->id);
    (void)snprintf(sb->provider, sizeof sb->provider, "docker");
    sb->image = json_pack("{s:s}", "uri", image);
    json_decref(sb->entrypoint);
    /* Each run appends to /keep: after stop + start it shows both runs. */
    sb->entrypoint = json_pack(
        "[s,s,s]", "sh", "-c",
        "if [ -f /keep ]; then echo again >> /keep; else echo first > /keep; fi; exec sleep 3600");
    return sb;
}

/* GET /files/download?path=PATH from execd through the provider's connect. */
static char *
read_file(struct sbx_provider *p, const struct sbx_record *sb, const char *path)
{
    sbx_autoclose int fd = -1;
    sbx_autoerror sbx_error *err = NULL;
    if (p->ops->connect(p, sb, 44772, &fd, &err) < 0) {
        fprintf(stderr, "connect: %s\n", sbx_error_msg(err));
        return NULL;
    }
    json_t *h = p->ops->proxy_headers(p, sb, 44772);
    sbx_autofree char *req =
        sbx_xasprintf("GET /files/download?path=%s HTTP/1.0\r\nX-EXECD-ACCESS-TOKEN: %s\r\n\r\n",
                      path, json_string_value(json_object_get(h, "X-EXECD-ACCESS-TOKEN")));
    json_decref(h);
    if (sbx_write_all(fd, req, strlen(req)) < 0)
        return NULL;
    char buf[4096];
    ssize_t n = sbx_read_full(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.0 200", 12) != 0 && strncmp(buf, "HTTP/1.1 200", 12) != 0)
        return sbx_xasprintf("<%.40s>", buf);
    return body ? sbx_xstrdup(body + 4) : NULL;
}

/* The entrypoint starts after execd is ready (execd forks it once it answers), so what it writes
 * shows up a moment later: read until PATH holds `want` or 5 s pass, and return the last read. */
static char *
read_until(struct sbx_provider *p, const struct sbx_record *sb, const char *path, const char *want)
{
    char *got = NULL;
    for (int i = 0; i < 100; i++) {
        free(got);
        got = read_file(p, sb, path);
        if (got && strcmp(got, want) == 0)
            break;
        (void)usleep(50 * 1000);
    }
    return got;
}

static enum sbx_state_class
cls(struct sbx_provider *p, const struct sbx_record *sb, char *reason, size_t n)
{
    struct sbx_provider_status st = {0};
    sbx_autoerror sbx_error *err = NULL;
    if (p->ops->status(p, sb, &st, &err) < 0) {
        (void)snprintf(reason, n, "error: %s", sbx_error_msg(err));
        return (enum sbx_state_class) - 1;
    }
    (void)snprintf(reason, n, "%s/%s", st.state, st.reason);
    return st.cls;
}

#define OP(call)                                                \
    do {                                                        \
        sbx_autoerror sbx_error *e_ = NULL;                     \
        sbx_error **err = &e_;                                  \
        CHECK((call) >= 0, "%s: %s", #call, sbx_error_msg(e_)); \
    } while (0)

static void
stop_start(struct sbx_provider *p, struct sbx_record *sb)
{
    char why[256];
    OP(p->ops->create(p, sb, err));
    OP(p->ops->start(p, sb, err));
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_USABLE, "running: %s", why);
    sbx_autofree char *first = read_until(p, sb, "/keep", "first\n");
    CHECK(first && strcmp(first, "first\n") == 0, "entrypoint ran once: %s", first);

    OP(p->ops->stop(p, sb, err));
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_STARTABLE && strstr(why, "CONTAINER_STOPPED"),
          "stopped is startable: %s", why);
    sbx_autofree char *none = read_file(p, sb, "/keep");
    CHECK(!none, "a stopped sandbox cannot be reached");

    /* A restarted server re-finds it (from a copy of the record, as loaded from the store). */
    struct sbx_record *copy = sbx_record_dup(sb);
    struct sbx_provider_status st = {0};
    OP(p->ops->reconcile(p, copy, &st, err));
    CHECK(st.cls == SBX_CLASS_STARTABLE, "reconcile of a stopped one: %s/%s", st.state, st.reason);
    sbx_record_free(copy);

    OP(p->ops->start(p, sb, err));
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_USABLE, "started again: %s", why);
    sbx_autofree char *both = read_until(p, sb, "/keep", "first\nagain\n");
    CHECK(both && strcmp(both, "first\nagain\n") == 0, "the filesystem was kept: %s", both);
    printf("ok stop/start keeps the filesystem\n");

    /* After a restart a stopped sandbox may come back as Paused: resume starts it. */
    OP(p->ops->stop(p, sb, err));
    OP(p->ops->resume(p, sb, err));
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_USABLE, "resume of a stopped one: %s", why);
    sbx_autofree char *third = read_until(p, sb, "/keep", "first\nagain\nagain\n");
    CHECK(third && strcmp(third, "first\nagain\nagain\n") == 0, "resume ran it again: %s", third);
    printf("ok resume of a stopped container starts it\n");
}

static void
pause_resume(struct sbx_provider *p, struct sbx_record *sb)
{
    char why[256];
    OP(p->ops->pause(p, sb, err));
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_STARTABLE, "paused: %s", why);
    struct sbx_record *copy = sbx_record_dup(sb);
    struct sbx_provider_status st = {0};
    OP(p->ops->reconcile(p, copy, &st, err));
    CHECK(st.cls == SBX_CLASS_STARTABLE && strcmp(st.state, "paused") == 0,
          "reconcile of a paused one: %s", st.state);
    sbx_record_free(copy);
    /* stop of a paused container thaws it first */
    OP(p->ops->stop(p, sb, err));
    OP(p->ops->start(p, sb, err));
    OP(p->ops->pause(p, sb, err));
    OP(p->ops->resume(p, sb, err));
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_USABLE, "resumed: %s", why);
    sbx_autofree char *keep = read_file(p, sb, "/keep");
    CHECK(keep != NULL, "reachable after resume");
    printf("ok pause/resume and stop of a paused container\n");
}

static bool
fired(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

/* watch of a copy of sb with priv[key] set to v (stolen): the fd, closed (-1: refused). */
static int
watch_forged(struct sbx_provider *p, const struct sbx_record *sb, const char *key, json_t *v)
{
    struct sbx_record *copy = sbx_record_dup(sb);
    (void)json_object_set_new(copy->priv, key, v);
    bool owned = false;
    int fd = p->ops->watch(p, copy, &owned);
    sbx_record_free(copy);
    if (fd >= 0 && !owned) {
        fprintf(stderr, "FAIL %s:%d: a docker watch fd is the caller's\n", __FILE__, __LINE__);
        failures++;
    }
    if (fd >= 0)
        (void)close(fd);
    return fd;
}

static void
watch(struct sbx_provider *p, struct sbx_record *sb)
{
    bool owned = false;
    sbx_autoclose int fd = p->ops->watch(p, sb, &owned);
    CHECK(fd >= 0 && owned, "a running container is watched, with an fd of the caller's");
    CHECK(!fired(fd, 200), "the watch of a running container is quiet");
    OP(p->ops->pause(p, sb, err));
    CHECK(!fired(fd, 1000), "pause (the freezer) does not fire the watch");
    sbx_autoclose int paused = p->ops->watch(p, sb, &owned);
    CHECK(paused >= 0, "a paused container is watched");
    OP(p->ops->resume(p, sb, err));
    CHECK(!fired(fd, 200), "resume does not fire the watch");
    /* A recycled pid: the record's start time is not the live process's. */
    json_int_t start = json_integer_value(json_object_get(sb->priv, "start_time"));
    CHECK(watch_forged(p, sb, "start_time", json_integer(start + 1)) < 0,
          "another start time is not watched");
    CHECK(watch_forged(p, sb, "pid", json_integer(0)) < 0,
          "no local pid (a remote engine): not watched");
    CHECK(watch_forged(p, sb, "pid", json_integer(getpid())) < 0, "another process is not watched");
    CHECK(watch_forged(p, sb, "stopped", json_true()) < 0, "a stopped record is not watched");
    OP(p->ops->stop(p, sb, err));
    CHECK(fired(fd, 2000) && fired(paused, 0), "stop fires the watch");
    CHECK(p->ops->watch(p, sb, &owned) < 0, "a stopped container is not watched");
    OP(p->ops->start(p, sb, err));
    printf("ok the watch: quiet while running and paused, fired by stop, refused for a forged "
           "pid or start time\n");
}

static void
died_and_gone(struct sbx_provider *p, struct sbx_record *sb)
{
    char why[256];
    pid_t pid = (pid_t)json_integer_value(json_object_get(sb->priv, "pid"));
    CHECK(pid > 1, "the container's init is a local process: %d", (int)pid);
    bool owned = false;
    sbx_autoclose int fd = p->ops->watch(p, sb, &owned);
    CHECK(fd >= 0 && owned, "watched");
    CHECK(kill(pid, SIGKILL) == 0, "kill the container's init");
    uint64_t t0 = sbx_now_ms();
    CHECK(fired(fd, 2000), "the death fires the watch");
    /* the first status after the watch fired knows it (the engine's lag is waited out) */
    enum sbx_state_class c = cls(p, sb, why, sizeof why);
    CHECK(c == SBX_CLASS_TERMINAL && strstr(why, "CONTAINER_EXITED"), "died: %s", why);
    printf("ok a killed init fires the watch and status says %s (%llu ms)\n", why,
           (unsigned long long)(sbx_now_ms() - t0));
    OP(p->ops->delete (p, sb, err));
    OP(p->ops->delete (p, sb, err)); /* idempotent */
    CHECK(cls(p, sb, why, sizeof why) == SBX_CLASS_TERMINAL && strstr(why, "SANDBOX_LOST"),
          "gone: %s", why);
    printf("ok a dead container is terminal, delete is idempotent, a removed one is lost\n");
}

/* An "execd" that exits at once (static busybox, which knows no applet `sbx-execd`): start
 * fails without waiting out the ping timeout, with the container's last output. */
static void
died_early(void)
{
    if (access("/bin/busybox", X_OK) < 0) {
        printf("note: no /bin/busybox, early exit not checked\n");
        return;
    }
    struct sbx_provider *p = provider_with(sock, "/bin/busybox");
    struct sbx_record *sb = record();
    sbx_autoerror sbx_error *err = NULL;
    uint64_t t0 = sbx_now_ms();
    int r = p->ops->create(p, sb, &err);
    if (r >= 0)
        r = p->ops->start(p, sb, &err);
    uint64_t ms = sbx_now_ms() - t0;
    (void)p->ops->delete (p, sb, NULL);
    sbx_record_free(sb);
    p->ops->free(p);
    CHECK(r < 0 && strstr(sbx_error_msg(err), "before execd was ready") &&
              strstr(sbx_error_msg(err), "applet not found"),
          "early exit: %s", sbx_error_msg(err));
    CHECK(ms < 4000, "reported at once, not after the ping timeout: %llu ms",
          (unsigned long long)ms);
    printf("ok an execd that exits at once: %s\n", sbx_error_msg(err));
}

static void
unreachable(void)
{
    sbx_autofree char *missing = sbx_xasprintf("%s/no-such.sock", state_dir);
    struct sbx_provider *p = provider(missing);
    struct sbx_record *sb = record();
    sbx_autoerror sbx_error *err = NULL;
    int r = p->ops->create(p, sb, &err);
    sbx_autofree char *want = sbx_xasprintf("docker: cannot reach %s: No such file", missing);
    CHECK(r == -SBX_EUNAVAIL && strstr(sbx_error_msg(err), want), "create: %d %s", r,
          sbx_error_msg(err));
    sbx_error_clear(&err);
    struct sbx_provider_status st = {0};
    CHECK(p->ops->status(p, sb, &st, &err) == -SBX_EUNAVAIL, "status says unavailable");
    sbx_error_clear(&err);
    CHECK(p->ops->delete (p, sb, &err) == -SBX_EUNAVAIL, "delete says unavailable");
    sbx_record_free(sb);
    p->ops->free(p);
    printf("ok an unreachable daemon: %s\n", want);
}

int
main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: docker_probe SOCKET IMAGE CGROUP_PARENT EXECD STATE_DIR\n");
        return 2;
    }
    sock = argv[1], image = argv[2], cgroup = argv[3], execd = argv[4], state_dir = argv[5];
    sbx_log_init("docker_probe", SBX_LOG_WARN, SBX_LOG_TEXT);
    struct sbx_provider *p = provider(sock);
    struct sbx_record *sb = record();
    stop_start(p, sb);
    if (!failures)
        pause_resume(p, sb);
    if (!failures)
        watch(p, sb);
    if (!failures)
        died_and_gone(p, sb);
    sbx_autoerror sbx_error *err = NULL;
    (void)p->ops->delete (p, sb, &err);
    sbx_record_free(sb);
    p->ops->free(p);
    died_early();
    unreachable();
    return failures ? 1 : 0;
}
