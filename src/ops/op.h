/* op.h: the op interface: shape inference over partly known shapes, reference compute calls,
 * and helpers every op family shares (broadcasting, axes, error messages naming the node). */
#ifndef GRAFT_OPS_OP_H
#define GRAFT_OPS_OP_H

#include "../graph/ir.h"

/* The most elements a value may have (docs/engine.md "Limits"); shape rules that multiply dims
 * check against it before they multiply. */
#define OP_MAX_ELEMENTS ((int64_t)1 << 40)

/* What is known about a tensor while inferring: dtype (UNDEFINED: unknown), rank (-1: unknown),
 * dims (-1: unknown until run time) and, when known, the value itself. At run time everything
 * is known and `value` points at the real tensor. `present` is false for an omitted optional
 * input (and then nothing else is set). */
typedef struct value_info {
    bool present;
    graft_dtype dtype;
    int ndim;
    int64_t dims[GRAFT_MAX_DIMS];
    const tensor *value;
} value_info;

/* Infer the outputs' dtype and shape from the inputs'. Must fill every out[i] (unknown parts as
 * -1), never assume a value is known unless `value` is set, and reject attributes or inputs that
 * make no sense with a message from op_error(). */
typedef graft_status (*op_infer_fn)(const ir_node *node, const value_info *in, int n_in,
                                    value_info *out, int n_out, graft_err *e);

/* One kernel call. Inputs are NULL where omitted. Outputs come with dtype and shape set by the
 * op's inference and data allocated but NOT zero-filled: the kernel writes every element (tests
 * fill outputs with NaN bytes first, GRAFT_POISON_OUTPUTS=1, to catch one that does not). */
typedef struct op_call {
    const ir_node *node;
    const tensor *const *in;
    int n_in;
    tensor *const *out;
    int n_out;
    graft_err *err;
} op_call;

typedef graft_status (*op_compute_fn)(const op_call *call);

typedef struct op_def {
    const char *name;
    const char *family;
    int since, until; /* supported opset range */
    op_infer_fn infer;
    op_compute_fn reference;
} op_def;

/* The registry, generated from ops.def. */
const op_def *op_find(const char *op_type);
int op_count(void);
const op_def *op_at(int index);
/* graft's own ops (the training graph's Backward): in the registry so the executor runs them,
 * but no ONNX model may use them and no ONNX conformance counts them. */
bool op_is_internal(const op_def *op);

/* Error "node 'NAME' (OpType): message", returns status. */
graft_status op_error(const ir_node *node, graft_err *e, graft_status status, const char *fmt, ...)
    GRAFT_PRINTF(4, 5);

/* Check n_in / n_out against a range; error names the node. */
graft_status op_check_arity(const ir_node *node, int n_in, int min_in, int max_in, int n_out,
                            int min_out, int max_out, graft_err *e);
/* Normalise a possibly negative axis for a tensor of rank `rank`; error when out of range. */
graft_status op_axis(const ir_node *node, int64_t axis, int rank, int *out, graft_err *e);
/* Numpy-style multidirectional broadcast of two shapes (unknown dims propagate as -1). */
graft_status op_broadcast(const ir_node *node, int na, const int64_t *a, int nb, const int64_t *b,
                          int *nout, int64_t *out, graft_err *e);
/* Read an integer 1-D (or scalar) input value into vals (at most max); returns count or -1. */
int op_read_ints(const tensor *t, int64_t *vals, int max);
/* Set out to an unknown tensor of the given dtype. */
void op_unknown(value_info *out, graft_dtype dtype);
/* Copy dtype and shape from in to out (value not copied). */
void op_same(value_info *out, const value_info *in);
/* True when every dim is known. */
bool op_shape_known(const value_info *v);

/* Input k of `op` is read on the host (a shape, axes, pads, a scalar bound): a device backend
 * gets it in host memory, and a node computing such a value runs on the host. */
bool op_input_on_host(const char *op, int k);
/* op_input_on_host for node n: a Backward node (src/ops/backward.h) holds its forward inputs on
 * the host where its forward op does, so its rules read the same starts, pads and axes. */
bool node_input_on_host(const ir_node *n, int k);
/* Ops that only describe tensors (Shape, Constant): they run where the host has the answer. */
bool op_runs_on_host(const char *op);
/* Input k's data is never read (Shape reads only the dims): no copy is needed anywhere. */
bool op_input_data_unused(const char *op, int k);

/* Declarations of every op's inference and reference kernel. */
#define OP(name, family, since, until)                                                             \
    graft_status op_infer_##name(const ir_node *node, const value_info *in, int n_in,              \
                                 value_info *out, int n_out, graft_err *e);                        \
    graft_status ref_##name(const op_call *call);
#include "ops.def"
#undef OP

#endif
