/* hash.h: a fast, portable 64-bit content hash over bytes, one-shot or streaming. */
#ifndef GRAFT_CORE_HASH_H
#define GRAFT_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Streaming state. Bytes are consumed in 32-byte stripes (four 64-bit lanes, read
 * little-endian so the result is the same on every platform); a partial stripe waits in `buf`.
 * The result depends only on the byte sequence and the seed, not on how it was split into
 * update calls. Not a cryptographic hash: it detects changes and corruption, not attacks. */
typedef struct hash64_state {
    uint64_t acc[4];
    uint8_t buf[32];
    uint32_t buf_len;
    uint64_t total_len;
    uint64_t seed;
} hash64_state;

void hash64_init(hash64_state *s, uint64_t seed);
void hash64_update(hash64_state *s, const void *data, size_t len);
uint64_t hash64_final(const hash64_state *s); /* does not change s: updates may continue */

/* One call: hash64_init + hash64_update + hash64_final. */
uint64_t hash64(const void *data, size_t len, uint64_t seed);

/* Helpers for hashing structures field by field, independent of host byte order and padding. */
void hash64_update_u64(hash64_state *s, uint64_t v); /* 8 bytes, little-endian */
/* A string as its length (u64) then its bytes, so ("ab","c") and ("a","bc") differ; NULL hashes
 * as length 2^64-1. */
void hash64_update_str(hash64_state *s, const char *str);

#endif
