/* A string-keyed hash map (chained, power-of-two buckets, FNV-1a): O(1) lookups by id where
 * a linear scan grew with the number of sandboxes. Keys are copied; values are borrowed. */
#ifndef SBX_COMMON_STRMAP_H
#define SBX_COMMON_STRMAP_H

#include <stddef.h>

struct sbx_strmap_node;

struct sbx_strmap {
    struct sbx_strmap_node **buckets;
    size_t nbuckets; /* 0 or a power of two */
    size_t count;
};

void sbx_strmap_init(struct sbx_strmap *m);
/* Frees the map's nodes and keys, not the values. */
void sbx_strmap_free(struct sbx_strmap *m);
/* Insert or replace; returns the value it replaced, or NULL. */
void *sbx_strmap_put(struct sbx_strmap *m, const char *key, void *val);
void *sbx_strmap_get(const struct sbx_strmap *m, const char *key);
/* Remove; returns the value removed, or NULL. */
void *sbx_strmap_del(struct sbx_strmap *m, const char *key);
size_t sbx_strmap_count(const struct sbx_strmap *m);
/* fn for every entry, in no particular order; fn must not change the map. */
void sbx_strmap_each(const struct sbx_strmap *m, void (*fn)(const char *key, void *val, void *ud),
                     void *ud);

#endif
