/* shape_plan.h: run-time plans of the data-movement ops (views of Transpose, Slice and Expand,
 * Concat/Split and Gather checks, Pad, Range and ConstantOfShape parameters) and the output
 * checks every kernel makes, shared by the reference kernels and the device backends' glue. */
#ifndef GRAFT_OPS_SHAPE_PLAN_H
#define GRAFT_OPS_SHAPE_PLAN_H

#include "tensor_plan.h"

/* An N-d view of an input in elements: the element at offset, then dims and strides (negative
 * for reversed axes, zero for broadcast ones). */
typedef struct tensor_view {
    int ndim;
    int64_t offset;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t strides[GRAFT_MAX_DIMS];
} tensor_view;

/* Outputs come shaped by inference; a kernel that disagrees must stop rather than overrun. */
graft_status op_expect_output(const op_call *c, const tensor *out, graft_dtype dtype, int ndim,
                              const int64_t *dims);
/* Output i must be allocated with dtype dt and numel elements. */
graft_status op_check_output(const op_call *c, int i, graft_dtype dt, int64_t numel);
/* "input i is missing". */
graft_status op_missing_input(const op_call *c, int i);
/* Output 0 does not fit `what` (names its dtype and shape). */
graft_status op_bad_output(const op_call *c, const char *what);

/* value_info views of a call's first max inputs, for the plans shared with inference; returns
 * how many. */
int call_value_infos(const op_call *c, value_info *vi, int max);

/* Drop size-1 axes and merge neighbours contiguous with each other, so that loops run over as
 * few and as long axes as possible. Returns the new rank (0: a single element), or -1 for an
 * empty view. */
int view_simplify(int ndim, const int64_t *dims, const int64_t *strides, int64_t *d, int64_t *s);

/* Reshape-like ops: input 0 and output 0 hold the same bytes in the same order. */
graft_status same_bytes_check(const op_call *c);

/* The view of input 0 that Transpose, Slice and Expand copy densely into output 0 (checked). */
graft_status transpose_view(const op_call *c, tensor_view *v);
graft_status slice_view(const op_call *c, tensor_view *v);
graft_status expand_view(const op_call *c, tensor_view *v);

/* Concat's inputs (or Split's outputs) against the whole: present, matching it off the axis
 * and adding up to it on the axis (from the node's axis attribute, returned). */
graft_status concat_pieces_check(const op_call *c, const tensor *whole, tensor *const *pieces,
                                 int n, int *axis);

/* Gather's inputs and output shape; the axis it gathers on. */
graft_status gather_check(const op_call *c, int *axis);

/* Pad's plan for inputs 0..3, checked against output 0, and the pad value as the bytes of input
 * 0's dtype (16 bytes written). */
graft_status pad_call_plan(const op_call *c, pad_plan *p, unsigned char *cval);

/* Range's start, limit and delta (inputs 0..2), and the length n of output 0. */
graft_status range_check(const op_call *c, int64_t *n);

/* ConstantOfShape's value attribute, checked against output 0; NULL for the default float 0. */
graft_status constant_of_shape_value(const op_call *c, const tensor **value);

#endif
