/* layout_plan.h: which 4-D activations a backend keeps channels-last (NHWC) between the
 * convolutions that prefer it (half precision on the GPU, f32 on the CPU), and which ops can read
 * and write them so. */
#ifndef GRAFT_GRAPH_LAYOUT_PLAN_H
#define GRAFT_GRAPH_LAYOUT_PLAN_H

#include <stdbool.h>

#include "../ops/op.h"
#include "ir.h"

/* How an op meets channels-last data. */
typedef enum layout_kind {
    LAYOUT_NONE,   /* reads and writes NCHW only */
    LAYOUT_CONV,   /* Conv: reads X in either layout, writes either */
    LAYOUT_POOL,   /* MaxPool, AveragePool: output in the input's layout */
    LAYOUT_GLOBAL, /* GlobalAveragePool: reads NHWC, writes (N, C, 1, 1), the same in both */
    LAYOUT_UNARY,  /* element by element on input 0 (other inputs scalars): layout-free */
    LAYOUT_BINARY, /* element-wise on same-shaped inputs (or scalars): layout-free */
} layout_kind;

layout_kind layout_op_kind(const ir_node *n);

/* Mark nhwc[v] = 1 for the values (of g->n_values) worth keeping channels-last: 4-D fp16 or
 * bf16 activations (f32 ones when f32: the CPU's oneDNN convolutions) written by a Conv, a pool or
 * a layout-free op on the device (on_dev per node) whose every reader is on the device and reads
 * them natively (a Conv's X, a pool or layout-free op whose own output is channels-last,
 * GlobalAveragePool), or reads only their shape; never a graph output. Windows with asymmetric or
 * automatic padding, dilated pools and ceil_mode stay NCHW. Values elsewhere get 0. */
void layout_plan_nhwc(const ir_graph *g, const unsigned char *on_dev, bool f32,
                      unsigned char *nhwc);

/* A backend's channels-last values for its current placement. */
typedef struct layout_state {
    unsigned char *nhwc; /* per value, or NULL: none */
    int n;               /* values nhwc covers */
    bool plain; /* a kernel runs on NCHW copies: layout_in_nhwc / layout_out_nhwc say false */
} layout_state;

/* Plan (replacing an earlier plan) for a placement; nothing marked when off or out of memory.
 * Returns how many values are marked. */
int layout_state_plan(layout_state *ls, const ir_graph *g, const unsigned char *on_dev, bool f32,
                      bool off);
void layout_state_free(layout_state *ls);
/* Input k / output k of a call is channels-last: its logical dims stay (N, C, H, W), its data is
 * laid out (N, H, W, C). */
bool layout_in_nhwc(const layout_state *ls, const op_call *c, int k);
bool layout_out_nhwc(const layout_state *ls, const op_call *c, int k);
/* Any of the call's tensors is channels-last. */
bool layout_call_has_nhwc(const layout_state *ls, const op_call *c);
/* An element-wise node (kind UNARY or BINARY) whose data tensors are all channels-last and of
 * one shape (other inputs single values): it computes the same element by element in either
 * layout. */
bool layout_free_call(const layout_state *ls, const op_call *c, layout_kind kind);

#endif
