/* trainer_resident.c: a head alone (head_step.h), or blocks, trained with everything resident on
 * their device (trainer.h's
 * `resident`): the optimizer graph (optim_graph.h) on the blocks' device holds every parameter,
 * gradient and optimizer state slot, the blocks' runs read their weights there and leave their
 * gradients there, so a step moves only the rows, the features, their gradient, the head's
 * gradients and weights (kilobytes) and the training state over PCIe. docs/training.md
 * "Blocks resident on the GPU". */
#include <stdlib.h>
#include <string.h>

#include "../core/device_kind.h"
#include "../dist/dist_train.h"
#include "trainer.h"

/* Whether the group's device collectives (NCCL) run on the model's device. */
static bool dist_on_model_device(const graft_trainer *t) {
    int index = dist_device_index(trainer_dist(t));
    /* (device_name reads "cuda:0 (NVIDIA H100 ...)": the index is kept apart) */
    return index >= 0 && t->model && t->model->have_device && t->model->device_index == index;
}

static bool wanted(const graft_trainer *t) {
    const char *env = getenv("GRAFT_RESIDENT");
    if (env && !strcmp(env, "0") && t->blocks) return false;
    /* data-parallel: resident when the device is the NCCL group's (the gradients are summed
     * there, trainer_resident_step; checked on a GPU by tools/gpu_nccl_run.sh); else the host
     * path sums host copies. GRAFT_DIST_RESIDENT=0 keeps the host path. */
    const char *dr = getenv("GRAFT_DIST_RESIDENT");
    if (trainer_dist(t) && (!dist_on_model_device(t) || (dr && !strcmp(dr, "0")))) return false;
    if (!t->blocks) /* a head alone: its step graph runs where the model does */
        return t->model && t->model->have_device && !t->gpu.disable;
    return train_exec_on_device(&t->blocks->run) && t->blocks->fixed == 0;
}

graft_status trainer_resident_setup(graft_trainer *t, int threads, graft_err *e) {
    bool fp16 = t->options.precision == GRAFT_PRECISION_FP16;
    float clip = (float)t->options.clip_norm;
    t->resident = wanted(t);
    t->device_current = false;
    t->host_current = true;
    t->n_head_params = t->n_params - (t->blocks ? t->blocks->n_params : 0);
    if (!t->resident) return optim_graph_init(&t->og, t->opt, fp16, clip, threads, e);
    graft_status st = optim_graph_init_model(&t->og, t->opt, fp16, clip, t->model, threads, e);
    if (st == GRAFT_OK && !t->og.on_device)
        st = err_set(e, GRAFT_E_INTERNAL, "the optimizer is not on the device");
    if (st == GRAFT_OK && trainer_dist(t))
        ctx_log(t->model->ctx, GRAFT_LOG_INFO,
                "data-parallel: the gradients are summed where they are, on %s, over %s",
                t->model->device_name, dist_backend_name(trainer_dist(t)));
    if (st == GRAFT_OK && (!t->blocks || trainer_step_graph_wanted(t))) return GRAFT_OK;
    if (st == GRAFT_OK) /* an error here leaves the blocks half changed: no way back */
        return blocks_make_resident(t->blocks, &t->og, t->n_head_params, t->model, threads, e);
    if (st != GRAFT_E_OUT_OF_MEMORY) return st;
    /* The weights, gradients and state do not fit on the device: the host keeps them, as before
     * residency (slower: they cross PCIe every step). */
    ctx_log(t->model->ctx, GRAFT_LOG_WARN,
            "the trainable weights, gradients and optimizer state do not fit on %s (%s); they "
            "stay on the host%s",
            t->model->device_name, e->msg,
            t->blocks ? " and cross PCIe every step" : ", where the head trains");
    err_clear(e);
    t->resident = false;
    return optim_graph_init(&t->og, t->opt, fp16, clip, threads, e);
}

graft_status trainer_device_current(graft_trainer *t, graft_err *e) {
    if (!t->resident || t->device_current) return GRAFT_OK;
    TRY(optim_graph_upload(&t->og, t->opt, &t->scaler, e));
    t->device_current = true;
    return GRAFT_OK;
}

/* Data-parallel: every parameter's gradient on the device summed across ranks (one fused NCCL
 * call), before the step unscales, clips and applies them. */
static graft_status sum_device_grads(graft_trainer *t, graft_err *e) {
    dist *d = trainer_dist(t);
    if (!d) return GRAFT_OK;
    void **bufs = malloc(sizeof *bufs * (size_t)t->n_params);
    int64_t *numels = malloc(sizeof *numels * (size_t)t->n_params);
    graft_status st =
        bufs && numels ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == GRAFT_OK && i < t->n_params; i++) {
        bufs[i] = optim_graph_device_buffer(&t->og, i, OG_G);
        numels[i] = t->params[i].numel;
    }
    if (st == GRAFT_OK) st = dist_allreduce_device(d, bufs, numels, t->n_params, e);
    free(bufs), free(numels);
    return st;
}

graft_status trainer_resident_step(graft_trainer *t, float lr, bool *skipped, graft_err *e) {
    float total_norm;
    TRY(trainer_device_current(t, e));
    t->host_current = false;
    if (t->hs.on_device) { /* the head's gradients are there already; nothing comes back */
        TRY(sum_device_grads(t, e));
        return optim_graph_step(&t->og, t->opt, lr, NULL, skipped, &total_norm, e);
    }
    /* the head trained on the host, in the blocks' pause */
    int nh = t->n_head_params;
    TRY(optim_graph_move(&t->og, t->opt, true, OG_G, 0, nh, e));
    TRY(sum_device_grads(t, e));
    TRY(optim_graph_step(&t->og, t->opt, lr, NULL, skipped, &total_norm, e));
    TRY(optim_graph_move(&t->og, t->opt, false, OG_W | OG_STATE, 0, nh, e));
    optim_graph_state_to(&t->og, t->opt, &t->scaler);
    return GRAFT_OK;
}

graft_status trainer_sync_host(graft_trainer *t, graft_err *e) {
    if (!t->resident || t->host_current || !t->device_current) return GRAFT_OK;
    TRY(optim_graph_download(&t->og, t->opt, &t->scaler, NULL, e));
    t->host_current = true;
    return GRAFT_OK;
}
