/* optimizer_step.c: the CPU kernel of the OptimizerStep node (src/ops/optimizer_step.h): the
 * trainer's step as src/train/ computes it: unscale and check (loss_scale.c), clip
 * (clip_grad_norm), then optim.c's update of each tensor; the gradients are zeroed after. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/optimizer_step.h"
#include "../../train/loss_scale.h"
#include "../../train/optim.h"
#include "../../train/train_state.h"

typedef struct step_lists {
    float **grads;
    int64_t *numels;
    optim_tensor *tensors;
} step_lists;

static void lists_free(step_lists *s) {
    free(s->grads), free(s->numels), free(s->tensors);
}

/* The parameters as optim.c takes them (input buffers written in place: the op's contract). */
static graft_status gather(const op_call *c, const optimizer_step_layout *l, step_lists *s) {
    size_t n = (size_t)l->n_params + 1;
    s->grads = malloc(sizeof *s->grads * n);
    s->numels = malloc(sizeof *s->numels * n);
    s->tensors = malloc(sizeof *s->tensors * n);
    if (!s->grads || !s->numels || !s->tensors)
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < l->n_params; i++) {
        const tensor *const *in = c->in + OPTIMIZER_STEP_FIRST + i * OPTIMIZER_STEP_SLOTS;
        int64_t numel = tensor_numel(in[0]);
        for (int k = 1; k < OPTIMIZER_STEP_SLOTS; k++)
            if (in[k] && tensor_numel(in[k]) != numel)
                return op_error(c->node, c->err, GRAFT_E_SHAPE,
                                "parameter %d: input %d has %lld values, the weights %lld", i, k,
                                (long long)tensor_numel(in[k]), (long long)numel);
        optim_tensor *t = &s->tensors[i];
        *t = (optim_tensor){
            .w = in[0]->data, .g = in[1]->data, .numel = numel, .decay = l->decay[i] != 0};
        for (int k = 0; k < OPTIM_SLOTS; k++) t->s[k] = in[2 + k] ? in[2 + k]->data : NULL;
        s->grads[i] = in[1]->data;
        s->numels[i] = numel;
    }
    return GRAFT_OK;
}

static optim_config config_of(const optimizer_step_layout *l, const float *hyper) {
    optim_config c = {.kind = (optim_kind)l->kind,
                      .weight_decay = l->weight_decay,
                      .dampening = l->dampening,
                      .nesterov = l->nesterov,
                      .beta1 = hyper[1],
                      .beta2 = l->beta2,
                      .eps = l->eps,
                      .amsgrad = l->amsgrad};
    if (l->kind == OPTIM_SGD) c.momentum = hyper[1];
    return c;
}

/* fp16: unscale and check, then GradScaler's update; *skip on an inf or NaN. */
static graft_status unscale(const op_call *c, train_state *st, const step_lists *s, int n,
                            bool *skip) {
    loss_scaler sc = {st->scale, st->growth_factor, st->backoff_factor, st->growth_interval,
                      st->growth_tracker};
    TRY(loss_scale_unscale(skip, s->grads, s->numels, n, &sc, c->err));
    loss_scale_update(&sc, *skip);
    st->scale = sc.scale;
    st->growth_tracker = sc.growth_tracker;
    return GRAFT_OK;
}

static graft_status step(const op_call *c, const optimizer_step_layout *l, train_state *st,
                         const float *hyper, const step_lists *s, float *result) {
    int n = l->n_params;
    bool skip = false;
    if (l->fp16) TRY(unscale(c, st, s, n, &skip));
    if (skip) {
        st->skipped++;
        result[0] = 1.0f;
        return GRAFT_OK;
    }
    if (l->max_norm > 0.0f)
        TRY(clip_grad_norm(&result[1], s->grads, s->numels, n, l->max_norm, c->err));
    optim_config cfg = config_of(l, hyper);
    TRY(optim_check_config(&cfg, c->err));
    int64_t t = st->opt_steps + 1;
    for (int i = 0; i < n; i++)
        optim_update_tensor(&cfg, &s->tensors[i], optim_param_lr(hyper[0], l->lr_scale[i]), t);
    st->opt_steps = t;
    return GRAFT_OK;
}

graft_status ref_OptimizerStep(const op_call *c) {
    optimizer_step_layout l;
    TRY(optimizer_step_read(c->node, c->n_in, c->n_out, &l, c->err));
    const tensor *state = c->in[0], *hyper = c->in[1];
    if (!state || tensor_numel(state) != (int64_t)sizeof(train_state) || !hyper ||
        hyper->dtype != GRAFT_DTYPE_F32 || tensor_numel(hyper) != 2)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "needs the training state and (lr, momentum)");
    const float *hy = hyper->data;
    if (!isfinite(hy[0]) || hy[0] < 0.0f)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "learning rate %g", hy[0]);
    train_state st;
    memcpy(&st, state->data, sizeof st); /* the state may be unaligned bytes */
    step_lists s = {0};
    float *result = c->out[0]->data;
    result[0] = result[1] = 0.0f;
    graft_status status = gather(c, &l, &s);
    if (status == GRAFT_OK) status = step(c, &l, &st, hy, &s, result);
    if (status == GRAFT_OK) {
        memcpy(state->data, &st, sizeof st);
        for (int i = 0; i < l.n_params; i++)
            memset(s.grads[i], 0, sizeof(float) * (size_t)s.numels[i]);
    }
    lists_free(&s);
    return status;
}
