/*
 * a11y_xml.c - the tree as OSWorld's XML (what lxml.etree.tostring writes for the tree its
 * server builds): one line, namespaces declared once on the root, attributes in OSWorld's order
 * (name, st:*, attr:*, cp:*, image, selection, val:*, act:*), the text as element content.
 *
 * Differences, all where OSWorld would fail instead: characters XML cannot hold (C0 controls,
 * U+FFFE/U+FFFF) are dropped, and application strings used as attribute names are made XML
 * names (lxml raises on them and OSWorld loses the node and its later siblings).
 *
 * Bounded: an element is written only if it and the closing tags still open fit in the
 * output's maximum; past it the tree is closed properly and a comment says it was cut.
 */
#include <stdio.h>
#include <string.h>

#include "desktop/a11y_int.h"

#define NS           "https://accessibility.ubuntu.example.org/ns/"
#define TAIL_RESERVE 4096 /* the root's closing tag and the notes */

static const char root_open[] =
    "<desktop-frame xmlns:st=\"" NS "state\" xmlns:attr=\"" NS "attributes\" xmlns:cp=\"" NS
    "component\" xmlns:doc=\"" NS "document\" xmlns:docattr=\"" NS
    "document/attributes\" xmlns:txt=\"" NS "text\" xmlns:val=\"" NS "value\" xmlns:act=\"" NS
    "action\"";

struct xw {
    struct a11y_ctx *c;
    struct sbx_buf *out;
    struct sbx_buf el;   /* one element's start tag (and text) before it is known to fit */
    struct sbx_buf name; /* scratch for attribute names */
    size_t close_need;   /* bytes of the end tags still open */
    bool full;
    sbx_error **err;
};

/* Escape as libxml2 does; drop what XML 1.0 cannot hold. */
static void
esc(struct sbx_buf *b, const char *s, bool attr)
{
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s;; p++) {
        const char *rep = NULL;
        size_t skip = 1;
        unsigned char ch = *p;
        if (ch == 0) {
            (void)sbx_buf_append(b, run, (size_t)((const char *)p - run), NULL);
            return;
        }
        if (ch == '&')
            rep = "&amp;";
        else if (ch == '<')
            rep = "&lt;";
        else if (ch == '>')
            rep = "&gt;";
        else if (ch == '"' && attr)
            rep = "&quot;";
        else if (ch == '\r')
            rep = "&#13;";
        else if (ch == '\n' && attr)
            rep = "&#10;";
        else if (ch == '\t' && attr)
            rep = "&#9;";
        else if (ch < 0x20 && ch != '\n' && ch != '\t')
            rep = "";
        else if (ch == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
            rep = "", skip = 3;
        if (!rep)
            continue;
        (void)sbx_buf_append(b, run, (size_t)((const char *)p - run), NULL);
        (void)sbx_buf_append_str(b, rep, NULL);
        p += skip - 1;
        run = (const char *)p + 1;
    }
}

static void
attr(struct sbx_buf *b, const char *prefix, const char *name, const char *suffix, const char *v)
{
    (void)sbx_buf_printf(b, NULL, " %s%s%s=\"", prefix, name, suffix);
    esc(b, v, true);
    (void)sbx_buf_append(b, "\"", 1, NULL);
}

static const char *
tag_of(struct xw *w, const struct a11y_node *n)
{
    const char *tag = a11y_role_tag(n->role);
    if (tag)
        return tag;
    sbx_buf_reset(&w->name);
    const char *raw = n->role_name ? n->role_name : "";
    while (*raw == ' ')
        raw++;
    a11y_xml_name(*raw ? raw : "unknown", &w->name, NULL);
    while (w->name.len && w->name.data[w->name.len - 1] == '-') /* OSWorld strips the role */
        w->name.data[--w->name.len] = '\0';
    return w->name.len ? sbx_buf_str(&w->name) : "unknown";
}

/* attr:* and act:* from application strings: names made XML-safe, the first occurrence of a
 * name written (a Python dict keeps the first position), with the last value. */
static void
attrs(struct xw *w, const struct a11y_node *n)
{
    for (uint16_t i = 0; i < n->nattrs; i++) {
        if (!n->attrs[i].k[0])
            continue; /* OSWorld skips empty keys */
        sbx_buf_reset(&w->name);
        a11y_xml_name(n->attrs[i].k, &w->name, NULL);
        attr(&w->el, "attr:", sbx_buf_str(&w->name), "", n->attrs[i].v);
    }
}

static bool
action_dup(const struct a11y_node *n, uint16_t i)
{
    for (uint16_t j = 0; j < i; j++)
        if (strcmp(n->actions[j].name, n->actions[i].name) == 0)
            return true;
    return false;
}

static void
actions(struct xw *w, const struct a11y_node *n)
{
    for (uint16_t i = 0; i < n->nactions; i++) {
        if (action_dup(n, i))
            continue;
        const struct a11y_action *a = &n->actions[i];
        for (uint16_t j = (uint16_t)(i + 1); j < n->nactions; j++)
            if (strcmp(n->actions[j].name, a->name) == 0)
                a = &n->actions[j];
        sbx_buf_reset(&w->name);
        a11y_xml_name(a->name, &w->name, NULL);
        attr(&w->el, "act:", sbx_buf_str(&w->name), "_desc", a->desc);
        attr(&w->el, "act:", sbx_buf_str(&w->name), "_kb", a->kb);
    }
}

static void
values(struct xw *w, const struct a11y_node *n)
{
    static const char *const names[4] = {"value", "min", "max", "step"};
    char num[48];
    for (int i = 0; i < 4; i++) {
        if (!(n->val_mask & (1u << i)))
            continue;
        a11y_pyfloat(n->val[i], num, sizeof(num));
        attr(&w->el, "val:", names[i], "", num);
    }
}

static void
start_tag(struct xw *w, const struct a11y_node *n, const char *tag)
{
    struct sbx_buf *b = &w->el;
    (void)sbx_buf_printf(b, NULL, "<%s", tag);
    attr(b, "", "name", "", n->name);
    for (unsigned s = 0; s < A11Y_STATE_COUNT; s++)
        if (n->states & (1ULL << s))
            (void)sbx_buf_printf(b, NULL, " st:%s=\"true\"", a11y_state_name(s));
    attrs(w, n);
    if (n->flags & A11Y_NF_EXTENTS)
        (void)sbx_buf_printf(b, NULL, " cp:screencoord=\"(%d, %d)\" cp:size=\"(%d, %d)\"",
                             n->ext[0], n->ext[1], n->ext[2], n->ext[3]);
    if (n->ifaces & A11Y_IF_IMAGE)
        (void)sbx_buf_append_str(b, " image=\"true\"", NULL);
    if (n->ifaces & A11Y_IF_SELECTION)
        (void)sbx_buf_append_str(b, " selection=\"true\"", NULL);
    values(w, n);
    actions(w, n);
}

static bool
any_shown(const struct a11y_ctx *c, uint32_t idx)
{
    for (uint32_t k = 0; k < c->nodes[idx].nkids; k++)
        if (a11y_shown(c, idx, k))
            return true;
    return false;
}

/* Move the element into the output if it fits with everything still to close. */
static bool
fits(struct xw *w, size_t close_len)
{
    if (w->out->len + w->el.len + w->close_need + close_len + TAIL_RESERVE > w->out->max) {
        w->full = true;
        return false;
    }
    (void)sbx_buf_append(w->out, w->el.data, w->el.len, NULL);
    w->close_need += close_len;
    return true;
}

static void
node(struct xw *w, uint32_t idx)
{
    struct a11y_ctx *c = w->c;
    const struct a11y_node *n = &c->nodes[idx];
    char tag[256];
    snprintf(tag, sizeof(tag), "%s", tag_of(w, n));
    bool kids = any_shown(c, idx);
    sbx_buf_reset(&w->el);
    start_tag(w, n, tag);
    if (kids || n->text) {
        (void)sbx_buf_append(&w->el, ">", 1, NULL);
        if (n->text)
            esc(&w->el, n->text, false);
    }
    if (!kids)
        (void)sbx_buf_printf(&w->el, NULL, n->text ? "</%s>" : "/>", tag);
    size_t close_len = kids ? strlen(tag) + 3 : 0;
    if (!fits(w, close_len))
        return;
    if (c->st)
        c->st->nodes++;
    for (uint32_t k = 0; k < c->nodes[idx].nkids && !w->full; k++)
        if (a11y_shown(c, idx, k))
            node(w, c->nodes[idx].kids[k]);
    if (kids) {
        (void)sbx_buf_printf(w->out, NULL, "</%s>", tag);
        w->close_need -= close_len;
    }
}

/* A comment may not hold "--". */
static void
comment(struct sbx_buf *b, const char *text)
{
    (void)sbx_buf_append_str(b, "<!-- sbx: ", NULL);
    sbx_autobuf struct sbx_buf t;
    sbx_buf_init(&t, (size_t)SBX_A11Y_NOTE_MAX * 8);
    esc(&t, text, false);
    for (char *p = t.data; p && *p; p++)
        if (p[0] == '-' && p[1] == '-')
            p[1] = '_';
    (void)sbx_buf_append_str(b, sbx_buf_str(&t), NULL);
    (void)sbx_buf_append_str(b, " -->", NULL);
}

int
a11y_write_xml(struct a11y_ctx *c, struct sbx_buf *out, sbx_error **err)
{
    if (out->max < out->len + TAIL_RESERVE + sizeof(root_open) + 64)
        return sbx_error_set(err, SBX_ELIMIT, 0, "accessibility tree: output limit too small");
    struct xw w = {.c = c, .out = out, .err = err};
    sbx_buf_init(&w.el, SIZE_MAX / 4);
    sbx_buf_init(&w.name, 1 << 20);
    uint32_t desk = a11y_node_get(c, 1, "/org/a11y/atspi/accessible/root");
    (void)sbx_buf_append_str(out, root_open, NULL);
    if (c->st)
        c->st->nodes++;
    bool kids = any_shown(c, desk) || c->note[0] || c->cut;
    if (kids) {
        (void)sbx_buf_append(out, ">", 1, NULL);
        for (uint32_t k = 0; k < c->nodes[desk].nkids && !w.full; k++)
            if (a11y_shown(c, desk, k))
                node(&w, c->nodes[desk].kids[k]);
    }
    if (c->st)
        c->st->truncated = w.full || c->cut;
    if (w.full || c->cut)
        comment(out, "tree cut at the size or node limit");
    if (c->note[0])
        comment(out, c->note);
    (void)sbx_buf_append_str(out, kids ? "</desktop-frame>" : "/>", NULL);
    sbx_buf_dispose(&w.el);
    sbx_buf_dispose(&w.name);
    return 0;
}
