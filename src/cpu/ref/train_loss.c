/* train_loss.c: the CPU kernel of the TrainLoss node (src/ops/train_loss.h): loss_compute, then
 * the gradient scaled for accumulation and fp16's loss scale as the trainer scales it, and the
 * loss sums and right answers into the training state. */
#include <string.h>

#include "../../ops/train_loss.h"
#include "../../train/loss.h"
#include "../../train/train_state.h"

graft_status ref_TrainLoss(const op_call *c) {
    train_loss_layout l;
    TRY(train_loss_read(c->node, c->n_in, c->n_out, &l, c->err));
    const tensor *x = c->in[0], *y = c->in[1], *w = c->in[2], *state = c->in[3];
    int64_t n = x->dims[0], k = x->dims[1];
    if (w && tensor_numel(w) != k)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "the weights have %lld values for %lld "
                        "outputs",
                        (long long)tensor_numel(w), (long long)k);
    train_state st;
    memcpy(&st, state->data, sizeof st); /* the state may be unaligned bytes */
    loss_spec spec = {.kind = (loss_kind)l.kind,
                      .label_smoothing = l.label_smoothing,
                      .class_weight = l.kind == LOSS_SOFTMAX_CE && w ? w->data : NULL,
                      .pos_weight = l.kind == LOSS_BCE_LOGITS && w ? w->data : NULL,
                      .grad_scale = train_loss_grad_scale(&l, c->in, c->n_in)};
    double loss;
    float *dl = c->out[0]->data;
    graft_status s = loss_compute(&loss, dl, &spec, x->data, y->data, n, k, c->err);
    if (s != GRAFT_OK) {
        char why[sizeof c->err->msg];
        memcpy(why, c->err->msg, sizeof why);
        return op_error(c->node, c->err, s, "%s", why);
    }
    double scale = 1.0 / (double)l.accumulate;
    if (l.fp16) scale *= st.scale;
    if (scale != 1.0)
        for (int64_t i = 0; i < n * k; i++) dl[i] = (float)(dl[i] * scale);
    int64_t right = l.kind == LOSS_SOFTMAX_CE ? loss_count_correct(x->data, y->data, n, k) : 0;
    st.step_loss = loss;
    st.epoch_loss += loss * (double)n;
    st.step_correct = right;
    st.epoch_correct += right;
    memcpy(state->data, &st, sizeof st);
    return GRAFT_OK;
}
