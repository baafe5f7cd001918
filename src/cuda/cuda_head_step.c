/* cuda_head_step.c: one micro-batch of head training on the GPU: the batch gather, the forward
 * (Gemm through cuBLASLt in fp32, activation, dropout), the backward, and the optimizer step
 * (gradient checks, the step's scalars, one fused update per parameter tensor). All of it is
 * enqueued on the backend's stream; nothing waits for the GPU. */
#include <string.h>

#include "cuda_head_internal.h"

/* A row-major fp32 product c (rows, cols) = op(a) op(b) (+ bias) (+ beta c) with a plan kept per
 * layer, product and batch shape (the last batch of an epoch is often shorter). */
static graft_status gemm(cuda_head *ch, ch_layer *l, int which, int64_t m, int64_t rows,
                         int64_t cols, int64_t k, const float *a, bool trans_a, const float *b,
                         bool trans_b, float *c, const float *bias, float beta, graft_err *e) {
    cuda_gemm_args g = cuda_gemm_dense(rows, cols, k, a, trans_a, b, trans_b, c, GRAFT_DTYPE_F32);
    g.bias = bias;
    g.beta = beta;
    return cuda_gemm_run(ch->be, &l->plans[which][m == ch->opt.max_batch], &g, e);
}

/* Pageable features: this batch's rows gathered on the host into a pinned buffer (waiting for
 * that buffer's previous copy), then copied. Two buffers let a copy overlap the next gather. */
static graft_status gather_staged(cuda_head *ch, int64_t at, int64_t m, graft_err *e) {
    cudaStream_t s = ch->be->stream;
    int k = ch->slot;
    ch->slot ^= 1;
    CUDA_TRY(e, cudaEventSynchronize(ch->staged[k]), "waiting for a staging buffer");
    size_t row = sizeof(float) * (size_t)ch->dim;
    for (int64_t i = 0; i < m; i++)
        memcpy(ch->staging[k] + i * ch->dim, ch->host_x + ch->host_order[at + i] * ch->dim, row);
    CUDA_TRY(e, cudaMemcpyAsync(ch->x0, ch->staging[k], row * (size_t)m, cudaMemcpyHostToDevice, s),
             "copying a batch of features to the GPU");
    CUDA_TRY(e, cudaEventRecord(ch->staged[k], s), "recording a staging event");
    ch->counters.feature_h2d_bytes += (int64_t)(row * (size_t)m);
    CUDA_TRY(e, train_round(ch->x0, ch->x0, m * ch->dim, ch->round, s), "rounding features");
    return GRAFT_OK;
}

graft_status ch_gather(cuda_head *ch, int64_t at, int64_t m, graft_err *e) {
    cudaStream_t s = ch->be->stream;
    const int64_t *idx = ch->dev_order + at;
    if (ch->counters.place == CUDA_HEAD_FEATURES_STAGED) {
        TRY(gather_staged(ch, at, m, e));
    } else {
        CUDA_TRY(e, train_gather_rows(ch->x0, ch->dev_x, idx, m, ch->dim, ch->round, s),
                 "gathering a batch of features");
        if (ch->counters.place == CUDA_HEAD_FEATURES_MAPPED)
            ch->counters.feature_bus_bytes += (int64_t)sizeof(float) * m * ch->dim;
    }
    if (ch->loss == LOSS_SOFTMAX_CE)
        CUDA_TRY(e, train_gather_i64(ch->yb, ch->dev_y, idx, m, s), "gathering labels");
    else
        CUDA_TRY(e,
                 train_gather_rows(ch->yb, ch->dev_y, idx, m, ch->n_outputs, TRAIN_ROUND_NONE, s),
                 "gathering targets");
    return GRAFT_OK;
}

graft_status ch_forward(cuda_head *ch, int64_t m, bool training, uint64_t seed,
                        const float **logits, graft_err *e) {
    cudaStream_t s = ch->be->stream;
    if (ch->wcopy)
        CUDA_TRY(e, train_round(ch->wcopy, ch->master, ch->offset[ch->n_params], ch->round, s),
                 "rounding the head's weights");
    ch->dropped_p = training ? ch->dropout : 0.0f;
    const float *x = ch->x0;
    for (int i = 0; i < ch->n_layers; i++) {
        ch_layer *l = &ch->layers[i];
        TRY(gemm(ch, l, CH_GEMM_FORWARD, m, m, l->out, l->in, x, false, l->wc, true, l->z, l->bc,
                 0.0f, e));
        if (!l->has_act) {
            CUDA_TRY(e, train_round(l->z, l->z, m * l->out, ch->round, s), "rounding logits");
            x = l->z;
            continue;
        }
        /* each layer its own mask stream */
        l->seed = seed ^ ((uint64_t)(i + 1) * 0xd1b54a32d192ed03ull);
        CUDA_TRY(
            e,
            train_act_forward(l->y, l->z, m, l->out, ch->act, ch->dropped_p, l->seed, ch->round, s),
            "the head's activation");
        x = l->y;
    }
    *logits = x;
    return GRAFT_OK;
}

/* dy (m, out) of layer i -> dW and db added to its gradients; dx (m, in) when i > 0. */
static graft_status layer_backward(cuda_head *ch, int i, int64_t m, float *dy, float *dx,
                                   graft_err *e) {
    cudaStream_t s = ch->be->stream;
    ch_layer *l = &ch->layers[i];
    const float *x = i == 0 ? ch->x0 : ch->layers[i - 1].y;
    if (l->has_act)
        CUDA_TRY(
            e,
            train_act_backward(dy, l->z, m, l->out, ch->act, ch->dropped_p, l->seed, ch->round, s),
            "the head's activation backward");
    if (ch->round != TRAIN_ROUND_NONE) {
        /* the product is rounded to the compute precision before it is accumulated */
        TRY(gemm(ch, l, CH_GEMM_DW, m, l->out, l->in, m, dy, true, x, false, ch->dw_tmp, NULL, 0.0f,
                 e));
        CUDA_TRY(e, train_add_rounded(l->gw, ch->dw_tmp, l->out * l->in, ch->round, s),
                 "accumulating weight gradients");
    } else {
        TRY(gemm(ch, l, CH_GEMM_DW, m, l->out, l->in, m, dy, true, x, false, l->gw, NULL, 1.0f, e));
    }
    CUDA_TRY(e, train_colsum_add(l->gb, dy, m, l->out, ch->round, s), "bias gradients");
    if (!dx) return GRAFT_OK;
    TRY(gemm(ch, l, CH_GEMM_DX, m, m, l->in, l->out, dy, false, l->wc, false, dx, NULL, 0.0f, e));
    CUDA_TRY(e, train_round(dx, dx, m * l->in, ch->round, s), "rounding gradients");
    return GRAFT_OK;
}

graft_status ch_backward(cuda_head *ch, int64_t m, graft_err *e) {
    float *dy = ch->g_a, *dx = ch->g_b;
    for (int i = ch->n_layers - 1; i >= 0; i--) {
        TRY(layer_backward(ch, i, m, dy, i > 0 ? dx : NULL, e));
        float *t = dy;
        dy = dx;
        dx = t;
    }
    return GRAFT_OK;
}

/* The state buffers a parameter's update uses, in train_optim_update's order. */
static void state_of(const cuda_head *ch, int p, float **s) {
    int64_t off = ch->offset[p];
    float *const *st = ch->state;
    if (ch->oc.kind == OPTIM_SGD) {
        s[0] = st[CH_MOMENTUM] ? st[CH_MOMENTUM] + off : NULL;
        s[1] = s[2] = NULL;
        return;
    }
    s[0] = st[CH_EXP_AVG] + off;
    s[1] = st[CH_EXP_AVG_SQ] + off;
    s[2] = st[CH_MAX_EXP_AVG_SQ] ? st[CH_MAX_EXP_AVG_SQ] + off : NULL;
}

graft_status ch_apply(cuda_head *ch, const cuda_head_update *u, graft_err *e) {
    cudaStream_t s = ch->be->stream;
    const optim_config *c = &ch->oc;
    bool clip = ch->opt.clip_norm > 0.0;
    if (ch->fp16 || clip)
        for (int p = 0; p < ch->n_params; p++)
            CUDA_TRY(e,
                     train_grad_check(ch->grad + ch->offset[p], ch->numel[p], ch->fp16,
                                      ch->partials + (size_t)p * TRAIN_PARTIALS, ch->st, s),
                     "checking the gradients");
    float lr = (float)u->lr; /* the optimizer's step takes an fp32 rate, as optim_step */
    train_step_args sa = {.kind = (int)c->kind,
                          .fp16 = ch->fp16,
                          .clip = clip,
                          .max_norm = (float)ch->opt.clip_norm,
                          .lr = lr,
                          .beta1 = u->beta1,
                          .beta2 = c->beta2,
                          .n_params = ch->n_params};
    CUDA_TRY(e, train_step_finalize(ch->st, ch->partials, sa, s), "settling the step");
    double *lamb_scratch = ch->partials + (size_t)ch->n_params * TRAIN_PARTIALS;
    for (int p = 0; p < ch->n_params; p++) {
        train_optim_args oa = {.kind = (int)c->kind,
                               .lr = lr,
                               .weight_decay = ch->decay[p] ? c->weight_decay : 0.0f,
                               .momentum = u->momentum,
                               .dampening = c->dampening,
                               .nesterov = c->nesterov,
                               .beta1 = u->beta1,
                               .beta2 = c->beta2,
                               .eps = c->eps,
                               .amsgrad = c->amsgrad,
                               .fp16 = ch->fp16};
        float *st[3];
        state_of(ch, p, st);
        int64_t off = ch->offset[p];
        CUDA_TRY(e,
                 train_optim_update(ch->master + off, ch->grad + off, st[0], st[1], st[2],
                                    ch->numel[p], oa, lamb_scratch, ch->st, s),
                 "the optimizer step");
    }
    return GRAFT_OK;
}
