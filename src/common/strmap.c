#include "common/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

struct sbx_strmap_node {
    struct sbx_strmap_node *next;
    uint64_t hash;
    void *val;
    char key[];
};

static uint64_t
fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void
sbx_strmap_init(struct sbx_strmap *m)
{
    memset(m, 0, sizeof *m);
}

void
sbx_strmap_free(struct sbx_strmap *m)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct sbx_strmap_node *n = m->buckets[i];
        while (n) {
            struct sbx_strmap_node *next = n->next;
            free(n);
            n = next;
        }
    }
    free(m->buckets);
    sbx_strmap_init(m);
}

static void
grow(struct sbx_strmap *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : 64;
    struct sbx_strmap_node **b = sbx_xcalloc(nb, sizeof(struct sbx_strmap_node *));
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct sbx_strmap_node *n = m->buckets[i];
        while (n) {
            struct sbx_strmap_node *next = n->next;
            size_t k = (size_t)(n->hash & (nb - 1));
            n->next = b[k];
            b[k] = n;
            n = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
}

static struct sbx_strmap_node **
slot(const struct sbx_strmap *m, const char *key, uint64_t h)
{
    struct sbx_strmap_node **p = &m->buckets[h & (m->nbuckets - 1)];
    while (*p && ((*p)->hash != h || strcmp((*p)->key, key) != 0))
        p = &(*p)->next;
    return p;
}

void *
sbx_strmap_put(struct sbx_strmap *m, const char *key, void *val)
{
    if (m->count + 1 > m->nbuckets) /* load factor <= 1 */
        grow(m);
    uint64_t h = fnv1a(key);
    struct sbx_strmap_node **p = slot(m, key, h);
    if (*p) {
        void *old = (*p)->val;
        (*p)->val = val;
        return old;
    }
    size_t len = strlen(key);
    struct sbx_strmap_node *n = sbx_xmalloc(sizeof *n + len + 1);
    n->next = NULL;
    n->hash = h;
    n->val = val;
    memcpy(n->key, key, len + 1);
    *p = n;
    m->count++;
    return NULL;
}

void *
sbx_strmap_get(const struct sbx_strmap *m, const char *key)
{
    if (!m->nbuckets)
        return NULL;
    struct sbx_strmap_node **p = slot(m, key, fnv1a(key));
    return *p ? (*p)->val : NULL;
}

void *
sbx_strmap_del(struct sbx_strmap *m, const char *key)
{
    if (!m->nbuckets)
        return NULL;
    struct sbx_strmap_node **p = slot(m, key, fnv1a(key));
    struct sbx_strmap_node *n = *p;
    if (!n)
        return NULL;
    void *val = n->val;
    *p = n->next;
    free(n);
    m->count--;
    return val;
}

size_t
sbx_strmap_count(const struct sbx_strmap *m)
{
    return m->count;
}

void
sbx_strmap_each(const struct sbx_strmap *m, void (*fn)(const char *key, void *val, void *ud),
                void *ud)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (const struct sbx_strmap_node *n = m->buckets[i]; n; n = n->next)
            fn(n->key, n->val, ud);
    }
}
