/* tensor_index.h: what the indexing ops (GatherElements, GatherND, ScatterND), Tile and Trilu
 * derive from a node and its tensors, shared by shape inference, the reference kernels and the
 * device backends' glue. */
#ifndef GRAFT_OPS_TENSOR_INDEX_H
#define GRAFT_OPS_TENSOR_INDEX_H

#include "shape_plan.h"

/* Index values of idx, flattened, against dims[i % stride] (a GatherND tuple's entries, or one
 * axis with stride 1): the first out of range fails, naming it, its position and axis first +
 * (i % stride). Unknown dims (-1) pass. */
graft_status index_check_values(const ir_node *node, const tensor *idx, int64_t stride, int first,
                                const int64_t *dims, graft_err *e);
/* The error for an index value outside [-dim, dim) of axis `axis` (entry `at` of the indices). */
graft_status index_out_of_range(const ir_node *node, graft_err *e, int64_t value, int64_t at,
                                int axis, int64_t dim);

/* GatherElements at run time: its inputs and output checked; the axis it gathers along. */
graft_status gather_elements_check(const op_call *c, int *axis);

/* GatherND / ScatterND as (batches, tuples per batch, m entries per tuple, slice elements): the
 * tuple t of batch b selects the `slice` contiguous elements of data at
 * b * batch_stride + sum_j index_j * strides[j] (index_j counted from the end when negative,
 * within dims[j]). */
typedef struct nd_plan {
    int64_t batches, tuples, slice, batch_stride;
    int m, first_axis; /* first_axis: the data axis the tuple's first entry indexes */
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t strides[GRAFT_MAX_DIMS];
} nd_plan;

typedef enum scatter_mode {
    SCATTER_NONE,
    SCATTER_ADD,
    SCATTER_MUL,
    SCATTER_MAX,
    SCATTER_MIN
} scatter_mode;

/* ScatterND's reduction attribute (add and mul from opset 16, max and min from 18). */
graft_status scatter_reduction(const ir_node *node, scatter_mode *mode, graft_err *e);

/* The plans, with the inputs and output checked. */
graft_status gather_nd_plan(const op_call *c, nd_plan *p);
graft_status scatter_nd_plan(const op_call *c, nd_plan *p, scatter_mode *mode);

/* Tile's repeats (input 1, host memory), checked against input 0 and output 0. */
graft_status tile_check(const op_call *c, int64_t *repeats);

/* Trilu's diagonal offset k (input 1, host memory; NULL: 0). */
graft_status trilu_diagonal(const ir_node *node, const tensor *k, int64_t *out, graft_err *e);

#endif
