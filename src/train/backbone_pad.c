/* backbone_pad.c: on a GPU, a short backbone batch (a source's last, one with skipped files)
 * runs padded to the full batch, so the model keeps one shape: each new shape costs a memory
 * plan, cuDNN's algorithm choice and a CUDA graph recording (0.3-0.65 s for ResNet-50 on an
 * H200), the padding rows a few milliseconds of compute. A frozen backbone's rows are
 * independent (the feature cache assumes so too), so the first rows' features are unchanged. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../graph/model.h"
#include "trainer.h"
#include "../core/clock.h"

bool backbone_pads(const graft_trainer *t) {
    return t->backbone->have_device;
}

/* Buffer k grown to `bytes` where the model reads its inputs (device or host); zero_tail fills
 * what the rows copied in leave. */
static graft_status pad_buffer(graft_trainer *t, int k, size_t bytes, bool dev, graft_err *e) {
    backbone_pad_buffer *p = &t->pad[k];
    if (p->bytes >= bytes && p->on_device == dev) return GRAFT_OK;
    backbone_pad_free_one(t, k);
    graft_backend *d = &t->backbone->device;
    if (dev) {
        TRY(d->alloc(d->impl, bytes, &p->data, e));
    } else {
        p->data = malloc(bytes);
        if (!p->data) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory padding a batch");
    }
    p->bytes = bytes, p->on_device = dev;
    return GRAFT_OK;
}

/* The tail [from, bytes) of buffer k set to zero (a device buffer from a zeroed host block). */
static graft_status zero_tail(graft_trainer *t, int k, size_t from, size_t bytes, graft_err *e) {
    backbone_pad_buffer *p = &t->pad[k];
    if (bytes <= from) return GRAFT_OK;
    if (!p->on_device) {
        memset((char *)p->data + from, 0, bytes - from);
        return GRAFT_OK;
    }
    if (t->pad_zeros_bytes < bytes - from) {
        free(t->pad_zeros);
        t->pad_zeros_bytes = 0;
        if (!(t->pad_zeros = calloc(1, bytes - from)))
            return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory padding a batch");
        t->pad_zeros_bytes = bytes - from;
    }
    graft_backend *d = &t->backbone->device;
    return d->copy_to_device(d->impl, (char *)p->data + from, t->pad_zeros, bytes - from, e);
}

graft_status backbone_pad(graft_trainer *t, const graft_named_tensor *in, int n_in, int64_t m,
                          int64_t rows, graft_named_tensor *out, graft_err *e) {
    if (n_in > BACKBONE_PAD_INPUTS)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "too many inputs to pad (%d)", n_in);
    bool dev = t->backbone->inputs_on_device;
    graft_backend *d = &t->backbone->device;
    for (int k = 0; k < n_in; k++) {
        const graft_tensor *x = &in[k].tensor;
        size_t row = (size_t)(graft_tensor_numel(x) / m) * graft_dtype_size(x->dtype);
        size_t used = row * (size_t)m, bytes = row * (size_t)rows;
        TRY(pad_buffer(t, k, bytes, dev, e));
        void *dst = t->pad[k].data;
        if (dev)
            TRY(d->copy_on_device(d->impl, dst, x->data, used, e));
        else
            memcpy(dst, x->data, used);
        TRY(zero_tail(t, k, used, bytes, e));
        out[k] = in[k];
        out[k].tensor.dims[0] = rows;
        out[k].tensor.data = dst;
    }
    return GRAFT_OK;
}

void backbone_warm_up(graft_trainer *t, int64_t rows) {
    if (!backbone_pads(t) || t->warmed_up || graft_model_input_count(t->backbone) != 1) return;
    t->warmed_up = true;
    graft_value_info v;
    graft_err *e = &t->backbone->ctx->err;
    if (graft_model_input_info(t->backbone, 0, &v) != GRAFT_OK || v.ndim < 2) return;
    graft_named_tensor in = {v.name, {v.dtype, v.ndim, {rows}, NULL}};
    size_t bytes = graft_dtype_size(v.dtype) * (size_t)rows;
    for (int d = 1; d < v.ndim; d++) {
        if (v.dims[d] <= 0) return; /* a size only the data says (a text's length) */
        in.tensor.dims[d] = v.dims[d];
        bytes *= (size_t)v.dims[d];
    }
    double t0 = clock_seconds();
    graft_status st = pad_buffer(t, 0, bytes, t->backbone->inputs_on_device, e);
    if (st == GRAFT_OK) st = zero_tail(t, 0, 0, bytes, e);
    in.tensor.data = t->pad[0].data;
    if (st == GRAFT_OK) st = graft_model_run(t->backbone, &in, 1);
    t->backbone_seconds += clock_seconds() - t0;
    ctx_log(t->backbone->ctx, GRAFT_LOG_DEBUG,
            "backbone: warmed up on %lld zero samples in %.2f ms%s%s", (long long)rows,
            (clock_seconds() - t0) * 1e3, st == GRAFT_OK ? "" : ": ", st == GRAFT_OK ? "" : e->msg);
    err_clear(e); /* a failed warm-up leaves the first batch to fail or not */
}

void backbone_pad_free_one(graft_trainer *t, int k) {
    backbone_pad_buffer *p = &t->pad[k];
    if (p->data && p->on_device)
        t->backbone->device.free(t->backbone->device.impl, p->data);
    else
        free(p->data);
    memset(p, 0, sizeof *p);
}

void backbone_pad_free(graft_trainer *t) {
    for (int k = 0; k < BACKBONE_PAD_INPUTS; k++) backbone_pad_free_one(t, k);
    free(t->pad_zeros);
    t->pad_zeros = NULL, t->pad_zeros_bytes = 0;
}
