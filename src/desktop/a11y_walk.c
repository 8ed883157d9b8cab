/*
 * a11y_walk.c - what to ask, and what the answers mean.
 *
 * 1. The registry's desktop root lists the applications (GetChildren).
 * 2. Per application, one Cache.GetItems returns every object it has cached with its parent,
 *    index, child count, interfaces, name, role, description and states: most of a tree in one
 *    answer. The root's own properties and children are asked directly.
 * 3. Walk passes from the desktop: a node not known yet gets its basic calls (properties, role,
 *    states, interfaces), a node whose children the cache did not give gets GetChildren (or
 *    GetChildAtIndex when it has more than max_width), all queued and sent together; repeat
 *    until a pass asks nothing (for an application without a cache: one pass per level).
 * 4. The details of every node reached: attributes, extents (visible and showing components),
 *    text, value, actions; again all at once.
 * Depth and width limits, duplicates and cycles are applied in the walk, so the writers only
 * follow what the last pass reached.
 */
#include <string.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/a11y_int.h"

/* ---- reading answers ---- */

static const char *
iter_str(struct a11y_ctx *c, DBusMessageIter *it)
{
    const char *s = "";
    if (dbus_message_iter_get_arg_type(it) == DBUS_TYPE_STRING ||
        dbus_message_iter_get_arg_type(it) == DBUS_TYPE_OBJECT_PATH)
        dbus_message_iter_get_basic(it, &s);
    return a11y_strdup(c, s, strlen(s));
}

/* (so) -> node index, A11Y_NONE for the null object or a malformed reference. */
uint32_t
a11y_iter_ref(struct a11y_ctx *c, DBusMessageIter *it)
{
    if (dbus_message_iter_get_arg_type(it) != DBUS_TYPE_STRUCT)
        return A11Y_NONE;
    DBusMessageIter s;
    dbus_message_iter_recurse(it, &s);
    const char *bus = NULL;
    const char *path = NULL;
    if (dbus_message_iter_get_arg_type(&s) != DBUS_TYPE_STRING)
        return A11Y_NONE;
    dbus_message_iter_get_basic(&s, &bus);
    if (!dbus_message_iter_next(&s) || dbus_message_iter_get_arg_type(&s) != DBUS_TYPE_OBJECT_PATH)
        return A11Y_NONE;
    dbus_message_iter_get_basic(&s, &path);
    /* Boundary: the name is an application's string, used as a destination: a bad one would
     * make libdbus refuse to build the call (and abort us). */
    if (!bus[0] || !dbus_validate_bus_name(bus, NULL))
        return A11Y_NONE;
    return a11y_node_get(c, a11y_bus_index(c, bus), path);
}

static uint64_t
iter_states(DBusMessageIter *it)
{
    uint64_t st = 0;
    if (dbus_message_iter_get_arg_type(it) != DBUS_TYPE_ARRAY)
        return 0;
    DBusMessageIter a;
    dbus_message_iter_recurse(it, &a);
    for (unsigned word = 0; word < 2 && dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_UINT32;
         word++, dbus_message_iter_next(&a)) {
        uint32_t v;
        dbus_message_iter_get_basic(&a, &v);
        st |= (uint64_t)v << (32 * word);
    }
    return st;
}

static uint32_t
iter_ifaces(DBusMessageIter *it)
{
    uint32_t bits = 0;
    if (dbus_message_iter_get_arg_type(it) != DBUS_TYPE_ARRAY)
        return 0;
    DBusMessageIter a;
    dbus_message_iter_recurse(it, &a);
    for (; dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_STRING; dbus_message_iter_next(&a)) {
        const char *s;
        dbus_message_iter_get_basic(&a, &s);
        bits |= a11y_iface_bit(s);
    }
    return bits;
}

/* The first argument of a reply, if it has `type`. */
static bool
first_arg(DBusMessage *m, int type, DBusMessageIter *it)
{
    return m && dbus_message_iter_init(m, it) && dbus_message_iter_get_arg_type(it) == type;
}

/* ---- the cache ---- */

static void
cache_item(struct a11y_ctx *c, DBusMessageIter *item, bool old_format)
{
    DBusMessageIter f;
    dbus_message_iter_recurse(item, &f);
    uint32_t idx = a11y_iter_ref(c, &f);
    dbus_message_iter_next(&f); /* application */
    dbus_message_iter_next(&f);
    uint32_t parent = a11y_iter_ref(c, &f);
    dbus_message_iter_next(&f);
    int32_t index = -1;
    int32_t count = -1;
    if (old_format) {
        dbus_message_iter_next(&f); /* a(so) children: placed by their own parent and index */
    } else {
        dbus_message_iter_get_basic(&f, &index);
        dbus_message_iter_next(&f);
        dbus_message_iter_get_basic(&f, &count);
        dbus_message_iter_next(&f);
    }
    uint32_t ifaces = iter_ifaces(&f);
    dbus_message_iter_next(&f);
    const char *name = iter_str(c, &f);
    dbus_message_iter_next(&f);
    uint32_t role = 0;
    dbus_message_iter_get_basic(&f, &role);
    dbus_message_iter_next(&f);
    const char *desc = iter_str(c, &f);
    dbus_message_iter_next(&f);
    if (idx == A11Y_NONE)
        return;
    struct a11y_node *n = &c->nodes[idx];
    n->states = iter_states(&f);
    n->ifaces = ifaces;
    n->name = name;
    n->desc = desc;
    n->role = role;
    n->parent = parent;
    n->index_in_parent = index;
    n->child_count = count;
    n->flags |= A11Y_NF_BASIC_ASKED | A11Y_NF_CACHED;
    if (a11y_role_tag(role)) {
        n->flags |= A11Y_NF_BASIC;
    } else { /* the cache has no role names: ask for the rare role without one */
        n->wait_basic = 1;
        a11y_queue(c, A11Y_K_ROLE_NAME, idx, 0);
    }
}

static void
on_cache(struct a11y_ctx *c, DBusMessage *m)
{
    const char *sig = dbus_message_get_signature(m);
    bool cur = strcmp(sig, "a((so)(so)(so)iiassusau)") == 0;
    bool old = strcmp(sig, "a((so)(so)(so)a(so)assusau)") == 0;
    DBusMessageIter it;
    DBusMessageIter a;
    if ((!cur && !old) || !first_arg(m, DBUS_TYPE_ARRAY, &it))
        return; /* an unknown layout: the walk asks everything itself */
    dbus_message_iter_recurse(&it, &a);
    size_t before = c->nnodes;
    /* An application's cache is as large as it says: nodes past max_nodes are not kept. */
    for (; dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_STRUCT && c->nnodes < c->o.max_nodes;
         dbus_message_iter_next(&a))
        cache_item(c, &a, old);
    if (c->st)
        c->st->cached += c->nnodes - before;
}

/* Cached objects go into their parent's children, at their index; a parent all of whose
 * children (up to max_width) were placed needs no GetChildren. */
static void
place_cached(struct a11y_ctx *c)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        struct a11y_node *n = &c->nodes[i];
        if (!(n->flags & A11Y_NF_CACHED) || n->parent == A11Y_NONE)
            continue;
        struct a11y_node *p = &c->nodes[n->parent];
        if (!(p->flags & A11Y_NF_CACHED) || p->child_count <= 0 ||
            (p->flags & (A11Y_NF_KIDS | A11Y_NF_KIDS_ASKED)))
            continue;
        if (!p->kids) {
            p->nkids =
                (uint32_t)(p->child_count < c->o.max_width ? p->child_count : c->o.max_width);
            p->kids = a11y_alloc(c, p->nkids * sizeof(*p->kids));
            memset(p->kids, 0xff, p->nkids * sizeof(*p->kids));
        }
        if (n->index_in_parent >= 0 && (uint32_t)n->index_in_parent < p->nkids)
            p->kids[n->index_in_parent] = (uint32_t)i;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        struct a11y_node *p = &c->nodes[i];
        if (!(p->flags & A11Y_NF_CACHED) || (p->flags & (A11Y_NF_KIDS | A11Y_NF_KIDS_ASKED)))
            continue;
        bool full = p->child_count == 0 || p->kids;
        for (uint32_t k = 0; full && k < p->nkids; k++)
            full = p->kids[k] != A11Y_NONE;
        if (full)
            p->flags |= A11Y_NF_KIDS;
    }
}

/* ---- asking ---- */

/* Name, role, states, interfaces (and the description for JSON): the child count only where
 * it decides how children are asked (ask_kids). */
static void
ask_basic(struct a11y_ctx *c, uint32_t idx)
{
    struct a11y_node *n = &c->nodes[idx];
    n->flags |= A11Y_NF_BASIC_ASKED;
    n->wait_basic = 4;
    a11y_queue(c, A11Y_K_NAME, idx, 0);
    a11y_queue(c, A11Y_K_ROLE, idx, 0);
    a11y_queue(c, A11Y_K_STATE, idx, 0);
    a11y_queue(c, A11Y_K_IFACES, idx, 0);
    if (c->o.format == SBX_A11Y_JSON) {
        n->wait_basic++;
        a11y_queue(c, A11Y_K_DESC, idx, 0);
    }
}

/* GetChildren, except for an object that manages its descendants (a table of a million cells):
 * its child count first, then, past max_width, the first max_width by index, as OSWorld's
 * `for child in node` (childCount and getChildAtIndex) does. */
static void
ask_kids(struct a11y_ctx *c, uint32_t idx)
{
    struct a11y_node *n = &c->nodes[idx];
    bool managed = n->states & (1ULL << A11Y_STATE_MANAGES_DESCENDANTS);
    if (managed && n->child_count < 0) {
        if (!(n->flags & A11Y_NF_COUNT_ASKED)) {
            n->flags |= A11Y_NF_COUNT_ASKED;
            a11y_queue(c, A11Y_K_COUNT, idx, 0);
        }
        return; /* the next pass decides */
    }
    n->flags |= A11Y_NF_KIDS_ASKED;
    if (!managed || n->child_count <= c->o.max_width) {
        a11y_queue(c, A11Y_K_CHILDREN, idx, 0);
        return;
    }
    n->nkids = (uint32_t)c->o.max_width;
    n->kids = a11y_alloc(c, n->nkids * sizeof(*n->kids));
    memset(n->kids, 0xff, n->nkids * sizeof(*n->kids));
    n->wait_kids = (uint16_t)n->nkids;
    for (uint32_t k = 0; k < n->nkids; k++)
        a11y_queue(c, A11Y_K_CHILD_AT, idx, (int32_t)k);
}

static void
ask_details(struct a11y_ctx *c, uint32_t idx)
{
    struct a11y_node *n = &c->nodes[idx];
    n->flags |= A11Y_NF_DETAILS;
    a11y_queue(c, A11Y_K_ATTRS, idx, 0);
    uint64_t vs = (1ULL << A11Y_STATE_VISIBLE) | (1ULL << A11Y_STATE_SHOWING);
    if ((n->ifaces & A11Y_IF_COMPONENT) && (n->states & vs) == vs)
        a11y_queue(c, A11Y_K_EXTENTS, idx, 0);
    if (n->ifaces & A11Y_IF_TEXT)
        a11y_queue(c, A11Y_K_TEXT, idx, 0);
    for (int32_t i = 0; i < 4 && (n->ifaces & A11Y_IF_VALUE); i++)
        a11y_queue(c, A11Y_K_VALUE, idx, i);
    if ((n->ifaces & A11Y_IF_ACTION) && !c->o.no_actions)
        a11y_queue(c, A11Y_K_ACTIONS, idx, 0);
}

/* ---- answers ---- */

static void
basic_done(struct a11y_node *n)
{
    if (n->wait_basic && --n->wait_basic == 0)
        n->flags |= A11Y_NF_BASIC;
}

/* The variant of a Properties.Get answer. */
static bool
variant(DBusMessage *m, DBusMessageIter *v)
{
    DBusMessageIter it;
    if (!first_arg(m, DBUS_TYPE_VARIANT, &it))
        return false;
    dbus_message_iter_recurse(&it, v);
    return true;
}

static void
on_prop(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    DBusMessageIter v;
    if (!variant(m, &v))
        return;
    struct a11y_node *n = &c->nodes[call->node];
    if (call->kind == A11Y_K_NAME)
        n->name = iter_str(c, &v);
    else if (call->kind == A11Y_K_DESC)
        n->desc = iter_str(c, &v);
    else if (dbus_message_iter_get_arg_type(&v) == DBUS_TYPE_INT32)
        dbus_message_iter_get_basic(&v, &n->child_count);
}

static void
set_kids(struct a11y_ctx *c, uint32_t idx, DBusMessage *m)
{
    DBusMessageIter it;
    DBusMessageIter a;
    uint32_t cap = (uint32_t)c->o.max_width;
    uint32_t k = 0;
    uint32_t *kids = a11y_alloc(c, cap * sizeof(*kids));
    if (first_arg(m, DBUS_TYPE_ARRAY, &it)) {
        dbus_message_iter_recurse(&it, &a);
        for (; k < cap && dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_STRUCT;
             dbus_message_iter_next(&a))
            kids[k++] = a11y_iter_ref(c, &a); /* may grow c->nodes: index, never hold a pointer */
    }
    struct a11y_node *n = &c->nodes[idx];
    n->kids = kids;
    n->nkids = k;
    n->flags |= A11Y_NF_KIDS;
}

static void
set_role(struct a11y_ctx *c, uint32_t idx, DBusMessage *m)
{
    DBusMessageIter it;
    struct a11y_node *n = &c->nodes[idx];
    if (first_arg(m, DBUS_TYPE_UINT32, &it))
        dbus_message_iter_get_basic(&it, &n->role);
    if (!a11y_role_tag(n->role)) {
        n->wait_basic++;
        a11y_queue(c, A11Y_K_ROLE_NAME, idx, 0);
    }
}

static void
set_attrs(struct a11y_ctx *c, uint32_t idx, DBusMessage *m)
{
    DBusMessageIter it;
    DBusMessageIter a;
    if (!first_arg(m, DBUS_TYPE_ARRAY, &it))
        return;
    int count = dbus_message_iter_get_element_count(&it);
    if (count <= 0)
        return;
    struct a11y_kv *kv = a11y_alloc(c, (size_t)count * sizeof(*kv));
    uint16_t k = 0;
    dbus_message_iter_recurse(&it, &a);
    for (; k < (uint16_t)count && k < UINT16_MAX &&
           dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_DICT_ENTRY;
         dbus_message_iter_next(&a)) {
        DBusMessageIter e;
        dbus_message_iter_recurse(&a, &e);
        kv[k].k = iter_str(c, &e);
        dbus_message_iter_next(&e);
        kv[k].v = iter_str(c, &e);
        k++;
    }
    c->nodes[idx].attrs = kv;
    c->nodes[idx].nattrs = k;
}

static void
set_actions(struct a11y_ctx *c, uint32_t idx, DBusMessage *m)
{
    DBusMessageIter it;
    DBusMessageIter a;
    if (!first_arg(m, DBUS_TYPE_ARRAY, &it))
        return;
    int count = dbus_message_iter_get_element_count(&it);
    if (count <= 0)
        return;
    struct a11y_action *act = a11y_alloc(c, (size_t)count * sizeof(*act));
    uint16_t k = 0;
    dbus_message_iter_recurse(&it, &a);
    for (; k < (uint16_t)count && k < UINT16_MAX &&
           dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_STRUCT;
         dbus_message_iter_next(&a)) {
        DBusMessageIter e;
        dbus_message_iter_recurse(&a, &e);
        act[k].name = "";
        dbus_message_iter_next(&e);
        act[k].desc = iter_str(c, &e);
        dbus_message_iter_next(&e);
        act[k].kb = iter_str(c, &e);
        k++;
    }
    c->nodes[idx].actions = act;
    c->nodes[idx].nactions = k;
    for (uint16_t i = 0; i < k; i++)
        a11y_queue(c, A11Y_K_ACTION_NAME, idx, i);
}

static void
set_action_name(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    DBusMessageIter it;
    struct a11y_node *n = &c->nodes[call->node];
    if (call->arg >= 0 && call->arg < n->nactions && first_arg(m, DBUS_TYPE_STRING, &it))
        n->actions[call->arg].name = iter_str(c, &it);
}

static void
set_extents(struct a11y_node *n, DBusMessage *m)
{
    DBusMessageIter it;
    DBusMessageIter s;
    if (!first_arg(m, DBUS_TYPE_STRUCT, &it))
        return;
    dbus_message_iter_recurse(&it, &s);
    for (int i = 0; i < 4; i++, dbus_message_iter_next(&s)) {
        if (dbus_message_iter_get_arg_type(&s) != DBUS_TYPE_INT32)
            return;
        dbus_message_iter_get_basic(&s, &n->ext[i]);
    }
    n->flags |= A11Y_NF_EXTENTS;
}

/* OSWorld drops U+FFFC (object replacement) and U+FFFD from the text. */
static void
set_text(struct a11y_ctx *c, struct a11y_node *n, DBusMessage *m)
{
    DBusMessageIter it;
    const char *s;
    if (!first_arg(m, DBUS_TYPE_STRING, &it))
        return;
    dbus_message_iter_get_basic(&it, &s);
    size_t len = strlen(s);
    size_t o = 0;
    if (len == 0 || !a11y_budget(c, len))
        return;
    char *t = a11y_alloc(c, len + 1);
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] == 0xef && i + 2 < len && (unsigned char)s[i + 1] == 0xbf &&
            ((unsigned char)s[i + 2] == 0xbc || (unsigned char)s[i + 2] == 0xbd)) {
            i += 2;
            continue;
        }
        t[o++] = s[i];
    }
    t[o] = '\0';
    n->text = o ? t : NULL;
}

static void
set_value(struct a11y_node *n, const struct a11y_call *call, DBusMessage *m)
{
    DBusMessageIter v;
    if (!variant(m, &v) || dbus_message_iter_get_arg_type(&v) != DBUS_TYPE_DOUBLE)
        return;
    dbus_message_iter_get_basic(&v, &n->val[call->arg & 3]);
    n->val_mask |= (uint8_t)(1u << (call->arg & 3));
}

static void
on_apps(struct a11y_ctx *c, uint32_t desk, DBusMessage *m)
{
    set_kids(c, desk, m);
    for (uint32_t k = 0; k < c->nodes[desk].nkids; k++) {
        uint32_t app = c->nodes[desk].kids[k];
        if (app == A11Y_NONE)
            continue;
        if (!c->o.no_direct) {
            a11y_queue(c, A11Y_K_P2P_ADDR, app, 0);
            a11y_queue(c, A11Y_K_PID, app, 0);
        }
        if (c->st)
            c->st->apps++;
    }
}

/* Per application: its cache, its root's basics and children (on the direct connection when
 * one was opened). */
static void
ask_apps(struct a11y_ctx *c, uint32_t desk)
{
    for (uint32_t k = 0; k < c->nodes[desk].nkids; k++) {
        uint32_t app = c->nodes[desk].kids[k];
        if (app == A11Y_NONE)
            continue;
        a11y_open_p2p(c, c->nodes[app].bus);
        if (!c->o.no_cache)
            a11y_queue(c, A11Y_K_CACHE, app, 0);
        ask_basic(c, app);
        c->nodes[app].flags |= A11Y_NF_KIDS_ASKED;
        a11y_queue(c, A11Y_K_CHILDREN, app, 0);
    }
}

static void
on_p2p(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    DBusMessageIter it;
    struct a11y_bus *b = &c->buses[c->nodes[call->node].bus];
    if (call->kind == A11Y_K_P2P_ADDR && first_arg(m, DBUS_TYPE_STRING, &it))
        b->p2p_addr = iter_str(c, &it);
    else if (call->kind == A11Y_K_PID && first_arg(m, DBUS_TYPE_UINT32, &it))
        dbus_message_iter_get_basic(&it, &b->pid);
}

static void
on_child_at(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    DBusMessageIter it;
    uint32_t kid = first_arg(m, DBUS_TYPE_STRUCT, &it) ? a11y_iter_ref(c, &it) : A11Y_NONE;
    struct a11y_node *n = &c->nodes[call->node];
    if (call->arg >= 0 && (uint32_t)call->arg < n->nkids)
        n->kids[call->arg] = kid;
    if (n->wait_kids && --n->wait_kids == 0)
        n->flags |= A11Y_NF_KIDS;
}

static void
on_basic_reply(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    DBusMessageIter it;
    struct a11y_node *n = &c->nodes[call->node];
    switch (call->kind) {
    case A11Y_K_NAME:
    case A11Y_K_DESC:
        on_prop(c, call, m);
        n = &c->nodes[call->node];
        break;
    case A11Y_K_COUNT:
        on_prop(c, call, m);
        if (c->nodes[call->node].child_count < 0)
            c->nodes[call->node].child_count = 0;
        return;
    case A11Y_K_ROLE:
        set_role(c, call->node, m);
        n = &c->nodes[call->node];
        break;
    case A11Y_K_ROLE_NAME:
        n->role_name = first_arg(m, DBUS_TYPE_STRING, &it) ? iter_str(c, &it) : "unknown";
        break;
    case A11Y_K_STATE:
        n->states = first_arg(m, DBUS_TYPE_ARRAY, &it) ? iter_states(&it) : 0;
        break;
    case A11Y_K_IFACES:
        n->ifaces = first_arg(m, DBUS_TYPE_ARRAY, &it) ? iter_ifaces(&it) : 0;
        break;
    default:
        return;
    }
    basic_done(n);
}

void
a11y_on_reply(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    struct a11y_node *n = &c->nodes[call->node];
    switch (call->kind) {
    case A11Y_K_APPS:
        on_apps(c, call->node, m);
        break;
    case A11Y_K_CACHE:
        on_cache(c, m);
        break;
    case A11Y_K_CHILDREN:
        set_kids(c, call->node, m);
        break;
    case A11Y_K_CHILD_AT:
        on_child_at(c, call, m);
        break;
    case A11Y_K_ATTRS:
        set_attrs(c, call->node, m);
        break;
    case A11Y_K_ACTIONS:
        set_actions(c, call->node, m);
        break;
    case A11Y_K_ACTION_NAME:
        set_action_name(c, call, m);
        break;
    case A11Y_K_REGISTER:
        break;
    case A11Y_K_P2P_ADDR:
    case A11Y_K_PID:
        on_p2p(c, call, m);
        break;
    case A11Y_K_EXTENTS:
        set_extents(n, m);
        break;
    case A11Y_K_TEXT:
        set_text(c, n, m);
        break;
    case A11Y_K_VALUE:
        set_value(n, call, m);
        break;
    case A11Y_K_NCOLS:
    case A11Y_K_CALC_CELL:
    case A11Y_K_CALC_STATE:
        a11y_calc_on_cell(c, call, m);
        break;
    default:
        on_basic_reply(c, call, m);
        break;
    }
}

void
a11y_on_error(struct a11y_ctx *c, const struct a11y_call *call, const char *name, const char *msg)
{
    (void)name; /* UnknownObject, UnknownMethod, Failed: the same for the walk */
    (void)msg;
    struct a11y_node *n = &c->nodes[call->node];
    switch (call->kind) {
    case A11Y_K_COUNT:
        n->child_count = 0;
        break;
    case A11Y_K_NAME:
    case A11Y_K_ROLE:
    case A11Y_K_STATE:
        n->flags |= A11Y_NF_GONE; /* the object went away between its listing and now */
        basic_done(n);
        break;
    case A11Y_K_ROLE_NAME:
    case A11Y_K_IFACES:
    case A11Y_K_DESC:
        basic_done(n);
        break;
    case A11Y_K_CHILDREN:
        n->flags |= A11Y_NF_KIDS; /* no children rather than none of the tree */
        break;
    case A11Y_K_CHILD_AT:
        a11y_on_reply(c, call, NULL);
        break;
    case A11Y_K_NCOLS:
    case A11Y_K_CALC_CELL:
    case A11Y_K_CALC_STATE:
        a11y_calc_on_cell(c, call, NULL);
        break;
    default:
        break; /* a detail the object does not have */
    }
}

/* ---- the walk ---- */

static void
visit(struct a11y_ctx *c, uint32_t parent, uint32_t slot, int depth, bool calc)
{
    uint32_t idx = c->nodes[parent].kids[slot];
    if (idx == A11Y_NONE)
        return;
    struct a11y_node *n = &c->nodes[idx];
    if ((n->flags & A11Y_NF_GONE) || n->seen == c->pass || c->buses[n->bus].dead)
        return;
    if (c->reached >= c->o.max_nodes) {
        c->cut = true;
        return;
    }
    n->seen = c->pass;
    n->tree_parent = parent;
    n->tree_slot = slot;
    c->reached++;
    if (!(n->flags & A11Y_NF_BASIC)) {
        if (!(n->flags & A11Y_NF_BASIC_ASKED))
            ask_basic(c, idx);
        return;
    }
    calc = calc || n->role == A11Y_ROLE_DOCUMENT_SPREADSHEET;
    if (depth >= c->o.max_depth)
        return;
    if (calc && n->role == A11Y_ROLE_TABLE) {
        if (!(n->flags & A11Y_NF_CALC_DONE))
            a11y_calc_step(c, idx);
        if (!(c->nodes[idx].flags & A11Y_NF_CALC_DONE))
            return;
    } else if (!(n->flags & A11Y_NF_KIDS)) {
        if (!(n->flags & A11Y_NF_KIDS_ASKED))
            ask_kids(c, idx);
        return;
    }
    for (uint32_t k = 0; k < c->nodes[idx].nkids; k++)
        visit(c, idx, k, depth + 1, calc);
}

bool
a11y_shown(const struct a11y_ctx *c, uint32_t parent, uint32_t slot)
{
    uint32_t idx = c->nodes[parent].kids[slot];
    if (idx == A11Y_NONE)
        return false;
    const struct a11y_node *n = &c->nodes[idx];
    return n->seen == c->pass && n->tree_parent == parent && n->tree_slot == slot &&
           !(n->flags & A11Y_NF_GONE) && (n->flags & A11Y_NF_BASIC) && !c->buses[n->bus].dead;
}

int
a11y_walk(struct a11y_ctx *c, sbx_error **err)
{
    int ret;
    uint32_t desk = a11y_node_get(c, 1, "/org/a11y/atspi/accessible/root");
    if (!c->o.no_cache) {
        /* registryd signals the applications before it answers, so they publish their cache
         * before our GetItems reach them. */
        a11y_queue(c, A11Y_K_REGISTER, desk, 0);
        ret = a11y_pump(c, err);
        if (ret < 0)
            return ret;
    }
    a11y_queue(c, A11Y_K_APPS, desk, 0);
    ret = a11y_pump(c, err);
    if (ret < 0)
        return ret;
    if (!(c->nodes[desk].flags & A11Y_NF_KIDS))
        return sbx_error_set(err, SBX_EIO, 0, "accessibility registry: no desktop children");
    ask_apps(c, desk);
    ret = a11y_pump(c, err);
    if (ret < 0)
        return ret;
    place_cached(c);
    for (;;) {
        c->pass++;
        c->reached = 0;
        c->cut = false;
        c->calc_pending = false;
        for (uint32_t k = 0; k < c->nodes[desk].nkids; k++)
            visit(c, desk, k, 1, false);
        if (c->qlen == 0 && !c->calc_pending)
            return 0;
        ret = a11y_pump(c, err);
        if (ret < 0)
            return ret;
    }
}

int
a11y_details(struct a11y_ctx *c, sbx_error **err)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        const struct a11y_node *n = &c->nodes[i];
        if (n->seen == c->pass && (n->flags & A11Y_NF_BASIC) && !(n->flags & A11Y_NF_GONE) &&
            !(n->flags & A11Y_NF_DETAILS))
            ask_details(c, (uint32_t)i);
    }
    return a11y_pump(c, err);
}
