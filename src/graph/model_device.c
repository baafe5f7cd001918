/* model_device.c: choosing where a model runs (the context's device option), creating the
 * device backend, and saying where it ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/device_kind.h"
#include "model.h"

static void log_from_backend(void *user, int level, const char *msg) {
    ctx_log(user, (graft_log_level)level, "%s", msg);
}

static device_backend_options backend_options(graft_model *m, int index) {
    return (device_backend_options){.device = index,
                                    .allow_tf32 = m->ctx->options.allow_tf32 != 0,
                                    .log = log_from_backend,
                                    .log_user = m->ctx,
                                    .num_threads = m->ctx->options.num_threads};
}

/* "auto" without a usable GPU: one warning per context, then the CPU. */
static graft_status fall_back(graft_model *m, const char *why) {
    if (!m->ctx->device_noted)
        ctx_log(m->ctx, GRAFT_LOG_WARN, "device auto: %s; running on the CPU", why);
    m->ctx->device_noted = true;
    return GRAFT_OK;
}

/* "auto": the first kind with a usable device; *kind NULL (and why says so) when none. */
static const device_kind *auto_kind(char *why, size_t why_size) {
    int n;
    const device_kind *const *kinds = device_kinds(&n);
    snprintf(why, why_size, "this graft was built without CUDA");
    for (int i = 0; i < n; i++) {
        char w[256] = "";
        if (kinds[i]->count(w, sizeof w) > 0) return kinds[i];
        snprintf(why, why_size, "no usable GPU (%s)", w);
    }
    return NULL;
}

/* Open device index of kind k for m: the backend, its name, the log line. */
static graft_status open_on(graft_model *m, const device_kind *k, int index, const char *d,
                            bool automatic, graft_err *e) {
    device_backend_options o = backend_options(m, index);
    graft_err be_err;
    err_clear(&be_err);
    graft_status st = k->create(&o, &m->device, &be_err);
    if (st != GRAFT_OK) {
        if (automatic) return fall_back(m, be_err.msg);
        return err_set(e, st, "device '%s': %s", d, be_err.msg);
    }
    m->have_device = true;
    m->device_kind = k;
    m->device_index = index;
    graft_gpu_info info;
    if (k->query(index, &info, NULL) == GRAFT_OK)
        snprintf(m->device_name, sizeof m->device_name, "%s:%d (%s)", k->name, index, info.name);
    else
        snprintf(m->device_name, sizeof m->device_name, "%s:%d", k->name, index);
    ctx_log(m->ctx, GRAFT_LOG_INFO, "running on %s", m->device_name);
    return GRAFT_OK;
}

graft_status model_open_device(graft_model *m, graft_err *e) {
    const char *d = m->ctx->options.device ? m->ctx->options.device : "cpu";
    snprintf(m->device_name, sizeof m->device_name, "cpu");
    if (strcmp(d, "cpu") == 0) return GRAFT_OK;
    char why[300] = "";
    if (strcmp(d, "auto") == 0) {
        const device_kind *k = auto_kind(why, sizeof why);
        return k ? open_on(m, k, 0, d, true, e) : fall_back(m, why);
    }
    int index = device_kind_known(d) ? device_index_of(d) : -2;
    if (index == -2)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "device '%s': expected cpu, auto, cuda or cuda:N", d);
    const device_kind *k = device_kind_of(d);
    if (!k)
        return err_set(e, GRAFT_E_UNSUPPORTED, "device '%s': this graft was built without CUDA", d);
    if (k->count(why, sizeof why) == 0)
        return err_set(e, GRAFT_E_BACKEND, "device '%s': no usable GPU (%s)", d, why);
    return open_on(m, k, index, d, false, e);
}

graft_status model_device_open_another(graft_model *m, graft_backend *out, bool *have,
                                       graft_err *e) {
    *have = false;
    if (!m->have_device) return GRAFT_OK;
    if (!m->device_kind) return err_set(e, GRAFT_E_INTERNAL, "a device model without its kind");
    device_backend_options o = backend_options(m, m->device_index);
    TRY(m->device_kind->create(&o, out, e));
    *have = true;
    return GRAFT_OK;
}

graft_backend *model_device(graft_model *m) {
    return m->have_device ? &m->device : NULL;
}

void model_release_state(graft_model *m) {
    m->batch.chunked = false; /* the last chunked run's outputs are stale too */
    exec_drop_device_copies(&m->exec);
    m->backend.release_state(m->backend.impl);
    if (m->have_device) m->device.release_state(m->device.impl);
}

/* Nodes the device has no kernel for run on the CPU: say which, once per model. */
void model_note_fallbacks(graft_model *m) {
    const executor *x = &m->exec;
    if (!m->have_device || x->n_fallback_nodes == 0) return;
    char ops[512] = "";
    size_t len = 0;
    for (int i = 0; i < m->g.n_nodes && len + 40 < sizeof ops; i++) {
        const ir_node *n = &m->g.nodes[i];
        if (!x->node_fallback[i]) continue;
        if (strstr(ops, n->op_type)) continue;
        len += (size_t)snprintf(ops + len, sizeof ops - len, "%s%s", len ? ", " : "", n->op_type);
    }
    ctx_log(m->ctx, GRAFT_LOG_WARN, "%d node%s run on the CPU (no CUDA kernel): %s",
            x->n_fallback_nodes, x->n_fallback_nodes == 1 ? "" : "s", ops);
}

const char *graft_model_device(const graft_model *m) {
    return m ? m->device_name : "";
}
