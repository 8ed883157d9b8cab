/*
 * desktop_int.h - what the files of the desktop library share (not for its users).
 */
#ifndef SBX_DESKTOP_INT_H
#define SBX_DESKTOP_INT_H

#include <xcb/shm.h>
#include <xcb/xcb.h>

#include "desktop/desktop.h"

enum desk_proc {
    P_XVNC,
    P_WM,
    P_A11Y_BUS,
    P_REGISTRYD,
    P_SESSION_BUS,
    P_RECORDER, /* ffmpeg while a recording runs (record.c) */
    P_AUDIO,    /* PulseAudio, with a desktop user (as_user) and the program installed */
    P_COUNT
};

/* Atoms looked up once per connection. */
struct desk_atoms {
    xcb_atom_t clipboard, targets, utf8, string, text, incr, net_client_list, net_active_window,
        net_wm_name, net_close_window, wm_protocols, wm_delete, wm_name, wm_class, at_spi_bus,
        sbx_sel;
};

struct sbx_desktop {
    /* pointers and 64-bit fields first (no padding between them) */
    char *home;
    char *runtime_dir;          /* XDG_RUNTIME_DIR, 0700, made for the desktop */
    char *a11y_bus;             /* the accessibility bus's address */
    char *session_bus;          /* the session bus's address */
    char **env;                 /* for programs: "K=V" ..., NULL-terminated */
    uint64_t restart_window_ms; /* start of the minute the restarts are counted in */
    double ready_ms;
    /* X */
    xcb_connection_t *conn;
    xcb_screen_t *screen;
    uint32_t *keymap; /* (max-min+1) * syms_per_code keysyms */
    uint8_t *shm_mem; /* capture: the shared segment */
    size_t shm_size;
    char *clip; /* what we serve while we own CLIPBOARD */
    size_t clip_len;
    struct sbx_desktop_opts opts;
    enum sbx_desktop_state state;
    int display;
    unsigned restarts;
    unsigned restarts_in_window;
    xcb_window_t root;
    int syms_per_code;
    uint32_t spare_sym; /* what spare_code is mapped to now (0: nothing) */
    xcb_shm_seg_t shm_seg;
    xcb_window_t sel_win; /* owner window of our selections */
    pid_t pid[P_COUNT];
    struct desk_atoms atom;
    bool stopping;
    uint8_t min_keycode, max_keycode;
    uint8_t shift_code, spare_code;
    bool shm_ok;
    bool clip_owned;
    char last_error[256];
    /* record.c */
    char *rec_path;        /* the MP4 being written */
    uint64_t rec_start_ms; /* when it started */
    int rec_status;        /* the recorder's wait status once it exited */
    bool rec_exited;
    bool wm_ready; /* the window manager ran its --startup command (desk_wait_wm) */
};

/* session.c */
int desk_spawn(struct sbx_desktop *d, enum desk_proc which, char **argv, int pass_fd,
               sbx_error **err);
/* session.c: until the window manager has its key bindings (at most once, bounded): a key
 * sent before would reach no binding (Ctrl+Alt+T right after a reset) */
void desk_wait_wm(struct sbx_desktop *d);
/* session_bus.c: the session bus's activation environment = d->env (best effort) */
void desk_session_bus_env(struct sbx_desktop *d);
/* x11.c */
int desk_x_connect(struct sbx_desktop *d, sbx_error **err);
void desk_x_disconnect(struct sbx_desktop *d);
/* Handle one event (any path that reads events calls this for those it does not wait for). */
void desk_x_event(struct sbx_desktop *d, xcb_generic_event_t *ev);
int desk_x_error(struct sbx_desktop *d, xcb_generic_error_t *e, const char *what, sbx_error **err);
/* SBX_ECONFLICT unless running with a working connection. */
int desk_need_x(struct sbx_desktop *d, sbx_error **err);
/* input.c */
int desk_keymap_load(struct sbx_desktop *d, sbx_error **err);
uint32_t desk_char_keysym(uint32_t cp);
/* capture.c */
void desk_shm_release(struct sbx_desktop *d);
/* clipboard.c */
void desk_selection_request(struct sbx_desktop *d, const xcb_selection_request_event_t *rq);
void desk_selection_clear(struct sbx_desktop *d, const xcb_selection_clear_event_t *ev);
/* encode.c */
struct desk_image {
    const uint8_t *px; /* BGRX */
    unsigned w, h;
    size_t stride; /* bytes per row */
};
int desk_encode_png(const struct desk_image *im, struct sbx_buf *out, sbx_error **err);
int desk_encode_jpeg(const struct desk_image *im, int quality, struct sbx_buf *out,
                     sbx_error **err);

#endif
