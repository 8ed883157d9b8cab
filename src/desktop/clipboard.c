/*
 * clipboard.c - the CLIPBOARD selection, ICCCM style: read by converting it to UTF8_STRING
 * (STRING when the owner offers no UTF-8) into a property of our own window, INCR transfers
 * included; written by owning the selection and answering other clients' requests from
 * sbx_desktop_x_events (the owner's event loop), as any X client would.
 *
 * The owner is another program in the sandbox: its answer is untrusted, so every read is
 * bounded (the caller's max, a deadline for each step) and nothing it sends is interpreted.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <xcb/xcb.h>

#include "common/buf.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/desktop_int.h"

#define STEP_TIMEOUT_MS 1000       /* per answer of the owner */
#define CLIP_SET_MAX    (1u << 20) /* what we serve in one property (no INCR of our own) */

/* Wait for an event that `match` accepts (others are handled as usual); NULL on timeout. */
static xcb_generic_event_t *
wait_event(struct sbx_desktop *d, bool (*match)(struct sbx_desktop *, xcb_generic_event_t *),
           int timeout_ms)
{
    uint64_t deadline = sbx_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        xcb_generic_event_t *ev;
        while ((ev = xcb_poll_for_event(d->conn))) {
            if (match(d, ev))
                return ev;
            desk_x_event(d, ev);
            free(ev);
        }
        xcb_flush(d->conn);
        if (xcb_connection_has_error(d->conn))
            return NULL;
        uint64_t now = sbx_now_ms();
        if (now >= deadline)
            return NULL;
        struct pollfd p = {.fd = xcb_get_file_descriptor(d->conn), .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
            return NULL;
    }
}

static bool
is_notify(struct sbx_desktop *d, xcb_generic_event_t *ev)
{
    const xcb_selection_notify_event_t *n = (const xcb_selection_notify_event_t *)ev;
    return (ev->response_type & 0x7f) == XCB_SELECTION_NOTIFY && n->requestor == d->sel_win;
}

static bool
is_new_value(struct sbx_desktop *d, xcb_generic_event_t *ev)
{
    const xcb_property_notify_event_t *n = (const xcb_property_notify_event_t *)ev;
    return (ev->response_type & 0x7f) == XCB_PROPERTY_NOTIFY && n->window == d->sel_win &&
           n->atom == d->atom.sbx_sel && n->state == XCB_PROPERTY_NEW_VALUE;
}

/* Read (and delete) our property; appends to out; *type gets its type. */
static int
take_property(struct sbx_desktop *d, struct sbx_buf *out, xcb_atom_t *type, size_t *got,
              sbx_error **err)
{
    size_t room = out->max > out->len ? out->max - out->len : 0;
    uint32_t words = (uint32_t)((room + 4) / 4 + 1);
    xcb_get_property_reply_t *r =
        xcb_get_property_reply(d->conn,
                               xcb_get_property(d->conn, 1, d->sel_win, d->atom.sbx_sel,
                                                XCB_GET_PROPERTY_TYPE_ANY, 0, words),
                               NULL);
    if (!r)
        return sbx_error_set(err, SBX_EIO, 0, "read the clipboard's property");
    *type = r->type;
    size_t len = (size_t)xcb_get_property_value_length(r);
    *got = len;
    int rc = 0;
    if (r->type != d->atom.incr && (r->bytes_after > 0 || len > room))
        rc = sbx_error_set(err, SBX_ELIMIT, 0, "the clipboard holds more than %zu bytes", out->max);
    else if (r->type != d->atom.incr)
        rc = sbx_buf_append(out, xcb_get_property_value(r), len, err);
    free(r);
    return rc;
}

static int
read_incr(struct sbx_desktop *d, struct sbx_buf *out, sbx_error **err)
{
    for (;;) {
        xcb_generic_event_t *ev = wait_event(d, is_new_value, STEP_TIMEOUT_MS);
        if (!ev)
            return sbx_error_set(err, SBX_ETIMEDOUT, 0,
                                 "the clipboard's owner stopped sending (INCR)");
        free(ev);
        xcb_atom_t type = XCB_ATOM_NONE;
        size_t got = 0;
        if (take_property(d, out, &type, &got, err) < 0)
            return -SBX_ELIMIT;
        if (got == 0)
            return 0; /* a zero-length chunk ends the transfer */
    }
}

/* Ask the owner for the selection as `target`; 1: converted, 0: refused, <0: error. */
static int
convert(struct sbx_desktop *d, xcb_atom_t target, struct sbx_buf *out, sbx_error **err)
{
    xcb_delete_property(d->conn, d->sel_win, d->atom.sbx_sel);
    xcb_convert_selection(d->conn, d->sel_win, d->atom.clipboard, target, d->atom.sbx_sel,
                          XCB_CURRENT_TIME);
    xcb_flush(d->conn);
    xcb_generic_event_t *ev = wait_event(d, is_notify, STEP_TIMEOUT_MS);
    if (!ev)
        return sbx_error_set(err, SBX_ETIMEDOUT, 0, "the clipboard's owner did not answer");
    xcb_atom_t prop = ((xcb_selection_notify_event_t *)ev)->property;
    free(ev);
    if (prop == XCB_ATOM_NONE)
        return 0;
    xcb_atom_t type = XCB_ATOM_NONE;
    size_t got = 0;
    if (take_property(d, out, &type, &got, err) < 0)
        return -SBX_ELIMIT;
    if (type == d->atom.incr && read_incr(d, out, err) < 0)
        return -SBX_EIO;
    return 1;
}

int
sbx_desktop_clipboard_get(struct sbx_desktop *d, char **out, size_t *len, size_t max,
                          sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    sbx_autobuf struct sbx_buf b;
    sbx_buf_init(&b, max);
    if (d->clip_owned) { /* ours: asking ourselves through the server would deadlock */
        if (d->clip_len > max)
            return sbx_error_set(err, SBX_ELIMIT, 0, "the clipboard holds more than %zu bytes",
                                 max);
        if (sbx_buf_append(&b, d->clip, d->clip_len, err) < 0)
            return -SBX_ELIMIT;
    } else {
        xcb_get_selection_owner_reply_t *o = xcb_get_selection_owner_reply(
            d->conn, xcb_get_selection_owner(d->conn, d->atom.clipboard), NULL);
        bool owned = o && o->owner != XCB_NONE;
        free(o);
        if (owned) {
            int r = convert(d, d->atom.utf8, &b, err);
            if (r == 0)
                r = convert(d, d->atom.string, &b, err);
            if (r < 0)
                return r;
        }
    }
    *len = b.len;
    *out = sbx_buf_steal(&b);
    return 0;
}

int
sbx_desktop_clipboard_set(struct sbx_desktop *d, const char *text, size_t len, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    if (len > CLIP_SET_MAX)
        return sbx_error_set(err, SBX_ELIMIT, 0, "clipboard text over %u bytes", CLIP_SET_MAX);
    free(d->clip);
    d->clip = sbx_xmalloc(len + 1);
    memcpy(d->clip, text, len);
    d->clip[len] = '\0';
    d->clip_len = len;
    xcb_set_selection_owner(d->conn, d->sel_win, d->atom.clipboard, XCB_CURRENT_TIME);
    xcb_get_selection_owner_reply_t *o = xcb_get_selection_owner_reply(
        d->conn, xcb_get_selection_owner(d->conn, d->atom.clipboard), NULL);
    d->clip_owned = o && o->owner == d->sel_win;
    free(o);
    if (!d->clip_owned)
        return sbx_error_set(err, SBX_EIO, 0, "could not take the clipboard");
    return 0;
}

static void
notify(struct sbx_desktop *d, const xcb_selection_request_event_t *rq, xcb_atom_t prop)
{
    xcb_selection_notify_event_t n = {0};
    n.response_type = XCB_SELECTION_NOTIFY;
    n.time = rq->time;
    n.requestor = rq->requestor;
    n.selection = rq->selection;
    n.target = rq->target;
    n.property = prop;
    xcb_send_event(d->conn, 0, rq->requestor, 0, (const char *)&n);
}

void
desk_selection_request(struct sbx_desktop *d, const xcb_selection_request_event_t *rq)
{
    /* Old clients send property None: ICCCM says use the target as the property. */
    xcb_atom_t prop = rq->property != XCB_ATOM_NONE ? rq->property : rq->target;
    const struct desk_atoms *a = &d->atom;
    bool ours = d->clip_owned && rq->selection == a->clipboard;
    bool text = rq->target == a->utf8 || rq->target == a->string || rq->target == a->text;
    if (ours && rq->target == a->targets) {
        xcb_atom_t t[] = {a->targets, a->utf8, a->string, a->text};
        xcb_change_property(d->conn, XCB_PROP_MODE_REPLACE, rq->requestor, prop, XCB_ATOM_ATOM, 32,
                            SBX_ARRAY_SIZE(t), t);
        notify(d, rq, prop);
    } else if (ours && text) {
        xcb_atom_t type = rq->target == a->string ? XCB_ATOM_STRING : a->utf8;
        xcb_change_property(d->conn, XCB_PROP_MODE_REPLACE, rq->requestor, prop, type, 8,
                            (uint32_t)d->clip_len, d->clip);
        notify(d, rq, prop);
    } else {
        notify(d, rq, XCB_ATOM_NONE); /* not ours, MULTIPLE and the rest: refused */
    }
    xcb_flush(d->conn);
}

void
desk_selection_clear(struct sbx_desktop *d, const xcb_selection_clear_event_t *ev)
{
    if (ev->selection == d->atom.clipboard && ev->owner == d->sel_win)
        d->clip_owned = false; /* someone else copied something */
}
