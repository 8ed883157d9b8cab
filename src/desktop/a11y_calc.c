/*
 * a11y_calc.c - LibreOffice Calc tables, walked as OSWorld walks them.
 *
 * A sheet's table claims every cell of the sheet as a child (rows x 1024 or 16384 columns),
 * so OSWorld does not list its children: it scans cells by index, row by row, and keeps the
 * SHOWING ones. Its rule: a row is scanned from the first showing column found so far (0
 * before any) until the first cell that is not showing once something showed, or column 500
 * when nothing has; the scan stops at a row whose first scanned cell is not showing, or after
 * row 500 when nothing showed. The number of columns per row, which OSWorld derives from
 * `libreoffice --version` (1024 before 7.4, 16384 since), is the table's own NColumns here.
 *
 * The scan is re-run over what is known after each round; where it meets a cell not fetched
 * yet it asks for a block of them (GetChildAtIndex, then GetState), all pipelined.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "desktop/a11y_int.h"

#define MAX_ROWS     1048576
#define GIVE_UP      500 /* OSWorld: columns (or rows) scanned while nothing shows */
#define BLOCK_COLS   64
#define BLOCK_ROWS   8
#define DEFAULT_COLS 16384

struct cell {
    int64_t index; /* -1: empty slot */
    uint32_t node; /* A11Y_NONE until answered */
    uint8_t absent;
};

struct a11y_calc {
    int64_t cols; /* 0 until NColumns answered */
    bool cols_asked;
    struct cell *cells;
    size_t ncells, cap;
};

static struct cell *
cell_find(struct a11y_calc *t, int64_t index, bool make)
{
    if (make && (t->ncells + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct cell *cells = sbx_xmalloc(cap * sizeof(*cells));
        for (size_t i = 0; i < cap; i++)
            cells[i].index = -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (t->cells[i].index < 0)
                continue;
            size_t at = (size_t)t->cells[i].index & (cap - 1);
            while (cells[at].index >= 0)
                at = (at + 1) & (cap - 1);
            cells[at] = t->cells[i];
        }
        free(t->cells);
        t->cells = cells;
        t->cap = cap;
    }
    if (!t->cap)
        return NULL;
    size_t at = (size_t)index & (t->cap - 1);
    for (; t->cells[at].index >= 0; at = (at + 1) & (t->cap - 1))
        if (t->cells[at].index == index)
            return &t->cells[at];
    if (!make)
        return NULL;
    t->cells[at] = (struct cell){.index = index, .node = A11Y_NONE};
    t->ncells++;
    return &t->cells[at];
}

/* The calc scans live in the arena's lifetime but own a malloc'd map: freed with the ctx. */
static struct a11y_calc *
calc_of(struct a11y_ctx *c, uint32_t table)
{
    struct a11y_node *n = &c->nodes[table];
    if (!n->calc) {
        n->calc = a11y_alloc(c, sizeof(*n->calc));
        memset(n->calc, 0, sizeof(*n->calc));
    }
    return n->calc;
}

void
a11y_calc_free(struct a11y_ctx *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].calc)
            free(c->nodes[i].calc->cells);
}

/* -1: not known yet (asked now), 0: not showing or absent, 1: showing. */
static int
showing(struct a11y_ctx *c, uint32_t table, int64_t index)
{
    struct a11y_calc *t = c->nodes[table].calc;
    struct cell *cell = cell_find(t, index, false);
    if (!cell)
        return -1;
    if (cell->absent)
        return 0;
    if (cell->node == A11Y_NONE)
        return -1;
    const struct a11y_node *n = &c->nodes[cell->node];
    if (!(n->flags & A11Y_NF_CELL_STATE))
        return -1;
    return (n->states & (1ULL << A11Y_STATE_SHOWING)) ? 1 : 0;
}

static void
ask_block(struct a11y_ctx *c, uint32_t table, int64_t row, int64_t col, int64_t col0)
{
    struct a11y_calc *t = c->nodes[table].calc;
    for (int64_t r = row; r < row + BLOCK_ROWS && r < MAX_ROWS; r++) {
        int64_t from = r == row ? col : col0;
        for (int64_t k = from; k < from + BLOCK_COLS && k < t->cols; k++) {
            int64_t index = r * t->cols + k;
            if (index > INT32_MAX || cell_find(t, index, false))
                continue;
            (void)cell_find(t, index, true);
            a11y_queue(c, A11Y_K_CALC_CELL, table, (int32_t)index);
        }
    }
    c->calc_pending = true;
}

struct scan {
    uint32_t *kids;
    uint32_t nkids;
    uint32_t cap;
};

static void
scan_add(struct a11y_ctx *c, struct scan *s, uint32_t table, int64_t index)
{
    if (s->nkids == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        uint32_t *k = a11y_alloc(c, cap * sizeof(*k));
        if (s->nkids)
            memcpy(k, s->kids, s->nkids * sizeof(*k));
        s->kids = k;
        s->cap = cap;
    }
    s->kids[s->nkids++] = cell_find(c->nodes[table].calc, index, false)->node;
}

/* One row of OSWorld's scan. Returns the column it stopped at, or -1 when a cell is unknown. */
static int64_t
scan_row(struct a11y_ctx *c, uint32_t table, int64_t row, int64_t *col_base, struct scan *s)
{
    struct a11y_calc *t = c->nodes[table].calc;
    int64_t clm = *col_base >= 0 ? *col_base : 0;
    for (; clm < t->cols; clm++) {
        int sh = showing(c, table, row * t->cols + clm);
        if (sh < 0) {
            ask_block(c, table, row, clm, *col_base >= 0 ? *col_base : clm);
            return -1;
        }
        if (sh) {
            scan_add(c, s, table, row * t->cols + clm);
            if (*col_base < 0)
                *col_base = clm;
        } else if (*col_base >= 0 || clm >= GIVE_UP) {
            break;
        }
    }
    return clm < t->cols ? clm : t->cols - 1;
}

static void
scan(struct a11y_ctx *c, uint32_t table)
{
    struct scan s = {0};
    int64_t col_base = -1;
    for (int64_t r = 0; r < MAX_ROWS; r++) {
        int64_t clm = scan_row(c, table, r, &col_base, &s);
        if (clm < 0)
            return; /* cells asked; scanned again next round */
        if ((col_base >= 0 && clm == col_base) || (col_base < 0 && r >= GIVE_UP))
            break;
        if (s.nkids >= c->o.max_nodes)
            break;
    }
    struct a11y_node *n = &c->nodes[table];
    n->kids = s.kids;
    n->nkids = s.nkids;
    n->flags |= A11Y_NF_CALC_DONE;
}

void
a11y_calc_step(struct a11y_ctx *c, uint32_t table)
{
    struct a11y_calc *t = calc_of(c, table);
    if (!t->cols_asked) {
        t->cols_asked = true;
        a11y_queue(c, A11Y_K_NCOLS, table, 0);
        c->calc_pending = true;
        return;
    }
    if (t->cols <= 0)
        t->cols = DEFAULT_COLS;
    scan(c, table);
}

static void
on_ncols(struct a11y_ctx *c, uint32_t table, DBusMessage *m)
{
    DBusMessageIter it;
    DBusMessageIter v;
    struct a11y_calc *t = calc_of(c, table);
    t->cols = DEFAULT_COLS;
    if (!m || !dbus_message_iter_init(m, &it) ||
        dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_VARIANT)
        return;
    dbus_message_iter_recurse(&it, &v);
    int32_t cols = 0;
    if (dbus_message_iter_get_arg_type(&v) == DBUS_TYPE_INT32)
        dbus_message_iter_get_basic(&v, &cols);
    if (cols > 0)
        t->cols = cols;
}

static void
on_cell(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    struct cell *cell = cell_find(c->nodes[call->node].calc, call->arg, false);
    if (!cell)
        return;
    DBusMessageIter it;
    uint32_t table = call->node;
    uint32_t kid = A11Y_NONE;
    if (m && dbus_message_iter_init(m, &it))
        kid = a11y_iter_ref(c, &it); /* checks the types and the bus name */
    cell = cell_find(c->nodes[table].calc, call->arg, false); /* the node table may have moved */
    if (kid == A11Y_NONE) {
        cell->absent = 1;
        return;
    }
    cell->node = kid;
    a11y_queue(c, A11Y_K_CALC_STATE, kid, call->arg);
}

static void
on_cell_state(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    struct a11y_node *n = &c->nodes[call->node];
    DBusMessageIter it;
    DBusMessageIter a;
    n->states = 0;
    if (m && dbus_message_iter_init(m, &it) &&
        dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_ARRAY) {
        dbus_message_iter_recurse(&it, &a);
        for (unsigned w = 0; w < 2 && dbus_message_iter_get_arg_type(&a) == DBUS_TYPE_UINT32;
             w++, dbus_message_iter_next(&a)) {
            uint32_t v;
            dbus_message_iter_get_basic(&a, &v);
            n->states |= (uint64_t)v << (32 * w);
        }
    }
    n->flags |= A11Y_NF_CELL_STATE;
}

void
a11y_calc_on_cell(struct a11y_ctx *c, const struct a11y_call *call, DBusMessage *m)
{
    switch (call->kind) {
    case A11Y_K_NCOLS:
        on_ncols(c, call->node, m);
        break;
    case A11Y_K_CALC_CELL:
        on_cell(c, call, m);
        break;
    case A11Y_K_CALC_STATE:
        on_cell_state(c, call, m);
        break;
    default:
        break;
    }
}
