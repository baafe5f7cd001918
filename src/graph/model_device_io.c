/* model_device_io.c: inputs and outputs in GPU memory (graft_model_set_device_io) and the
 * device buffers and copies an application needs for them without linking CUDA itself. */
#include <string.h>

#include "model.h"

/* The model's device backend, or an error naming why there is none. */
static graft_backend *need_device(graft_model *m, const char *what) {
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (m->have_device) return &m->device;
    err_set(e, GRAFT_E_UNSUPPORTED, "%s: the model runs on the CPU (load it with a GPU device)",
            what);
    return NULL;
}

graft_status graft_model_set_device_io(graft_model *m, int inputs_on_device,
                                       int outputs_on_device) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    if ((inputs_on_device || outputs_on_device) && !need_device(m, "graft_model_set_device_io"))
        return m->ctx->err.status;
    err_clear(&m->ctx->err);
    if (m->inputs_on_device != (inputs_on_device != 0)) {
        m->exec.inputs_on_device = inputs_on_device != 0;
        exec_disable_graphs(&m->exec); /* recorded for the other kind of input */
        m->exec.graph_off = false;
    }
    m->inputs_on_device = inputs_on_device != 0;
    m->outputs_on_device = outputs_on_device != 0;
    return GRAFT_OK;
}

graft_status graft_model_device_alloc(graft_model *m, size_t bytes, void **out) {
    if (!m || !out) return GRAFT_E_INVALID_ARGUMENT;
    *out = NULL;
    graft_backend *d = need_device(m, "graft_model_device_alloc");
    if (!d) return m->ctx->err.status;
    TRY(d->alloc(d->impl, bytes ? bytes : 1, out, &m->ctx->err));
    /* Stream-ordered pools hand out memory for the model's stream: wait, so any stream may use it.
     */
    graft_status st = d->synchronize(d->impl, &m->ctx->err);
    if (st != GRAFT_OK) {
        d->free(d->impl, *out);
        *out = NULL;
    }
    return st;
}

void graft_model_device_free(graft_model *m, void *ptr) {
    if (m && ptr && m->have_device) m->device.free(m->device.impl, ptr);
}

graft_status graft_model_copy(graft_model *m, void *dst, const void *src, size_t bytes,
                              graft_copy_kind kind) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_backend *d = need_device(m, "graft_model_copy");
    if (!d) return m->ctx->err.status;
    graft_err *e = &m->ctx->err;
    if (bytes && (!dst || !src)) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "a NULL buffer");
    if (!bytes) return GRAFT_OK;
    switch (kind) {
    case GRAFT_COPY_HOST_TO_DEVICE:
        TRY(d->copy_to_device(d->impl, dst, src, bytes, e));
        return d->synchronize(d->impl, e);
    case GRAFT_COPY_DEVICE_TO_HOST:
        return d->copy_to_host(d->impl, dst, src, bytes, e);
    case GRAFT_COPY_DEVICE_TO_DEVICE:
        TRY(d->copy_on_device(d->impl, dst, src, bytes, e));
        return d->synchronize(d->impl, e);
    }
    return err_set(e, GRAFT_E_INVALID_ARGUMENT, "unknown copy kind %d", (int)kind);
}
