/*
 * x11.c - the desktop's X connection (xcb): kept open for the desktop's life, so a screenshot
 * or an action is requests on it, not a new client. Atoms, the screen, the pointer, events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xcb/xcb.h>
#include <xcb/xtest.h>

#include "common/xalloc.h"
#include "desktop/desktop_int.h"

static xcb_atom_t
intern(xcb_connection_t *c, const char *name)
{
    xcb_intern_atom_reply_t *r =
        xcb_intern_atom_reply(c, xcb_intern_atom(c, 0, (uint16_t)strlen(name), name), NULL);
    xcb_atom_t a = r ? r->atom : XCB_ATOM_NONE;
    free(r);
    return a;
}

static void
load_atoms(struct sbx_desktop *d)
{
    struct desk_atoms *a = &d->atom;
    xcb_connection_t *c = d->conn;
    a->clipboard = intern(c, "CLIPBOARD");
    a->targets = intern(c, "TARGETS");
    a->utf8 = intern(c, "UTF8_STRING");
    a->string = XCB_ATOM_STRING;
    a->text = intern(c, "TEXT");
    a->incr = intern(c, "INCR");
    a->net_client_list = intern(c, "_NET_CLIENT_LIST");
    a->net_active_window = intern(c, "_NET_ACTIVE_WINDOW");
    a->net_wm_name = intern(c, "_NET_WM_NAME");
    a->net_close_window = intern(c, "_NET_CLOSE_WINDOW");
    a->wm_protocols = intern(c, "WM_PROTOCOLS");
    a->wm_delete = intern(c, "WM_DELETE_WINDOW");
    a->wm_name = XCB_ATOM_WM_NAME;
    a->wm_class = XCB_ATOM_WM_CLASS;
    a->at_spi_bus = intern(c, "AT_SPI_BUS");
    a->sbx_sel = intern(c, "SBX_SELECTION");
}

int
desk_x_error(struct sbx_desktop *d, xcb_generic_error_t *e, const char *what, sbx_error **err)
{
    (void)d;
    int code = e ? e->error_code : 0;
    free(e);
    return sbx_error_set(err, SBX_EIO, 0, "%s: X error %d", what, code);
}

int
desk_x_connect(struct sbx_desktop *d, sbx_error **err)
{
    char name[32];
    snprintf(name, sizeof name, ":%d", d->display);
    int screen = 0;
    d->conn = xcb_connect(name, &screen);
    if (!d->conn || xcb_connection_has_error(d->conn)) {
        if (d->conn)
            xcb_disconnect(d->conn);
        d->conn = NULL;
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "connect to the X server %s", name);
    }
    xcb_screen_iterator_t it = xcb_setup_roots_iterator(xcb_get_setup(d->conn));
    for (int i = 0; i < screen && it.rem; i++)
        xcb_screen_next(&it);
    d->screen = it.data;
    d->root = d->screen->root;
    load_atoms(d);
    /* XTest is what every action uses: without it nothing works. */
    xcb_test_get_version_reply_t *v =
        xcb_test_get_version_reply(d->conn, xcb_test_get_version(d->conn, 2, 2), NULL);
    if (!v)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "the X server %s has no XTEST extension", name);
    free(v);
    /* Apps find the accessibility bus here (no session bus needed): at-spi's own lookup. */
    if (d->a11y_bus)
        xcb_change_property(d->conn, XCB_PROP_MODE_REPLACE, d->root, d->atom.at_spi_bus,
                            XCB_ATOM_STRING, 8, (uint32_t)strlen(d->a11y_bus), d->a11y_bus);
    /* An unmapped window of ours: owner of our selections, target of conversions. */
    d->sel_win = xcb_generate_id(d->conn);
    uint32_t mask = XCB_EVENT_MASK_PROPERTY_CHANGE;
    xcb_create_window(d->conn, XCB_COPY_FROM_PARENT, d->sel_win, d->root, -10, -10, 1, 1, 0,
                      XCB_WINDOW_CLASS_INPUT_ONLY, XCB_COPY_FROM_PARENT, XCB_CW_EVENT_MASK, &mask);
    int r = desk_keymap_load(d, err);
    xcb_flush(d->conn);
    return r;
}

void
desk_x_disconnect(struct sbx_desktop *d)
{
    desk_shm_release(d);
    if (d->conn)
        xcb_disconnect(d->conn);
    d->conn = NULL;
    d->screen = NULL;
    free(d->keymap);
    d->keymap = NULL;
    d->spare_sym = 0;
    free(d->clip);
    d->clip = NULL;
    d->clip_len = 0;
    d->clip_owned = false;
}

int
sbx_desktop_x_fd(const struct sbx_desktop *d)
{
    return d && d->conn ? xcb_get_file_descriptor(d->conn) : -1;
}

void
desk_x_event(struct sbx_desktop *d, xcb_generic_event_t *ev)
{
    switch (ev->response_type & 0x7f) {
    case XCB_SELECTION_REQUEST:
        desk_selection_request(d, (xcb_selection_request_event_t *)ev);
        break;
    case XCB_SELECTION_CLEAR:
        desk_selection_clear(d, (xcb_selection_clear_event_t *)ev);
        break;
    case XCB_MAPPING_NOTIFY: {
        sbx_autoerror sbx_error *e = NULL;
        (void)desk_keymap_load(d, &e); /* the keyboard map changed under us */
        break;
    }
    default:
        break;
    }
}

void
sbx_desktop_x_events(struct sbx_desktop *d)
{
    if (!d->conn)
        return;
    xcb_generic_event_t *ev;
    while ((ev = xcb_poll_for_event(d->conn))) {
        desk_x_event(d, ev);
        free(ev);
    }
    xcb_flush(d->conn);
}

static int
need_x(struct sbx_desktop *d, sbx_error **err)
{
    if (d->state != SBX_DESKTOP_RUNNING || !d->conn)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "the desktop is not running");
    if (xcb_connection_has_error(d->conn))
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "the X connection is broken");
    return 0;
}

int
sbx_desktop_screen_size(struct sbx_desktop *d, unsigned *w, unsigned *h, sbx_error **err)
{
    if (need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    xcb_get_geometry_reply_t *g =
        xcb_get_geometry_reply(d->conn, xcb_get_geometry(d->conn, d->root), NULL);
    if (!g)
        return sbx_error_set(err, SBX_EIO, 0, "root window geometry");
    *w = g->width;
    *h = g->height;
    free(g);
    return 0;
}

int
sbx_desktop_cursor(struct sbx_desktop *d, int *x, int *y, sbx_error **err)
{
    if (need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    xcb_query_pointer_reply_t *p =
        xcb_query_pointer_reply(d->conn, xcb_query_pointer(d->conn, d->root), NULL);
    if (!p)
        return sbx_error_set(err, SBX_EIO, 0, "query the pointer");
    *x = p->root_x;
    *y = p->root_y;
    free(p);
    return 0;
}

int
desk_need_x(struct sbx_desktop *d, sbx_error **err)
{
    return need_x(d, err);
}
