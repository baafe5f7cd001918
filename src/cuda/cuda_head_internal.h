/* cuda_head_internal.h: the GPU head's device buffers, shared by cuda_head.c (set-up, data,
 * state transfers) and cuda_head_step.c (the micro-batch step). */
#ifndef GRAFT_CUDA_HEAD_INTERNAL_H
#define GRAFT_CUDA_HEAD_INTERNAL_H

#include "cuda_head.h"
#include "cuda_internal.h"
#include "cuda_matmul.h"
#include "train_launch.h"

/* Optimizer state kinds, in optim.c's order. */
enum { CH_MOMENTUM, CH_EXP_AVG, CH_EXP_AVG_SQ, CH_MAX_EXP_AVG_SQ, CH_STATE_KINDS };
/* The products of a layer, and whether a plan is for the full batch or a shorter last one. */
enum { CH_GEMM_FORWARD, CH_GEMM_DW, CH_GEMM_DX, CH_GEMMS };

typedef struct ch_layer {
    int64_t in, out;
    bool has_act;
    float *w, *b;   /* master weights, inside cuda_head.master */
    float *gw, *gb; /* gradients, inside cuda_head.grad */
    float *wc, *bc; /* what the forward computes with: rounded copies, or w and b in fp32 */
    float *z;       // (max_batch, out) Gemm output
    float *y;       // (max_batch, out) activation (after dropout); hidden layers only
    uint64_t seed;  /* dropout mask of the last forward */
    cuda_gemm_plan *plans[CH_GEMMS][2];
} ch_layer;

struct cuda_head {
    cuda_backend *be;
    int n_layers;
    ch_layer layers[HEAD_MAX_LAYERS];
    int act; /* TRAIN_ACT_* */
    float dropout;
    int round;       /* TRAIN_ROUND_*: the head's precision */
    float dropped_p; /* the dropout the last forward applied (0 in eval or without dropout) */
    bool fp16;       /* dynamic loss scaling */
    loss_kind loss;
    double smoothing, wsum_c;
    float *class_weight, *pos_weight; /* device copies or NULL */
    int64_t n_outputs;
    optim_config oc;
    int n_params;
    int64_t numel[2 * HEAD_MAX_LAYERS], offset[2 * HEAD_MAX_LAYERS + 1];
    bool decay[2 * HEAD_MAX_LAYERS];
    float *master, *grad, *wcopy; /* (total) each; wcopy only in bf16/fp16 */
    float *state[CH_STATE_KINDS]; /* (total) each, NULL when the optimizer has no such state */
    cuda_head_options opt;
    /* per micro-batch buffers */
    float *x0;            // (max_batch, in) the gathered features
    void *yb;             // (max_batch) labels
    float *g_a, *g_b;     // (max_batch, widest layer) gradients flowing back
    float *dw_tmp;        // (largest weight) one product's dW before rounding (bf16/fp16)
    double *loss_scratch; // (4 * max_batch)
    double *partials;     // (n_params + 2) * TRAIN_PARTIALS
    train_state *st;      /* device */
    train_state *host_st; /* pinned */
    /* the data */
    int64_t n, dim;
    size_t label_bytes; /* of one sample */
    const float *host_x;
    const float *dev_x; /* device memory, or the mapped host array */
    float *dev_x_owned; /* device copy to free */
    bool registered;    /* host_x is page-locked by us */
    void *dev_y;
    int64_t *dev_order;
    const int64_t *host_order;
    float *staging[2]; /* pinned, (max_batch, dim) */
    cudaEvent_t staged[2];
    int slot;
    cuda_head_counters counters;
};

/* The micro-batch step's parts (cuda_head_step.c). */
graft_status ch_forward(cuda_head *ch, int64_t m, bool training, uint64_t seed,
                        const float **logits, graft_err *e);
graft_status ch_backward(cuda_head *ch, int64_t m, graft_err *e);
graft_status ch_apply(cuda_head *ch, const cuda_head_update *u, graft_err *e);
graft_status ch_gather(cuda_head *ch, int64_t at, int64_t m, graft_err *e);

#endif
