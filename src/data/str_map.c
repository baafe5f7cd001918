/* str_map.c: open-addressing hash maps (FNV-1a, linear probing) for token strings and BPE pairs. */
#include "data/str_map.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static size_t find_slot(const str_map *m, const char *key, size_t len) {
    size_t mask = m->n_slots - 1;
    for (size_t i = fnv(key, len) & mask;; i = (i + 1) & mask) {
        int32_t at = m->slots[i];
        if (at < 0 || (m->lens[at] == len && memcmp(m->pool + m->offs[at], key, len) == 0))
            return i;
    }
}

static int grow_slots(str_map *m) {
    size_t n_slots = m->n_slots ? m->n_slots * 2 : 64;
    int32_t *slots = malloc(n_slots * sizeof *slots);
    if (!slots) return -1;
    memset(slots, 0xff, n_slots * sizeof *slots);
    free(m->slots);
    m->slots = slots, m->n_slots = n_slots;
    for (size_t k = 0; k < m->n; k++)
        m->slots[find_slot(m, m->pool + m->offs[k], m->lens[k])] = (int32_t)k;
    return 0;
}

int str_map_put(str_map *m, const char *key, size_t len, int64_t val) {
    if (len > UINT32_MAX || m->n >= INT32_MAX / 2) return -1;
    if (m->n_slots == 0 || 2 * (m->n + 1) > m->n_slots)
        if (grow_slots(m)) return -1;
    size_t slot = find_slot(m, key, len);
    if (m->slots[slot] >= 0) {
        m->vals[m->slots[slot]] = val;
        return 0;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        size_t *offs = realloc(m->offs, cap * sizeof *offs);
        if (offs) m->offs = offs;
        uint32_t *lens = realloc(m->lens, cap * sizeof *lens);
        if (lens) m->lens = lens;
        int64_t *vals = realloc(m->vals, cap * sizeof *vals);
        if (vals) m->vals = vals;
        if (!offs || !lens || !vals) return -1;
        m->cap = cap;
    }
    if (m->pool_n + len + 1 > m->pool_cap) {
        size_t cap = m->pool_cap ? m->pool_cap : 4096;
        while (cap < m->pool_n + len + 1) cap *= 2;
        char *pool = realloc(m->pool, cap);
        if (!pool) return -1;
        m->pool = pool, m->pool_cap = cap;
    }
    memcpy(m->pool + m->pool_n, key, len);
    m->pool[m->pool_n + len] = 0;
    m->offs[m->n] = m->pool_n, m->lens[m->n] = (uint32_t)len, m->vals[m->n] = val;
    m->pool_n += len + 1;
    m->slots[slot] = (int32_t)m->n++;
    if (len > m->max_len) m->max_len = len;
    return 0;
}

int64_t str_map_get(const str_map *m, const char *key, size_t len) {
    if (m->n_slots == 0 || len > m->max_len) return -1;
    int32_t at = m->slots[find_slot(m, key, len)];
    return at < 0 ? -1 : m->vals[at];
}

void str_map_free(str_map *m) {
    free(m->pool), free(m->offs), free(m->lens), free(m->vals), free(m->slots);
    memset(m, 0, sizeof *m);
}

static size_t pair_slot(const pair_map *m, uint64_t key) {
    size_t mask = m->n_slots - 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (size_t i = (size_t)(h >> 20) & mask;; i = (i + 1) & mask)
        if (m->keys[i] == key || m->keys[i] == UINT64_MAX) return i;
}

static int pair_grow(pair_map *m) {
    pair_map g = {.n_slots = m->n_slots ? m->n_slots * 2 : 1024, .n = m->n};
    g.keys = malloc(g.n_slots * sizeof *g.keys);
    g.rank = malloc(g.n_slots * sizeof *g.rank);
    g.id = malloc(g.n_slots * sizeof *g.id);
    if (!g.keys || !g.rank || !g.id) {
        pair_map_free(&g);
        return -1;
    }
    memset(g.keys, 0xff, g.n_slots * sizeof *g.keys);
    for (size_t i = 0; i < m->n_slots; i++) {
        if (m->keys[i] == UINT64_MAX) continue;
        size_t s = pair_slot(&g, m->keys[i]);
        g.keys[s] = m->keys[i], g.rank[s] = m->rank[i], g.id[s] = m->id[i];
    }
    pair_map_free(m);
    *m = g;
    return 0;
}

int pair_map_put(pair_map *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
    if (m->n_slots == 0 || 2 * (m->n + 1) > m->n_slots)
        if (pair_grow(m)) return -1;
    uint64_t key = (uint64_t)a << 32 | b;
    size_t s = pair_slot(m, key);
    if (m->keys[s] == UINT64_MAX) m->n++;
    m->keys[s] = key, m->rank[s] = rank, m->id[s] = id;
    return 0;
}

bool pair_map_get(const pair_map *m, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *id) {
    if (m->n_slots == 0) return false;
    size_t s = pair_slot(m, (uint64_t)a << 32 | b);
    if (m->keys[s] == UINT64_MAX) return false;
    *rank = m->rank[s], *id = m->id[s];
    return true;
}

void pair_map_free(pair_map *m) {
    free(m->keys), free(m->rank), free(m->id);
    memset(m, 0, sizeof *m);
}
