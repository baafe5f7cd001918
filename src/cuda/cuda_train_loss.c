/* cuda_train_loss.c: the TrainLoss node (src/ops/train_loss.h) on the GPU: train.cu's per-row
 * losses, their reduction into the training state and the scaled gradient, all enqueued on the
 * stream; the weights come from the host (their sum is cross-entropy's gradient's divisor). */
#include <string.h>

#include "../ops/train_loss.h"
#include "../train/train_state.h"
#include "cuda_internal.h"
#include "train_launch.h"

/* The weights (host memory, op_input_on_host) copied to the device; *wsum_c their sum (or C). */
static graft_status upload_weights(cuda_backend *be, const op_call *c, int64_t k, float **dev,
                                   double *wsum_c) {
    const tensor *w = c->in[2];
    *dev = NULL;
    *wsum_c = (double)k;
    if (!w) return GRAFT_OK;
    const float *hw = w->data;
    *wsum_c = 0.0;
    for (int64_t j = 0; j < k; j++) *wsum_c += (double)hw[j];
    TRY(cuda_malloc(be, sizeof(float) * (size_t)k, (void **)dev, c->err));
    return cuda_upload(be, *dev, hw, sizeof(float) * (size_t)k, c->err);
}

static graft_status k_train_loss(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    train_loss_layout l;
    TRY(train_loss_read(c->node, c->n_in, c->n_out, &l, c->err));
    const tensor *x = c->in[0], *st = c->in[3];
    if (x->ndim != 2 || tensor_numel(st) != (int64_t)sizeof(train_state) ||
        (c->in[2] && tensor_numel(c->in[2]) != x->dims[1]))
        return GRAFT_OK; /* the reference names what is wrong */
    *handled = true;
    int64_t m = x->dims[0], k = x->dims[1];
    float *w = NULL;
    double wsum_c;
    TRY(upload_weights(be, c, k, &w, &wsum_c));
    double *scratch = NULL;
    graft_status s =
        cuda_malloc(be, sizeof(double) * 4 * (size_t)(m > 0 ? m : 1), (void **)&scratch, c->err);
    if (s == GRAFT_OK) {
        double gs = train_loss_grad_scale(&l, c->in, c->n_in);
        train_loss_args a = {.kind = l.kind,
                             .m = m,
                             .c = k,
                             .smoothing = l.label_smoothing,
                             .wsum_c = wsum_c,
                             .class_weight = l.kind == TRAIN_LOSS_CE ? w : NULL,
                             .pos_weight = l.kind == TRAIN_LOSS_BCE ? w : NULL,
                             .targets = c->in[1]->data,
                             .grad_mult = gs / (double)l.accumulate,
                             .scale_grad = l.fp16,
                             .round = TRAIN_ROUND_NONE};
        s = cuda_fail_if(c->err,
                         train_loss(x->data, c->out[0]->data, &a, scratch, st->data, be->stream),
                         "the training loss");
        cuda_free(be, scratch);
    }
    cuda_free(be, w); /* stream-ordered: after the kernels that read it */
    return s;
}

const cuda_kernel cuda_train_loss_kernels[] = {
    {"TrainLoss", k_train_loss, NULL},
    {NULL, NULL, NULL},
};
