/* rng.h: a small seeded generator (splitmix64) for initialisation, data order and dropout:
 * deterministic on every platform, state held by the caller. */
#ifndef GRAFT_CORE_RNG_H
#define GRAFT_CORE_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The state k draws later (splitmix64's state moves by a constant per draw). */
static inline void rng_skip(uint64_t *state, uint64_t k) {
    *state += k * 0x9e3779b97f4a7c15ull;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(uint64_t *state) {
    return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0 (rejection sampling: no modulo bias). */
static inline uint64_t rng_below(uint64_t *state, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = rng_next(state);
    while (r >= limit);
    return r % n;
}

/* Fisher-Yates shuffle of idx[0..n). */
static inline void rng_shuffle(uint64_t *state, int64_t *idx, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(state, (uint64_t)i + 1);
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

#endif
