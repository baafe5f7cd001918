/* cuda_optimizer.c: the OptimizerStep node (src/ops/optimizer_step.h) on the GPU: the gradients'
 * checks and norms, the step's scalars settled on the device (train_state), then one fused
 * update per parameter tensor (src/cuda/train_optim.cu, the formulas of src/train/optim.c). The
 * state, weights, gradients and moments are device memory the node updates in place; only the
 * step's rate and momentum come from the host. */
#include <math.h>
#include <string.h>

#include "../ops/optimizer_step.h"
#include "../train/optim.h"
#include "cuda_internal.h"
#include "train_launch.h"

static train_optim_args update_args(const optimizer_step_layout *l, const float *hyper, int p) {
    float lr = optim_param_lr(hyper[0], l->lr_scale[p]);
    train_optim_args a = {.kind = l->kind,
                          .lr = lr,
                          .weight_decay = l->decay[p] ? l->weight_decay : 0.0f,
                          .momentum = l->kind == TRAIN_OPT_SGD ? hyper[1] : 0.0f,
                          .dampening = l->dampening,
                          .nesterov = l->nesterov,
                          .beta1 = hyper[1],
                          .beta2 = l->beta2,
                          .eps = l->eps,
                          .amsgrad = l->amsgrad,
                          .fp16 = l->fp16};
    return a;
}

/* Every tensor a step writes is f32 device memory of its weights' size. */
static bool plain(const op_call *c, const optimizer_step_layout *l) {
    for (int p = 0; p < l->n_params; p++) {
        const tensor *const *in = c->in + OPTIMIZER_STEP_FIRST + p * OPTIMIZER_STEP_SLOTS;
        int64_t n = tensor_numel(in[0]);
        for (int k = 0; k < OPTIMIZER_STEP_SLOTS; k++)
            if (in[k] && (in[k]->dtype != GRAFT_DTYPE_F32 || tensor_numel(in[k]) != n))
                return false;
    }
    return true;
}

static graft_status enqueue(cuda_backend *be, const op_call *c, const optimizer_step_layout *l,
                            const float *hyper, double *partials) {
    cudaStream_t s = be->stream;
    graft_err *e = c->err;
    train_state *st = c->in[0]->data;
    bool clip = l->max_norm > 0.0f;
    for (int p = 0; (l->fp16 || clip) && p < l->n_params; p++) {
        const tensor *g = c->in[OPTIMIZER_STEP_FIRST + p * OPTIMIZER_STEP_SLOTS + 1];
        CUDA_TRY(e,
                 train_grad_check(g->data, tensor_numel(g), l->fp16,
                                  partials + (size_t)p * TRAIN_PARTIALS, st, s),
                 "checking the gradients");
    }
    train_step_args sa = {.kind = l->kind,
                          .fp16 = l->fp16,
                          .clip = clip,
                          .max_norm = l->max_norm,
                          .lr = hyper[0],
                          .beta1 = hyper[1],
                          .beta2 = l->beta2,
                          .n_params = l->n_params};
    CUDA_TRY(e, train_step_finalize(st, partials, sa, s), "settling the step");
    double *lamb_scratch = partials + (size_t)l->n_params * TRAIN_PARTIALS;
    for (int p = 0; p < l->n_params; p++) {
        tensor *const *in =
            (tensor *const *)c->in + OPTIMIZER_STEP_FIRST + p * OPTIMIZER_STEP_SLOTS;
        float *sl[3];
        for (int k = 0; k < 3; k++) sl[k] = in[2 + k] ? in[2 + k]->data : NULL;
        CUDA_TRY(e,
                 train_optim_update(in[0]->data, in[1]->data, sl[0], sl[1], sl[2],
                                    tensor_numel(in[0]), update_args(l, hyper, p), lamb_scratch, st,
                                    s),
                 "the optimizer step");
    }
    return GRAFT_OK;
}

/* The result (skipped, total norm) from the settled state, on the device. */
static graft_status result(cuda_backend *be, const op_call *c, const optimizer_step_layout *l) {
    const train_state *st = c->in[0]->data;
    float *out = c->out[0]->data;
    CUDA_TRY(c->err, train_step_result(out, st, l->max_norm > 0.0f, be->stream),
             "the step's result");
    return GRAFT_OK;
}

static graft_status k_optimizer_step(cuda_backend *be, const op_call *c, void **state,
                                     bool *handled) {
    (void)state;
    optimizer_step_layout l;
    TRY(optimizer_step_read(c->node, c->n_in, c->n_out, &l, c->err));
    const tensor *hy = c->in[1], *st = c->in[0];
    if (!st || tensor_numel(st) != (int64_t)sizeof(train_state) || !hy ||
        hy->dtype != GRAFT_DTYPE_F32 || tensor_numel(hy) != 2 || !plain(c, &l))
        return GRAFT_OK;           /* the reference names what is wrong */
    const float *hyper = hy->data; /* host memory (op_input_on_host) */
    if (!isfinite(hyper[0]) || hyper[0] < 0.0f) return GRAFT_OK;
    *handled = true;
    double *partials = NULL;
    size_t bytes = sizeof(double) * TRAIN_PARTIALS * ((size_t)l.n_params + 2);
    TRY(cuda_malloc(be, bytes, (void **)&partials, c->err));
    graft_status s = enqueue(be, c, &l, hyper, partials);
    cuda_free(be, partials); /* stream-ordered: after the kernels that use it */
    return s == GRAFT_OK ? result(be, c, &l) : s;
}

const cuda_kernel cuda_optimizer_kernels[] = {
    {"OptimizerStep", k_optimizer_step, NULL},
    {NULL, NULL, NULL},
};
