/*
 * a11y_json.c - the same tree as JSON: nested objects with numeric positions.
 *
 *   {"role": "desktop-frame", "children": [
 *     {"role": "push-button", "name": "OK", "description": "", "states": ["enabled", ...],
 *      "attributes": {"id": "b"}, "x": 110, "y": 60, "width": 200, "height": 60,
 *      "text": "OK", "image": true, "selection": true,
 *      "value": {"current": 1.0, "min": 0.0, "max": 10.0, "step": 1.0},
 *      "actions": [{"name": "press", "description": "", "keybinding": ""}],
 *      "children": [...]}, ...],
 *    "truncated": false, "note": ""}
 *
 * Keys whose value OSWorld would leave out (no extents, no text, ...) are left out; role is the
 * XML tag. Bounded like the XML: cut at an element boundary, closed properly.
 */
#include <stdio.h>
#include <string.h>

#include "desktop/a11y_int.h"

#define TAIL_RESERVE 4096

struct jw {
    struct a11y_ctx *c;
    struct sbx_buf *out;
    struct sbx_buf el;
    struct sbx_buf name;
    size_t close_need;
    bool full;
};

static void
str(struct sbx_buf *b, const char *s)
{
    (void)sbx_buf_append(b, "\"", 1, NULL);
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\')
            snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p < 0x20)
            snprintf(esc, sizeof(esc), "\\u%04x", *p);
        else
            continue;
        (void)sbx_buf_append(b, run, (size_t)((const char *)p - run), NULL);
        (void)sbx_buf_append_str(b, esc, NULL);
        run = (const char *)p + 1;
    }
    (void)sbx_buf_append_str(b, run, NULL);
    (void)sbx_buf_append(b, "\"", 1, NULL);
}

static void
key(struct sbx_buf *b, const char *k)
{
    (void)sbx_buf_printf(b, NULL, ",\"%s\":", k);
}

static void
num(struct sbx_buf *b, double v)
{
    char s[48];
    a11y_pyfloat(v, s, sizeof(s));
    (void)sbx_buf_append_str(b, (s[0] == 'n' || s[0] == 'i' || s[1] == 'i') ? "null" : s, NULL);
}

static void
states(struct sbx_buf *b, const struct a11y_node *n)
{
    key(b, "states");
    (void)sbx_buf_append(b, "[", 1, NULL);
    bool first = true;
    for (unsigned s = 0; s < A11Y_STATE_COUNT; s++) {
        if (!(n->states & (1ULL << s)))
            continue;
        (void)sbx_buf_printf(b, NULL, "%s\"%s\"", first ? "" : ",", a11y_state_name(s));
        first = false;
    }
    (void)sbx_buf_append(b, "]", 1, NULL);
}

static void
attributes(struct sbx_buf *b, const struct a11y_node *n)
{
    if (!n->nattrs)
        return;
    key(b, "attributes");
    (void)sbx_buf_append(b, "{", 1, NULL);
    for (uint16_t i = 0; i < n->nattrs; i++) {
        if (i)
            (void)sbx_buf_append(b, ",", 1, NULL);
        str(b, n->attrs[i].k);
        (void)sbx_buf_append(b, ":", 1, NULL);
        str(b, n->attrs[i].v);
    }
    (void)sbx_buf_append(b, "}", 1, NULL);
}

static void
value(struct sbx_buf *b, const struct a11y_node *n)
{
    static const char *const names[4] = {"current", "min", "max", "step"};
    if (!n->val_mask)
        return;
    key(b, "value");
    (void)sbx_buf_append(b, "{", 1, NULL);
    bool first = true;
    for (int i = 0; i < 4; i++) {
        if (!(n->val_mask & (1u << i)))
            continue;
        (void)sbx_buf_printf(b, NULL, "%s\"%s\":", first ? "" : ",", names[i]);
        num(b, n->val[i]);
        first = false;
    }
    (void)sbx_buf_append(b, "}", 1, NULL);
}

static void
actions(struct sbx_buf *b, const struct a11y_node *n)
{
    if (!n->nactions)
        return;
    key(b, "actions");
    (void)sbx_buf_append(b, "[", 1, NULL);
    for (uint16_t i = 0; i < n->nactions; i++) {
        (void)sbx_buf_append_str(b, i ? ",{\"name\":" : "{\"name\":", NULL);
        str(b, n->actions[i].name);
        (void)sbx_buf_append_str(b, ",\"description\":", NULL);
        str(b, n->actions[i].desc);
        (void)sbx_buf_append_str(b, ",\"keybinding\":", NULL);
        str(b, n->actions[i].kb);
        (void)sbx_buf_append(b, "}", 1, NULL);
    }
    (void)sbx_buf_append(b, "]", 1, NULL);
}

static void
object(struct jw *w, const struct a11y_node *n)
{
    struct sbx_buf *b = &w->el;
    const char *tag = a11y_role_tag(n->role);
    (void)sbx_buf_append_str(b, "{\"role\":", NULL);
    if (!tag) {
        sbx_buf_reset(&w->name);
        a11y_xml_name(n->role_name && n->role_name[0] ? n->role_name : "unknown", &w->name, NULL);
        tag = sbx_buf_str(&w->name);
    }
    str(b, tag);
    key(b, "name");
    str(b, n->name);
    key(b, "description");
    str(b, n->desc);
    states(b, n);
    attributes(b, n);
    if (n->flags & A11Y_NF_EXTENTS)
        (void)sbx_buf_printf(b, NULL, ",\"x\":%d,\"y\":%d,\"width\":%d,\"height\":%d", n->ext[0],
                             n->ext[1], n->ext[2], n->ext[3]);
    if (n->text) {
        key(b, "text");
        str(b, n->text);
    }
    if (n->ifaces & A11Y_IF_IMAGE)
        (void)sbx_buf_append_str(b, ",\"image\":true", NULL);
    if (n->ifaces & A11Y_IF_SELECTION)
        (void)sbx_buf_append_str(b, ",\"selection\":true", NULL);
    value(b, n);
    actions(b, n);
}

static bool
any_shown(const struct a11y_ctx *c, uint32_t idx)
{
    for (uint32_t k = 0; k < c->nodes[idx].nkids; k++)
        if (a11y_shown(c, idx, k))
            return true;
    return false;
}

static bool
fits(struct jw *w, size_t close_len)
{
    if (w->out->len + w->el.len + w->close_need + close_len + TAIL_RESERVE > w->out->max) {
        w->full = true;
        return false;
    }
    (void)sbx_buf_append(w->out, w->el.data, w->el.len, NULL);
    w->close_need += close_len;
    return true;
}

static void children(struct jw *w, uint32_t idx);

static void
node(struct jw *w, uint32_t idx, bool first)
{
    struct a11y_ctx *c = w->c;
    bool kids = any_shown(c, idx);
    sbx_buf_reset(&w->el);
    if (!first)
        (void)sbx_buf_append(&w->el, ",", 1, NULL);
    object(w, &c->nodes[idx]);
    (void)sbx_buf_append_str(&w->el, kids ? ",\"children\":[" : "}", NULL);
    if (!fits(w, kids ? 2 : 0))
        return;
    if (c->st)
        c->st->nodes++;
    if (!kids)
        return;
    children(w, idx);
    (void)sbx_buf_append_str(w->out, "]}", NULL);
    w->close_need -= 2;
}

static void
children(struct jw *w, uint32_t idx)
{
    bool first = true;
    for (uint32_t k = 0; k < w->c->nodes[idx].nkids && !w->full; k++) {
        if (!a11y_shown(w->c, idx, k))
            continue;
        size_t before = w->out->len;
        node(w, w->c->nodes[idx].kids[k], first);
        first = first && w->out->len == before;
    }
}

int
a11y_write_json(struct a11y_ctx *c, struct sbx_buf *out, sbx_error **err)
{
    if (out->max < out->len + TAIL_RESERVE + 64)
        return sbx_error_set(err, SBX_ELIMIT, 0, "accessibility tree: output limit too small");
    struct jw w = {.c = c, .out = out};
    sbx_buf_init(&w.el, SIZE_MAX / 4);
    sbx_buf_init(&w.name, 1 << 20);
    uint32_t desk = a11y_node_get(c, 1, "/org/a11y/atspi/accessible/root");
    (void)sbx_buf_append_str(out, "{\"role\":\"desktop-frame\",\"children\":[", NULL);
    if (c->st)
        c->st->nodes++;
    children(&w, desk);
    bool cut = w.full || c->cut;
    if (c->st)
        c->st->truncated = cut;
    (void)sbx_buf_printf(out, NULL, "],\"truncated\":%s,\"note\":", cut ? "true" : "false");
    str(out, c->note);
    (void)sbx_buf_append(out, "}", 1, NULL);
    sbx_buf_dispose(&w.el);
    sbx_buf_dispose(&w.name);
    return 0;
}
