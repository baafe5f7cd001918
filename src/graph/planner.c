/* planner.c: the liveness-based memory planner (greedy by size, first fit in time and space) and
 * per-node FLOP estimates. */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

#define PLAN_ALIGN 64

typedef struct placed {
    int64_t offset, end;
    int first, last;
} placed;

static int by_size_desc(const void *a, const void *b, void *sizes) {
    const int64_t *s = sizes;
    int ia = *(const int *)a, ib = *(const int *)b;
    if (s[ia] != s[ib]) return s[ia] < s[ib] ? 1 : -1;
    return ia - ib;
}

static int cmp_offset(const void *a, const void *b) {
    const placed *pa = a, *pb = b;
    return (pa->offset > pb->offset) - (pa->offset < pb->offset);
}

graft_status plan_memory(int n, const int64_t *bytes, const int *first, const int *last,
                         int64_t *offsets, int64_t *arena_bytes, graft_err *e) {
    int *order = malloc(sizeof(int) * ((size_t)n + 1));
    placed *done = malloc(sizeof(placed) * ((size_t)n + 1));
    placed *overlap = malloc(sizeof(placed) * ((size_t)n + 1));
    if (!order || !done || !overlap) {
        free(order), free(done), free(overlap);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory planning %d buffers", n);
    }
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof(int), by_size_desc, (void *)bytes);
    int n_done = 0;
    int64_t arena = 0;
    for (int oi = 0; oi < n; oi++) {
        int b = order[oi];
        int64_t size = (bytes[b] + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
        /* Buffers alive at the same time as b, by offset; take the first gap that fits. */
        int n_ov = 0;
        for (int j = 0; j < n_done; j++)
            if (done[j].first <= last[b] && first[b] <= done[j].last) overlap[n_ov++] = done[j];
        qsort(overlap, (size_t)n_ov, sizeof(placed), cmp_offset);
        int64_t at = 0;
        for (int j = 0; j < n_ov; j++) {
            if (overlap[j].offset - at >= size) break;
            if (overlap[j].end > at) at = overlap[j].end;
        }
        offsets[b] = at;
        done[n_done++] = (placed){at, at + size, first[b], last[b]};
        if (at + size > arena) arena = at + size;
    }
    *arena_bytes = arena;
    free(order), free(done), free(overlap);
    return GRAFT_OK;
}

double node_flops(const ir_node *node, const tensor *const *in, int n_in, const tensor *const *out,
                  int n_out) {
    if (n_out < 1 || !out[0]) return 0.0;
    double out_numel = (double)tensor_numel(out[0]);
    const char *op = node->op_type;
    if (strcmp(op, "Conv") == 0 && n_in >= 2 && in[1]) {
        /* Each output element: (C_in / group) * kernel multiply-adds. */
        int64_t per = tensor_numel(in[1]) / (in[1]->dims[0] ? in[1]->dims[0] : 1);
        return 2.0 * out_numel * (double)per;
    }
    if ((strcmp(op, "MatMul") == 0 || strcmp(op, "Gemm") == 0) && n_in >= 2 && in[0]) {
        int64_t k = in[0]->ndim ? in[0]->dims[in[0]->ndim - 1] : 1;
        if (strcmp(op, "Gemm") == 0 && attr_i(node, "transA", 0) && in[0]->ndim == 2)
            k = in[0]->dims[0];
        return 2.0 * out_numel * (double)k;
    }
    if (strcmp(op, "Shape") == 0 || strcmp(op, "Reshape") == 0 || strcmp(op, "Flatten") == 0 ||
        strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Identity") == 0)
        return 0.0;
    /* Element-wise and data movement: one operation per input element read. */
    double in_numel = n_in >= 1 && in[0] ? (double)tensor_numel(in[0]) : 0.0;
    return in_numel > out_numel ? in_numel : out_numel;
}
