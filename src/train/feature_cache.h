/* feature_cache.h: per-sample backbone features kept in memory or in a checked, mmapped file. */
#ifndef GRAFT_TRAIN_FEATURE_CACHE_H
#define GRAFT_TRAIN_FEATURE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../graph/ir.h"

/* What the features depend on. Any difference makes a cache file stale. */
typedef struct feature_cache_key {
    uint64_t model_hash; /* feature_cache_model_hash() of the (uncut) model */
    const char *cut;     /* the cut point, e.g. "resnetv22_pool1_fwd|avg" (NULL: "") */
    const char
        *preprocessing; /* the preprocessing, e.g. "resize=224;mean=...;std=..." (NULL: "") */
} feature_cache_key;

/* What feature_cache_open found. */
typedef enum feature_cache_reason {
    FEATURE_CACHE_NEW = 0,                 /* in memory, or no file at the path */
    FEATURE_CACHE_REUSED = 1,              /* the file matched and verified: its rows are present */
    FEATURE_CACHE_REBUILT_KEY_CHANGED = 2, /* model hash, cut or preprocessing differ */
    FEATURE_CACHE_REBUILT_SHAPE_CHANGED = 3, /* sample count, dim or storage dtype differ */
    FEATURE_CACHE_REBUILT_CORRUPT = 4,       /* bad magic/version, truncated, checksum mismatch or a
                                                write that never finished (crash) */
} feature_cache_reason;

const char *feature_cache_reason_str(feature_cache_reason r);

typedef struct feature_cache feature_cache;

/* Open a cache of n_samples rows of dim floats, stored as storage (F32, F16 or BF16).
 * path NULL: in memory (reason NEW). Otherwise the file at path is reused when its header
 * matches key, n_samples, dim and storage and both checksums verify; in every other case it is
 * replaced by a fresh, empty file and *reason (and feature_cache_reason_detail) says why.
 * File layout (header fields little-endian; rows in host float order, recorded in the header):
 *   header: magic "GRAFTFC\0", version, header size, endianness tag, model hash, key hash,
 *           n, dim, storage dtype, state (clean/dirty), present count, payload checksum,
 *           string lengths, header checksum, then the cut and preprocessing strings, padded to
 *           4096 bytes; payload: a present-bitmap (1 bit per sample, padded to 8 bytes), then
 *           n * dim values.
 * The header says "dirty" from the first change until feature_cache_sync/close has flushed the
 * payload and written its checksum, so a crash mid-way leaves a file that reopens as CORRUPT.
 * The file is locked (flock) while open: a second opener gets GRAFT_E_IO. reason may be NULL. */
graft_status feature_cache_open(feature_cache **out, feature_cache_reason *reason, const char *path,
                                const feature_cache_key *key, int64_t n_samples, int64_t dim,
                                graft_dtype storage, graft_err *e);
/* The file name of the set a key and storage dtype make, "features-<16 hex digits>.cache" (a
 * hash of both), for a folder of caches where each set keeps its own file. */
void feature_cache_file_name(char *out, size_t size, const feature_cache_key *key,
                             graft_dtype storage);
/* Flush a file cache: payload, then checksums and a "clean" header. No-op for memory caches. */
graft_status feature_cache_sync(feature_cache *fc, graft_err *e);
/* Sync (for files), unmap and free. NULL is allowed. Returns the sync status. */
graft_status feature_cache_close(feature_cache *fc, graft_err *e);

/* Row i present? (false for i out of range.) */
bool feature_cache_has(const feature_cache *fc, int64_t i);
/* Store row i (converted to the storage dtype; overwrites an existing row). */
graft_status feature_cache_put(feature_cache *fc, int64_t i, const float *features /* (dim) */,
                               graft_err *e);
/* Store rows idx[0..m) from features (m, dim): one write per run of consecutive indices into a
 * file cache. A write that fails (a full disk) is GRAFT_E_IO naming the rows; rows before it are
 * stored. */
graft_status feature_cache_put_rows(feature_cache *fc, const int64_t *idx /* (m) */, int64_t m,
                                    const float *features /* (m, dim) */, graft_err *e);
/* Read row i into out when present (*found true, counts a hit); otherwise *found is false, out is
 * untouched and a miss is counted. Errors only for bad arguments. */
graft_status feature_cache_get(feature_cache *fc, float *out /* (dim) */, bool *found, int64_t i,
                               graft_err *e);

/* Rows idx[0..m) into out (m, dim), on all threads for a large batch: the present ones read (and
 * counted as hits), the others left untouched (misses); *found receives how many were present. */
graft_status feature_cache_get_rows(feature_cache *fc, float *out /* (m, dim) */,
                                    const int64_t *idx /* (m) */, int64_t m, int64_t *found,
                                    graft_err *e);

bool feature_cache_complete(const feature_cache *fc); /* every row present */
int64_t feature_cache_count(const feature_cache *fc); /* rows present */
int64_t feature_cache_hits(const feature_cache *fc);
int64_t feature_cache_misses(const feature_cache *fc);
int64_t feature_cache_dim(const feature_cache *fc);
int64_t feature_cache_n_samples(const feature_cache *fc);
graft_dtype feature_cache_storage(const feature_cache *fc);
feature_cache_reason feature_cache_open_reason(const feature_cache *fc);
const char *feature_cache_reason_detail(const feature_cache *fc); /* human-readable why */

/* Content hash of a graph: opsets, every value (name, dtype, shape, constant bytes), every live
 * node (op type, domain, name, attributes, input/output value indices) and the graph inputs and
 * outputs. A changed weight byte, op, attribute or cut changes it. */
uint64_t feature_cache_model_hash(const ir_graph *g);

/* Recompute the checksums of a cache file's bytes in memory (the header's and/or the payload's),
 * so that a fuzzer's mutations reach the checks behind them. */
void feature_cache_reseal(uint8_t *file, size_t size, bool header, bool payload);

#endif
