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

/* The copies graft_model_copy_async started, waited for on the host. */
static graft_status sync_uploads(graft_model *m, graft_err *e) {
    graft_backend *d = &m->device;
    return m->have_device && d->sync_uploads ? d->sync_uploads(d->impl, e) : GRAFT_OK;
}

void graft_model_device_free(graft_model *m, void *ptr) {
    if (!m || !ptr || !m->have_device) return;
    graft_err scratch = {0}; /* a failed wait is the device's error: the next call reports it */
    sync_uploads(m, &scratch);
    m->device.free(m->device.impl, ptr);
}

graft_status graft_model_host_alloc(graft_model *m, size_t bytes, void **out) {
    if (!m || !out) return GRAFT_E_INVALID_ARGUMENT;
    *out = NULL;
    graft_backend *d = need_device(m, "graft_model_host_alloc");
    if (!d) return m->ctx->err.status;
    if (!d->host_alloc)
        return err_set(&m->ctx->err, GRAFT_E_UNSUPPORTED,
                       "graft_model_host_alloc: the %s backend has no page-locked memory", d->name);
    return d->host_alloc(d->impl, bytes ? bytes : 1, out, &m->ctx->err);
}

void graft_model_host_free(graft_model *m, void *ptr) {
    if (!m || !ptr || !m->have_device || !m->device.host_free) return;
    graft_err scratch = {0};
    sync_uploads(m, &scratch); /* a copy may still read it */
    m->device.host_free(ptr);
}

graft_status graft_model_copy_async(graft_model *m, void *dst, const void *src, size_t bytes) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_backend *d = need_device(m, "graft_model_copy_async");
    if (!d) return m->ctx->err.status;
    graft_err *e = &m->ctx->err;
    if (bytes && (!dst || !src)) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "a NULL buffer");
    if (!d->upload_async)
        return err_set(e, GRAFT_E_UNSUPPORTED, "graft_model_copy_async: the %s backend has none",
                       d->name);
    return d->upload_async(d->impl, dst, src, bytes, e);
}

graft_status graft_model_copy_wait(graft_model *m) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    if (!need_device(m, "graft_model_copy_wait")) return m->ctx->err.status;
    return sync_uploads(m, &m->ctx->err);
}

graft_status graft_model_copy(graft_model *m, void *dst, const void *src, size_t bytes,
                              graft_copy_kind kind) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_backend *d = need_device(m, "graft_model_copy");
    if (!d) return m->ctx->err.status;
    graft_err *e = &m->ctx->err;
    if (bytes && (!dst || !src)) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "a NULL buffer");
    if (!bytes) return GRAFT_OK;
    TRY(sync_uploads(m, e)); /* an asynchronous copy under way may write dst or read src */
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
