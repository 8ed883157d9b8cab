/*
 * desktop.c - the desktop endpoints (/desktop/...): execd owns the sandbox's one desktop
 * (src/desktop), reaps its processes, watches its X connection in the event loop and gives
 * its environment (DISPLAY, the buses) to every command. docs/desktop.md lists the API.
 *
 * Every input here comes from the API: numbers are range-checked, actions are validated
 * whole before anything is sent to X (src/desktop/actions.c), bodies are bounded by
 * EXECD_MAX_JSON_BODY, and a long answer (a11y tree, screenshot) by its own maximum.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sodium.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/a11y.h"
#include "desktop/desktop.h"
#include "execd/desktop_int.h"
#include "execd/execd.h"
#include "execd/proc.h"
#include "execd/spawn.h"

#define SHOT_MAX    (256u << 20) /* an 8192x8192 PNG at worst */
#define A11Y_MAX    (64u << 20)
#define CLIP_MAX    (16u << 20)
#define MAX_ACTIONS 256 /* in one request */

struct execd_desktop {
    struct execd *ex;
    struct sbx_desktop *d;
    struct event *x_ev; /* the X connection's fd */
    int x_fd;
    struct evconnlistener *ipc; /* desktop_ipc.c */
    pid_t osworld;              /* py/sbx_osworld_server.py on port 5000, 0 when none */
    /* a POST /desktop/recording/stop waiting for ffmpeg to finish the file */
    struct evhttp_request *rec_req;
    struct evhttp_connection *rec_evcon;
    struct event *rec_timer;
    char **env;                    /* the desktop's env + the socket and PYTHONPATH */
    const char *const *env_source; /* the desktop's env it was made from */
};

/* An action request that waits (WAIT, hold_key): answered from a timer. */
struct pending {
    struct execd *ex;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct event *timer;
    json_t *actions; /* the whole list */
    size_t next;     /* the next to apply */
    json_t *results;
    struct sbx_action_result held; /* hold_key: released when the timer fires */
    bool single;                   /* the body was one action: answer its result alone */
};

static struct pending *the_pending; /* at most one action request waits at a time */
static char *desktop_home;          /* the desktop user's home (opts.home points here) */

static void
on_x(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_desktop *dk = arg;
    sbx_desktop_x_events(dk->d);
}

/* Watch the desktop's X connection (a restart makes a new one). */
static void
watch_x(struct execd_desktop *dk)
{
    int fd = sbx_desktop_x_fd(dk->d);
    if (fd == dk->x_fd && (fd < 0 || dk->x_ev))
        return;
    if (dk->x_ev)
        event_free(dk->x_ev);
    dk->x_ev = NULL;
    dk->x_fd = fd;
    if (fd >= 0) {
        dk->x_ev = event_new(dk->ex->base, fd, EV_READ | EV_PERSIST, on_x, dk);
        if (dk->x_ev)
            (void)event_add(dk->x_ev, NULL);
    }
}

static void
oom_pre(void *ctx)
{
    (void)ctx;
    execd_oom_self(true); /* the desktop's processes, like commands, go before execd */
}

static void
oom_post(void *ctx)
{
    (void)ctx;
    execd_oom_self(false);
}

static struct execd_desktop *
get(struct execd *ex)
{
    if (!ex->desktop) {
        struct execd_desktop *dk = sbx_xcalloc(1, sizeof *dk);
        dk->ex = ex;
        dk->x_fd = -1;
        (void)sbx_desktop_new(&dk->d, NULL);
        ex->desktop = dk;
    }
    return ex->desktop;
}

struct sbx_desktop *
execd_desktop_handle(struct execd *ex)
{
    return get(ex)->d;
}

#define OSWORLD_PORT "5000"

static const char *
find_python(void)
{
    static const char *const where[] = {"/usr/local/bin/python3", "/usr/bin/python3",
                                        "/bin/python3"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(where); i++) {
        if (access(where[i], X_OK) == 0)
            return where[i];
    }
    return NULL;
}

/* OSWorld's in-VM API on 127.0.0.1:5000 of the sandbox, when the image has python3 (OSWorld's
 * own actions are python code, so an image without it could not run them anyway). */
static void
osworld_start(struct execd *ex, struct execd_desktop *dk)
{
    const char *py = find_python();
    if (dk->osworld > 0 || !py || !dk->ipc)
        return;
    /* -S: no site module (the server needs the standard library only): its start, which a
     * DesktopEnv reset waits for, is ~20 ms shorter. */
    char *argv[] = {(char *)py, "-S", (char *)execd_desktop_osworld_script(), OSWORLD_PORT, NULL};
    char **envp = execd_child_env(ex, NULL);
    struct execd_spawn sp = {
        .argv = argv, .envp = envp, .fd_out = -1, .fd_err = -1, .die_with_parent = true};
    struct sbx_desktop_status st;
    sbx_desktop_status(dk->d, &st);
    if (st.as_user) { /* OSWorld's server runs commands as the VM's user: the desktop's */
        execd_spawn_set_user(&sp, st.uid, true, st.gid);
        sp.cwd = desktop_home && access(desktop_home, X_OK) == 0 ? desktop_home : NULL;
    }
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    sp.fd_out = sp.fd_err = null;
    sbx_autoerror sbx_error *err = NULL;
    execd_oom_self(true);
    pid_t pid = null >= 0 ? execd_spawn(&sp, &err) : -1;
    execd_oom_self(false);
    if (null >= 0)
        (void)close(null);
    execd_strv_free(envp);
    if (pid < 0)
        sbx_warn("desktop: OSWorld API not started: %s", sbx_error_msg(err));
    else
        dk->osworld = pid;
}

static void
osworld_stop(struct execd_desktop *dk)
{
    if (dk->osworld > 0)
        (void)kill(-dk->osworld, SIGKILL); /* its own process group (execd_spawn) */
    dk->osworld = 0;
}

/* The image's desktop user (SBX_DESKTOP_USER, a name or uid of its /etc/passwd): the desktop's
 * programs and OSWorld's API run as that user, in its home, with its groups. */
static int
desktop_user(struct sbx_desktop_opts *o, sbx_error **err)
{
    const char *want = getenv("SBX_DESKTOP_USER"); // NOLINT(concurrency-mt-unsafe): one thread
    if (!want || !*want)
        return 0;
    struct passwd pw;
    char buf[4096];
    char by_uid[24];
    (void)snprintf(by_uid, sizeof by_uid, "#%.20s", want); /* a uid: its entry */
    bool numeric = strspn(want, "0123456789") == strlen(want);
    if (execd_find_user(numeric ? by_uid : want, &pw, buf, sizeof buf)) {
        if (pw.pw_uid == 0 || pw.pw_uid == geteuid())
            return 0; /* ourselves: what the desktop is without a user */
        if (geteuid() != 0)
            return sbx_error_set(err, SBX_EPERM, 0,
                                 "SBX_DESKTOP_USER=%.64s: execd runs as uid %u, not root, so it "
                                 "cannot start the desktop as another user",
                                 want, (unsigned)geteuid());
        struct execd_spawn sp = {0};
        execd_spawn_set_user(&sp, pw.pw_uid, true, pw.pw_gid); /* its groups */
        o->as_user = true;
        o->uid = pw.pw_uid;
        o->gid = pw.pw_gid;
        o->ngroups = sp.ngroups < SBX_DESKTOP_MAX_GROUPS ? sp.ngroups : SBX_DESKTOP_MAX_GROUPS;
        memcpy(o->groups, sp.groups, o->ngroups * sizeof o->groups[0]);
        snprintf(o->user, sizeof o->user, "%.63s", pw.pw_name);
        free(desktop_home);
        desktop_home = sbx_xstrdup(pw.pw_dir);
        o->home = desktop_home;
        return 0;
    }
    return sbx_error_set(err, SBX_EINVAL, 0,
                         "SBX_DESKTOP_USER=%.64s: no such user in the sandbox's /etc/passwd", want);
}

/* The image's default size (SBX_DESKTOP_SIZE=WxH) when the request names none. */
static void
desktop_size(struct sbx_desktop_opts *o)
{
    const char *size = getenv("SBX_DESKTOP_SIZE"); // NOLINT(concurrency-mt-unsafe): one thread
    struct sbx_desktop_opts def = {0};
    if (o->width || !size || sbx_desktop_parse_spec(size, &def, NULL) < 0)
        return;
    o->width = def.width;
    o->height = def.height;
}

static int
start(struct execd *ex, struct sbx_desktop_opts *o, sbx_error **err)
{
    struct execd_desktop *dk = get(ex);
    desktop_size(o);
    if (desktop_user(o, err) < 0)
        return sbx_error_wrap(err, "start the desktop");
    o->pre_spawn = oom_pre;
    o->post_spawn = oom_post;
    int r = sbx_desktop_start(dk->d, o, err);
    watch_x(dk);
    sbx_autoerror sbx_error *e = NULL;
    if (r == 0 && execd_desktop_ipc_start(ex, &dk->ipc, &e) < 0)
        sbx_warn("desktop: no pyautogui socket: %s", sbx_error_msg(e));
    if (r == 0)
        osworld_start(ex, dk);
    sbx_error_clear(&e);
    if (r == 0 && o->as_user && execd_sudo_start(ex, &e) < 0)
        sbx_warn("desktop: no sudo for %s: %s", o->user, sbx_error_msg(e));
    return r;
}

int
execd_desktop_boot(struct execd *ex, const char *spec)
{
    struct sbx_desktop_opts o = {0};
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_desktop_parse_spec(spec, &o, &err) < 0 || start(ex, &o, &err) < 0) {
        sbx_warn("desktop: %s", sbx_error_msg(err));
        return -1;
    }
    struct sbx_desktop_status st;
    sbx_desktop_status(ex->desktop->d, &st);
    sbx_info("desktop :%d %ux%u ready in %.1f ms", st.display, st.width, st.height, st.ready_ms);
    return 0;
}

static void rec_finish(struct execd_desktop *dk);

bool
execd_desktop_reaped(struct execd *ex, pid_t pid, int status)
{
    if (ex->desktop && pid == ex->desktop->osworld) {
        ex->desktop->osworld = 0; /* started again with the next desktop start */
        return true;
    }
    if (!ex->desktop || !sbx_desktop_child_exited(ex->desktop->d, pid, status))
        return false;
    watch_x(ex->desktop);
    if (ex->desktop->rec_req && !sbx_desktop_recording(ex->desktop->d))
        rec_finish(ex->desktop);
    return true;
}

static void
env_free(struct execd_desktop *dk)
{
    for (size_t i = 0; dk->env && dk->env[i]; i++)
        free(dk->env[i]);
    free(dk->env);
    dk->env = NULL;
    dk->env_source = NULL;
}

/* The desktop's env plus SBX_DESKTOP_SOCKET and PYTHONPATH (our pyautogui first), remade
 * when the desktop's own changes (a restart has new bus addresses). */
const char *const *
execd_desktop_env(const struct execd *ex)
{
    struct execd_desktop *dk = ex->desktop;
    const char *const *src = dk ? sbx_desktop_env(dk->d) : NULL;
    if (!src || !dk->ipc)
        return src;
    if (dk->env && dk->env_source == src)
        return (const char *const *)dk->env;
    env_free(dk);
    size_t n = 0;
    while (src[n])
        n++;
    dk->env = sbx_xcalloc(n + 3, sizeof *dk->env);
    for (size_t i = 0; i < n; i++)
        dk->env[i] = sbx_xstrdup(src[i]);
    dk->env[n] = sbx_xasprintf("SBX_DESKTOP_SOCKET=%s", execd_desktop_ipc_socket());
    const char *pp = getenv("PYTHONPATH"); // NOLINT(concurrency-mt-unsafe): one thread
    dk->env[n + 1] = sbx_xasprintf("PYTHONPATH=%s%s%s", execd_desktop_ipc_pythonpath(),
                                   pp && *pp ? ":" : "", pp && *pp ? pp : "");
    dk->env_source = src;
    return (const char *const *)dk->env;
}

void
execd_desktop_free(struct execd *ex)
{
    struct execd_desktop *dk = ex->desktop;
    if (!dk)
        return;
    if (dk->x_ev)
        event_free(dk->x_ev);
    osworld_stop(dk);
    execd_sudo_stop();
    execd_desktop_ipc_stop(&dk->ipc);
    if (dk->rec_req) {
        evhttp_connection_set_closecb(dk->rec_evcon, NULL, NULL);
        execd_reply_error(dk->rec_req, 503, "DESKTOP_UNAVAILABLE", "execd is stopping");
    }
    if (dk->rec_timer)
        event_free(dk->rec_timer);
    env_free(dk);
    sbx_desktop_free(dk->d);
    free(desktop_home);
    desktop_home = NULL;
    free(dk);
    ex->desktop = NULL;
}

/* ---- replies ---- */

static int
http_status(const sbx_error *err)
{
    switch (sbx_error_code(err)) {
    case SBX_EINVAL:
        return 400;
    case SBX_ENOTFOUND:
        return 404;
    case SBX_ECONFLICT:
        return 409;
    case SBX_ELIMIT:
        return 413;
    case SBX_EUNAVAIL:
        return 503;
    case SBX_ETIMEDOUT:
        return 504;
    default:
        return 500;
    }
}

static const char *
error_code(int status)
{
    switch (status) {
    case 400:
        return "INVALID_REQUEST_BODY";
    case 404:
        return "NOT_FOUND";
    case 409:
        return "DESKTOP_NOT_RUNNING";
    case 413:
        return "TOO_LARGE";
    case 503:
        return "DESKTOP_UNAVAILABLE";
    default:
        return "DESKTOP_ERROR";
    }
}

static void
reply_err(struct evhttp_request *req, const sbx_error *err)
{
    int st = http_status(err);
    execd_reply_error(req, st, error_code(st), "%s", sbx_error_msg(err));
}

static json_t *
status_json(struct execd *ex)
{
    struct sbx_desktop_status st = {0};
    if (ex->desktop)
        sbx_desktop_status(ex->desktop->d, &st);
    static const char *const names[] = {"stopped", "running", "failed"};
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:b, s:i, s:f, s:s}", "state", names[st.state],
                          "width", (int)st.width, "height", (int)st.height, "depth", (int)st.depth,
                          "windowManager", st.wm, "restarts", (int)st.restarts, "readyMs",
                          st.ready_ms, "lastError", st.last_error);
    if (ex->desktop && st.state == SBX_DESKTOP_RUNNING) {
        char disp[16];
        (void)snprintf(disp, sizeof disp, ":%d", st.display);
        (void)json_object_set_new(j, "display", json_string(disp));
        (void)json_object_set_new(j, "vncPort",
                                  st.vnc_port > 0 ? json_integer(st.vnc_port) : json_null());
        (void)json_object_set_new(j, "accessibility",
                                  json_boolean(sbx_desktop_a11y_bus(ex->desktop->d) != NULL));
    }
    return j;
}

void
execd_desktop_status(struct execd *ex, struct evhttp_request *req)
{
    execd_reply_json(req, 200, status_json(ex));
}

/* {"width", "height", "depth", "windowManager": bool} (all optional). */
static int
start_opts(json_t *j, struct sbx_desktop_opts *o, sbx_error **err)
{
    const char *k;
    json_t *v;
    json_object_foreach (j, k, v) {
        if (strcmp(k, "windowManager") == 0) {
            if (!json_is_boolean(v))
                return sbx_error_set(err, SBX_EINVAL, 0, "`windowManager` must be a boolean");
            o->no_wm = !json_is_true(v);
            continue;
        }
        unsigned *dst = strcmp(k, "width") == 0    ? &o->width
                        : strcmp(k, "height") == 0 ? &o->height
                        : strcmp(k, "depth") == 0  ? &o->depth
                                                   : NULL;
        if (!dst)
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "`%.64s` is not a desktop option (width, height, depth, "
                                 "windowManager)",
                                 k);
        json_int_t n = json_integer_value(v);
        if (!json_is_integer(v) || n < 0 || n > 8192)
            return sbx_error_set(err, SBX_EINVAL, 0, "`%s` must be an integer", k);
        *dst = (unsigned)n;
    }
    if ((o->width || o->height) && (o->width < 64 || o->height < 64))
        return sbx_error_set(err, SBX_EINVAL, 0, "`width` and `height` must be 64-8192");
    if (o->depth && o->depth != 24)
        return sbx_error_set(err, SBX_EINVAL, 0, "`depth` must be 24");
    return 0;
}

void
execd_desktop_start(struct execd *ex, struct evhttp_request *req)
{
    bool empty = false;
    json_t *j = execd_body_json(req, &empty);
    if (!j && !empty)
        return;
    struct sbx_desktop_opts o = {0};
    sbx_autoerror sbx_error *err = NULL;
    int r = 0;
    if (j && !json_is_object(j))
        r = sbx_error_set(&err, SBX_EINVAL, 0, "the body must be an object");
    if (r == 0 && j)
        r = start_opts(j, &o, &err);
    json_decref(j);
    if (r == 0)
        r = start(ex, &o, &err);
    if (r < 0) {
        reply_err(req, err);
        return;
    }
    execd_reply_json(req, 200, status_json(ex));
}

static void rec_abort(struct execd_desktop *dk);

void
execd_desktop_stop(struct execd *ex, struct evhttp_request *req)
{
    if (ex->desktop) {
        sbx_desktop_stop(ex->desktop->d);
        watch_x(ex->desktop);
        rec_abort(ex->desktop);
        osworld_stop(ex->desktop);
    }
    execd_reply_json(req, 200, status_json(ex));
}

static struct sbx_desktop *
running(struct execd *ex, struct evhttp_request *req)
{
    if (!ex->desktop || !sbx_desktop_running(ex->desktop->d)) {
        execd_reply_error(req, 409, "DESKTOP_NOT_RUNNING",
                          "the desktop is not running (POST /desktop/start)");
        return NULL;
    }
    return ex->desktop->d;
}

/* An integer query parameter within [lo, hi]; false (and a 400 sent) when malformed. */
static bool
q_int(struct evhttp_request *req, const char *name, int lo, int hi, int *out)
{
    sbx_autofree char *v = execd_query(req, name);
    if (!v)
        return true;
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < lo || n > hi) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`%s` must be an integer %d-%d", name,
                          lo, hi);
        return false;
    }
    *out = (int)n;
    return true;
}

static bool
q_bool(struct evhttp_request *req, const char *name, bool *out)
{
    sbx_autofree char *v = execd_query(req, name);
    if (!v)
        return true;
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
        *out = true;
    } else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
        *out = false;
    } else {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`%s` must be true or false", name);
        return false;
    }
    return true;
}

/* format, quality, x, y, width, height, scale, cursor */
static bool
shot_opts(struct evhttp_request *req, struct sbx_shot_opts *o)
{
    sbx_autofree char *fmt = execd_query(req, "format");
    if (fmt && strcmp(fmt, "png") != 0 && strcmp(fmt, "jpeg") != 0 && strcmp(fmt, "jpg") != 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`format` must be png or jpeg");
        return false;
    }
    o->jpeg = fmt && fmt[0] == 'j';
    bool cursor = true;
    if (!q_int(req, "quality", 1, 100, &o->quality) || !q_int(req, "x", 0, 8191, &o->x) ||
        !q_int(req, "y", 0, 8191, &o->y) || !q_int(req, "width", 1, 8192, &o->w) ||
        !q_int(req, "height", 1, 8192, &o->h) || !q_bool(req, "cursor", &cursor))
        return false;
    o->no_cursor = !cursor;
    sbx_autofree char *scale = execd_query(req, "scale");
    if (scale) {
        char *end = NULL;
        double s = strtod(scale, &end);
        if (!*scale || *end || !isfinite(s) || s <= 0 || s > 1) {
            execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`scale` must be in (0, 1]");
            return false;
        }
        o->scale = s;
    }
    return true;
}

static void
reply_image(struct evhttp_request *req, struct sbx_buf *img, bool jpeg,
            const struct sbx_shot_stats *st)
{
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, img->data ? img->data : "", img->len);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", jpeg ? "image/jpeg" : "image/png");
    char t[160];
    (void)snprintf(t, sizeof t, "grab=%.3f;cursor=%.3f;scale=%.3f;encode=%.3f", st->ms_grab,
                   st->ms_cursor, st->ms_scale, st->ms_encode);
    evhttp_add_header(h, "X-Sbx-Timing-Ms", t);
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

void
execd_desktop_screenshot(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    struct sbx_shot_opts o = {0};
    if (!d || !shot_opts(req, &o))
        return;
    sbx_autobuf struct sbx_buf img;
    sbx_buf_init(&img, SHOT_MAX);
    struct sbx_shot_stats st;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_desktop_screenshot(d, &o, &img, &st, &err) < 0) {
        reply_err(req, err);
        return;
    }
    reply_image(req, &img, o.jpeg, &st);
}

void
execd_desktop_screen(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    unsigned w = 0;
    unsigned h = 0;
    sbx_autoerror sbx_error *err = NULL;
    if (!d)
        return;
    if (sbx_desktop_screen_size(d, &w, &h, &err) < 0) {
        reply_err(req, err);
        return;
    }
    execd_reply_json(req, 200, json_pack("{s:i, s:i}", "width", (int)w, "height", (int)h));
}

void
execd_desktop_cursor(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    int x = 0;
    int y = 0;
    sbx_autoerror sbx_error *err = NULL;
    if (!d)
        return;
    if (sbx_desktop_cursor(d, &x, &y, &err) < 0) {
        reply_err(req, err);
        return;
    }
    execd_reply_json(req, 200, json_pack("{s:i, s:i}", "x", x, "y", y));
}

/* ---- actions ---- */

static json_t *
image_json(struct sbx_desktop *d, const struct sbx_action_result *res, sbx_error **err)
{
    sbx_autobuf struct sbx_buf img;
    sbx_buf_init(&img, SHOT_MAX);
    if (sbx_desktop_screenshot(d, &res->shot, &img, NULL, err) < 0)
        return NULL;
    size_t n = sodium_base64_ENCODED_LEN(img.len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = sbx_xmalloc(n);
    (void)sodium_bin2base64(b64, n, (const unsigned char *)(img.data ? img.data : ""), img.len,
                            sodium_base64_VARIANT_ORIGINAL);
    json_t *j = json_pack("{s:s, s:s}", "mediaType", "image/png", "data", b64);
    free(b64);
    return j;
}

json_t *
execd_desktop_result_json(struct sbx_desktop *d, const struct sbx_action_result *res,
                          sbx_error **err)
{
    json_t *j = json_pack("{s:b, s:b}", "done", res->done, "fail", res->fail);
    if (res->cursor)
        (void)json_object_set_new(j, "cursor", json_pack("{s:i, s:i}", "x", res->x, "y", res->y));
    if (res->image) {
        json_t *img = image_json(d, res, err);
        if (!img) {
            json_decref(j);
            return NULL;
        }
        (void)json_object_set_new(j, "image", img);
    }
    return j;
}

static void
pending_free(struct pending *p)
{
    if (p->timer)
        event_free(p->timer);
    json_decref(p->actions);
    json_decref(p->results);
    if (the_pending == p)
        the_pending = NULL;
    free(p);
}

static void
pending_reply(struct pending *p, int status, json_t *body)
{
    evhttp_connection_set_closecb(p->evcon, NULL, NULL);
    execd_reply_json(p->req, status, body);
    pending_free(p);
}

static void run_actions(struct pending *p);

static void
on_wait(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct pending *p = arg;
    sbx_autoerror sbx_error *err = NULL;
    if (p->held.n_release && p->ex->desktop &&
        sbx_desktop_release(p->ex->desktop->d, &p->held, &err) < 0)
        sbx_warn("desktop: release held keys: %s", sbx_error_msg(err));
    p->held.n_release = 0;
    run_actions(p);
}

static void
on_pending_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct pending *p = arg;
    struct evhttp_request *req = p->req;
    sbx_autoerror sbx_error *err = NULL;
    if (p->held.n_release && p->ex->desktop) /* never leave a key held down */
        (void)sbx_desktop_release(p->ex->desktop->d, &p->held, &err);
    pending_free(p);
    execd_http_abandon(req);
}

/* Apply actions from p->next on; a wait parks the request on a timer. */
static void
run_actions(struct pending *p)
{
    struct execd *ex = p->ex;
    if (!ex->desktop || !sbx_desktop_running(ex->desktop->d)) {
        pending_reply(p, 409,
                      json_pack("{s:s, s:s}", "code", "DESKTOP_NOT_RUNNING", "message",
                                "the desktop is not running (POST /desktop/start)"));
        return;
    }
    struct sbx_desktop *d = ex->desktop->d;
    while (p->next < json_array_size(p->actions)) {
        size_t i = p->next++;
        struct sbx_action_result res;
        sbx_autoerror sbx_error *err = NULL;
        json_t *r = NULL;
        if (sbx_desktop_action(d, json_array_get(p->actions, i), &res, &err) == 0)
            r = execd_desktop_result_json(d, &res, &err);
        if (!r) {
            int st = http_status(err);
            char msg[600];
            if (p->single)
                (void)snprintf(msg, sizeof msg, "%s", sbx_error_msg(err));
            else
                (void)snprintf(msg, sizeof msg, "actions[%zu]: %s", i, sbx_error_msg(err));
            json_t *body = json_pack("{s:s, s:s}", "code", error_code(st), "message", msg);
            if (!p->single)
                (void)json_object_set(body, "results", p->results);
            pending_reply(p, st, body);
            return;
        }
        (void)json_array_append_new(p->results, r);
        if (res.wait_s > 0) {
            p->held = res;
            struct timeval tv = {.tv_sec = (time_t)res.wait_s,
                                 .tv_usec = (suseconds_t)(fmod(res.wait_s, 1.0) * 1e6)};
            if (!p->timer)
                p->timer = evtimer_new(ex->base, on_wait, p);
            (void)evtimer_add(p->timer, &tv);
            return;
        }
    }
    json_t *body = p->single ? json_incref(json_array_get(p->results, 0))
                             : json_pack("{s:O}", "results", p->results);
    pending_reply(p, 200, body);
}

/* Body: one action, a list of them, or {"actions": [...]}; applied in order. */
void
execd_desktop_action(struct execd *ex, struct evhttp_request *req)
{
    if (!running(ex, req))
        return;
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    json_t *list = NULL;
    bool single = false;
    if (json_is_array(j)) {
        list = json_incref(j);
    } else if (json_is_object(j) && json_is_array(json_object_get(j, "actions"))) {
        list = json_incref(json_object_get(j, "actions"));
    } else if (json_is_object(j)) {
        list = json_pack("[O]", j);
        single = true;
    }
    json_decref(j);
    if (!list || json_array_size(list) == 0 || json_array_size(list) > MAX_ACTIONS) {
        json_decref(list);
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "the body must be an action, or a list of 1-%d actions", MAX_ACTIONS);
        return;
    }
    if (the_pending) {
        json_decref(list);
        execd_reply_error(req, 409, "DESKTOP_BUSY",
                          "another action request is waiting (WAIT or hold_key)");
        return;
    }
    struct pending *p = sbx_xcalloc(1, sizeof *p);
    p->ex = ex;
    p->req = req;
    p->evcon = evhttp_request_get_connection(req);
    p->actions = list;
    p->results = json_array();
    p->single = single;
    the_pending = p;
    execd_http_park(req);
    evhttp_connection_set_closecb(p->evcon, on_pending_close, p);
    run_actions(p);
}

/* ---- windows, clipboard, accessibility ---- */

void
execd_desktop_windows(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    if (!d)
        return;
    sbx_autofree char *js = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_desktop_windows(d, &js, &err) < 0) {
        reply_err(req, err);
        return;
    }
    json_t *arr = json_loads(js, 0, NULL);
    execd_reply_json(req, 200, json_pack("{s:o}", "windows", arr ? arr : json_array()));
}

static bool
window_id(struct evhttp_request *req, const char *arg, uint32_t *id)
{
    uint64_t v = 0;
    if (sbx_parse_u64(arg, &v, NULL) < 0 || v == 0 || v > UINT32_MAX) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "window id `%.32s` is not a number",
                          arg);
        return false;
    }
    *id = (uint32_t)v;
    return true;
}

static void
window_op(struct execd *ex, struct evhttp_request *req, const char *arg, bool close)
{
    struct sbx_desktop *d = running(ex, req);
    uint32_t id = 0;
    if (!d || !window_id(req, arg, &id))
        return;
    sbx_autoerror sbx_error *err = NULL;
    int r =
        close ? sbx_desktop_window_close(d, id, &err) : sbx_desktop_window_activate(d, id, &err);
    if (r < 0) {
        reply_err(req, err);
        return;
    }
    execd_reply_empty(req);
}

void
execd_desktop_window_activate(struct execd *ex, struct evhttp_request *req, const char *arg)
{
    window_op(ex, req, arg, false);
}

void
execd_desktop_window_close(struct execd *ex, struct evhttp_request *req, const char *arg)
{
    window_op(ex, req, arg, true);
}

void
execd_desktop_clipboard_get(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    if (!d)
        return;
    sbx_autofree char *text = NULL;
    size_t len = 0;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_desktop_clipboard_get(d, &text, &len, CLIP_MAX, &err) < 0) {
        reply_err(req, err);
        return;
    }
    /* what another program put there: any bytes; JSON gets U+FFFD for what is not UTF-8 */
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, "{\"text\":", 8);
    execd_json_quote(out, text, len);
    evbuffer_add(out, "}", 1);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

void
execd_desktop_clipboard_set(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    if (!d)
        return;
    json_t *j = execd_body_json(req, NULL);
    if (!j)
        return;
    json_t *t = json_object_get(j, "text");
    sbx_autoerror sbx_error *err = NULL;
    int r = 0;
    if (!json_is_string(t))
        r = sbx_error_set(&err, SBX_EINVAL, 0, "the body must be {\"text\": STRING}");
    else
        r = sbx_desktop_clipboard_set(d, json_string_value(t), json_string_length(t), &err);
    json_decref(j);
    if (r < 0) {
        reply_err(req, err);
        return;
    }
    execd_reply_empty(req);
}

void
execd_desktop_a11y(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    if (!d)
        return;
    const char *bus = sbx_desktop_a11y_bus(d);
    if (!bus) {
        execd_reply_error(req, 503, "DESKTOP_UNAVAILABLE",
                          "the desktop has no accessibility bus (at-spi2-core is not installed)");
        return;
    }
    struct sbx_a11y_opts o = {0};
    sbx_autofree char *fmt = execd_query(req, "format");
    if (fmt && strcmp(fmt, "xml") != 0 && strcmp(fmt, "json") != 0) {
        execd_reply_error(req, 400, "INVALID_REQUEST_BODY", "`format` must be xml or json");
        return;
    }
    o.format = fmt && fmt[0] == 'j' ? SBX_A11Y_JSON : SBX_A11Y_XML;
    bool actions = true;
    int max_nodes = 0;
    if (!q_bool(req, "actions", &actions) || !q_int(req, "maxNodes", 1, 1000000, &max_nodes))
        return;
    o.no_actions = !actions;
    o.max_nodes = (size_t)max_nodes;
    sbx_autobuf struct sbx_buf out;
    sbx_buf_init(&out, A11Y_MAX);
    struct sbx_a11y_stats st;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_a11y_snapshot(bus, &o, &out, &st, &err) < 0) {
        reply_err(req, err);
        return;
    }
    struct evbuffer *body = evbuffer_new();
    evbuffer_add(body, out.data ? out.data : "", out.len);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type",
                      o.format == SBX_A11Y_JSON ? "application/json" : "application/xml");
    char n[64];
    (void)snprintf(n, sizeof n, "%zu", st.nodes);
    evhttp_add_header(h, "X-Sbx-A11y-Nodes", n);
    (void)snprintf(n, sizeof n, "%.1f", st.ms_total);
    evhttp_add_header(h, "X-Sbx-Timing-Ms", n);
    if (st.truncated)
        evhttp_add_header(h, "X-Sbx-A11y-Truncated", "true");
    evhttp_send_reply(req, 200, "OK", body);
    evbuffer_free(body);
}

/* ---- recording ---- */

#define REC_STOP_TIMEOUT_S 15 /* for ffmpeg to finish the file after SIGINT */

void
execd_desktop_recording_start(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    if (!d)
        return;
    bool empty = false;
    json_t *j = execd_body_json(req, &empty);
    if (!j && !empty)
        return;
    json_t *fps = json_object_get(j, "fps");
    sbx_autoerror sbx_error *err = NULL;
    int r = 0;
    if (j && (!json_is_object(j) || (fps && !json_is_integer(fps))))
        r = sbx_error_set(&err, SBX_EINVAL, 0, "the body must be {\"fps\": 1-60}");
    int rate = fps ? (int)json_integer_value(fps) : 15;
    json_decref(j);
    if (r == 0)
        r = sbx_desktop_record_start(d, rate, &err);
    if (r < 0) {
        reply_err(req, err);
        return;
    }
    execd_reply_json(req, 200, json_pack("{s:b, s:i}", "recording", 1, "fps", rate));
}

void
execd_desktop_recording_get(struct execd *ex, struct evhttp_request *req)
{
    bool on = ex->desktop && sbx_desktop_recording(ex->desktop->d);
    execd_reply_json(req, 200, json_pack("{s:b}", "recording", on));
}

static void
rec_done(struct execd_desktop *dk)
{
    evhttp_connection_set_closecb(dk->rec_evcon, NULL, NULL);
    dk->rec_req = NULL;
    dk->rec_evcon = NULL;
    if (dk->rec_timer)
        evtimer_del(dk->rec_timer);
}

/* The desktop went (stop, X restart) with the recorder: the waiting stop gets an error. */
static void
rec_abort(struct execd_desktop *dk)
{
    struct evhttp_request *req = dk->rec_req;
    if (!req)
        return;
    rec_done(dk);
    execd_reply_error(req, 500, "DESKTOP_ERROR",
                      "the recording ended with the desktop (stopped or restarted)");
}

/* The recorder exited: answer the waiting stop with the MP4. */
static void
rec_finish(struct execd_desktop *dk)
{
    struct evhttp_request *req = dk->rec_req;
    rec_done(dk);
    sbx_autofree char *path = NULL;
    double secs = 0;
    sbx_autoerror sbx_error *err = NULL;
    int r = sbx_desktop_record_take(dk->d, &path, &secs, &err);
    if (r == -SBX_ECONFLICT) /* the recorder went with the desktop (an X restart) */
        (void)sbx_error_set(&err, SBX_EIO, 0,
                            "the recording ended with the desktop (stopped or restarted)");
    if (r < 0) {
        reply_err(req, err);
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    (void)unlink(path); /* the open fd keeps it until it is sent */
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            (void)close(fd);
        execd_reply_error(req, 500, "DESKTOP_ERROR", "the recording's file is gone");
        return;
    }
    struct evbuffer *out = evbuffer_new();
    (void)evbuffer_add_file(out, fd, 0, st.st_size); /* takes fd */
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "video/mp4");
    evhttp_add_header(h, "Content-Disposition", "attachment; filename=\"recording.mp4\"");
    char v[32];
    (void)snprintf(v, sizeof v, "%.3f", secs);
    evhttp_add_header(h, "X-Sbx-Recording-Seconds", v);
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

static void
on_rec_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct execd_desktop *dk = arg;
    if (sbx_desktop_recording(dk->d)) {
        sbx_warn("desktop: the recorder did not finish in %d s: killed", REC_STOP_TIMEOUT_S);
        sbx_desktop_record_kill(dk->d); /* its exit answers the request (as a failure) */
        struct timeval tv = {.tv_sec = 2};
        (void)evtimer_add(dk->rec_timer, &tv);
        return;
    }
    rec_abort(dk);
}

static void
on_rec_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct execd_desktop *dk = arg;
    struct evhttp_request *req = dk->rec_req;
    rec_done(dk); /* the recorder still finishes; its file goes with the desktop */
    execd_http_abandon(req);
}

void
execd_desktop_recording_stop(struct execd *ex, struct evhttp_request *req)
{
    struct sbx_desktop *d = running(ex, req);
    if (!d)
        return;
    struct execd_desktop *dk = ex->desktop;
    sbx_autoerror sbx_error *err = NULL;
    if (dk->rec_req || sbx_desktop_record_stop(d, &err) < 0) {
        if (!err)
            (void)sbx_error_set(&err, SBX_ECONFLICT, 0, "a stop is under way already");
        reply_err(req, err);
        return;
    }
    dk->rec_req = req;
    dk->rec_evcon = evhttp_request_get_connection(req);
    execd_http_park(req);
    evhttp_connection_set_closecb(dk->rec_evcon, on_rec_close, dk);
    if (!dk->rec_timer)
        dk->rec_timer = evtimer_new(ex->base, on_rec_timeout, dk);
    struct timeval tv = {.tv_sec = REC_STOP_TIMEOUT_S};
    (void)evtimer_add(dk->rec_timer, &tv);
}
