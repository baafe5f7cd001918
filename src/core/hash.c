/* hash.c: a four-lane multiply-rotate 64-bit hash (streaming), with a strong final avalanche. */
#include "hash.h"

#include <string.h>

/* Odd 64-bit multipliers with well-mixed bits (golden ratio and other irrational expansions). */
#define HK1 0x9E3779B97F4A7C15ull
#define HK2 0xBF58476D1CE4E5B9ull
#define HK3 0x94D049BB133111EBull
#define HK4 0xD1B54A32D192ED03ull
#define HK5 0x8CB92BA72F3D8DD7ull

static inline uint64_t rotl64(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

/* Little-endian load of 8 bytes; compilers turn this into one load on little-endian hosts. */
static inline uint64_t load_le64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

/* One lane step: fold 8 input bytes into an accumulator. */
static inline uint64_t lane_step(uint64_t acc, uint64_t word) {
    acc += word * HK2;
    acc = rotl64(acc, 29);
    return acc * HK1;
}

/* Final avalanche: every input bit affects every output bit with probability ~1/2. */
static inline uint64_t avalanche(uint64_t h) {
    h ^= h >> 31;
    h *= HK3;
    h ^= h >> 29;
    h *= HK2;
    h ^= h >> 32;
    return h;
}

static void stripe(uint64_t acc[4], const uint8_t *p) {
    acc[0] = lane_step(acc[0], load_le64(p));
    acc[1] = lane_step(acc[1], load_le64(p + 8));
    acc[2] = lane_step(acc[2], load_le64(p + 16));
    acc[3] = lane_step(acc[3], load_le64(p + 24));
}

void hash64_init(hash64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->acc[0] = seed + HK1 + HK2;
    s->acc[1] = seed + HK2;
    s->acc[2] = seed ^ HK4;
    s->acc[3] = seed - HK1;
}

void hash64_update(hash64_state *s, const void *data, size_t len) {
    const uint8_t *p = data;
    if (len == 0) return;
    s->total_len += len;
    if (s->buf_len) {
        size_t take = 32 - s->buf_len;
        if (take > len) take = len;
        memcpy(s->buf + s->buf_len, p, take);
        s->buf_len += (uint32_t)take;
        p += take;
        len -= take;
        if (s->buf_len < 32) return;
        stripe(s->acc, s->buf);
        s->buf_len = 0;
    }
    uint64_t a[4] = {s->acc[0], s->acc[1], s->acc[2], s->acc[3]};
    while (len >= 32) {
        stripe(a, p);
        p += 32;
        len -= 32;
    }
    memcpy(s->acc, a, sizeof a);
    if (len) {
        memcpy(s->buf, p, len);
        s->buf_len = (uint32_t)len;
    }
}

uint64_t hash64_final(const hash64_state *s) {
    uint64_t h;
    if (s->total_len >= 32) {
        h = rotl64(s->acc[0], 1) + rotl64(s->acc[1], 7) + rotl64(s->acc[2], 12) +
            rotl64(s->acc[3], 18);
        for (int i = 0; i < 4; i++) {
            h ^= lane_step(0, s->acc[i]);
            h = h * HK1 + HK4;
        }
    } else {
        h = s->seed + HK5;
    }
    h += s->total_len * HK3;
    /* Tail: 8 bytes at a time, the last word zero-padded (the length above tells them apart). */
    for (uint32_t off = 0; off < s->buf_len; off += 8) {
        uint8_t word[8] = {0};
        uint32_t n = s->buf_len - off < 8 ? s->buf_len - off : 8;
        memcpy(word, s->buf + off, n);
        h ^= lane_step(0, load_le64(word));
        h = rotl64(h, 27) * HK1 + HK4;
    }
    return avalanche(h);
}

uint64_t hash64(const void *data, size_t len, uint64_t seed) {
    hash64_state s;
    hash64_init(&s, seed);
    hash64_update(&s, data, len);
    return hash64_final(&s);
}

void hash64_update_u64(hash64_state *s, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    hash64_update(s, b, 8);
}

void hash64_update_str(hash64_state *s, const char *str) {
    if (!str) {
        hash64_update_u64(s, UINT64_MAX);
        return;
    }
    size_t n = strlen(str);
    hash64_update_u64(s, (uint64_t)n);
    hash64_update(s, str, n);
}
