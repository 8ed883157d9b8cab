/*
 * a11y_store.c - the node table of one snapshot: an arena for strings and small arrays, nodes
 * keyed by (bus, object path) in an open-addressing hash, the buses seen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "desktop/a11y_int.h"

#define ARENA_CHUNK ((size_t)256 * 1024)

struct a11y_arena_chunk {
    struct a11y_arena_chunk *next;
    size_t used, cap;
    _Alignas(max_align_t) unsigned char data[];
};

void *
a11y_alloc(struct a11y_ctx *c, size_t n)
{
    n = (n + 15u) & ~(size_t)15u;
    struct a11y_arena_chunk *a = c->arena;
    if (!a || a->cap - a->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        a = sbx_xmalloc(sizeof(*a) + cap);
        a->cap = cap;
        a->used = 0;
        a->next = c->arena;
        c->arena = a;
    }
    void *p = a->data + a->used;
    a->used += n;
    return p;
}

static const char *
copy(struct a11y_ctx *c, const char *s, size_t n)
{
    if (n == 0)
        return "";
    char *p = a11y_alloc(c, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

bool
a11y_budget(struct a11y_ctx *c, size_t n)
{
    /* Applications choose their strings' sizes: past the budget (twice the output's maximum,
     * 16 MiB at least) their contents are dropped, and the note says so. */
    if (c->str_budget && n > c->str_budget - c->str_bytes) {
        if (!c->strings_cut)
            a11y_note(c, "strings dropped past the memory budget");
        c->strings_cut = true;
        return false;
    }
    c->str_bytes += n;
    return true;
}

const char *
a11y_strdup(struct a11y_ctx *c, const char *s, size_t n)
{
    return a11y_budget(c, n) ? copy(c, s, n) : "";
}

void
a11y_store_free(struct a11y_ctx *c)
{
    while (c->arena) {
        struct a11y_arena_chunk *next = c->arena->next;
        free(c->arena);
        c->arena = next;
    }
    free(c->nodes);
    free(c->hash);
    free(c->buses);
    free(c->apps);
    free(c->queue);
    c->nodes = NULL;
    c->hash = NULL;
    c->buses = NULL;
    c->apps = NULL;
    c->queue = NULL;
}

uint32_t
a11y_bus_index(struct a11y_ctx *c, const char *name)
{
    /* A handful of applications: a linear search, newest first (replies come in runs). */
    for (size_t i = c->nbuses; i-- > 0;)
        if (strcmp(c->buses[i].name, name) == 0)
            return (uint32_t)i;
    if (c->nbuses == c->capbuses) {
        c->capbuses = c->capbuses ? c->capbuses * 2 : 8;
        c->buses = sbx_xrealloc(c->buses, c->capbuses * sizeof(*c->buses));
    }
    struct a11y_bus *b = &c->buses[c->nbuses];
    memset(b, 0, sizeof(*b));
    b->name = copy(c, name, strlen(name)); /* names and paths are never dropped */
    return (uint32_t)c->nbuses++;
}

static uint64_t
key_hash(uint32_t bus, const char *path)
{
    uint64_t h = 1469598103934665603ULL ^ bus; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

static void
rehash(struct a11y_ctx *c)
{
    size_t cap = c->hcap ? c->hcap * 2 : 1024;
    uint32_t *h = sbx_xcalloc(cap, sizeof(*h));
    for (size_t i = 0; i < c->nnodes; i++) {
        size_t at = key_hash(c->nodes[i].bus, c->nodes[i].path) & (cap - 1);
        while (h[at])
            at = (at + 1) & (cap - 1);
        h[at] = (uint32_t)i + 1;
    }
    free(c->hash);
    c->hash = h;
    c->hcap = cap;
}

static uint32_t
node_new(struct a11y_ctx *c, uint32_t bus, const char *path)
{
    if (c->nnodes == c->capnodes) {
        c->capnodes = c->capnodes ? c->capnodes * 2 : 1024;
        c->nodes = sbx_xrealloc(c->nodes, c->capnodes * sizeof(*c->nodes));
    }
    struct a11y_node *n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof(*n));
    n->bus = bus;
    n->path = copy(c, path, strlen(path));
    n->name = n->desc = "";
    n->parent = A11Y_NONE;
    n->index_in_parent = -1;
    n->child_count = -1;
    return (uint32_t)c->nnodes++;
}

uint32_t
a11y_node_get(struct a11y_ctx *c, uint32_t bus, const char *path)
{
    if (strcmp(path, "/org/a11y/atspi/null") == 0)
        return A11Y_NONE;
    if ((c->nnodes + 1) * 2 > c->hcap)
        rehash(c);
    size_t at = key_hash(bus, path) & (c->hcap - 1);
    for (; c->hash[at]; at = (at + 1) & (c->hcap - 1)) {
        const struct a11y_node *n = &c->nodes[c->hash[at] - 1];
        if (n->bus == bus && strcmp(n->path, path) == 0)
            return c->hash[at] - 1;
    }
    uint32_t idx = node_new(c, bus, path);
    c->hash[at] = idx + 1;
    return idx;
}

void
a11y_note(struct a11y_ctx *c, const char *text)
{
    size_t len = strlen(c->note);
    if (len + 8 < sizeof(c->note))
        (void)snprintf(c->note + len, sizeof(c->note) - len, "%s%s", len ? "; " : "", text);
}
