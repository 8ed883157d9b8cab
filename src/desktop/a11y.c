/*
 * a11y.c - sbx_a11y_snapshot: connect, walk, details, write; timings and notes in the stats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "desktop/a11y_int.h"

static double
ms_since(uint64_t t0)
{
    return (double)(sbx_now_ns() - t0) / 1e6;
}

static void
defaults(struct sbx_a11y_opts *o)
{
    if (o->timeout_ms <= 0)
        o->timeout_ms = 10000;
    if (o->stall_ms <= 0)
        o->stall_ms = 2000;
    if (o->max_nodes == 0)
        o->max_nodes = 200000;
    if (o->max_depth <= 0)
        o->max_depth = 50;
    if (o->max_width <= 0)
        o->max_width = 1024;
    if (o->window <= 0)
        o->window = 256;
    if (o->window > (int)A11Y_FLIGHT_SLOTS)
        o->window = (int)A11Y_FLIGHT_SLOTS;
}

static int
run(struct a11y_ctx *c, const char *address, struct sbx_buf *out, sbx_error **err)
{
    struct sbx_a11y_stats *st = c->st;
    uint64_t t = sbx_now_ns();
    int ret = a11y_connect(c, address, err);
    st->ms_connect = ms_since(t);
    if (ret < 0)
        return ret;
    t = sbx_now_ns();
    ret = a11y_walk(c, err);
    st->ms_tree = ms_since(t);
    if (ret < 0)
        return ret;
    t = sbx_now_ns();
    ret = a11y_details(c, err);
    st->ms_details = ms_since(t);
    if (ret < 0)
        return ret;
    t = sbx_now_ns();
    ret = c->o.format == SBX_A11Y_JSON ? a11y_write_json(c, out, err) : a11y_write_xml(c, out, err);
    st->ms_write = ms_since(t);
    return ret;
}

int
sbx_a11y_snapshot(const char *bus_address, const struct sbx_a11y_opts *o, struct sbx_buf *out,
                  struct sbx_a11y_stats *st, sbx_error **err)
{
    struct sbx_a11y_stats local;
    struct a11y_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->o = o ? *o : (struct sbx_a11y_opts){0};
    defaults(&c->o);
    c->st = st ? st : &local;
    memset(c->st, 0, sizeof(*c->st));
    uint64_t t0 = sbx_now_ns();
    c->deadline_ns = t0 + (uint64_t)c->o.timeout_ms * 1000000ULL;
    size_t len0 = out->len;
    c->str_budget = out->max > SIZE_MAX / 4 ? SIZE_MAX / 2 : out->max * 2;
    if (c->str_budget < ((size_t)16 << 20))
        c->str_budget = (size_t)16 << 20;
    int ret = run(c, bus_address ? bus_address : "", out, err);
    c->st->ms_total = ms_since(t0);
    snprintf(c->st->note, sizeof(c->st->note), "%s", c->note);
    if (ret < 0) {
        (void)sbx_error_wrap(err, "accessibility tree");
        if (out->data && out->len > len0) { /* nothing half-written */
            out->len = len0;
            out->data[len0] = '\0';
        }
    }
    a11y_disconnect(c);
    a11y_calc_free(c);
    a11y_store_free(c);
    free(c);
    return ret < 0 ? ret : 0;
}
