/* reduce.h: axis resolution shared by the reduce family's shape inference and its kernels, so
 * both read a node's axes attributes and inputs the same way. */
#ifndef GRAFT_OPS_REDUCE_H
#define GRAFT_OPS_REDUCE_H

#include "op.h"

/* Which axes a Reduce* node reduces over an input of a given rank. */
typedef struct reduce_axes {
    bool known;    /* false when the axes come from an input whose value is not known yet */
    bool noop;     /* empty axes with noop_with_empty_axes: nothing is reduced (each element
                    * is its own group: ReduceSumSquare squares it, ReduceMax copies it) */
    bool keepdims; /* reduced dims stay as 1 */
    bool reduced[GRAFT_MAX_DIMS];
} reduce_axes;

/* Resolve the axes of a Reduce* node over an input of rank `rank` (>= 0). The axes come from
 * the attribute (ReduceSum before opset 13, the others before 18) or from input 1:
 * `axes_present` says whether that input is given, `axes` is its value (NULL when not known). */
graft_status reduce_resolve_axes(const ir_node *node, int rank, bool axes_present,
                                 const tensor *axes, reduce_axes *out, graft_err *e);
/* The same for a kernel call: input 0's rank, input 1 (host memory) as the axes. */
graft_status reduce_call_axes(const op_call *c, reduce_axes *out);

/* What a Reduce* op computes over each group of elements. */
typedef enum reduce_kind {
    REDUCE_SUM,
    REDUCE_MEAN,
    REDUCE_MAX,
    REDUCE_MIN,
    REDUCE_PROD,
    REDUCE_L1,
    REDUCE_L2,
    REDUCE_SUM_SQUARE,
    REDUCE_LOG_SUM,
    REDUCE_LOG_SUM_EXP,
} reduce_kind;

/* The kind of a Reduce* op type; false for any other op. */
bool reduce_kind_of(const char *op_type, reduce_kind *kind);
/* Kinds whose value over a single element is that element (a size-1 reduction copies). */
bool reduce_kind_keeps_single(reduce_kind kind);

/* Softmax / LogSoftmax / ArgMax / CumSum / LayerNormalization view a tensor as
 * (outer, n, inner): `n` elements along the processed axis (or axes), `inner` the stride
 * between them. */
typedef struct axis_split {
    int64_t outer, n, inner;
} axis_split;

/* Split dims at `axis` (normalised): dims[axis] is n when `single_axis`, else n is the product of
 * dims[axis..] (and inner is 1). */
axis_split axis_split_dims(int ndim, const int64_t *dims, int axis, bool single_axis);

/* The normalised axis of a Softmax / LogSoftmax node for an input of rank `rank`, and whether it
 * names a single axis (opset 13+) or the flattened trailing part (before 13). */
graft_status softmax_axis(const ir_node *node, int rank, int *axis, bool *single_axis,
                          graft_err *e);

/* TopK's axis (normalised) and k: the attribute before opset 10, else input 1 (host memory;
 * NULL while not known, and then *k = -1). */
graft_status topk_params(const ir_node *node, int rank, const tensor *k_input, int *axis,
                         int64_t *k, graft_err *e);

#endif
