/* tensor_plan.h: parameters of the shape/data-movement ops that shape inference and the reference
 * kernels both derive (integer lists from attributes or inputs, Slice and Pad plans, perms). */
#ifndef GRAFT_OPS_TENSOR_PLAN_H
#define GRAFT_OPS_TENSOR_PLAN_H

#include "op.h"

/* An integer list that older opsets give as an attribute and newer ones as an input. */
typedef enum int_list_state {
    INT_LIST_ABSENT,  /* neither attribute nor input given */
    INT_LIST_UNKNOWN, /* an input whose value is not known yet (n may still be known) */
    INT_LIST_KNOWN,
} int_list_state;

/* Enough for Split's sizes (one per output); pads need 2 * GRAFT_MAX_DIMS. */
#define INT_LIST_MAX 64

typedef struct int_list {
    int_list_state state;
    int n; /* count of values; -1 when not even the count is known */
    int64_t v[INT_LIST_MAX];
} int_list;

/* The input at index i, or NULL when it is omitted or beyond n_in. */
const value_info *tensor_opt_input(const value_info *in, int n_in, int i);

/* Read an int32/int64 scalar or 1-D input (NULL: absent) into out; at most max values. */
graft_status int_list_from_input(const ir_node *node, const value_info *in, const char *what,
                                 int max, int_list *out, graft_err *e);
/* Read an INTS attribute into out (absent when the node lacks it); at most max values. */
graft_status int_list_from_attr(const ir_node *node, const char *name, int max, int_list *out,
                                graft_err *e);

/* Describe a run-time tensor (NULL: omitted) as a fully known value_info. */
void tensor_value_info(value_info *vi, const tensor *t);

/* Transpose's permutation for an input of the given rank (default: reversed axes). */
graft_status transpose_perm(const ir_node *node, int rank, int *perm, graft_err *e);

/* Slice on every axis: output length (-1 unknown), first input index and step. Axes the node
 * does not slice get start 0, step 1, len = dim. ndim is -1 when the rank is unknown. */
typedef struct slice_plan {
    int ndim;
    int64_t start[GRAFT_MAX_DIMS];
    int64_t step[GRAFT_MAX_DIMS];
    int64_t len[GRAFT_MAX_DIMS];
} slice_plan;

graft_status slice_plan_make(const ir_node *node, const value_info *in, int n_in, slice_plan *p,
                             graft_err *e);

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* Pad on every axis: elements added before and after (negative crops). pads_known is false when
 * the pads are an input whose value is not known yet; ndim is -1 when the rank is unknown. */
typedef struct pad_plan {
    int ndim;
    pad_mode mode;
    bool pads_known;
    int64_t begin[GRAFT_MAX_DIMS];
    int64_t end[GRAFT_MAX_DIMS];
} pad_plan;

graft_status pad_plan_make(const ir_node *node, const value_info *in, int n_in, pad_plan *p,
                           graft_err *e);
/* The input index that output index o of an axis (begin elements added in front of an input of
 * dim elements) reads in this mode, or -1 where the constant is written. */
int64_t pad_plan_source(pad_mode mode, int64_t o, int64_t begin, int64_t dim);

#endif
