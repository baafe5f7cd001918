/* feature_cache.c: the feature cache (memory or mmapped file with checksummed header) and the
 * model content hash that keys it. */
#include "feature_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/half.h"
#include "../core/hash.h"
#include "../core/tensor.h"

#define FC_MAGIC "GRAFTFC" /* 8 bytes with the NUL */
#define FC_VERSION 2u      /* 2: the payload checksum over 16 MiB chunks (1: one stream) */
#define FC_FIXED 96u       /* bytes of fixed header fields */
#define FC_ALIGN 4096u     /* header padded to this, so the payload is page aligned */
#define FC_MAX_STR 65536u  /* longest cut / preprocessing string */
#define FC_ENDIAN_TAG 0x01020304u
#define FC_STATE_CLEAN 1u
#define FC_STATE_DIRTY 2u
#define FC_SEED 0x6772616674666331ull /* "graftfc1" */

/* Fixed header field offsets. */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 8,
    OFF_HEADER_SIZE = 12,
    OFF_ENDIAN = 16,
    OFF_DTYPE = 20,
    OFF_MODEL_HASH = 24,
    OFF_KEY_HASH = 32,
    OFF_N = 40,
    OFF_DIM = 48,
    OFF_STATE = 56,
    OFF_CUT_LEN = 60,
    OFF_PREP_LEN = 64,
    OFF_PRESENT = 72,
    OFF_PAYLOAD_SUM = 80,
    OFF_HEADER_SUM = 88
};

struct feature_cache {
    int64_t n, dim;
    graft_dtype storage;
    size_t elem_bytes, row_bytes;
    size_t bitmap_bytes, payload_bytes; /* payload = bitmap + rows */
    uint8_t *bitmap;                    /* (bitmap_bytes) */
    uint8_t *rows;                      /* (n, dim) of storage */
    int64_t present, hits, misses;
    /* memory caches */
    uint8_t *mem;
    /* file caches */
    int fd; /* -1 for memory caches */
    uint8_t *map;
    size_t map_bytes, header_bytes;
    bool dirty;
    uint64_t model_hash, key_hash;
    char *cut, *prep;
    feature_cache_reason reason;
    char detail[256];
};

const char *feature_cache_reason_str(feature_cache_reason r) {
    switch (r) {
    case FEATURE_CACHE_NEW:
        return "new";
    case FEATURE_CACHE_REUSED:
        return "reused";
    case FEATURE_CACHE_REBUILT_KEY_CHANGED:
        return "rebuilt: key changed";
    case FEATURE_CACHE_REBUILT_SHAPE_CHANGED:
        return "rebuilt: shape or storage changed";
    case FEATURE_CACHE_REBUILT_CORRUPT:
        return "rebuilt: corrupt or incomplete";
    }
    return "unknown";
}

/* ---- little-endian field access ---- */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t key_hash_of(uint64_t model_hash, const char *cut, const char *prep) {
    hash64_state s;
    hash64_init(&s, FC_SEED);
    hash64_update_u64(&s, model_hash);
    hash64_update_str(&s, cut);
    hash64_update_str(&s, prep);
    return hash64_final(&s);
}

void feature_cache_file_name(char *out, size_t size, const feature_cache_key *key,
                             graft_dtype storage) {
    hash64_state s;
    hash64_init(&s, FC_SEED ^ 3);
    hash64_update_u64(&s, key_hash_of(key->model_hash, key->cut ? key->cut : "",
                                      key->preprocessing ? key->preprocessing : ""));
    hash64_update_u64(&s, (uint64_t)storage);
    snprintf(out, size, "features-%016llx.cache", (unsigned long long)hash64_final(&s));
}

/* Checksum of a header of `len` bytes, its own checksum field counted as zero. */
static uint64_t header_checksum(const uint8_t *h, size_t len) {
    hash64_state s;
    hash64_init(&s, FC_SEED ^ 1);
    hash64_update(&s, h, OFF_HEADER_SUM);
    hash64_update_u64(&s, 0);
    hash64_update(&s, h + OFF_HEADER_SUM + 8, len - OFF_HEADER_SUM - 8);
    return hash64_final(&s);
}

#define FC_CHUNK ((size_t)16 << 20) /* the payload checksum's pieces, hashed in parallel */

static uint64_t chunk_sum(const uint8_t *p, size_t total, size_t i) {
    size_t at = i * FC_CHUNK, len = total - at < FC_CHUNK ? total - at : FC_CHUNK;
    return hash64(p + at, len, FC_SEED ^ 2 ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull));
}

/* The payload's checksum: each 16 MiB chunk hashed (on all threads; a million rows are
 * gigabytes, ~1 s a pass on one core), then the chunks' hashes and the length hashed in order:
 * the same value at any thread count. */
static uint64_t payload_checksum(const feature_cache *fc) {
    size_t total = fc->payload_bytes, n = (total + FC_CHUNK - 1) / FC_CHUNK;
    uint64_t *sums = malloc(sizeof(uint64_t) * (n + 1));
    hash64_state s;
    hash64_init(&s, FC_SEED ^ 3);
    if (sums) {
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
        for (size_t i = 0; i < n; i++) sums[i] = chunk_sum(fc->bitmap, total, i);
    }
    for (size_t i = 0; i < n; i++)
        hash64_update_u64(&s, sums ? sums[i] : chunk_sum(fc->bitmap, total, i));
    hash64_update_u64(&s, (uint64_t)total);
    free(sums);
    return hash64_final(&s);
}

static int64_t popcount_bytes(const uint8_t *b, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++)
        for (uint8_t x = b[i]; x; x &= (uint8_t)(x - 1)) c++;
    return c;
}

/* Fill the header at fc->map from fc's fields (state and checksums as given). */
static void write_header(feature_cache *fc, uint32_t state, uint64_t payload_sum) {
    uint8_t *h = fc->map;
    size_t cl = strlen(fc->cut), pl = strlen(fc->prep);
    uint32_t endian = FC_ENDIAN_TAG;
    memset(h, 0, fc->header_bytes);
    memcpy(h + OFF_MAGIC, FC_MAGIC, 8);
    put_u32(h + OFF_VERSION, FC_VERSION);
    put_u32(h + OFF_HEADER_SIZE, (uint32_t)fc->header_bytes);
    memcpy(h + OFF_ENDIAN, &endian, 4); /* host order: tells a foreign-endian reader to rebuild */
    put_u32(h + OFF_DTYPE, (uint32_t)fc->storage);
    put_u64(h + OFF_MODEL_HASH, fc->model_hash);
    put_u64(h + OFF_KEY_HASH, fc->key_hash);
    put_u64(h + OFF_N, (uint64_t)fc->n);
    put_u64(h + OFF_DIM, (uint64_t)fc->dim);
    put_u32(h + OFF_STATE, state);
    put_u32(h + OFF_CUT_LEN, (uint32_t)cl);
    put_u32(h + OFF_PREP_LEN, (uint32_t)pl);
    put_u64(h + OFF_PRESENT, (uint64_t)fc->present);
    put_u64(h + OFF_PAYLOAD_SUM, payload_sum);
    memcpy(h + FC_FIXED, fc->cut, cl);
    memcpy(h + FC_FIXED + cl, fc->prep, pl);
    put_u64(h + OFF_HEADER_SUM, header_checksum(h, FC_FIXED + cl + pl));
}

static graft_status sync_header(feature_cache *fc, graft_err *e) {
    if (msync(fc->map, fc->header_bytes, MS_SYNC) != 0)
        return err_set(e, GRAFT_E_IO, "feature cache: msync failed: %s", strerror(errno));
    return GRAFT_OK;
}

/* ---- validation of an existing file ---- */

#define REJECT(r, ...)                                                                             \
    do {                                                                                           \
        snprintf(fc->detail, sizeof fc->detail, __VA_ARGS__);                                      \
        return (r);                                                                                \
    } while (0)

/* Check the header at h (the first `avail` bytes of a file of file_size bytes) against fc. */
static feature_cache_reason check_header(feature_cache *fc, const uint8_t *h, size_t avail,
                                         uint64_t file_size) {
    const feature_cache_reason bad = FEATURE_CACHE_REBUILT_CORRUPT;
    if (avail < FC_FIXED) REJECT(bad, "file too short for a header (%zu bytes)", avail);
    if (memcmp(h + OFF_MAGIC, FC_MAGIC, 8) != 0) REJECT(bad, "not a graft feature cache (magic)");
    if (get_u32(h + OFF_VERSION) != FC_VERSION)
        REJECT(get_u32(h + OFF_VERSION) < FC_VERSION ? FEATURE_CACHE_REBUILT_SHAPE_CHANGED : bad,
               "format version %u%s, expected %u", get_u32(h + OFF_VERSION),
               get_u32(h + OFF_VERSION) < FC_VERSION ? " from an older graft" : "", FC_VERSION);
    uint32_t endian;
    memcpy(&endian, h + OFF_ENDIAN, 4);
    if (endian != FC_ENDIAN_TAG) REJECT(bad, "written on a host of other byte order");
    uint64_t cl = get_u32(h + OFF_CUT_LEN), pl = get_u32(h + OFF_PREP_LEN);
    uint64_t hsize = get_u32(h + OFF_HEADER_SIZE);
    if (cl > FC_MAX_STR || pl > FC_MAX_STR || FC_FIXED + cl + pl > hsize || hsize > avail)
        REJECT(bad, "header sizes inconsistent or header truncated");
    if (header_checksum(h, FC_FIXED + cl + pl) != get_u64(h + OFF_HEADER_SUM))
        REJECT(bad, "header checksum mismatch");
    const char *cut = (const char *)h + FC_FIXED, *prep = cut + cl;
    if (get_u64(h + OFF_MODEL_HASH) != fc->model_hash)
        REJECT(FEATURE_CACHE_REBUILT_KEY_CHANGED, "model hash %016llx, expected %016llx",
               (unsigned long long)get_u64(h + OFF_MODEL_HASH), (unsigned long long)fc->model_hash);
    if (cl != strlen(fc->cut) || memcmp(cut, fc->cut, cl) != 0)
        REJECT(FEATURE_CACHE_REBUILT_KEY_CHANGED, "cut '%.*s', expected '%s'",
               (int)(cl > 80 ? 80 : cl), cut, fc->cut);
    if (pl != strlen(fc->prep) || memcmp(prep, fc->prep, pl) != 0)
        REJECT(FEATURE_CACHE_REBUILT_KEY_CHANGED, "preprocessing changed");
    if ((int64_t)get_u64(h + OFF_N) != fc->n || (int64_t)get_u64(h + OFF_DIM) != fc->dim ||
        get_u32(h + OFF_DTYPE) != (uint32_t)fc->storage)
        REJECT(FEATURE_CACHE_REBUILT_SHAPE_CHANGED,
               "file has %lld x %lld %s, expected %lld x %lld %s", (long long)get_u64(h + OFF_N),
               (long long)get_u64(h + OFF_DIM),
               graft_dtype_name((graft_dtype)get_u32(h + OFF_DTYPE)), (long long)fc->n,
               (long long)fc->dim, graft_dtype_name(fc->storage));
    if (hsize != fc->header_bytes)
        REJECT(bad, "header size %llu, expected %zu", (unsigned long long)hsize, fc->header_bytes);
    if (get_u32(h + OFF_STATE) != FC_STATE_CLEAN)
        REJECT(bad, "an earlier writer did not finish (crash or still open)");
    if (file_size != fc->map_bytes)
        REJECT(bad, "file is %llu bytes, expected %zu (truncated?)", (unsigned long long)file_size,
               fc->map_bytes);
    return FEATURE_CACHE_REUSED;
}

/* Try to reuse the open file fc->fd; on success fc->map is mapped and verified. */
static feature_cache_reason try_reuse(feature_cache *fc, uint64_t file_size) {
    uint8_t *h = calloc(1, fc->header_bytes);
    if (!h) REJECT(FEATURE_CACHE_REBUILT_CORRUPT, "out of memory reading the header");
    size_t want = file_size < fc->header_bytes ? (size_t)file_size : fc->header_bytes;
    ssize_t got = pread(fc->fd, h, want, 0);
    feature_cache_reason r = check_header(fc, h, got < 0 ? 0 : (size_t)got, file_size);
    uint64_t present = get_u64(h + OFF_PRESENT), sum = get_u64(h + OFF_PAYLOAD_SUM);
    free(h);
    if (r != FEATURE_CACHE_REUSED) return r;
    fc->map = mmap(NULL, fc->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fc->fd, 0);
    if (fc->map == MAP_FAILED) {
        fc->map = NULL;
        REJECT(FEATURE_CACHE_REBUILT_CORRUPT, "mmap failed: %s", strerror(errno));
    }
    fc->bitmap = fc->map + fc->header_bytes;
    fc->rows = fc->bitmap + fc->bitmap_bytes;
    if (payload_checksum(fc) != sum)
        REJECT(FEATURE_CACHE_REBUILT_CORRUPT, "payload checksum mismatch");
    fc->present = popcount_bytes(fc->bitmap, fc->bitmap_bytes);
    if ((uint64_t)fc->present != present)
        REJECT(FEATURE_CACHE_REBUILT_CORRUPT, "present count %llu, bitmap has %lld",
               (unsigned long long)present, (long long)fc->present);
    snprintf(fc->detail, sizeof fc->detail, "reused %lld of %lld rows", (long long)fc->present,
             (long long)fc->n);
    return FEATURE_CACHE_REUSED;
}

/* The file's blocks allocated up front (fallocate; unwritten extents, no zeroing on ext4 or
 * XFS): a disk without room for the cache is an error at the open, naming the size. Unreserved,
 * a store or a read of a hole through the mapping fails with SIGBUS once the disk is full (reads
 * too on tmpfs, which allocates a page for them). A file system without fallocate keeps the
 * sparse file; rows are then written with pwrite (write_rows), whose failure is an error too. */
static graft_status reserve_space(feature_cache *fc, const char *path, graft_err *e) {
    int r;
    while ((r = fallocate(fc->fd, 0, 0, (off_t)fc->map_bytes)) != 0 && errno == EINTR) {
    }
    if (r == 0 || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) /* not supported */
        return GRAFT_OK;
    int why = errno;
    int emptied = ftruncate(fc->fd, 0); /* give back what the failed reservation took */
    (void)emptied;                      /* the error to report is the reservation's */
    char size[32];
    if (fc->map_bytes < 10000000)
        snprintf(size, sizeof size, "%zu bytes", fc->map_bytes);
    else
        snprintf(size, sizeof size, "%.1f GB", (double)fc->map_bytes / 1e9);
    return err_set(e, GRAFT_E_IO,
                   "feature cache '%s': cannot reserve %s on its disk for %lld rows of %lld %s: "
                   "%s (free some space, or put --cache on another disk)",
                   path, size, (long long)fc->n, (long long)fc->dim, graft_dtype_name(fc->storage),
                   strerror(why));
}

/* The file's first `bytes` bytes set to zero with pwrite. */
static graft_status write_zeros(feature_cache *fc, const char *path, size_t bytes, graft_err *e) {
    static const uint8_t zeros[FC_ALIGN];
    for (size_t at = 0; at < bytes;) {
        size_t c = bytes - at < sizeof zeros ? bytes - at : sizeof zeros;
        ssize_t w = pwrite(fc->fd, zeros, c, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return err_set(e, GRAFT_E_IO, "feature cache '%s': writing its header: %s", path,
                           w < 0 ? strerror(errno) : "nothing written");
        at += (size_t)w;
    }
    return GRAFT_OK;
}

/* Replace the file with a fresh, empty one of the right size, marked dirty. */
static graft_status fresh_file(feature_cache *fc, const char *path, graft_err *e) {
    if (fc->map) munmap(fc->map, fc->map_bytes);
    fc->map = NULL;
    /* Reserved (which sizes a shorter file), then sized, not truncated to 0 first: ext4 flushes
     * a file truncated to 0 and rewritten when it is closed (seconds for a million rows). An old
     * file's rows stay until overwritten; the cleared bitmap says none is present. */
    TRY(reserve_space(fc, path, e));
    if (ftruncate(fc->fd, (off_t)fc->map_bytes) != 0)
        return err_set(e, GRAFT_E_IO, "feature cache '%s': cannot size the file to %zu bytes: %s",
                       path, fc->map_bytes, strerror(errno));
    TRY(write_zeros(fc, path, fc->header_bytes + fc->bitmap_bytes, e));
    fc->map = mmap(NULL, fc->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fc->fd, 0);
    if (fc->map == MAP_FAILED) {
        fc->map = NULL;
        return err_set(e, GRAFT_E_IO, "feature cache '%s': mmap failed: %s", path, strerror(errno));
    }
    fc->bitmap = fc->map + fc->header_bytes;
    fc->rows = fc->bitmap + fc->bitmap_bytes;
    fc->present = 0;
    write_header(fc, FC_STATE_DIRTY, 0);
    fc->dirty = true;
    return sync_header(fc, e);
}

/* ---- open / close ---- */

static graft_status size_layout(feature_cache *fc, graft_err *e) {
    fc->elem_bytes = graft_dtype_size(fc->storage);
    int64_t row = dtype_bytes(fc->storage, fc->dim);
    int64_t rows = row < 0 ? -1 : dims_numel(2, (const int64_t[]){fc->n, row});
    if (rows < 0 || (uint64_t)rows > SIZE_MAX / 2)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "feature cache: %lld x %lld %s is too large",
                       (long long)fc->n, (long long)fc->dim, graft_dtype_name(fc->storage));
    fc->row_bytes = (size_t)row;
    fc->bitmap_bytes = (((size_t)fc->n + 7) / 8 + 7) & ~(size_t)7;
    fc->payload_bytes = fc->bitmap_bytes + (size_t)rows;
    size_t strs = strlen(fc->cut) + strlen(fc->prep);
    fc->header_bytes = (FC_FIXED + strs + FC_ALIGN - 1) / FC_ALIGN * FC_ALIGN;
    fc->map_bytes = fc->header_bytes + fc->payload_bytes;
    return GRAFT_OK;
}

static graft_status check_args(const feature_cache_key *key, int64_t n, int64_t dim,
                               graft_dtype storage, graft_err *e) {
    if (!key) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: no key");
    if (n <= 0 || dim <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "feature cache: n_samples (%lld) and dim (%lld) must be positive",
                       (long long)n, (long long)dim);
    if (storage != GRAFT_DTYPE_F32 && storage != GRAFT_DTYPE_F16 && storage != GRAFT_DTYPE_BF16)
        return err_set(e, GRAFT_E_DTYPE, "feature cache: storage must be f32, f16 or bf16, not %s",
                       graft_dtype_name(storage));
    if ((key->cut && strlen(key->cut) > FC_MAX_STR) ||
        (key->preprocessing && strlen(key->preprocessing) > FC_MAX_STR))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "feature cache: cut or preprocessing string longer than %u bytes",
                       FC_MAX_STR);
    return GRAFT_OK;
}

static graft_status open_file(feature_cache *fc, const char *path, graft_err *e) {
    fc->fd = open(path, O_RDWR);
    bool existed = fc->fd >= 0;
    if (!existed && errno == ENOENT) fc->fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fc->fd < 0)
        return err_set(e, GRAFT_E_IO, "feature cache '%s': cannot open: %s", path, strerror(errno));
    if (flock(fc->fd, LOCK_EX | LOCK_NB) != 0)
        return err_set(e, GRAFT_E_IO, "feature cache '%s': in use by another process (%s)", path,
                       strerror(errno));
    if (existed) {
        struct stat st;
        if (fstat(fc->fd, &st) != 0)
            return err_set(e, GRAFT_E_IO, "feature cache '%s': fstat: %s", path, strerror(errno));
        fc->reason = try_reuse(fc, (uint64_t)st.st_size);
        if (fc->reason == FEATURE_CACHE_REUSED) return GRAFT_OK;
    } else {
        fc->reason = FEATURE_CACHE_NEW;
        snprintf(fc->detail, sizeof fc->detail, "no file at the path");
    }
    return fresh_file(fc, path, e);
}

graft_status feature_cache_open(feature_cache **out, feature_cache_reason *reason, const char *path,
                                const feature_cache_key *key, int64_t n_samples, int64_t dim,
                                graft_dtype storage, graft_err *e) {
    if (!out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: out is NULL");
    *out = NULL;
    TRY(check_args(key, n_samples, dim, storage, e));
    feature_cache *fc = calloc(1, sizeof *fc);
    if (!fc) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "feature cache: out of memory");
    fc->fd = -1;
    fc->n = n_samples;
    fc->dim = dim;
    fc->storage = storage;
    fc->model_hash = key->model_hash;
    fc->cut = ir_strdup(key->cut ? key->cut : "");
    fc->prep = ir_strdup(key->preprocessing ? key->preprocessing : "");
    graft_status st = GRAFT_OK;
    if (!fc->cut || !fc->prep)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "feature cache: out of memory");
    if (st == GRAFT_OK) st = size_layout(fc, e);
    fc->key_hash = key_hash_of(fc->model_hash, fc->cut, fc->prep);
    if (st == GRAFT_OK && !path) {
        fc->reason = FEATURE_CACHE_NEW;
        snprintf(fc->detail, sizeof fc->detail, "in memory");
        fc->mem = calloc(1, fc->payload_bytes);
        if (!fc->mem)
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "feature cache: cannot allocate %zu bytes",
                         fc->payload_bytes);
        fc->bitmap = fc->mem;
        fc->rows = fc->mem ? fc->mem + fc->bitmap_bytes : NULL;
    } else if (st == GRAFT_OK) {
        st = open_file(fc, path, e);
    }
    if (st != GRAFT_OK) {
        fc->dirty = false; /* nothing worth flushing */
        feature_cache_close(fc, NULL);
        return st;
    }
    if (reason) *reason = fc->reason;
    *out = fc;
    return GRAFT_OK;
}

graft_status feature_cache_sync(feature_cache *fc, graft_err *e) {
    if (!fc) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: NULL");
    if (!fc->map || !fc->dirty) return GRAFT_OK;
    /* The payload's writeback asked for, not waited for (a million rows are gigabytes: seconds
     * on a disk), then the header that vouches for it, synced. A process that dies loses
     * nothing (the kernel holds the pages); after a power loss a header that reached the disk
     * before its payload fails the payload checksum every open verifies: the cache is rebuilt. */
    if (msync(fc->map, fc->map_bytes, MS_ASYNC) != 0)
        return err_set(e, GRAFT_E_IO, "feature cache: msync failed: %s", strerror(errno));
    write_header(fc, FC_STATE_CLEAN, payload_checksum(fc));
    TRY(sync_header(fc, e));
    fc->dirty = false;
    return GRAFT_OK;
}

graft_status feature_cache_close(feature_cache *fc, graft_err *e) {
    if (!fc) return GRAFT_OK;
    graft_status st = feature_cache_sync(fc, e);
    if (fc->map) munmap(fc->map, fc->map_bytes);
    if (fc->fd >= 0) close(fc->fd);
    free(fc->mem);
    free(fc->cut);
    free(fc->prep);
    free(fc);
    return st;
}

/* ---- rows ---- */

bool feature_cache_has(const feature_cache *fc, int64_t i) {
    if (!fc || i < 0 || i >= fc->n) return false;
    return (fc->bitmap[i >> 3] >> (i & 7)) & 1;
}

static graft_status check_row(const feature_cache *fc, const void *p, int64_t i, graft_err *e) {
    if (!fc || !p) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: NULL argument");
    if (i < 0 || i >= fc->n)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "feature cache: sample index %lld out of range [0, %lld)", (long long)i,
                       (long long)fc->n);
    return GRAFT_OK;
}

/* count rows of features converted to the storage dtype into dst (count, row_bytes). */
static void store_rows(const feature_cache *fc, uint8_t *dst,
                       const float *features /* (count, dim) */, int64_t count) {
    size_t values = (size_t)(count * fc->dim);
    if (fc->storage == GRAFT_DTYPE_F32) {
        memcpy(dst, features, values * sizeof(float));
    } else if (fc->storage == GRAFT_DTYPE_BF16) {
        uint16_t *h = (uint16_t *)(void *)dst; /* rows are 2-byte aligned: page + n * 2 * dim */
        for (size_t k = 0; k < values; k++) h[k] = f32_to_bf16(features[k]);
    } else {
        uint16_t *h = (uint16_t *)(void *)dst;
        for (size_t k = 0; k < values; k++) h[k] = f32_to_f16(features[k]);
    }
}

#define FC_STAGE_BYTES ((size_t)1 << 20) /* converted rows written to the file per call */

/* Rows [first, first + count) into the file with pwrite, converted through a staging buffer
 * when the storage is not f32: the kernel copies into its page cache, where stores through the
 * mapping would take a write fault per 4 KiB page, and a full disk is an error (ENOSPC), not a
 * SIGBUS. The mapping is MAP_SHARED, so it sees the rows. */
static graft_status write_rows(feature_cache *fc, int64_t first, int64_t count,
                               const float *features /* (count, dim) */, uint8_t *stage,
                               graft_err *e) {
    int64_t per =
        fc->storage == GRAFT_DTYPE_F32 ? count : (int64_t)(FC_STAGE_BYTES / fc->row_bytes);
    if (per < 1) per = 1;
    for (int64_t done = 0; done < count;) {
        int64_t c = count - done < per ? count - done : per;
        const uint8_t *src = (const uint8_t *)(features + done * fc->dim);
        if (fc->storage != GRAFT_DTYPE_F32) {
            store_rows(fc, stage, features + done * fc->dim, c);
            src = stage;
        }
        size_t bytes = (size_t)c * fc->row_bytes;
        off_t at =
            (off_t)(fc->header_bytes + fc->bitmap_bytes + (size_t)(first + done) * fc->row_bytes);
        for (size_t put = 0; put < bytes;) {
            ssize_t w = pwrite(fc->fd, src + put, bytes - put, at + (off_t)put);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
                return err_set(e, GRAFT_E_IO, "feature cache: writing rows %lld..%lld: %s",
                               (long long)(first + done), (long long)(first + done + c - 1),
                               w < 0 ? strerror(errno) : "nothing written");
            put += (size_t)w;
        }
        done += c;
    }
    return GRAFT_OK;
}

static void mark_present(feature_cache *fc, int64_t i) {
    if (!feature_cache_has(fc, i)) {
        fc->bitmap[i >> 3] |= (uint8_t)(1u << (i & 7));
        fc->present++;
    }
}

graft_status feature_cache_put_rows(feature_cache *fc, const int64_t *idx /* (m) */, int64_t m,
                                    const float *features /* (m, dim) */, graft_err *e) {
    if (!fc || !idx || (m > 0 && !features))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: NULL argument");
    for (int64_t j = 0; j < m; j++) TRY(check_row(fc, features, idx[j], e));
    if (m <= 0) return GRAFT_OK;
    if (fc->map && !fc->dirty) { /* mark the file dirty on disk before touching the payload */
        write_header(fc, FC_STATE_DIRTY, 0);
        TRY(sync_header(fc, e));
        fc->dirty = true;
    }
    uint8_t *stage = NULL;
    if (fc->map && fc->storage != GRAFT_DTYPE_F32) {
        /* the m rows converted, or 1 MiB of them (at least one) when they are more */
        size_t bytes = (size_t)m * fc->row_bytes, most = FC_STAGE_BYTES;
        if (most < fc->row_bytes) most = fc->row_bytes;
        stage = malloc(bytes < most ? bytes : most);
        if (!stage) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "feature cache: out of memory");
    }
    graft_status st = GRAFT_OK;
    for (int64_t j = 0; j < m && st == GRAFT_OK;) {
        int64_t run = 1; /* rows of consecutive sample indices go in one piece */
        while (j + run < m && idx[j + run] == idx[j] + run) run++;
        const float *src = features + j * fc->dim;
        if (fc->map)
            st = write_rows(fc, idx[j], run, src, stage, e);
        else
            store_rows(fc, fc->rows + (size_t)idx[j] * fc->row_bytes, src, run);
        for (int64_t k = 0; k < run && st == GRAFT_OK; k++) mark_present(fc, idx[j] + k);
        j += run;
    }
    free(stage);
    return st;
}

graft_status feature_cache_put(feature_cache *fc, int64_t i, const float *features /* (dim) */,
                               graft_err *e) {
    return feature_cache_put_rows(fc, &i, 1, features, e);
}

/* One row of the storage dtype at src into floats (dim). */
static void load_row(const feature_cache *fc, float *out /* (dim) */, const uint8_t *src) {
    const uint16_t *h = (const uint16_t *)(const void *)src; /* 2-byte aligned rows */
    if (fc->storage == GRAFT_DTYPE_F32)
        memcpy(out, src, fc->row_bytes);
    else if (fc->storage == GRAFT_DTYPE_BF16)
        for (int64_t k = 0; k < fc->dim; k++) out[k] = bf16_to_f32(h[k]);
    else
        for (int64_t k = 0; k < fc->dim; k++) out[k] = f16_to_f32(h[k]);
}

/* A read this large goes on all threads: a whole warm set at once (extract.c), not a batch of
 * 256 ResNet-50 rows (512 Ki values), whose fork and join on a loaded machine cost more than
 * the work (20,000 rows: 0.03 s a row at a time, 0.12-0.46 s a batch at a time in parallel while
 * CI ran beside it, 0.007 s quiet). */
#define FC_PARALLEL_VALUES ((int64_t)1 << 22)

/* Rows idx[0..m) that are present into out; returns how many were. */
static int64_t load_present(const feature_cache *fc, float *out /* (m, dim) */,
                            const int64_t *idx /* (m) */, int64_t m) {
    int64_t hits = 0;
    for (int64_t j = 0; j < m; j++) {
        if (!feature_cache_has(fc, idx[j])) continue;
        load_row(fc, out + j * fc->dim, fc->rows + (size_t)idx[j] * fc->row_bytes);
        hits++;
    }
    return hits;
}

graft_status feature_cache_get_rows(feature_cache *fc, float *out /* (m, dim) */,
                                    const int64_t *idx /* (m) */, int64_t m, int64_t *found,
                                    graft_err *e) {
    if (!fc || !idx || !found || (m > 0 && !out))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: NULL argument");
    for (int64_t j = 0; j < m; j++) TRY(check_row(fc, out, idx[j], e));
    int64_t hits = 0;
    if (m * fc->dim < FC_PARALLEL_VALUES) { /* no parallel region at all: a row costs ~1 us */
        hits = load_present(fc, out, idx, m);
    } else {
        const int64_t piece = 256; /* rows a thread takes at a time */
#pragma omp parallel for schedule(static) reduction(+ : hits)
        for (int64_t j = 0; j < m; j += piece)
            hits += load_present(fc, out + j * fc->dim, idx + j, m - j < piece ? m - j : piece);
    }
    fc->hits += hits, fc->misses += m - hits;
    *found = hits;
    return GRAFT_OK;
}

graft_status feature_cache_get(feature_cache *fc, float *out /* (dim) */, bool *found, int64_t i,
                               graft_err *e) {
    if (!found) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "feature cache: found is NULL");
    int64_t n = 0;
    TRY(feature_cache_get_rows(fc, out, &i, 1, &n, e));
    *found = n == 1;
    return GRAFT_OK;
}

bool feature_cache_complete(const feature_cache *fc) {
    return fc && fc->present == fc->n;
}
int64_t feature_cache_count(const feature_cache *fc) {
    return fc ? fc->present : 0;
}
int64_t feature_cache_hits(const feature_cache *fc) {
    return fc ? fc->hits : 0;
}
int64_t feature_cache_misses(const feature_cache *fc) {
    return fc ? fc->misses : 0;
}
int64_t feature_cache_dim(const feature_cache *fc) {
    return fc ? fc->dim : 0;
}
int64_t feature_cache_n_samples(const feature_cache *fc) {
    return fc ? fc->n : 0;
}
graft_dtype feature_cache_storage(const feature_cache *fc) {
    return fc ? fc->storage : GRAFT_DTYPE_UNDEFINED;
}
feature_cache_reason feature_cache_open_reason(const feature_cache *fc) {
    return fc ? fc->reason : FEATURE_CACHE_NEW;
}
const char *feature_cache_reason_detail(const feature_cache *fc) {
    return fc ? fc->detail : "";
}

void feature_cache_reseal(uint8_t *file, size_t size, bool header, bool payload) {
    if (size < FC_FIXED) return;
    if (payload && size > FC_ALIGN)
        put_u64(file + OFF_PAYLOAD_SUM, hash64(file + FC_ALIGN, size - FC_ALIGN, FC_SEED ^ 2));
    size_t len = FC_FIXED + (size_t)get_u32(file + OFF_CUT_LEN) + get_u32(file + OFF_PREP_LEN);
    if (header && len <= size) put_u64(file + OFF_HEADER_SUM, header_checksum(file, len));
}
