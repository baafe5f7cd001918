/* einsum.h: Einsum's equation parsed against its operands' ranks (labels, their sizes, the
 * output's labels), shared by shape inference and the kernels. */
#ifndef GRAFT_OPS_EINSUM_H
#define GRAFT_OPS_EINSUM_H

#include "shape_plan.h"

#define EINSUM_MAX_OPERANDS 8
/* 52 letters, then one label per dimension the ellipsis covers */
#define EINSUM_MAX_LABELS (52 + GRAFT_MAX_DIMS)

typedef struct einsum_plan {
    int n_operands;
    int n_labels;                         /* labels in use are 0..n_labels-1 after renumbering */
    int64_t label_dim[EINSUM_MAX_LABELS]; /* -1: not known yet */
    int op_ndim[EINSUM_MAX_OPERANDS];
    int op_label[EINSUM_MAX_OPERANDS][GRAFT_MAX_DIMS];
    int out_ndim;
    int out_label[GRAFT_MAX_DIMS];
} einsum_plan;

/* The labels as loops: the output's first (n_out of them), then the contracted ones, with each
 * operand's element stride per loop (0 where it broadcasts or lacks the label; a repeated label,
 * a diagonal, steps along both of its dims at once). Shared by the CPU and CUDA kernels. */
typedef struct einsum_loops {
    int n_out, n_all;
    int64_t dims[EINSUM_MAX_LABELS];
    int64_t strides[EINSUM_MAX_OPERANDS][EINSUM_MAX_LABELS];
} einsum_loops;

/* Fills L from a plan made against operands of the given ranks and dims. */
void einsum_make_loops(const einsum_plan *p, const int *op_ndim, const int64_t *const *op_dims,
                       einsum_loops *L);

/* Parses the equation attribute against n operands of the given ranks and dims (-1: unknown);
 * errors name what is wrong with it. */
graft_status einsum_make_plan(const ir_node *node, const value_info *in, int n, einsum_plan *p,
                              graft_err *e);

#endif
