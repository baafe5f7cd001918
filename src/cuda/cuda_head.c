/* cuda_head.c: the GPU head's set-up: device buffers for weights, gradients, optimizer state and
 * one micro-batch; the training set placed in GPU memory (or pinned host memory); state to and
 * from the host; the per-micro-batch step that the trainer calls. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_head_internal.h"

static graft_status ch_select(cuda_head *ch, graft_err *e) {
    CUDA_TRY(e, cudaSetDevice(ch->be->device), "selecting the GPU for head training");
    return GRAFT_OK;
}

static graft_status dev_alloc(cuda_head *ch, void *out, size_t bytes, graft_err *e) {
    return cuda_malloc(ch->be, bytes, (void **)out, e);
}

/* Shapes and parameter layout from the host head: params 2i and 2i+1 are layer i's weight
 * (decayed) and bias, as head_params lists them, each starting 16-byte aligned (cuBLASLt's
 * faster kernels want that of the weights and biases). */
static void describe(cuda_head *ch, const head *h) {
    ch->n_layers = h->n_layers;
    ch->act = (int)h->activation;
    ch->dropout = h->dropout;
    ch->round = (int)h->precision;
    ch->fp16 = h->precision == GRAFT_PRECISION_FP16;
    int64_t at = 0;
    for (int i = 0; i < h->n_layers; i++) {
        const head_layer *hl = &h->layers[i];
        ch_layer *l = &ch->layers[i];
        l->in = hl->in;
        l->out = hl->out;
        l->has_act = hl->has_act;
        int64_t sizes[2] = {hl->in * hl->out, hl->out};
        for (int k = 0; k < 2; k++) {
            int p = 2 * i + k;
            at = (at + 3) & ~(int64_t)3;
            ch->numel[p] = sizes[k];
            ch->decay[p] = k == 0;
            ch->offset[p] = at;
            at += sizes[k];
        }
    }
    ch->n_params = 2 * h->n_layers;
    ch->offset[ch->n_params] = at;
    ch->n_outputs = h->layers[h->n_layers - 1].out;
}

static graft_status alloc_params(cuda_head *ch, graft_err *e) {
    int64_t total = ch->offset[ch->n_params];
    size_t bytes = sizeof(float) * (size_t)total;
    TRY(dev_alloc(ch, &ch->master, bytes, e));
    TRY(dev_alloc(ch, &ch->grad, bytes, e));
    if (ch->round != TRAIN_ROUND_NONE) TRY(dev_alloc(ch, &ch->wcopy, bytes, e));
    int64_t largest = 0;
    for (int i = 0; i < ch->n_layers; i++) {
        ch_layer *l = &ch->layers[i];
        int64_t w = ch->offset[2 * i], b = ch->offset[2 * i + 1];
        l->w = ch->master + w, l->b = ch->master + b;
        l->gw = ch->grad + w, l->gb = ch->grad + b;
        l->wc = ch->wcopy ? ch->wcopy + w : l->w;
        l->bc = ch->wcopy ? ch->wcopy + b : l->b;
        if (l->in * l->out > largest) largest = l->in * l->out;
    }
    if (ch->round != TRAIN_ROUND_NONE)
        TRY(dev_alloc(ch, &ch->dw_tmp, sizeof(float) * (size_t)largest, e));
    return GRAFT_OK;
}

static graft_status alloc_batch(cuda_head *ch, graft_err *e) {
    int64_t b = ch->opt.max_batch, widest = ch->n_outputs;
    ch->label_bytes =
        ch->loss == LOSS_SOFTMAX_CE ? sizeof(int64_t) : sizeof(float) * (size_t)ch->n_outputs;
    for (int i = 0; i < ch->n_layers; i++) {
        ch_layer *l = &ch->layers[i];
        if (l->in > widest) widest = l->in;
        TRY(dev_alloc(ch, &l->z, sizeof(float) * (size_t)(b * l->out), e));
        if (l->has_act) TRY(dev_alloc(ch, &l->y, sizeof(float) * (size_t)(b * l->out), e));
    }
    TRY(dev_alloc(ch, &ch->x0, sizeof(float) * (size_t)(b * ch->layers[0].in), e));
    TRY(dev_alloc(ch, &ch->yb, ch->label_bytes * (size_t)b, e));
    TRY(dev_alloc(ch, &ch->g_a, sizeof(float) * (size_t)(b * widest), e));
    TRY(dev_alloc(ch, &ch->g_b, sizeof(float) * (size_t)(b * widest), e));
    TRY(dev_alloc(ch, &ch->loss_scratch, sizeof(double) * 4 * (size_t)b, e));
    TRY(dev_alloc(ch, &ch->partials, sizeof(double) * TRAIN_PARTIALS * (size_t)(ch->n_params + 2),
                  e));
    TRY(dev_alloc(ch, &ch->st, sizeof(train_state), e));
    CUDA_TRY(e, cudaMallocHost((void **)&ch->host_st, sizeof(train_state)),
             "allocating pinned memory for the training state");
    memset(ch->host_st, 0, sizeof *ch->host_st);
    return GRAFT_OK;
}

/* Class weights (CE) or positive weights (BCE) to the device; wsum_c is the CE gradient's sum of
 * class weights. */
static graft_status upload_loss(cuda_head *ch, const loss_spec *loss, graft_err *e) {
    size_t bytes = sizeof(float) * (size_t)ch->n_outputs;
    const float *cw = loss->kind == LOSS_SOFTMAX_CE ? loss->class_weight : NULL;
    const float *pw = loss->kind == LOSS_BCE_LOGITS ? loss->pos_weight : NULL;
    ch->wsum_c = 0.0;
    for (int64_t k = 0; k < ch->n_outputs; k++) ch->wsum_c += cw ? (double)cw[k] : 1.0;
    cudaStream_t s = ch->be->stream;
    if (cw) {
        TRY(dev_alloc(ch, &ch->class_weight, bytes, e));
        CUDA_TRY(e, cudaMemcpyAsync(ch->class_weight, cw, bytes, cudaMemcpyHostToDevice, s),
                 "copying class weights to the GPU");
    }
    if (pw) {
        TRY(dev_alloc(ch, &ch->pos_weight, bytes, e));
        CUDA_TRY(e, cudaMemcpyAsync(ch->pos_weight, pw, bytes, cudaMemcpyHostToDevice, s),
                 "copying positive weights to the GPU");
    }
    return GRAFT_OK;
}

graft_status cuda_head_create(cuda_head **out, graft_backend *device, const head *h,
                              const optim_config *oc, const loss_spec *loss,
                              const cuda_head_options *o, graft_err *e) {
    *out = NULL;
    if (!device || !device->impl || !h || h->n_layers < 1 || h->n_layers > HEAD_MAX_LAYERS || !oc ||
        !loss || !o || o->max_batch < 1 || o->accumulate < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "GPU head: bad arguments");
    cuda_head *ch = calloc(1, sizeof *ch);
    if (!ch) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for the GPU head");
    ch->be = device->impl;
    ch->oc = *oc;
    ch->opt = *o;
    ch->loss = loss->kind;
    ch->smoothing = loss->label_smoothing;
    describe(ch, h);
    graft_status st = ch_select(ch, e);
    if (st == GRAFT_OK) st = alloc_params(ch, e);
    if (st == GRAFT_OK) st = alloc_batch(ch, e);
    if (st == GRAFT_OK) st = upload_loss(ch, loss, e);
    if (st != GRAFT_OK) {
        cuda_head_free(ch);
        return st;
    }
    *out = ch;
    return GRAFT_OK;
}

static void release_data(cuda_head *ch) {
    cuda_backend *be = ch->be;
    if (ch->registered) {
        cudaStreamSynchronize(be->stream); /* no gather may still read the pages */
        cudaHostUnregister((void *)ch->host_x);
        ch->registered = false;
    }
    cuda_free(be, ch->dev_x_owned), cuda_free(be, ch->dev_y), cuda_free(be, ch->dev_order);
    ch->dev_x_owned = NULL, ch->dev_y = NULL, ch->dev_order = NULL, ch->dev_x = NULL;
    for (int s = 0; s < 2; s++) {
        if (ch->staged[s]) cudaEventSynchronize(ch->staged[s]), cudaEventDestroy(ch->staged[s]);
        if (ch->staging[s]) cudaFreeHost(ch->staging[s]);
        ch->staged[s] = NULL, ch->staging[s] = NULL;
    }
    ch->host_x = NULL;
    ch->host_order = NULL;
    ch->n = 0;
    ch->counters.place = CUDA_HEAD_FEATURES_NONE;
}

void cuda_head_free(cuda_head *ch) {
    if (!ch) return;
    cuda_backend *be = ch->be;
    cudaSetDevice(be->device);
    release_data(ch);
    for (int i = 0; i < ch->n_layers; i++) {
        ch_layer *l = &ch->layers[i];
        for (int g = 0; g < CH_GEMMS; g++)
            for (int f = 0; f < 2; f++) cuda_gemm_plan_free(l->plans[g][f]);
        cuda_free(be, l->z), cuda_free(be, l->y);
    }
    cuda_free(be, ch->master), cuda_free(be, ch->grad), cuda_free(be, ch->wcopy);
    for (int k = 0; k < CH_STATE_KINDS; k++) cuda_free(be, ch->state[k]);
    cuda_free(be, ch->x0), cuda_free(be, ch->yb), cuda_free(be, ch->g_a), cuda_free(be, ch->g_b);
    cuda_free(be, ch->dw_tmp), cuda_free(be, ch->loss_scratch), cuda_free(be, ch->partials);
    cuda_free(be, ch->st), cuda_free(be, ch->class_weight), cuda_free(be, ch->pos_weight);
    cudaStreamSynchronize(be->stream); /* the pinned state may still be a copy's target */
    if (ch->host_st) cudaFreeHost(ch->host_st);
    free(ch);
}

/* The state kind of an optimizer buffer, from its name's last part ("...exp_avg_sq"). */
static int state_kind(const char *name) {
    const char *dot = strrchr(name, '.');
    const char *tail = dot ? dot + 1 : name;
    static const char *const names[CH_STATE_KINDS] = {"momentum_buffer", "exp_avg", "exp_avg_sq",
                                                      "max_exp_avg_sq"};
    for (int k = 0; k < CH_STATE_KINDS; k++)
        if (strcmp(tail, names[k]) == 0) return k;
    return -1;
}

/* Device buffers for the state kinds the host optimizer keeps (zeroed): the same set, so that
 * e.g. SGD made without momentum stays without it whatever one-cycle later sets. */
static graft_status alloc_optim(cuda_head *ch, optim *opt, graft_err *e) {
    size_t bytes = sizeof(float) * (size_t)ch->offset[ch->n_params];
    int count = optim_state_count(opt);
    for (int i = 0; i < count; i++) {
        optim_state_buf b;
        TRY(optim_state_get(&b, opt, i, e));
        int k = state_kind(b.name);
        if (k < 0 || ch->state[k]) continue;
        TRY(dev_alloc(ch, &ch->state[k], bytes, e));
        CUDA_TRY(e, cudaMemsetAsync(ch->state[k], 0, bytes, ch->be->stream),
                 "clearing optimizer state");
    }
    if (ch->oc.kind != OPTIM_SGD && (!ch->state[CH_EXP_AVG] || !ch->state[CH_EXP_AVG_SQ]))
        return err_set(e, GRAFT_E_INTERNAL, "GPU head: the optimizer has no moment buffers");
    return GRAFT_OK;
}

/* Copy every optimizer state buffer between the host optimizer and the device. */
static graft_status transfer_optim(cuda_head *ch, optim *opt, bool to_device, graft_err *e) {
    int count = optim_state_count(opt);
    for (int i = 0; i < count; i++) {
        optim_state_buf b;
        TRY(optim_state_get(&b, opt, i, e));
        int k = state_kind(b.name);
        if (k < 0 || !ch->state[k] || b.param_index < 0 || b.param_index >= ch->n_params ||
            b.numel != ch->numel[b.param_index])
            return err_set(e, GRAFT_E_INTERNAL, "GPU head: optimizer state '%s' has no match",
                           b.name);
        float *dev = ch->state[k] + ch->offset[b.param_index];
        size_t bytes = sizeof(float) * (size_t)b.numel;
        if (to_device)
            CUDA_TRY(e, cudaMemcpyAsync(dev, b.data, bytes, cudaMemcpyHostToDevice, ch->be->stream),
                     "copying optimizer state to the GPU");
        else
            CUDA_TRY(e, cudaMemcpyAsync(b.data, dev, bytes, cudaMemcpyDeviceToHost, ch->be->stream),
                     "copying optimizer state from the GPU");
    }
    return GRAFT_OK;
}

/* Copy every layer's master weights between the host head and the device. */
static graft_status transfer_weights(cuda_head *ch, const head *h, bool to_device, graft_err *e) {
    for (int i = 0; i < ch->n_layers; i++) {
        const head_layer *hl = &h->layers[i];
        ch_layer *l = &ch->layers[i];
        float *host[2] = {hl->w.data, hl->b.data}, *dev[2] = {l->w, l->b};
        int64_t numel[2] = {l->in * l->out, l->out};
        for (int k = 0; k < 2; k++) {
            size_t bytes = sizeof(float) * (size_t)numel[k];
            if (to_device)
                CUDA_TRY(
                    e,
                    cudaMemcpyAsync(dev[k], host[k], bytes, cudaMemcpyHostToDevice, ch->be->stream),
                    "copying head weights to the GPU");
            else
                CUDA_TRY(
                    e,
                    cudaMemcpyAsync(host[k], dev[k], bytes, cudaMemcpyDeviceToHost, ch->be->stream),
                    "copying head weights from the GPU");
        }
    }
    return GRAFT_OK;
}

graft_status cuda_head_upload_state(cuda_head *ch, const head *h, optim *opt,
                                    const loss_scaler *scaler, int64_t skipped, graft_err *e) {
    TRY(ch_select(ch, e));
    cudaStream_t s = ch->be->stream;
    size_t bytes = sizeof(float) * (size_t)ch->offset[ch->n_params];
    CUDA_TRY(e, cudaMemsetAsync(ch->master, 0, bytes, s), "clearing the GPU head"); /* pads */
    TRY(transfer_weights(ch, h, true, e));
    CUDA_TRY(e, cudaMemsetAsync(ch->grad, 0, bytes, s), "clearing the GPU head's gradients");
    TRY(alloc_optim(ch, opt, e));
    TRY(transfer_optim(ch, opt, true, e));
    train_state *hs = ch->host_st;
    memset(hs, 0, sizeof *hs);
    hs->scale = scaler->scale;
    hs->growth_factor = scaler->growth_factor;
    hs->backoff_factor = scaler->backoff_factor;
    hs->growth_interval = scaler->growth_interval;
    hs->growth_tracker = scaler->growth_tracker;
    hs->skipped = skipped;
    hs->opt_steps = optim_step_count(opt);
    hs->clip_coef = 1.0f;
    hs->inv_scale = 1.0f;
    CUDA_TRY(e, cudaMemcpyAsync(ch->st, hs, sizeof *hs, cudaMemcpyHostToDevice, s),
             "copying the training state to the GPU");
    CUDA_TRY(e, cudaStreamSynchronize(s), "uploading the head to the GPU");
    return GRAFT_OK;
}

graft_status cuda_head_read(cuda_head *ch, cuda_head_stats *out, graft_err *e) {
    TRY(ch_select(ch, e));
    cudaStream_t s = ch->be->stream;
    CUDA_TRY(e,
             cudaMemcpyAsync(ch->host_st, ch->st, sizeof *ch->host_st, cudaMemcpyDeviceToHost, s),
             "reading the training state from the GPU");
    CUDA_TRY(e, cudaStreamSynchronize(s), "training the head on the GPU");
    const train_state *hs = ch->host_st;
    out->step_loss = hs->step_loss;
    out->step_correct = hs->step_correct;
    out->epoch_loss = hs->epoch_loss;
    out->epoch_correct = hs->epoch_correct;
    out->scaler = (loss_scaler){hs->scale, hs->growth_factor, hs->backoff_factor,
                                hs->growth_interval, hs->growth_tracker};
    out->skipped = hs->skipped;
    out->opt_steps = hs->opt_steps;
    out->bad_batches = hs->bad_batches;
    return GRAFT_OK;
}

graft_status cuda_head_download_state(cuda_head *ch, head *h, optim *opt, loss_scaler *scaler,
                                      int64_t *skipped, graft_err *e) {
    cuda_head_stats stats = {0};
    TRY(cuda_head_read(ch, &stats, e));
    TRY(transfer_weights(ch, h, false, e));
    TRY(transfer_optim(ch, opt, false, e));
    CUDA_TRY(e, cudaStreamSynchronize(ch->be->stream), "copying the head from the GPU");
    optim_set_step_count(opt, stats.opt_steps);
    *scaler = stats.scaler;
    *skipped = stats.skipped;
    return GRAFT_OK;
}

graft_status cuda_head_set_scaler(cuda_head *ch, const loss_scaler *scaler, graft_err *e) {
    TRY(ch_select(ch, e));
    cudaStream_t s = ch->be->stream;
    train_state *hs = ch->host_st;
    TRY(cuda_head_read(ch, &(cuda_head_stats){0}, e)); /* host_st now mirrors the device */
    hs->scale = scaler->scale;
    hs->growth_tracker = scaler->growth_tracker;
    CUDA_TRY(e, cudaMemcpyAsync(ch->st, hs, sizeof *hs, cudaMemcpyHostToDevice, s),
             "copying the loss scale to the GPU");
    CUDA_TRY(e, cudaStreamSynchronize(s), "copying the loss scale to the GPU");
    return GRAFT_OK;
}

cuda_head_counters cuda_head_get_counters(const cuda_head *ch) {
    return ch->counters;
}

/* GPU memory when the features fit with room to spare; else the host array page-locked and
 * mapped; else pinned staging buffers that each batch's rows are copied through. */
static graft_status place_features(cuda_head *ch, graft_err *e) {
    cudaStream_t s = ch->be->stream;
    size_t bytes = sizeof(float) * (size_t)(ch->n * ch->dim);
    size_t free_b = 0, total_b = 0;
    if (!ch->opt.force_host_features && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess &&
        bytes + ((size_t)256 << 20) + total_b / 20 <= free_b) {
        graft_err ignored;
        err_clear(&ignored);
        if (cuda_malloc(ch->be, bytes, (void **)&ch->dev_x_owned, &ignored) == GRAFT_OK) {
            CUDA_TRY(e,
                     cudaMemcpyAsync(ch->dev_x_owned, ch->host_x, bytes, cudaMemcpyHostToDevice, s),
                     "copying the features to the GPU");
            ch->dev_x = ch->dev_x_owned;
            ch->counters.place = CUDA_HEAD_FEATURES_DEVICE;
            ch->counters.feature_h2d_bytes += (int64_t)bytes;
            return GRAFT_OK;
        }
    }
    void *mapped = NULL;
    if (cudaHostRegister((void *)ch->host_x, bytes, cudaHostRegisterMapped) == cudaSuccess) {
        if (cudaHostGetDevicePointer(&mapped, (void *)ch->host_x, 0) == cudaSuccess) {
            ch->registered = true;
            ch->dev_x = mapped;
            ch->counters.place = CUDA_HEAD_FEATURES_MAPPED;
            return GRAFT_OK;
        }
        cudaHostUnregister((void *)ch->host_x);
    }
    cudaGetLastError(); /* the failed registration is not an error of what follows */
    size_t stage = sizeof(float) * (size_t)(ch->opt.max_batch * ch->dim);
    for (int k = 0; k < 2; k++) {
        CUDA_TRY(e, cudaMallocHost((void **)&ch->staging[k], stage),
                 "allocating pinned staging buffers for the features");
        CUDA_TRY(e, cudaEventCreateWithFlags(&ch->staged[k], cudaEventDisableTiming),
                 "creating a staging event");
    }
    ch->counters.place = CUDA_HEAD_FEATURES_STAGED;
    return GRAFT_OK;
}

graft_status cuda_head_set_data(cuda_head *ch, const float *x, const void *y, int64_t n,
                                graft_err *e) {
    TRY(ch_select(ch, e));
    release_data(ch);
    if (!x || !y || n < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "GPU head: no training data");
    /* The labels as loss_compute checks them, once for the whole set (the CPU checks each
     * batch). */
    TRY(loss_check_targets(ch->loss, y, n, ch->n_outputs, e));
    ch->n = n;
    ch->dim = ch->layers[0].in;
    ch->host_x = x;
    size_t ybytes = ch->label_bytes * (size_t)n;
    TRY(dev_alloc(ch, &ch->dev_y, ybytes, e));
    CUDA_TRY(e, cudaMemcpyAsync(ch->dev_y, y, ybytes, cudaMemcpyHostToDevice, ch->be->stream),
             "copying the labels to the GPU");
    TRY(dev_alloc(ch, &ch->dev_order, sizeof(int64_t) * (size_t)n, e));
    return place_features(ch, e);
}

graft_status cuda_head_epoch_begin(cuda_head *ch, const int64_t *order, graft_err *e) {
    TRY(ch_select(ch, e));
    cudaStream_t s = ch->be->stream;
    if (!ch->dev_order) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "GPU head: no data set");
    ch->host_order = order;
    /* From pageable memory: the copy has read `order` when the call returns. */
    CUDA_TRY(e,
             cudaMemcpyAsync(ch->dev_order, order, sizeof(int64_t) * (size_t)ch->n,
                             cudaMemcpyHostToDevice, s),
             "copying the epoch's order to the GPU");
    char *st = (char *)ch->st;
    CUDA_TRY(e, cudaMemsetAsync(st + offsetof(train_state, epoch_loss), 0, sizeof(double), s),
             "clearing the epoch's loss");
    CUDA_TRY(e, cudaMemsetAsync(st + offsetof(train_state, epoch_correct), 0, sizeof(int64_t), s),
             "clearing the epoch's count");
    return GRAFT_OK;
}

graft_status cuda_head_step(cuda_head *ch, int64_t at, int64_t m, uint64_t dropout_seed,
                            const cuda_head_update *u, graft_err *e) {
    if (m < 1 || m > ch->opt.max_batch || at < 0 || at + m > ch->n || !ch->host_order)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "GPU head: batch [%lld, %lld) of %lld rows",
                       (long long)at, (long long)(at + m), (long long)ch->n);
    TRY(ch_select(ch, e));
    TRY(ch_gather(ch, at, m, e));
    const float *logits;
    TRY(ch_forward(ch, m, true, dropout_seed, &logits, e));
    train_loss_args a = {.kind = (int)ch->loss,
                         .m = m,
                         .c = ch->n_outputs,
                         .smoothing = ch->smoothing,
                         .wsum_c = ch->wsum_c,
                         .class_weight = ch->class_weight,
                         .pos_weight = ch->pos_weight,
                         .targets = ch->yb,
                         .grad_mult = 1.0 / (double)ch->opt.accumulate,
                         .scale_grad = ch->fp16,
                         .round = ch->round};
    CUDA_TRY(e, train_loss(logits, ch->g_a, &a, ch->loss_scratch, ch->st, ch->be->stream),
             "computing the loss on the GPU");
    TRY(ch_backward(ch, m, e));
    if (u) TRY(ch_apply(ch, u, e));
    return GRAFT_OK;
}
