/* broadcast_plan.h: the broadcast of an element-wise op's inputs to its output, as the reference
 * and the device kernels both walk it (dims merged, strides 0 along broadcast dims), and MatMul's
 * batch broadcast. */
#ifndef GRAFT_OPS_BROADCAST_PLAN_H
#define GRAFT_OPS_BROADCAST_PLAN_H

#include "op.h"

#define BCAST_MAX_INPUTS 3

/* A broadcast over up to three inputs, outermost dim first, with the output's dims of size 1
 * dropped and adjacent dims merged wherever every input walks them contiguously. Equal shapes
 * become one dim, a (N, C, H, W) + (C, 1, 1) sum becomes (N, C, H*W) with strides (0, 1, 0) for
 * the second. */
typedef struct bcast_plan {
    int ndim; /* at least 1 */
    int n_in;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t strides[BCAST_MAX_INPUTS][GRAFT_MAX_DIMS]; /* elements; 0 along broadcast dims */
    int64_t numel;
} bcast_plan;

/* Plan ins[0..n_in) (n_in <= BCAST_MAX_INPUTS) broadcast to y. Errors: a missing input, or one
 * that does not broadcast to y's shape (so that no kernel ever reads out of bounds). */
graft_status bcast_plan_make(const ir_node *node, graft_err *e, const tensor *const *ins, int n_in,
                             const tensor *y, bcast_plan *p);

/* MatMul as numpy broadcasts it: (m, k) by (k, n) products (a 1-D A is a row, a 1-D B a column)
 * over nb batch dims, outermost first, with each operand's element strides along them (0 where
 * A or B is broadcast). */
typedef struct matmul_bcast {
    int64_t m, n, k;
    int nb;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t sa[GRAFT_MAX_DIMS], sb[GRAFT_MAX_DIMS], sy[GRAFT_MAX_DIMS];
} matmul_bcast;

/* Plan a (A) times b (B), both of rank 1 or more. */
void matmul_bcast_make(const tensor *a, const tensor *b, matmul_bcast *p);

#endif
