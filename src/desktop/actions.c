/*
 * actions.c - agents' actions as JSON, checked and applied through XTest:
 *   - OSWorld's computer_13: {"action_type": "CLICK", "parameters": {...}} or the parameters
 *     flattened next to action_type, with OSWorld's parameter names and ranges;
 *   - Anthropic's computer-use tool input: {"action": "left_click", "coordinate": [x, y], ...}.
 * Everything is validated before the first event is sent, so a bad action does nothing; an
 * error names the field. No delays are added: a "wait" (or hold_key's duration) is returned
 * to the caller, which answers later without blocking (execd uses a timer).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/util.h"
#include "desktop/desktop_int.h"

#define MAX_TEXT   (64u << 10) /* bytes typed by one action */
#define MAX_SCROLL 1000        /* clicks of one scroll */
#define MAX_KEYS   16          /* keys of one hotkey */
#define MAX_WAIT_S 60.0
#define DRAG_STEPS 8 /* motion events between press and release of a drag */

struct ctx {
    struct sbx_desktop *d;
    json_t *params; /* where the parameters are (computer_13's "parameters", or the action) */
    const char *type;
    unsigned sw, sh; /* the screen */
};

__attribute__((format(printf, 4, 5))) static int
bad(sbx_error **err, const struct ctx *c, const char *field, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): false positive, va_start above */
    (void)vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sbx_error_set(err, SBX_EINVAL, 0, "%s: `%s` %s", c->type, field, what);
}

struct xy {
    int x, y;
    bool has; /* given (optional coordinates may be absent) */
};

/* Where a coordinate pair comes from: two JSON numbers and their field names. */
struct xy_src {
    json_t *jx, *jy;
    const char *fx, *fy;
    bool required;
};

/* A coordinate pair inside the screen; out->has = false when both are absent (optional). */
static int
get_xy(const struct ctx *c, const struct xy_src *in, struct xy *out, sbx_error **err)
{
    out->has = false;
    if (!in->jx && !in->jy) {
        if (in->required)
            return bad(err, c, in->fx, "is required");
        return 0;
    }
    if (!in->jx || !in->jy)
        return bad(err, c, in->jx ? in->fy : in->fx, "is required with the other coordinate");
    json_t *j[2] = {in->jx, in->jy};
    const char *f[2] = {in->fx, in->fy};
    unsigned lim[2] = {c->sw, c->sh};
    int *dst[2] = {&out->x, &out->y};
    for (int i = 0; i < 2; i++) {
        if (!json_is_number(j[i]))
            return bad(err, c, f[i], "must be a number");
        double v = json_number_value(j[i]);
        if (!isfinite(v) || v < 0 || v > lim[i])
            return bad(err, c, f[i], "is outside the screen (0-%u)", lim[i]);
        int iv = (int)lround(v);
        *dst[i] = iv >= (int)lim[i] ? (int)lim[i] - 1 : iv; /* the edge itself: its last pixel */
    }
    out->has = true;
    return 0;
}

/* "x" and "y" of computer_13's parameters. */
static int
get_xy13(const struct ctx *c, bool required, struct xy *out, sbx_error **err)
{
    struct xy_src in = {json_object_get(c->params, "x"), json_object_get(c->params, "y"), "x", "y",
                        required};
    return get_xy(c, &in, out, err);
}

static int
get_button(const struct ctx *c, int *button, sbx_error **err)
{
    json_t *b = json_object_get(c->params, "button");
    *button = SBX_BTN_LEFT;
    if (!b)
        return 0;
    const char *s = json_string_value(b);
    if (s && strcmp(s, "left") == 0)
        *button = SBX_BTN_LEFT;
    else if (s && strcmp(s, "right") == 0)
        *button = SBX_BTN_RIGHT;
    else if (s && strcmp(s, "middle") == 0)
        *button = SBX_BTN_MIDDLE;
    else
        return bad(err, c, "button", "must be left, right or middle");
    return 0;
}

static int
get_key(const struct ctx *c, json_t *j, const char *field, uint32_t *sym, sbx_error **err)
{
    const char *s = json_string_value(j);
    if (!s)
        return bad(err, c, field, j ? "must be a key name" : "is required");
    sbx_autoerror sbx_error *e = NULL;
    if (sbx_desktop_key_lookup(s, sym, &e) < 0)
        return bad(err, c, field, "%s", sbx_error_msg(e));
    return 0;
}

static int
get_text(const struct ctx *c, json_t *j, const char *field, const char **s, size_t *len,
         sbx_error **err)
{
    if (!json_is_string(j))
        return bad(err, c, field, j ? "must be a string" : "is required");
    *s = json_string_value(j);
    *len = json_string_length(j);
    if (*len > MAX_TEXT)
        return bad(err, c, field, "is longer than %u bytes", MAX_TEXT);
    return 0;
}

/* Only these parameters (a typo is an error, not a silently different action). */
static int
only(const struct ctx *c, const char *const *allowed, sbx_error **err)
{
    const char *k;
    json_t *v;
    json_object_foreach (c->params, k, v) {
        bool ok = strcmp(k, "action_type") == 0 || strcmp(k, "action") == 0;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok)
            return bad(err, c, k, "is not a parameter of this action");
    }
    return 0;
}

static int
key(struct sbx_desktop *d, uint32_t sym, bool down, sbx_error **err)
{
    return sym ? sbx_desktop_keysym(d, sym, down, err) : 0; /* 0: a name without a key */
}

/* Press keys in order, release in reverse (a hotkey). */
static int
chord(struct sbx_desktop *d, const uint32_t *syms, size_t n, sbx_error **err)
{
    for (size_t i = 0; i < n; i++) {
        if (key(d, syms[i], true, err) < 0)
            return -SBX_EIO;
    }
    for (size_t i = n; i-- > 0;) {
        if (key(d, syms[i], false, err) < 0)
            return -SBX_EIO;
    }
    return 0;
}

/* A left-button drag from `from` (where the pointer is) to `to`. */
static int
drag(struct sbx_desktop *d, struct xy from, struct xy to, sbx_error **err)
{
    if (sbx_desktop_button(d, SBX_BTN_LEFT, true, err) < 0)
        return -SBX_EIO;
    /* Intermediate motion: toolkits start a drag only after the pointer moved a few pixels
     * with the button down, and some need more than one motion event. */
    for (int i = 1; i <= DRAG_STEPS; i++) {
        int x = from.x + (to.x - from.x) * i / DRAG_STEPS;
        int y = from.y + (to.y - from.y) * i / DRAG_STEPS;
        if (sbx_desktop_move(d, x, y, err) < 0)
            return -SBX_EIO;
    }
    return sbx_desktop_button(d, SBX_BTN_LEFT, false, err);
}

/* ---- computer_13 ---- */

static int
c13_pointer(struct ctx *c, struct sbx_action_result *res, sbx_error **err)
{
    struct sbx_desktop *d = c->d;
    json_t *p = c->params;
    struct xy at = {0};
    const char *t = c->type;
    bool xy_req = strcmp(t, "MOVE_TO") == 0 || strcmp(t, "DRAG_TO") == 0;
    int r = get_xy13(c, xy_req, &at, err);
    if (r < 0)
        return r;
    int button = SBX_BTN_LEFT;
    int clicks = 1;
    if (strcmp(t, "CLICK") == 0) {
        static const char *const ok[] = {"x", "y", "button", "num_clicks", NULL};
        if (only(c, ok, err) < 0 || get_button(c, &button, err) < 0)
            return -SBX_EINVAL;
        json_t *n = json_object_get(p, "num_clicks");
        if (n && (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > 3))
            return bad(err, c, "num_clicks", "must be 1, 2 or 3");
        clicks = n ? (int)json_integer_value(n) : 1;
    } else if (strcmp(t, "MOUSE_DOWN") == 0 || strcmp(t, "MOUSE_UP") == 0) {
        static const char *const ok[] = {"button", NULL};
        if (only(c, ok, err) < 0 || get_button(c, &button, err) < 0)
            return -SBX_EINVAL;
        return sbx_desktop_button(d, button, t[6] == 'D', err);
    } else {
        static const char *const ok[] = {"x", "y", NULL};
        if (only(c, ok, err) < 0)
            return -SBX_EINVAL;
    }
    if (strcmp(t, "DRAG_TO") == 0) {
        struct xy from = {0};
        if (sbx_desktop_cursor(d, &from.x, &from.y, err) < 0)
            return -SBX_EIO;
        return drag(d, from, at, err);
    }
    if (at.has && sbx_desktop_move(d, at.x, at.y, err) < 0)
        return -SBX_EIO;
    if (strcmp(t, "RIGHT_CLICK") == 0)
        button = SBX_BTN_RIGHT;
    if (strcmp(t, "DOUBLE_CLICK") == 0)
        clicks = 2;
    (void)res;
    return strcmp(t, "MOVE_TO") == 0 ? 0 : sbx_desktop_click(d, button, clicks, err);
}

static int
c13_scroll(struct ctx *c, sbx_error **err)
{
    static const char *const ok[] = {"dx", "dy", "x", "y", NULL};
    if (only(c, ok, err) < 0)
        return -SBX_EINVAL;
    int v[2] = {0, 0};
    const char *f[2] = {"dx", "dy"};
    bool any = false;
    for (int i = 0; i < 2; i++) {
        json_t *j = json_object_get(c->params, f[i]);
        if (!j)
            continue;
        any = true;
        if (!json_is_integer(j) || llabs(json_integer_value(j)) > MAX_SCROLL)
            return bad(err, c, f[i], "must be an integer within +-1000");
        v[i] = (int)json_integer_value(j);
    }
    if (!any)
        return bad(err, c, "dx", "or `dy` is required");
    struct xy at = {0};
    if (get_xy13(c, false, &at, err) < 0)
        return -SBX_EINVAL;
    if (at.has && sbx_desktop_move(c->d, at.x, at.y, err) < 0)
        return -SBX_EIO;
    /* pyautogui: hscroll(dx) (positive right) then vscroll(dy) (positive up) */
    return sbx_desktop_scroll(c->d, v[0], v[1], err);
}

static int
c13_keys(struct ctx *c, sbx_error **err)
{
    const char *t = c->type;
    if (strcmp(t, "TYPING") == 0) {
        static const char *const ok[] = {"text", NULL};
        const char *s = NULL;
        size_t len = 0;
        if (only(c, ok, err) < 0 ||
            get_text(c, json_object_get(c->params, "text"), "text", &s, &len, err) < 0)
            return -SBX_EINVAL;
        return sbx_desktop_type(c->d, s, len, err);
    }
    if (strcmp(t, "HOTKEY") == 0) {
        static const char *const ok[] = {"keys", NULL};
        if (only(c, ok, err) < 0)
            return -SBX_EINVAL;
        json_t *keys = json_object_get(c->params, "keys");
        size_t n = json_array_size(keys);
        if (!json_is_array(keys) || n == 0 || n > MAX_KEYS)
            return bad(err, c, "keys", "must be a list of 1-16 key names");
        uint32_t syms[MAX_KEYS];
        for (size_t i = 0; i < n; i++) {
            if (get_key(c, json_array_get(keys, i), "keys", &syms[i], err) < 0)
                return -SBX_EINVAL;
        }
        return chord(c->d, syms, n, err);
    }
    static const char *const ok[] = {"key", NULL};
    uint32_t sym = 0;
    if (only(c, ok, err) < 0 || get_key(c, json_object_get(c->params, "key"), "key", &sym, err) < 0)
        return -SBX_EINVAL;
    if (strcmp(t, "PRESS") == 0)
        return chord(c->d, &sym, 1, err);
    return key(c->d, sym, strcmp(t, "KEY_DOWN") == 0, err);
}

static int
computer_13(struct ctx *c, struct sbx_action_result *res, sbx_error **err)
{
    static const char *const pointer[] = {"MOVE_TO",     "CLICK",        "MOUSE_DOWN", "MOUSE_UP",
                                          "RIGHT_CLICK", "DOUBLE_CLICK", "DRAG_TO"};
    static const char *const keys[] = {"TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(pointer); i++) {
        if (strcmp(c->type, pointer[i]) == 0)
            return c13_pointer(c, res, err);
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(keys); i++) {
        if (strcmp(c->type, keys[i]) == 0)
            return c13_keys(c, err);
    }
    if (strcmp(c->type, "SCROLL") == 0)
        return c13_scroll(c, err);
    static const char *const none[] = {NULL};
    if (strcmp(c->type, "WAIT") == 0 || strcmp(c->type, "DONE") == 0 ||
        strcmp(c->type, "FAIL") == 0) {
        if (only(c, none, err) < 0)
            return -SBX_EINVAL;
        res->done = c->type[0] != 'W';
        res->fail = c->type[0] == 'F';
        return 0;
    }
    return sbx_error_set(err, SBX_EINVAL, 0,
                         "`action_type` `%.64s` is not one of computer_13's (MOVE_TO, CLICK, "
                         "MOUSE_DOWN, MOUSE_UP, RIGHT_CLICK, DOUBLE_CLICK, DRAG_TO, SCROLL, "
                         "TYPING, PRESS, KEY_DOWN, KEY_UP, HOTKEY, WAIT, FAIL, DONE)",
                         c->type);
}

/* ---- Anthropic's computer use ---- */

/* "ctrl+shift+t" into keysyms. */
static int
combo(const struct ctx *c, const char *s, size_t len, uint32_t *syms, size_t *n, sbx_error **err)
{
    *n = 0;
    size_t off = 0;
    while (off <= len) {
        size_t k = 0;
        while (off + k < len && s[off + k] != '+')
            k++;
        /* "ctrl++" and a lone "+": the plus key itself */
        if (k == 0 && off < len) {
            k = 1;
        }
        char name[64];
        if (k == 0 || k >= sizeof name || *n >= MAX_KEYS)
            return bad(err, c, "text", "is not a key combination like ctrl+shift+t");
        memcpy(name, s + off, k);
        name[k] = '\0';
        json_t *j = json_string(name);
        int r = get_key(c, j, "text", &syms[(*n)++], err);
        json_decref(j);
        if (r < 0)
            return r;
        off += k + 1;
    }
    return 0;
}

/* Modifier keys held during a click or scroll ("text": "shift" / "ctrl+alt"). */
static int
held(const struct ctx *c, uint32_t *syms, size_t *n, sbx_error **err)
{
    *n = 0;
    json_t *t = json_object_get(c->params, "text");
    if (!t || json_is_null(t))
        return 0;
    if (!json_is_string(t))
        return bad(err, c, "text", "must be a string of modifier keys");
    return combo(c, json_string_value(t), json_string_length(t), syms, n, err);
}

static int
hold(struct sbx_desktop *d, const uint32_t *syms, size_t n, bool down, sbx_error **err)
{
    for (size_t i = 0; i < n; i++) {
        if (key(d, syms[down ? i : n - 1 - i], down, err) < 0)
            return -SBX_EIO;
    }
    return 0;
}

static int
get_coordinate(const struct ctx *c, const char *field, bool required, struct xy *out,
               sbx_error **err)
{
    json_t *a = json_object_get(c->params, field);
    out->has = false;
    if (!a || json_is_null(a)) {
        if (required)
            return bad(err, c, field, "is required");
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) != 2)
        return bad(err, c, field, "must be [x, y]");
    char fx[40];
    char fy[40];
    (void)snprintf(fx, sizeof fx, "%s[0]", field);
    (void)snprintf(fy, sizeof fy, "%s[1]", field);
    struct xy_src in = {json_array_get(a, 0), json_array_get(a, 1), fx, fy, true};
    return get_xy(c, &in, out, err);
}

static int
get_duration(const struct ctx *c, double *s, sbx_error **err)
{
    json_t *j = json_object_get(c->params, "duration");
    if (!json_is_number(j) || json_number_value(j) < 0 || json_number_value(j) > MAX_WAIT_S)
        return bad(err, c, "duration", "must be a number of seconds within 0-60");
    *s = json_number_value(j);
    return 0;
}

static int
cu_click(struct ctx *c, sbx_error **err)
{
    const char *t = c->type;
    struct xy at = {0};
    uint32_t mods[MAX_KEYS];
    size_t nm = 0;
    if (get_coordinate(c, "coordinate", false, &at, err) < 0 || held(c, mods, &nm, err) < 0)
        return -SBX_EINVAL;
    int button = strcmp(t, "right_click") == 0    ? SBX_BTN_RIGHT
                 : strcmp(t, "middle_click") == 0 ? SBX_BTN_MIDDLE
                                                  : SBX_BTN_LEFT;
    int clicks = strcmp(t, "double_click") == 0 ? 2 : strcmp(t, "triple_click") == 0 ? 3 : 1;
    struct sbx_desktop *d = c->d;
    if (at.has && sbx_desktop_move(d, at.x, at.y, err) < 0)
        return -SBX_EIO;
    if (hold(d, mods, nm, true, err) < 0)
        return -SBX_EIO;
    int r = sbx_desktop_click(d, button, clicks, err);
    int r2 = hold(d, mods, nm, false, err);
    return r < 0 ? r : r2;
}

static int
cu_scroll(struct ctx *c, sbx_error **err)
{
    struct xy at = {0};
    uint32_t mods[MAX_KEYS];
    size_t nm = 0;
    if (get_coordinate(c, "coordinate", false, &at, err) < 0 || held(c, mods, &nm, err) < 0)
        return -SBX_EINVAL;
    const char *dir = json_string_value(json_object_get(c->params, "scroll_direction"));
    json_t *amt = json_object_get(c->params, "scroll_amount");
    int dx = 0;
    int dy = 0;
    if (!dir || (strcmp(dir, "up") != 0 && strcmp(dir, "down") != 0 && strcmp(dir, "left") != 0 &&
                 strcmp(dir, "right") != 0))
        return bad(err, c, "scroll_direction", "must be up, down, left or right");
    if (!json_is_integer(amt) || json_integer_value(amt) < 0 ||
        json_integer_value(amt) > MAX_SCROLL)
        return bad(err, c, "scroll_amount", "must be an integer within 0-1000");
    int n = (int)json_integer_value(amt);
    if (dir[0] == 'u')
        dy = n;
    else if (dir[0] == 'd')
        dy = -n;
    else if (dir[0] == 'l')
        dx = -n;
    else
        dx = n;
    struct sbx_desktop *d = c->d;
    if (at.has && sbx_desktop_move(d, at.x, at.y, err) < 0)
        return -SBX_EIO;
    if (hold(d, mods, nm, true, err) < 0)
        return -SBX_EIO;
    int r = sbx_desktop_scroll(d, dx, dy, err);
    int r2 = hold(d, mods, nm, false, err);
    return r < 0 ? r : r2;
}

/* xdotool's `key` takes several combinations separated by spaces: "ctrl+a Delete". */
static int
cu_key(struct ctx *c, sbx_error **err)
{
    const char *s = NULL;
    size_t len = 0;
    if (get_text(c, json_object_get(c->params, "text"), "text", &s, &len, err) < 0)
        return -SBX_EINVAL;
    if (len > 4096)
        return bad(err, c, "text", "is too long for key combinations");
    /* check every combination before sending any */
    for (int pass = 0; pass < 2; pass++) {
        size_t off = 0;
        while (off < len) {
            while (off < len && s[off] == ' ')
                off++;
            size_t k = strcspn(s + off, " ");
            if (off + k > len)
                k = len - off;
            if (!k)
                break;
            uint32_t syms[MAX_KEYS];
            size_t n = 0;
            if (combo(c, s + off, k, syms, &n, err) < 0)
                return -SBX_EINVAL;
            if (pass == 1 && chord(c->d, syms, n, err) < 0)
                return -SBX_EIO;
            off += k;
        }
    }
    return 0;
}

static int
cu_zoom(struct ctx *c, struct sbx_action_result *res, sbx_error **err)
{
    json_t *r = json_object_get(c->params, "region");
    if (!json_is_array(r) || json_array_size(r) != 4)
        return bad(err, c, "region", "must be [x0, y0, x1, y1]");
    int v[4];
    for (int i = 0; i < 4; i++) {
        json_t *j = json_array_get(r, (size_t)i);
        double n = json_number_value(j);
        unsigned lim = i % 2 ? c->sh : c->sw;
        if (!json_is_number(j) || !isfinite(n) || n < 0 || n > lim)
            return bad(err, c, "region", "must lie inside the screen");
        v[i] = (int)lround(n);
    }
    if (v[2] <= v[0] || v[3] <= v[1])
        return bad(err, c, "region", "must have x1 > x0 and y1 > y0");
    res->image = true;
    res->shot.x = v[0];
    res->shot.y = v[1];
    res->shot.w = v[2] - v[0];
    res->shot.h = v[3] - v[1];
    return 0;
}

static int
computer_use(struct ctx *c, struct sbx_action_result *res, sbx_error **err)
{
    const char *t = c->type;
    struct sbx_desktop *d = c->d;
    struct xy at = {0};
    if (strcmp(t, "key") == 0)
        return cu_key(c, err);
    if (strcmp(t, "type") == 0) {
        const char *s = NULL;
        size_t len = 0;
        if (get_text(c, json_object_get(c->params, "text"), "text", &s, &len, err) < 0)
            return -SBX_EINVAL;
        return sbx_desktop_type(d, s, len, err);
    }
    if (strcmp(t, "mouse_move") == 0) {
        if (get_coordinate(c, "coordinate", true, &at, err) < 0)
            return -SBX_EINVAL;
        return sbx_desktop_move(d, at.x, at.y, err);
    }
    if (strcmp(t, "left_click") == 0 || strcmp(t, "right_click") == 0 ||
        strcmp(t, "middle_click") == 0 || strcmp(t, "double_click") == 0 ||
        strcmp(t, "triple_click") == 0)
        return cu_click(c, err);
    if (strcmp(t, "left_click_drag") == 0) {
        struct xy from = {0};
        if (get_coordinate(c, "start_coordinate", false, &from, err) < 0 ||
            get_coordinate(c, "coordinate", true, &at, err) < 0)
            return -SBX_EINVAL;
        if (!from.has && sbx_desktop_cursor(d, &from.x, &from.y, err) < 0)
            return -SBX_EIO;
        if (from.has && sbx_desktop_move(d, from.x, from.y, err) < 0)
            return -SBX_EIO;
        return drag(d, from, at, err);
    }
    if (strcmp(t, "left_mouse_down") == 0 || strcmp(t, "left_mouse_up") == 0) {
        if (get_coordinate(c, "coordinate", false, &at, err) < 0)
            return -SBX_EINVAL;
        if (at.has && sbx_desktop_move(d, at.x, at.y, err) < 0)
            return -SBX_EIO;
        return sbx_desktop_button(d, SBX_BTN_LEFT, strcmp(t, "left_mouse_down") == 0, err);
    }
    if (strcmp(t, "scroll") == 0)
        return cu_scroll(c, err);
    if (strcmp(t, "hold_key") == 0) {
        size_t n = 0;
        json_t *txt = json_object_get(c->params, "text");
        if (!json_is_string(txt))
            return bad(err, c, "text", "is required");
        if (combo(c, json_string_value(txt), json_string_length(txt), res->release, &n, err) < 0 ||
            get_duration(c, &res->wait_s, err) < 0)
            return -SBX_EINVAL;
        res->n_release = n;
        return hold(d, res->release, n, true, err);
    }
    if (strcmp(t, "wait") == 0)
        return get_duration(c, &res->wait_s, err);
    if (strcmp(t, "cursor_position") == 0) {
        res->cursor = true;
        return sbx_desktop_cursor(d, &res->x, &res->y, err);
    }
    if (strcmp(t, "screenshot") == 0) {
        res->image = true;
        return 0;
    }
    if (strcmp(t, "zoom") == 0)
        return cu_zoom(c, res, err);
    return sbx_error_set(err, SBX_EINVAL, 0,
                         "`action` `%.64s` is not a computer-use action (key, type, mouse_move, "
                         "left_click, left_click_drag, right_click, middle_click, double_click, "
                         "triple_click, scroll, left_mouse_down, left_mouse_up, hold_key, "
                         "cursor_position, screenshot, wait, zoom)",
                         t);
}

int
sbx_desktop_action(struct sbx_desktop *d, json_t *action, struct sbx_action_result *res,
                   sbx_error **err)
{
    memset(res, 0, sizeof *res);
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    if (!json_is_object(action))
        return sbx_error_set(err, SBX_EINVAL, 0, "an action is a JSON object");
    desk_wait_wm(d);
    struct ctx c = {.d = d, .params = action};
    if (sbx_desktop_screen_size(d, &c.sw, &c.sh, err) < 0)
        return -SBX_EIO;
    json_t *at = json_object_get(action, "action_type");
    json_t *a = json_object_get(action, "action");
    int r = 0;
    if (at) {
        if (!json_is_string(at))
            return sbx_error_set(err, SBX_EINVAL, 0, "`action_type` must be a string");
        c.type = json_string_value(at);
        json_t *p = json_object_get(action, "parameters");
        if (p && !json_is_object(p))
            return sbx_error_set(err, SBX_EINVAL, 0, "`parameters` must be an object");
        if (p && json_object_size(action) > 2)
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "parameters go in `parameters` or next to `action_type`, "
                                 "not both");
        c.params = p ? p : action;
        r = computer_13(&c, res, err);
    } else if (a) {
        if (!json_is_string(a))
            return sbx_error_set(err, SBX_EINVAL, 0, "`action` must be a string");
        c.type = json_string_value(a);
        r = computer_use(&c, res, err);
    } else {
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "an action needs `action_type` (computer_13) or `action` "
                             "(computer use)");
    }
    if (r < 0)
        return r;
    return sbx_desktop_sync(d, err);
}

int
sbx_desktop_release(struct sbx_desktop *d, const struct sbx_action_result *res, sbx_error **err)
{
    if (hold(d, res->release, res->n_release, false, err) < 0)
        return -SBX_EIO;
    return sbx_desktop_sync(d, err);
}
