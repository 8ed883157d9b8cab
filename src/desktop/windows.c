/*
 * windows.c - the desktop's top-level windows: listed from the window manager's
 * _NET_CLIENT_LIST (EWMH), or from the root's mapped children when there is no window
 * manager; activated with _NET_ACTIVE_WINDOW (or focus + raise without one); closed politely
 * (_NET_CLOSE_WINDOW / WM_DELETE_WINDOW), never by killing the client.
 *
 * Titles and classes come from applications: they are untrusted bytes, passed on as JSON
 * strings (jansson escapes them; invalid UTF-8 is replaced) and bounded in length.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xcb/xcb.h>

#include "common/xalloc.h"
#include "desktop/desktop_int.h"

#define MAX_WINDOWS  4096
#define MAX_PROP_LEN 4096 /* bytes of a title or class read */

/* A property's value (at most MAX_PROP_LEN bytes), or NULL. */
static xcb_get_property_reply_t *
get_prop(struct sbx_desktop *d, xcb_window_t w, xcb_atom_t prop, xcb_atom_t type, uint32_t words)
{
    xcb_get_property_reply_t *r = xcb_get_property_reply(
        d->conn, xcb_get_property(d->conn, 0, w, prop, type, 0, words), NULL);
    if (r && r->type == XCB_ATOM_NONE) {
        free(r);
        return NULL;
    }
    return r;
}

/* A string property as a NUL-terminated copy (invalid UTF-8 is fixed by fix_utf8 later). */
static char *
prop_string(struct sbx_desktop *d, xcb_window_t w, xcb_atom_t prop, xcb_atom_t type)
{
    xcb_get_property_reply_t *r = get_prop(d, w, prop, type, MAX_PROP_LEN / 4);
    if (!r)
        return NULL;
    int len = xcb_get_property_value_length(r);
    char *s = sbx_xmalloc((size_t)len + 1);
    memcpy(s, xcb_get_property_value(r), (size_t)len);
    s[len] = '\0';
    free(r);
    return s;
}

/* Bytes that are not valid UTF-8 become '?' (jansson refuses such strings). */
static void
fix_utf8(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80             ? 1
                : (*p & 0xe0) == 0xc0 ? 2
                : (*p & 0xf0) == 0xe0 ? 3
                : (*p & 0xf8) == 0xf0 ? 4
                                      : 0;
        bool ok = n > 0;
        for (int i = 1; ok && i < n; i++)
            ok = (p[i] & 0xc0) == 0x80;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

static json_t *
jstr(char *s)
{
    if (!s)
        return json_string("");
    fix_utf8(s);
    json_t *j = json_string(s);
    free(s);
    return j ? j : json_string("");
}

/* The windows: _NET_CLIENT_LIST, else the root's viewable children. *n is the count. */
static xcb_window_t *
client_list(struct sbx_desktop *d, size_t *n)
{
    *n = 0;
    xcb_get_property_reply_t *r =
        get_prop(d, d->root, d->atom.net_client_list, XCB_ATOM_WINDOW, MAX_WINDOWS);
    if (r && r->format == 32) {
        size_t cnt = (size_t)xcb_get_property_value_length(r) / 4;
        xcb_window_t *out = sbx_xcalloc(cnt + 1, sizeof *out);
        memcpy(out, xcb_get_property_value(r), cnt * sizeof *out);
        free(r);
        *n = cnt;
        return out;
    }
    free(r);
    xcb_query_tree_reply_t *t =
        xcb_query_tree_reply(d->conn, xcb_query_tree(d->conn, d->root), NULL);
    if (!t)
        return sbx_xcalloc(1, sizeof(xcb_window_t));
    int cnt = xcb_query_tree_children_length(t);
    xcb_window_t *kids = xcb_query_tree_children(t);
    xcb_window_t *out = sbx_xcalloc((size_t)cnt + 1, sizeof *out);
    for (int i = 0; i < cnt && *n < MAX_WINDOWS; i++) {
        xcb_get_window_attributes_reply_t *a = xcb_get_window_attributes_reply(
            d->conn, xcb_get_window_attributes(d->conn, kids[i]), NULL);
        bool shown = a && a->map_state == XCB_MAP_STATE_VIEWABLE && !a->override_redirect &&
                     kids[i] != d->sel_win;
        free(a);
        if (shown)
            out[(*n)++] = kids[i];
    }
    free(t);
    return out;
}

static xcb_window_t
active_window(struct sbx_desktop *d)
{
    xcb_get_property_reply_t *r =
        get_prop(d, d->root, d->atom.net_active_window, XCB_ATOM_WINDOW, 1);
    xcb_window_t w = XCB_NONE;
    if (r && r->format == 32 && xcb_get_property_value_length(r) >= 4)
        memcpy(&w, xcb_get_property_value(r), sizeof w);
    free(r);
    if (w == XCB_NONE) { /* no window manager: the focus */
        xcb_get_input_focus_reply_t *f =
            xcb_get_input_focus_reply(d->conn, xcb_get_input_focus(d->conn), NULL);
        w = f ? f->focus : XCB_NONE;
        free(f);
    }
    return w;
}

static json_t *
describe(struct sbx_desktop *d, xcb_window_t w, xcb_window_t active)
{
    char *title = prop_string(d, w, d->atom.net_wm_name, d->atom.utf8);
    if (!title)
        title = prop_string(d, w, d->atom.wm_name, XCB_GET_PROPERTY_TYPE_ANY);
    /* WM_CLASS is "instance\0class\0" */
    char *inst = NULL;
    char *klass = NULL;
    xcb_get_property_reply_t *r = get_prop(d, w, d->atom.wm_class, XCB_ATOM_STRING, 256);
    if (r) {
        size_t len = (size_t)xcb_get_property_value_length(r);
        const char *v = xcb_get_property_value(r);
        size_t l1 = strnlen(v, len);
        inst = sbx_xstrndup(v, l1);
        if (l1 + 1 < len)
            klass = sbx_xstrndup(v + l1 + 1, strnlen(v + l1 + 1, len - l1 - 1));
        free(r);
    }
    int x = 0;
    int y = 0;
    unsigned width = 0;
    unsigned height = 0;
    xcb_get_geometry_reply_t *g =
        xcb_get_geometry_reply(d->conn, xcb_get_geometry(d->conn, w), NULL);
    if (g) {
        width = g->width;
        height = g->height;
        xcb_translate_coordinates_reply_t *t = xcb_translate_coordinates_reply(
            d->conn, xcb_translate_coordinates(d->conn, w, d->root, 0, 0), NULL);
        if (t) {
            x = t->dst_x;
            y = t->dst_y;
        }
        free(t);
    }
    free(g);
    return json_pack("{s:I, s:o, s:o, s:o, s:i, s:i, s:i, s:i, s:b}", "id", (json_int_t)w, "title",
                     jstr(title), "class", jstr(klass), "instance", jstr(inst), "x", x, "y", y,
                     "width", (int)width, "height", (int)height, "active", w == active);
}

int
sbx_desktop_windows(struct sbx_desktop *d, char **json_out, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    size_t n = 0;
    xcb_window_t *ws = client_list(d, &n);
    xcb_window_t active = active_window(d);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = describe(d, ws[i], active);
        if (o)
            (void)json_array_append_new(arr, o);
    }
    free(ws);
    *json_out = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return *json_out ? 0 : sbx_error_set(err, SBX_ENOMEM, 0, "window list");
}

/* A window we may act on: one of the listed (a client can only name windows that exist on
 * its desktop; this also keeps the API from sending client messages to arbitrary ids). */
static int
known_window(struct sbx_desktop *d, uint32_t id, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    size_t n = 0;
    xcb_window_t *ws = client_list(d, &n);
    bool found = false;
    for (size_t i = 0; i < n && !found; i++)
        found = ws[i] == id;
    free(ws);
    if (!found)
        return sbx_error_set(err, SBX_ENOTFOUND, 0, "no window %u on the desktop", id);
    return 0;
}

static bool
has_wm(struct sbx_desktop *d)
{
    xcb_get_property_reply_t *r = get_prop(d, d->root, d->atom.net_client_list, XCB_ATOM_WINDOW, 1);
    free(r);
    return r != NULL;
}

/* An EWMH request goes to the root (the window manager listens there), an ICCCM one to the
 * client's own window. */
static void
client_message(struct sbx_desktop *d, xcb_window_t w, xcb_atom_t type, uint32_t d0, uint32_t d1,
               bool to_root)
{
    xcb_window_t dest = to_root ? d->root : w;
    uint32_t mask =
        to_root ? XCB_EVENT_MASK_SUBSTRUCTURE_REDIRECT | XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY : 0;
    xcb_client_message_event_t ev = {0};
    ev.response_type = XCB_CLIENT_MESSAGE;
    ev.format = 32;
    ev.window = w;
    ev.type = type;
    ev.data.data32[0] = d0;
    ev.data.data32[1] = d1;
    xcb_send_event(d->conn, 0, dest, mask, (const char *)&ev);
}

int
sbx_desktop_window_activate(struct sbx_desktop *d, uint32_t id, sbx_error **err)
{
    int r = known_window(d, id, err);
    if (r < 0)
        return r;
    if (has_wm(d)) {
        /* source 2: a pager/tool, which window managers obey without focus-stealing rules */
        client_message(d, id, d->atom.net_active_window, 2, XCB_CURRENT_TIME, true);
    } else {
        uint32_t above = XCB_STACK_MODE_ABOVE;
        xcb_configure_window(d->conn, id, XCB_CONFIG_WINDOW_STACK_MODE, &above);
        xcb_set_input_focus(d->conn, XCB_INPUT_FOCUS_POINTER_ROOT, id, XCB_CURRENT_TIME);
    }
    return sbx_desktop_sync(d, err);
}

int
sbx_desktop_window_close(struct sbx_desktop *d, uint32_t id, sbx_error **err)
{
    int r = known_window(d, id, err);
    if (r < 0)
        return r;
    if (has_wm(d)) {
        client_message(d, id, d->atom.net_close_window, XCB_CURRENT_TIME, 2, true);
    } else {
        /* ICCCM: ask the client itself (it may ask "save changes?", as a user would see) */
        client_message(d, id, d->atom.wm_protocols, d->atom.wm_delete, XCB_CURRENT_TIME, false);
    }
    return sbx_desktop_sync(d, err);
}
