/*
 * a11y.h - the accessibility tree of a desktop, read over its private AT-SPI bus.
 *
 *   struct sbx_a11y_opts o = {.format = SBX_A11Y_XML};
 *   struct sbx_a11y_stats st;
 *   sbx_autobuf struct sbx_buf out;
 *   sbx_buf_init(&out, 64 << 20);
 *   if (sbx_a11y_snapshot(bus_address, &o, &out, &st, &err) < 0) ...
 *
 * The XML is OSWorld's Linux tree (desktop_env/server/main.py): root <desktop-frame>, one
 * element per accessible (tag = role name, spaces as '-'), `name`, `st:<state>="true"`,
 * `attr:<key>`, `cp:screencoord`/`cp:size` for visible+showing components, the text as element
 * content, `image`/`selection`, `val:*`, `act:*`, depth 50 and 1024 children per node at most,
 * LibreOffice Calc tables walked by showing cells. The JSON form carries the same information
 * as nested objects with numeric positions. docs/desktop.md "Accessibility tree" says how it is
 * read (Cache.GetItems per application, then every per-object call pipelined) and its limits.
 *
 * Boundary: `bus_address` must be the sandbox's own accessibility bus, which execd starts and
 * records itself; it is never taken from a request. Everything on that bus belongs to the
 * sandbox, so nothing here can reach another sandbox's applications.
 */
#ifndef SBX_DESKTOP_A11Y_H
#define SBX_DESKTOP_A11Y_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

enum sbx_a11y_format {
    SBX_A11Y_XML = 0,  /* OSWorld-compatible XML */
    SBX_A11Y_JSON = 1, /* nested objects, numeric positions */
};

/* Zero means the default for every field. */
struct sbx_a11y_opts {
    enum sbx_a11y_format format;
    int timeout_ms;   /* the whole snapshot; default 10000 */
    int stall_ms;     /* an application that answers nothing for this long is skipped; 2000 */
    size_t max_nodes; /* nodes read at most (then the tree is cut and says so); 200000 */
    int max_depth;    /* OSWorld's MAX_DEPTH: 50 */
    int max_width;    /* OSWorld's MAX_WIDTH: 1024 children per node */
    int window;       /* D-Bus calls in flight at once; 256 (at most 4096) */
    bool no_cache;    /* walk with GetChildren even where Cache.GetItems answers (tests, bench) */
    bool no_direct;   /* every call through the bus daemon, none on direct connections */
    bool no_actions;  /* leave out act:* (3 of ~5 calls per Chromium object; what OSWorld's
                         agents read of the tree does not include them) */
};

#define SBX_A11Y_NOTE_MAX 512

struct sbx_a11y_stats {
    size_t apps;         /* applications on the bus */
    size_t apps_skipped; /* hung, died or refused mid-walk: left out, named in `note` */
    size_t nodes;        /* elements written (the root included) */
    size_t cached;       /* objects that came from Cache.GetItems */
    size_t calls;        /* D-Bus calls made */
    bool truncated;      /* cut at max_nodes or at the output buffer's maximum */
    double ms_connect;   /* connect + Hello */
    double ms_tree;      /* applications, caches, the children still missing */
    double ms_details;   /* attributes, extents, text, values, actions */
    double ms_write;     /* serialising */
    double ms_total;
    char note[SBX_A11Y_NOTE_MAX]; /* "app `x`: no answer for 2000 ms; ..." or "" */
};

/*
 * Read the tree from the AT-SPI bus at `bus_address` and append it to `out` (whose maximum
 * bounds the output: past it the tree is cut at a node boundary, closed properly, and
 * `truncated` set). Applications that hang or die mid-walk are skipped and noted; the
 * snapshot fails only when the bus cannot be reached or the whole timeout passes
 * (-SBX_EUNAVAIL, -SBX_ETIMEDOUT). `st` may be NULL.
 */
int sbx_a11y_snapshot(const char *bus_address, const struct sbx_a11y_opts *o, struct sbx_buf *out,
                      struct sbx_a11y_stats *st, sbx_error **err);

#endif
