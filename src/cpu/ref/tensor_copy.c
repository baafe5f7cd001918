/* tensor_copy.c: strided N-d copies and element fills for the data-movement reference kernels;
 * they work on raw bytes so that every dtype goes through the same code. */
#include "tensor_copy.h"

#include <string.h>

#include "graft.h"

/* Drop size-1 axes and merge neighbours that are contiguous with each other, so the loops run
 * over as few and as long axes as possible. Returns the new rank, or -1 for an empty view. */
static int simplify_view(int ndim, const int64_t *dims, const int64_t *strides, int64_t *d,
                         int64_t *s) {
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0) return -1;
        if (dims[i] == 1) continue;
        if (n > 0 && s[n - 1] == strides[i] * dims[i]) {
            d[n - 1] *= dims[i];
            s[n - 1] = strides[i];
        } else {
            d[n] = dims[i];
            s[n] = strides[i];
            n++;
        }
    }
    return n;
}

/* Fixed-size memcpy compiles to one load and store, without alignment or aliasing worries. */
#define GATHER_ROW(SIZE)                                                                           \
    for (int64_t k = 0; k < n; k++) memcpy(dst + k * (SIZE), src + k * stride * (SIZE), (SIZE))

static void copy_row(char *dst, const char *src, int64_t n, int64_t stride, size_t elem) {
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * elem);
        return;
    }
    switch (elem) {
    case 1: GATHER_ROW(1); break;
    case 2: GATHER_ROW(2); break;
    case 4: GATHER_ROW(4); break;
    case 8: GATHER_ROW(8); break;
    default:
        for (int64_t k = 0; k < n; k++)
            memcpy(dst + k * (int64_t)elem, src + k * stride * (int64_t)elem, elem);
    }
}

/* Rows r0..r1-1 of the view (a row: the last axis), walking the outer axes as an odometer. */
static void copy_rows(char *dst, const char *src, size_t elem, int n, const int64_t *d,
                      const int64_t *s, int64_t r0, int64_t r1) {
    int64_t idx[GRAFT_MAX_DIMS] = {0}, off = 0, rem = r0;
    for (int k = n - 2; k >= 0; k--) {
        idx[k] = rem % d[k];
        rem /= d[k];
        off += idx[k] * s[k];
    }
    int64_t inner = d[n - 1], row_bytes = inner * (int64_t)elem;
    for (int64_t r = r0; r < r1; r++) {
        copy_row(dst + r * row_bytes, src + off * (int64_t)elem, inner, s[n - 1], elem);
        for (int k = n - 2; k >= 0; k--) {
            off += s[k];
            if (++idx[k] < d[k]) break;
            off -= s[k] * d[k];
            idx[k] = 0;
        }
    }
}

void strided_copy(void *dst, const void *src, size_t elem, int ndim, const int64_t *dims,
                  const int64_t *strides) {
    int64_t d[GRAFT_MAX_DIMS], s[GRAFT_MAX_DIMS];
    int n = simplify_view(ndim, dims, strides, d, s);
    if (n < 0) return;
    if (n == 0) {
        memcpy(dst, src, elem);
        return;
    }
    int64_t rows = 1;
    for (int k = 0; k < n - 1; k++) rows *= d[k];
    int64_t total = rows * d[n - 1];
    int64_t chunks = total >= TENSOR_PARALLEL_MIN ? (rows < 256 ? rows : 256) : 1;
    int64_t per = rows / chunks, extra = rows % chunks;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t r0 = c * per + (c < extra ? c : extra);
        int64_t r1 = r0 + per + (c < extra ? 1 : 0);
        copy_rows(dst, src, elem, n, d, s, r0, r1);
    }
}

void fill_elements(void *dst, const void *value, size_t elem, int64_t n) {
    if (n <= 0) return;
    char *out = dst;
    int64_t total = n * (int64_t)elem, done = (int64_t)elem;
    memcpy(out, value, elem);
    /* Doubling copies: log2(n) memcpy calls, each from the already filled prefix. */
    while (done < total) {
        int64_t chunk = done < total - done ? done : total - done;
        memcpy(out + done, out, (size_t)chunk);
        done += chunk;
    }
}
