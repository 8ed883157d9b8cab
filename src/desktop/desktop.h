/*
 * desktop.h - a GUI desktop inside a sandbox: an X server (TigerVNC's Xvnc, which is also the
 * VNC server of the live view), an optional window manager, a private accessibility bus and a
 * session bus, all supervised; and what agents do with it: screenshots, mouse and keyboard
 * (XTest), windows, the clipboard. docs/desktop.md describes it.
 *
 * No event loop of its own and no threads: the owner (sbx-execd) reaps children and passes
 * their exits in (sbx_desktop_child_exited), watches the X connection's fd and calls
 * sbx_desktop_x_events when it is readable. Every call is synchronous and bounded.
 *
 * Boundary: everything runs inside the sandbox, under its limits, as the sandbox's processes.
 * The X server listens only on its unix socket in the sandbox's /tmp (and the abstract socket
 * of the sandbox's own network namespace), never on TCP; its VNC port is on the sandbox's own
 * 127.0.0.1, reached from outside only through the API (provider.connect).
 */
#ifndef SBX_DESKTOP_DESKTOP_H
#define SBX_DESKTOP_DESKTOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/error.h"

struct sbx_desktop;

#define SBX_DESKTOP_MAX_GROUPS 64

struct sbx_desktop_opts {
    unsigned width, height, depth; /* default 1280x800x24 */
    bool no_wm;                    /* no window manager (openbox by default) */
    int vnc_port;                  /* 127.0.0.1 port of the VNC server; 0: 5900; -1: none */
    const char *home;              /* HOME of the desktop's programs; NULL: $HOME or /root */
    /* The user the desktop's programs run as (an image's SBX_DESKTOP_USER, OSWorld's `user`);
     * the caller resolves it (execd reads /etc/passwd without NSS). Unset: as the owner. With a
     * user, XDG_RUNTIME_DIR is /run/user/UID, the session bus /run/user/UID/bus and PulseAudio
     * runs (when installed) as the login session of a desktop distribution has them. */
    bool as_user;
    uid_t uid;
    gid_t gid;
    gid_t groups[SBX_DESKTOP_MAX_GROUPS];
    size_t ngroups;
    char user[64];
    /* Called around each spawn (execd: its children are the OOM killer's first choice). */
    void (*pre_spawn)(void *ctx);
    void (*post_spawn)(void *ctx);
    void *spawn_ctx;
};

enum sbx_desktop_state {
    SBX_DESKTOP_STOPPED = 0,
    SBX_DESKTOP_RUNNING,
    SBX_DESKTOP_FAILED, /* the X server died too often: not restarted (start again) */
};

struct sbx_desktop_status {
    enum sbx_desktop_state state;
    unsigned width, height, depth;
    int display;       /* :N */
    int vnc_port;      /* -1: none */
    unsigned restarts; /* X server restarts since start */
    double ready_ms;   /* the last start: from spawn to an X connection and a11y bus */
    bool wm;
    bool as_user; /* the programs run as uid/gid (opts.as_user) */
    uid_t uid;
    gid_t gid;
    char last_error[256];
};

/* Parse "WxH[xD][,wm=openbox|none]" into o (defaults kept for what is not given). */
int sbx_desktop_parse_spec(const char *spec, struct sbx_desktop_opts *o, sbx_error **err);

int sbx_desktop_new(struct sbx_desktop **out, sbx_error **err);
void sbx_desktop_free(struct sbx_desktop *d); /* stops it first */
/* Start the processes and connect; SBX_ECONFLICT when running. */
int sbx_desktop_start(struct sbx_desktop *d, const struct sbx_desktop_opts *o, sbx_error **err);
/* Stop every process of the desktop (SIGTERM, SIGKILL after a short grace). Idempotent. */
void sbx_desktop_stop(struct sbx_desktop *d);
bool sbx_desktop_running(const struct sbx_desktop *d);
void sbx_desktop_status(const struct sbx_desktop *d, struct sbx_desktop_status *st);
/* The environment a desktop program needs (DISPLAY, the session bus, XDG dirs...), as
 * "K=V" strings valid until the desktop stops; NULL when not running. */
const char *const *sbx_desktop_env(const struct sbx_desktop *d);
/* The private accessibility bus's address (for the a11y tree), or NULL. */
const char *sbx_desktop_a11y_bus(const struct sbx_desktop *d);

/* A child of the owner exited: true when it was one of the desktop's (then handled: the X
 * server is restarted, with its clients, unless it died too often). */
bool sbx_desktop_child_exited(struct sbx_desktop *d, pid_t pid, int status);
/* The X connection's fd (watch for readability), or -1. */
int sbx_desktop_x_fd(const struct sbx_desktop *d);
/* Handle pending X events (clipboard requests); call when the fd is readable. */
void sbx_desktop_x_events(struct sbx_desktop *d);

/* ---- screen ---- */
struct sbx_shot_opts {
    bool jpeg;      /* else PNG */
    int quality;    /* JPEG 1-100, default 80 */
    int x, y, w, h; /* region (w/h 0: the whole screen) */
    double scale;   /* 0 or 1: none; (0, 1]: downscale */
    bool no_cursor; /* the cursor is drawn in unless set (OSWorld's screenshots have it) */
};
struct sbx_shot_stats {
    double ms_grab, ms_cursor, ms_scale, ms_encode;
    unsigned width, height; /* of the image */
};
int sbx_desktop_screenshot(struct sbx_desktop *d, const struct sbx_shot_opts *o,
                           struct sbx_buf *out, struct sbx_shot_stats *st, sbx_error **err);
int sbx_desktop_screen_size(struct sbx_desktop *d, unsigned *w, unsigned *h, sbx_error **err);
int sbx_desktop_cursor(struct sbx_desktop *d, int *x, int *y, sbx_error **err);

/* ---- input ---- */
enum sbx_button {
    SBX_BTN_LEFT = 1,
    SBX_BTN_MIDDLE = 2,
    SBX_BTN_RIGHT = 3
};
int sbx_desktop_move(struct sbx_desktop *d, int x, int y, sbx_error **err);
int sbx_desktop_button(struct sbx_desktop *d, int button, bool down, sbx_error **err);
int sbx_desktop_click(struct sbx_desktop *d, int button, int count, sbx_error **err);
/* Scroll by clicks: dy > 0 up, dy < 0 down; dx > 0 right, dx < 0 left (buttons 4-7). */
int sbx_desktop_scroll(struct sbx_desktop *d, int dx, int dy, sbx_error **err);
/* A key by X keysym, pressed or released. */
int sbx_desktop_keysym(struct sbx_desktop *d, uint32_t keysym, bool down, sbx_error **err);
/* A key name (pyautogui's, xdotool's, an X keysym name or one character) to its keysym; 0 for
 * a known name that has no key on X ("accept"). keys.c lists the sources. */
int sbx_desktop_key_lookup(const char *name, uint32_t *keysym, sbx_error **err);
/* Type UTF-8 text: each character pressed and released (shift as the keymap needs it). */
int sbx_desktop_type(struct sbx_desktop *d, const char *text, size_t len, sbx_error **err);
/* Every pending request sent and processed by the server (an action's end). */
int sbx_desktop_sync(struct sbx_desktop *d, sbx_error **err);

/* ---- actions (actions.c): computer_13 and Anthropic's computer use, as JSON ---- */
struct sbx_action_result {
    bool done, fail;      /* computer_13 DONE / FAIL */
    double wait_s;        /* answer after this long (WAIT's and hold_key's duration) */
    uint32_t release[16]; /* hold_key: keys to release after wait_s (sbx_desktop_release) */
    size_t n_release;
    bool cursor; /* cursor_position: x, y */
    int x, y;
    bool image; /* screenshot / zoom: the caller takes one with shot */
    struct sbx_shot_opts shot;
};
/* Check the whole action, then apply it; SBX_EINVAL (naming the field) applies nothing. */
int sbx_desktop_action(struct sbx_desktop *d, json_t *action, struct sbx_action_result *res,
                       sbx_error **err);
/* Release what a hold_key action holds. */
int sbx_desktop_release(struct sbx_desktop *d, const struct sbx_action_result *res,
                        sbx_error **err);

/* ---- recording (record.c): ffmpeg x11grab -> H.264 MP4 ---- */
int sbx_desktop_record_start(struct sbx_desktop *d, int fps, sbx_error **err);
bool sbx_desktop_recording(const struct sbx_desktop *d);
/* Ask the recorder to finish (SIGINT); its exit comes through sbx_desktop_child_exited. */
int sbx_desktop_record_stop(struct sbx_desktop *d, sbx_error **err);
void sbx_desktop_record_kill(struct sbx_desktop *d);
/* After the recorder exited: the MP4's path (caller frees and removes the file) and how long
 * it ran; SBX_EIO with ffmpeg's message when it failed. */
int sbx_desktop_record_take(struct sbx_desktop *d, char **path, double *seconds, sbx_error **err);

/* ---- windows and clipboard ---- */
/* JSON array of {id, title, class, instance, x, y, width, height, active} (caller frees). */
int sbx_desktop_windows(struct sbx_desktop *d, char **json_out, sbx_error **err);
int sbx_desktop_window_activate(struct sbx_desktop *d, uint32_t id, sbx_error **err);
int sbx_desktop_window_close(struct sbx_desktop *d, uint32_t id, sbx_error **err);
/* The CLIPBOARD's text (UTF-8, at most max bytes; caller frees). */
int sbx_desktop_clipboard_get(struct sbx_desktop *d, char **out, size_t *len, size_t max,
                              sbx_error **err);
/* Own the CLIPBOARD with this text (served to other clients until someone else takes it). */
int sbx_desktop_clipboard_set(struct sbx_desktop *d, const char *text, size_t len, sbx_error **err);

#endif
