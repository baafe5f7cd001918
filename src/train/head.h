/* head.h: a trainable head (linear, or an MLP of Gemm -> activation -> dropout blocks) with fp32
 * master weights; forward through the ops' reference kernels, backward through the grad rules,
 * and bf16/fp16 compute emulated by rounding every tensor the head computes with. */
#ifndef GRAFT_TRAIN_HEAD_H
#define GRAFT_TRAIN_HEAD_H

#include <stdbool.h>

#include "../graph/ir.h"
#include "graft.h"
#include "optim.h"

#define HEAD_MAX_LAYERS (GRAFT_MAX_HIDDEN + 1)

typedef struct head_layer {
    int64_t in, out;
    tensor w, b;             // (out, in), (out): fp32 master weights
    tensor dw, db;           // gradients, same shapes, accumulated until head_zero_grad
    tensor w_c, b_c;         // the weights the forward computes with (rounded in bf16/fp16)
    tensor x, z, a, d, mask; // (N, in) input; (N, out) Gemm output, activation, dropout, mask
    bool has_act;
    ir_node gemm, act;
    ir_attr gemm_attr;
    ir_attr act_attr;
    char w_name[32], b_name[32];
} head_layer;

typedef struct head {
    int n_layers;
    head_layer layers[HEAD_MAX_LAYERS];
    graft_activation activation;
    float dropout;
    graft_precision precision;
    int64_t batch; /* rows the activation buffers hold */
    uint64_t rng;  /* dropout masks */
    /* A data-parallel rank's rows of the global batch: before it and after it. Each layer's
     * masks skip their draws (rows_before and rows_after rows), so every rank draws the
     * one-process run's masks for its rows; 0 and 0 in one process. */
    int64_t rows_before, rows_after;
    bool dropped; /* the last forward drew dropout masks */
} head;

graft_status head_init(head *h, int64_t in_dim, const graft_head_options *o,
                       graft_precision precision, graft_err *e);
void head_free(head *h);

/* logits (n, outputs) of features x (n, in); *logits points into the head (valid until the next
 * forward). training draws dropout masks. */
graft_status head_forward(head *h, const float *x, int64_t n, bool training, const float **logits,
                          graft_err *e);
/* Add d(loss)/d(weights) for the last forward to the layers' dw/db, given dlogits (n, outputs)
 * (already multiplied by the loss scale in fp16). */
graft_status head_backward(head *h, const float *dlogits, int64_t n, graft_err *e);
/* head_backward that also writes d(loss)/d(input) (n, in) to dx (not accumulated). */
graft_status head_backward_input(head *h, const float *dlogits, int64_t n, float *dx, graft_err *e);
void head_zero_grad(head *h);
/* The parameters for an optimizer: weights decay, biases do not. Returns the count (2/layer). */
int head_params(head *h, optim_param *params);
/* Append the head to g after value `in`, as graft_trainer_attach exports it: per layer a Gemm
 * (transB; the weights copied into constants named head.<i>.weight / head.<i>.bias) and the
 * activation; the last Gemm's value is named last_name. *out: the head's last value. */
graft_status head_append(const head *h, ir_graph *g, int in, const char *last_name, int *out,
                         graft_err *e);
/* head_append with masks: after each activation a product with a graph input
 * head/<i>/dropout_mask (N, out) holding 0 or 1/(1 - dropout) (training with dropout). */
graft_status head_append_masked(const head *h, ir_graph *g, int in, const char *last_name,
                                bool masks, int *out, graft_err *e);
/* Round v to the compute precision (identity in fp32). */
void head_round(graft_precision p, float *v, int64_t n);

#endif
