/* test_feature_cache_util.h: the feature cache tests' rows (N of D known floats), temporary
 * paths and helpers, shared by test_feature_cache.c and test_feature_cache_rows.c. */
#ifndef GRAFT_TEST_FEATURE_CACHE_UTIL_H
#define GRAFT_TEST_FEATURE_CACHE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "test_util.h"
#include "train/feature_cache.h"

#define N 37
#define D 19

static float feat(int64_t i, int64_t k) {
    return sinf((float)(i * 31 + k) * 0.37f) * (float)(1 + k % 5) + (float)i * 0.01f;
}

static void row(float *out, int64_t i) {
    for (int64_t k = 0; k < D; k++) out[k] = feat(i, k);
}

/* ---- cache ---- */

static const char *tmp_path(char *buf, size_t size, const char *tag) {
    snprintf(buf, size, "/tmp/graft_test_fc_%d_%s.bin", (int)getpid(), tag);
    return buf;
}

/* Fill rows [lo, hi) of fc. */
static int fill(feature_cache *fc, int64_t lo, int64_t hi) {
    float r[D];
    graft_err e = {0};
    for (int64_t i = lo; i < hi; i++) {
        row(r, i);
        if (feature_cache_put(fc, i, r, &e) != GRAFT_OK) return 0;
    }
    return 1;
}

/* Largest |got - want| / max(|want|, tiny) over all present rows; -1 when a row is missing. */
static double max_rel_err(feature_cache *fc, int64_t n) {
    double worst = 0;
    float got[D], want[D];
    for (int64_t i = 0; i < n; i++) {
        bool found = false;
        if (feature_cache_get(fc, got, &found, i, NULL) != GRAFT_OK || !found) return -1;
        row(want, i);
        for (int k = 0; k < D; k++) {
            double d = fabs((double)got[k] - want[k]) / fmax(fabs(want[k]), 1e-3);
            if (d > worst) worst = d;
        }
    }
    return worst;
}

static feature_cache *open_file(const char *path, const feature_cache_key *key, graft_dtype storage,
                                feature_cache_reason *why) {
    feature_cache *fc = NULL;
    graft_err e = {0};
    if (feature_cache_open(&fc, why, path, key, N, D, storage, &e) != GRAFT_OK) {
        printf("  open %s: %s\n", path, e.msg);
        return NULL;
    }
    return fc;
}

#endif
