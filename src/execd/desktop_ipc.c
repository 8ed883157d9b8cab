/*
 * desktop_ipc.c - the desktop for programs inside the sandbox: a unix socket where each line
 * is an action (the JSON of POST /desktop/action) or {"sbx": "screen"}, answered with one JSON
 * line; and the pyautogui module (py/pyautogui.py, embedded) that speaks it, so
 * `python3 -c "import pyautogui; pyautogui.click(100, 200)"` works in any image with python3.
 *
 * Boundary: the socket is in the sandbox's own /tmp and open to every process of the sandbox
 * (0666). That grants nothing new: those processes can already connect to the X server
 * itself and send the same input. It is never reachable from outside the sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/a11y.h"
#include "desktop/desktop.h"
#include "execd/desktop_int.h"
#include "execd/execd.h"

#define IPC_DIR      "/tmp/.sbx-desktop"
#define IPC_SOCK     IPC_DIR "/ipc.sock"
#define IPC_PYDIR    IPC_DIR "/python"
#define IPC_LINE_MAX (1u << 20) /* one request */

extern const unsigned char execd_pyautogui_py[];
extern const size_t execd_pyautogui_py_len;
extern const unsigned char execd_osworld_py[];
extern const size_t execd_osworld_py_len;
extern const unsigned char execd_sudo_py[];
extern const size_t execd_sudo_py_len;

/* Write one of the embedded Python files into IPC_PYDIR (through a temp name, then renamed). */
static int
write_py(const char *name, const unsigned char *data, size_t len, sbx_error **err)
{
    sbx_autofree char *tmp = sbx_xasprintf("%s/.%s.new", IPC_PYDIR, name);
    sbx_autofree char *dst = sbx_xasprintf("%s/%s", IPC_PYDIR, name);
    sbx_autoclose int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || sbx_write_all(fd, data, len) < 0 || rename(tmp, dst) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "write %s", dst);
    return 0;
}

static int
write_module(sbx_error **err)
{
    if ((mkdir(IPC_DIR, 0755) < 0 && errno != EEXIST) ||
        (mkdir(IPC_PYDIR, 0755) < 0 && errno != EEXIST))
        return sbx_error_set(err, SBX_EGENERIC, errno, "mkdir %s", IPC_PYDIR);
    struct stat st;
    /* our own dir, not something planted in /tmp before us */
    if (lstat(IPC_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return sbx_error_set(err, SBX_EGENERIC, 0, "%s is not our directory", IPC_DIR);
    if (write_py("pyautogui.py", execd_pyautogui_py, execd_pyautogui_py_len, err) < 0 ||
        write_py("sbx_osworld_server.py", execd_osworld_py, execd_osworld_py_len, err) < 0 ||
        write_py("sbx_sudo.py", execd_sudo_py, execd_sudo_py_len, err) < 0)
        return -SBX_EGENERIC;
    return 0;
}

static void
reply(struct bufferevent *bev, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    struct evbuffer *out = bufferevent_get_output(bev);
    evbuffer_add(out, s ? s : "{}", s ? strlen(s) : 2);
    evbuffer_add(out, "\n", 1);
    free(s);
}

static json_t *
error_json(const sbx_error *err)
{
    return json_pack("{s:s, s:s}", "code", "DESKTOP_ERROR", "message", sbx_error_msg(err));
}

/* The accessibility tree as OSWorld's XML, for {"sbx": "accessibility"}. */
static json_t *
tree(struct sbx_desktop *d, sbx_error **err)
{
    const char *bus = sbx_desktop_a11y_bus(d);
    if (!bus) {
        (void)sbx_error_set(err, SBX_EUNAVAIL, 0, "the desktop has no accessibility bus");
        return NULL;
    }
    struct sbx_a11y_opts o = {.format = SBX_A11Y_XML};
    sbx_autobuf struct sbx_buf out;
    sbx_buf_init(&out, 64u << 20);
    if (sbx_a11y_snapshot(bus, &o, &out, NULL, err) < 0)
        return NULL;
    return json_pack("{s:s%}", "xml", out.data ? out.data : "", out.len);
}

/* {"sbx": "screen" | "windows" | "accessibility" | "activate" | "close", "id"?} */
static json_t *
query(struct sbx_desktop *d, const char *op, json_t *req, sbx_error **err)
{
    if (strcmp(op, "screen") == 0) {
        unsigned w = 0;
        unsigned h = 0;
        if (sbx_desktop_screen_size(d, &w, &h, err) < 0)
            return NULL;
        return json_pack("{s:i, s:i}", "width", (int)w, "height", (int)h);
    }
    if (strcmp(op, "windows") == 0) {
        sbx_autofree char *js = NULL;
        if (sbx_desktop_windows(d, &js, err) < 0)
            return NULL;
        json_t *arr = json_loads(js, 0, NULL);
        return json_pack("{s:o}", "windows", arr ? arr : json_array());
    }
    if (strcmp(op, "accessibility") == 0)
        return tree(d, err);
    if (strcmp(op, "activate") == 0 || strcmp(op, "close") == 0) {
        json_int_t id = json_integer_value(json_object_get(req, "id"));
        if (id <= 0 || id > UINT32_MAX) {
            (void)sbx_error_set(err, SBX_EINVAL, 0, "`id` must be a window id");
            return NULL;
        }
        int r = op[0] == 'a' ? sbx_desktop_window_activate(d, (uint32_t)id, err)
                             : sbx_desktop_window_close(d, (uint32_t)id, err);
        return r < 0 ? NULL : json_object();
    }
    (void)sbx_error_set(err, SBX_EINVAL, 0, "unknown request `%.32s`", op);
    return NULL;
}

/* One request line: an action, or {"sbx": ...} (query). */
static json_t *
handle(struct execd *ex, const char *line, size_t len)
{
    sbx_autoerror sbx_error *err = NULL;
    struct sbx_desktop *d = ex->desktop ? execd_desktop_handle(ex) : NULL;
    if (!d || !sbx_desktop_running(d)) {
        (void)sbx_error_set(&err, SBX_ECONFLICT, 0, "the desktop is not running");
        return error_json(err);
    }
    json_error_t jerr;
    json_t *req = json_loadb(line, len, 0, &jerr);
    if (!req) {
        (void)sbx_error_set(&err, SBX_EINVAL, 0, "malformed JSON: %s", jerr.text);
        return error_json(err);
    }
    json_t *ans = NULL;
    const char *op = json_string_value(json_object_get(req, "sbx"));
    if (op) {
        ans = query(d, op, req, &err);
    } else {
        struct sbx_action_result res;
        if (sbx_desktop_action(d, req, &res, &err) == 0) {
            /* no timers here: a caller that wants to wait sleeps itself */
            if (res.n_release)
                (void)sbx_desktop_release(d, &res, NULL);
            ans = execd_desktop_result_json(d, &res, &err);
        }
    }
    json_decref(req);
    return ans ? ans : error_json(err);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct execd *ex = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        size_t len = 0;
        char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
        if (!line) {
            if (evbuffer_get_length(in) > IPC_LINE_MAX) { /* a line without end: drop them */
                bufferevent_free(bev);
                return;
            }
            return;
        }
        reply(bev, handle(ex, line, len));
        free(line);
    }
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        bufferevent_free(bev);
}

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    struct execd *ex = arg;
    struct bufferevent *bev = bufferevent_socket_new(ex->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        (void)close(fd);
        return;
    }
    bufferevent_setcb(bev, on_read, NULL, on_event, ex);
    (void)bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int
execd_desktop_ipc_start(struct execd *ex, struct evconnlistener **out, sbx_error **err)
{
    if (*out)
        return 0;
    if (write_module(err) < 0)
        return -SBX_EGENERIC;
    return execd_unix_listen(ex, IPC_SOCK, SOCK_STREAM, on_accept, out, err);
}

void
execd_desktop_ipc_stop(struct evconnlistener **l)
{
    if (*l) {
        evconnlistener_free(*l);
        (void)unlink(IPC_SOCK);
    }
    *l = NULL;
}

const char *
execd_desktop_ipc_socket(void)
{
    return IPC_SOCK;
}

const char *
execd_desktop_ipc_pythonpath(void)
{
    return IPC_PYDIR;
}

const char *
execd_desktop_osworld_script(void)
{
    return IPC_PYDIR "/sbx_osworld_server.py";
}
