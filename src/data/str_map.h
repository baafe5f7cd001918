/* str_map.h: hash maps: byte strings to int64 values (tokenizers' vocabularies, data sets' skipped
 * paths), and id pairs to a rank and an id (BPE's merges). */
#ifndef GRAFT_DATA_STR_MAP_H
#define GRAFT_DATA_STR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Strings (copied into the map's pool) to int64 values; inserting a present key replaces its
 * value (the later entry of a JSON object or vocabulary wins). */
typedef struct str_map {
    char *pool;
    size_t pool_n, pool_cap;
    size_t *offs;   /* (n,) key start in pool */
    uint32_t *lens; /* (n,) key length */
    int64_t *vals;  /* (n,) */
    size_t n, cap;
    int32_t *slots; /* (n_slots,) entry index or -1 */
    size_t n_slots;
    size_t max_len; /* longest key */
} str_map;

/* 0, or -1 when out of memory. */
int str_map_put(str_map *m, const char *key, size_t len, int64_t val);
/* The value, or -1 when absent. */
int64_t str_map_get(const str_map *m, const char *key, size_t len);
void str_map_free(str_map *m);

/* (a, b) id pairs to (rank, id): BPE's merges. */
typedef struct pair_map {
    uint64_t *keys; /* (n_slots,) a << 32 | b, or UINT64_MAX when empty */
    uint32_t *rank, *id;
    size_t n, n_slots;
} pair_map;

int pair_map_put(pair_map *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
bool pair_map_get(const pair_map *m, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *id);
void pair_map_free(pair_map *m);

#endif
