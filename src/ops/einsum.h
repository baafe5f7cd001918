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

/* Parses the equation attribute against n operands of the given ranks and dims (-1: unknown);
 * errors name what is wrong with it. */
graft_status einsum_make_plan(const ir_node *node, const value_info *in, int n, einsum_plan *p,
                              graft_err *e);

#endif
