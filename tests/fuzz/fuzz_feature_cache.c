/* fuzz_feature_cache.c: libFuzzer target: the feature-cache file reader. Byte 0 of the input
 * holds flags (bit 0: recompute the header checksum, bit 1: the payload checksum, so mutations
 * get past them), the rest is the file. The key, sample count, dim and storage are taken from
 * the file's own header (clamped small) so that a well-formed file is reused; every row is read,
 * one written, and a reopen after close must reuse the file. GRAFT_FUZZ_MAKE_SEED=FILE makes a
 * seed input and exits. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "train/feature_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The header layout of src/train/feature_cache.c (offsets of the fields the harness reads). */
enum { F_DTYPE = 20, F_MODEL = 24, F_N = 40, F_DIM = 48, F_CUT_LEN = 60, F_PREP_LEN = 64 };
enum { F_FIXED = 96, F_MAX = 256 };

static uint64_t get_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void run(const uint8_t *file, size_t size, uint8_t flags) {
    uint8_t *f = malloc(size ? size : 1);
    if (!f) return;
    memcpy(f, file, size);
    char cut[F_MAX + 1] = "", prep[F_MAX + 1] = "";
    int64_t n = 4, dim = 3;
    uint64_t model = 1;
    graft_dtype storage = GRAFT_DTYPE_F32;
    feature_cache_reseal(f, size, flags & 1, flags & 2);
    if (size >= F_FIXED) {
        size_t cl = get_le(f + F_CUT_LEN, 4), pl = get_le(f + F_PREP_LEN, 4);
        if (cl <= F_MAX && pl <= F_MAX && F_FIXED + cl + pl <= size) {
            memcpy(cut, f + F_FIXED, cl), cut[cl] = '\0';
            memcpy(prep, f + F_FIXED + cl, pl), prep[pl] = '\0';
        }
        model = get_le(f + F_MODEL, 8);
        uint64_t fn = get_le(f + F_N, 8), fd = get_le(f + F_DIM, 8);
        if (fn >= 1 && fn <= 256) n = (int64_t)fn;
        if (fd >= 1 && fd <= 64) dim = (int64_t)fd;
        storage = (graft_dtype)get_le(f + F_DTYPE, 4);
    }
    const char *path = fuzz_temp_file(f, size, ".cache");
    free(f);
    if (!path) return;
    feature_cache_key key = {model, cut, prep};
    feature_cache *fc = NULL;
    feature_cache_reason why;
    graft_err e;
    if (feature_cache_open(&fc, &why, path, &key, n, dim, storage, &e) != GRAFT_OK) return;
    float row[64] = {0};
    bool found;
    for (int64_t i = 0; i < n; i++) feature_cache_get(fc, row, &found, i, &e);
    row[0] = 1.5f;
    bool put = feature_cache_put(fc, 0, row, &e) == GRAFT_OK;
    if (feature_cache_close(fc, &e) != GRAFT_OK) return;
    if (feature_cache_open(&fc, &why, path, &key, n, dim, storage, &e) != GRAFT_OK) return;
    /* What was closed cleanly reopens as it was left. */
    if (why != FEATURE_CACHE_REUSED || (put && !feature_cache_has(fc, 0))) __builtin_trap();
    feature_cache_close(fc, &e);
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    run(data + 1, size - 1, data[0]);
    return 0;
}

/* A seed: a cache of 4 x 3 f32 rows, two present, behind a flags byte of 0. */
static int make_seed(const char *out) {
    const char *path = fuzz_temp_file(NULL, 0, ".seed");
    feature_cache_key key = {0x1234, "pool|avg", "resize=8"};
    feature_cache *fc = NULL;
    graft_err e;
    remove(path);
    if (feature_cache_open(&fc, NULL, path, &key, 4, 3, GRAFT_DTYPE_F32, &e) != GRAFT_OK) return 1;
    const float r[3] = {1, 2, 3};
    feature_cache_put(fc, 1, r, &e), feature_cache_put(fc, 3, r, &e);
    if (feature_cache_close(fc, &e) != GRAFT_OK) return 1;
    FILE *in = fopen(path, "rb"), *o = fopen(out, "wb");
    if (!in || !o) return 1;
    fputc(0, o);
    int c;
    while ((c = fgetc(in)) != EOF) fputc(c, o);
    fclose(in);
    remove(path);
    return fclose(o) != 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *seed = getenv("GRAFT_FUZZ_MAKE_SEED");
    if (seed && *seed) exit(make_seed(seed));
    return 0;
}
