/* tensor_copy.c: strided N-d copies and element fills for the data-movement reference kernels;
 * they work on raw bytes so that every dtype goes through the same code. */
#include "tensor_copy.h"

#include <string.h>

#include "../../ops/shape_plan.h"
#include "graft.h"

/* Fixed-size memcpy compiles to one load and store, without alignment or aliasing worries. */
#define GATHER_ROW(SIZE)                                                                           \
    for (int64_t k = 0; k < n; k++) memcpy(dst + k * (SIZE), src + k * stride * (SIZE), (SIZE))

static void copy_row(char *dst, const char *src, int64_t n, int64_t stride, size_t elem) {
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * elem);
        return;
    }
    switch (elem) {
    case 1:
        GATHER_ROW(1);
        break;
    case 2:
        GATHER_ROW(2);
        break;
    case 4:
        GATHER_ROW(4);
        break;
    case 8:
        GATHER_ROW(8);
        break;
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

/* Side of the square blocks of the tiled (transposing) copy: 16x16 elements of up to 8 bytes
 * read and written stay within L1. */
#define TILE 16

#define TILE_BLOCK(SIZE)                                                                           \
    for (int64_t i = 0; i < ni; i++) {                                                             \
        for (int64_t j = 0; j < nj; j++)                                                           \
            memcpy(dst + (i * dst_row + j) * (SIZE), src + (i + j * src_col) * (SIZE), (SIZE));    \
    }

/* One block: dst rows i are dst_row apart and dense along j; src is dense along i and src_col
 * apart along j. */
static void copy_block(char *dst, const char *src, size_t elem, int64_t ni, int64_t nj,
                       int64_t dst_row, int64_t src_col) {
    switch (elem) {
    case 1:
        TILE_BLOCK(1)
        break;
    case 2:
        TILE_BLOCK(2)
        break;
    case 4:
        TILE_BLOCK(4)
        break;
    case 8:
        TILE_BLOCK(8)
        break;
    default:
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < nj; j++)
                memcpy(dst + (i * dst_row + j) * (int64_t)elem,
                       src + (i + j * src_col) * (int64_t)elem, elem);
    }
}

/* A transposing view: the last axis is strided in src while axis k is contiguous there. Row by
 * row copying would touch a new cache line per element; TILE x TILE blocks over axes k and the
 * last one keep both sides in cache. */
static void copy_tiled(char *dst, const char *src, size_t elem, int n, const int64_t *d,
                       const int64_t *s, int k) {
    int64_t dense[GRAFT_MAX_DIMS], od[GRAFT_MAX_DIMS], o_src[GRAFT_MAX_DIMS], o_dst[GRAFT_MAX_DIMS];
    int no = 0;
    dense[n - 1] = 1;
    for (int a = n - 2; a >= 0; a--) dense[a] = dense[a + 1] * d[a + 1];
    for (int a = 0; a < n - 1; a++) {
        if (a == k) continue;
        od[no] = d[a];
        o_src[no] = s[a];
        o_dst[no] = dense[a];
        no++;
    }
    int64_t outer = 1, rows = d[k], cols = d[n - 1];
    for (int a = 0; a < no; a++) outer *= od[a];
    int64_t ti = (rows + TILE - 1) / TILE, tj = (cols + TILE - 1) / TILE;
    int64_t tiles = outer * ti * tj;
#pragma omp parallel for schedule(static) if (outer * rows * cols >= TENSOR_PARALLEL_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t jt = t % tj, it = (t / tj) % ti, rem = t / (tj * ti);
        int64_t src_off = 0, dst_off = 0;
        for (int a = no - 1; a >= 0; a--) {
            src_off += (rem % od[a]) * o_src[a];
            dst_off += (rem % od[a]) * o_dst[a];
            rem /= od[a];
        }
        int64_t i0 = it * TILE, j0 = jt * TILE;
        int64_t ni = rows - i0 < TILE ? rows - i0 : TILE, nj = cols - j0 < TILE ? cols - j0 : TILE;
        copy_block(dst + (dst_off + i0 * dense[k] + j0) * (int64_t)elem,
                   src + (src_off + i0 + j0 * s[n - 1]) * (int64_t)elem, elem, ni, nj, dense[k],
                   s[n - 1]);
    }
}

/* The axis (other than the last) that is contiguous in src, when tiling pays off; else -1. */
static int tiled_axis(int n, const int64_t *d, const int64_t *s) {
    if (n < 2 || s[n - 1] == 1 || s[n - 1] == 0 || d[n - 1] < 8) return -1;
    for (int k = n - 2; k >= 0; k--)
        if (s[k] == 1) return d[k] >= 8 ? k : -1;
    return -1;
}

void strided_copy(void *dst, const void *src, size_t elem, int ndim, const int64_t *dims,
                  const int64_t *strides) {
    int64_t d[GRAFT_MAX_DIMS], s[GRAFT_MAX_DIMS];
    int n = view_simplify(ndim, dims, strides, d, s);
    if (n < 0) return;
    if (n == 0) {
        memcpy(dst, src, elem);
        return;
    }
    int tk = tiled_axis(n, d, s);
    if (tk >= 0) {
        copy_tiled(dst, src, elem, n, d, s, tk);
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
