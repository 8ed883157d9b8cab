/*
 * input.c - mouse and keyboard through XTest, in-process: each action is a few requests on the
 * desktop's X connection, no delays, no helper process (xdotool's default adds 100 ms per
 * click and 12 ms per key).
 *
 * Keys are X keysyms. A keysym found in the keyboard map is sent with its keycode (and Shift
 * when it is the map's second column); one the map lacks (a character of another alphabet
 * being typed) is put on a spare keycode for the moment, as xdotool does.
 */
#include <stdlib.h>
#include <string.h>

#include <xcb/xcb.h>
#include <xcb/xtest.h>

#include "common/xalloc.h"
#include "desktop/desktop_int.h"

#define XK_Shift_L  0xffe1
#define XK_KP_Space 0xff80
#define XK_KP_Equal 0xffbd

int
desk_keymap_load(struct sbx_desktop *d, sbx_error **err)
{
    const xcb_setup_t *setup = xcb_get_setup(d->conn);
    d->min_keycode = setup->min_keycode;
    d->max_keycode = setup->max_keycode;
    uint8_t count = (uint8_t)(d->max_keycode - d->min_keycode + 1);
    xcb_get_keyboard_mapping_reply_t *r = xcb_get_keyboard_mapping_reply(
        d->conn, xcb_get_keyboard_mapping(d->conn, d->min_keycode, count), NULL);
    if (!r)
        return sbx_error_set(err, SBX_EIO, 0, "read the keyboard map");
    d->syms_per_code = r->keysyms_per_keycode;
    size_t n = (size_t)count * (size_t)d->syms_per_code;
    free(d->keymap);
    d->keymap = sbx_xmalloc(n * sizeof *d->keymap + 1);
    memcpy(d->keymap, xcb_get_keyboard_mapping_keysyms(r), n * sizeof *d->keymap);
    free(r);
    d->shift_code = 0;
    d->spare_code = 0;
    for (int k = d->max_keycode; k >= d->min_keycode; k--) {
        const uint32_t *syms = d->keymap + (size_t)(k - d->min_keycode) * d->syms_per_code;
        bool empty = true;
        for (int c = 0; c < d->syms_per_code; c++) {
            empty = empty && syms[c] == 0;
            if (c == 0 && syms[c] == XK_Shift_L)
                d->shift_code = (uint8_t)k;
        }
        if (empty && !d->spare_code)
            d->spare_code = (uint8_t)k; /* the highest unused keycode */
    }
    if (d->spare_sym && d->spare_code) { /* still mapped from before */
        uint32_t *syms = d->keymap + (size_t)(d->spare_code - d->min_keycode) * d->syms_per_code;
        syms[0] = d->spare_sym;
    }
    return 0;
}

/* The keycode of keysym, and whether Shift is needed; 0 when the map lacks it. */
static uint8_t
find_key(const struct sbx_desktop *d, uint32_t keysym, bool *shift)
{
    int cols = d->syms_per_code < 2 ? d->syms_per_code : 2;
    for (int col = 0; col < cols; col++) {
        for (int k = d->min_keycode; k <= d->max_keycode; k++) {
            if (d->keymap[(size_t)(k - d->min_keycode) * d->syms_per_code + col] == keysym) {
                *shift = col == 1;
                return (uint8_t)k;
            }
        }
    }
    return 0;
}

/* Put keysym on the spare keycode (both columns, so Shift does not matter). */
static uint8_t
remap_spare(struct sbx_desktop *d, uint32_t keysym)
{
    if (!d->spare_code)
        return 0;
    if (d->spare_sym != keysym) {
        uint32_t syms[2] = {keysym, keysym};
        xcb_change_keyboard_mapping(d->conn, 1, d->spare_code, 2, syms);
        /* the server must have the new map before the key event is processed */
        free(xcb_get_input_focus_reply(d->conn, xcb_get_input_focus(d->conn), NULL));
        d->spare_sym = keysym;
    }
    return d->spare_code;
}

static void
fake(struct sbx_desktop *d, uint8_t type, uint8_t detail, int x, int y)
{
    xcb_test_fake_input(d->conn, type, detail, XCB_CURRENT_TIME,
                        type == XCB_MOTION_NOTIFY ? d->root : XCB_NONE, (int16_t)x, (int16_t)y, 0);
}

int
sbx_desktop_keysym(struct sbx_desktop *d, uint32_t keysym, bool down, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    bool shift = false;
    uint8_t code = find_key(d, keysym, &shift);
    /* A keypad keysym's second column is reached with NumLock, not Shift (KP_5 with Shift is
     * KP_Begin): such a key goes on the spare keycode, where it is every column. */
    if (code && shift && keysym >= XK_KP_Space && keysym <= XK_KP_Equal)
        code = 0;
    if (!code) {
        code = remap_spare(d, keysym);
        shift = false;
    }
    if (!code)
        return sbx_error_set(err, SBX_EUNAVAIL, 0, "no keycode for keysym 0x%x", keysym);
    /* A key held on its own (KEY_DOWN) takes Shift only around the press. */
    if (shift && d->shift_code && down)
        fake(d, XCB_KEY_PRESS, d->shift_code, 0, 0);
    fake(d, down ? XCB_KEY_PRESS : XCB_KEY_RELEASE, code, 0, 0);
    if (shift && d->shift_code && down)
        fake(d, XCB_KEY_RELEASE, d->shift_code, 0, 0);
    return 0;
}

/* The keysym of a Unicode character (X's rule: Latin-1 as is, the rest 0x01000000 + U). */
uint32_t
desk_char_keysym(uint32_t cp)
{
    if (cp == '\n' || cp == '\r')
        return 0xff0d; /* Return */
    if (cp == '\t')
        return 0xff09; /* Tab */
    if (cp == '\b')
        return 0xff08; /* BackSpace */
    if (cp == 0x1b)
        return 0xff1b; /* Escape */
    if ((cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff))
        return cp;
    return 0x01000000 | cp;
}

/* Decode one UTF-8 character; -1 on a malformed sequence. */
static int
utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
    if (len == 0)
        return -1;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    int n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (n == 0 || (size_t)n > len)
        return -1;
    uint32_t v = s[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

int
sbx_desktop_type(struct sbx_desktop *d, const char *text, size_t len, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    const unsigned char *s = (const unsigned char *)text;
    size_t off = 0;
    while (off < len) {
        uint32_t cp = 0;
        int n = utf8_next(s + off, len - off, &cp);
        if (n < 0)
            return sbx_error_set(err, SBX_EINVAL, 0, "text is not UTF-8 (at byte %zu)", off);
        off += (size_t)n;
        uint32_t ks = desk_char_keysym(cp);
        if (sbx_desktop_keysym(d, ks, true, err) < 0 || sbx_desktop_keysym(d, ks, false, err) < 0)
            return -SBX_EIO;
        /* A character on the spare keycode must be processed before the next one remaps it. */
        if (d->spare_sym == ks && off < len)
            free(xcb_get_input_focus_reply(d->conn, xcb_get_input_focus(d->conn), NULL));
    }
    return 0;
}

int
sbx_desktop_move(struct sbx_desktop *d, int x, int y, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    fake(d, XCB_MOTION_NOTIFY, 0, x, y);
    return 0;
}

int
sbx_desktop_button(struct sbx_desktop *d, int button, bool down, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    if (button < 1 || button > 9)
        return sbx_error_set(err, SBX_EINVAL, 0, "button %d", button);
    fake(d, down ? XCB_BUTTON_PRESS : XCB_BUTTON_RELEASE, (uint8_t)button, 0, 0);
    return 0;
}

int
sbx_desktop_click(struct sbx_desktop *d, int button, int count, sbx_error **err)
{
    for (int i = 0; i < count; i++) {
        if (sbx_desktop_button(d, button, true, err) < 0 ||
            sbx_desktop_button(d, button, false, err) < 0)
            return -SBX_EIO;
    }
    return 0;
}

int
sbx_desktop_scroll(struct sbx_desktop *d, int dx, int dy, sbx_error **err)
{
    /* X buttons: 4 up, 5 down, 6 left, 7 right, one click per unit; horizontal first, as
     * OSWorld's SCROLL does (hscroll(dx), then vscroll(dy)). */
    int r = 0;
    if (dx)
        r = sbx_desktop_click(d, dx > 0 ? 7 : 6, abs(dx), err);
    if (r == 0 && dy)
        r = sbx_desktop_click(d, dy > 0 ? 4 : 5, abs(dy), err);
    return r;
}

int
sbx_desktop_sync(struct sbx_desktop *d, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    /* A round trip: every request before it has been processed by the server. */
    xcb_get_input_focus_reply_t *r =
        xcb_get_input_focus_reply(d->conn, xcb_get_input_focus(d->conn), NULL);
    if (!r)
        return sbx_error_set(err, SBX_EIO, 0, "X connection lost");
    free(r);
    return 0;
}
