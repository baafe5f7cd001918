/* model_device.c: choosing where a model runs (the context's device option), creating the
 * device backend, and saying where it ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft_config.h"
#include "model.h"
#if GRAFT_HAVE_CUDA
#include "../cuda/cuda_backend.h"
#endif

/* "auto" -> -1, "cuda" -> 0, "cuda:N" -> N; -2 for anything else. */
static int parse_device(const char *d) {
    if (strcmp(d, "auto") == 0) return -1;
    if (strcmp(d, "cuda") == 0) return 0;
    if (strncmp(d, "cuda:", 5) != 0 || !d[5]) return -2;
    char *end = NULL;
    long n = strtol(d + 5, &end, 10);
    if (*end || n < 0 || n > 1024) return -2;
    return (int)n;
}

#if GRAFT_HAVE_CUDA
static void log_from_backend(void *user, int level, const char *msg) {
    ctx_log(user, (graft_log_level)level, "%s", msg);
}
static cuda_backend_options backend_options(graft_model *m, int index) {
    return (cuda_backend_options){.device = index,
                                  .allow_tf32 = m->ctx->options.allow_tf32 != 0,
                                  .log = log_from_backend,
                                  .log_user = m->ctx,
                                  .num_threads = m->ctx->options.num_threads};
}
#endif

/* "auto" without a usable GPU: one warning per context, then the CPU. */
static graft_status fall_back(graft_model *m, const char *why) {
    if (!m->ctx->device_noted)
        ctx_log(m->ctx, GRAFT_LOG_WARN, "device auto: %s; running on the CPU", why);
    m->ctx->device_noted = true;
    return GRAFT_OK;
}

graft_status model_open_device(graft_model *m, graft_err *e) {
    const char *d = m->ctx->options.device ? m->ctx->options.device : "cpu";
    snprintf(m->device_name, sizeof m->device_name, "cpu");
    if (strcmp(d, "cpu") == 0) return GRAFT_OK;
    int index = parse_device(d);
    if (index == -2)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "device '%s': expected cpu, auto, cuda or cuda:N", d);
#if !GRAFT_HAVE_CUDA
    if (index == -1) return fall_back(m, "this graft was built without CUDA");
    return err_set(e, GRAFT_E_UNSUPPORTED, "device '%s': this graft was built without CUDA", d);
#else
    char why[256] = "";
    int n = cuda_device_count(why, sizeof why);
    if (n == 0) {
        if (index == -1) {
            char msg[300];
            snprintf(msg, sizeof msg, "no usable GPU (%s)", why);
            return fall_back(m, msg);
        }
        return err_set(e, GRAFT_E_BACKEND, "device '%s': no usable GPU (%s)", d, why);
    }
    cuda_backend_options o = backend_options(m, index < 0 ? 0 : index);
    graft_err be_err;
    err_clear(&be_err);
    graft_status st = cuda_backend_create(&o, &m->device, &be_err);
    if (st != GRAFT_OK) {
        if (index == -1) return fall_back(m, be_err.msg);
        return err_set(e, st, "device '%s': %s", d, be_err.msg);
    }
    m->have_device = true;
    m->device_index = o.device;
    cuda_device_info info;
    if (cuda_device_query(o.device, &info, NULL) == GRAFT_OK)
        snprintf(m->device_name, sizeof m->device_name, "cuda:%d (%s)", o.device, info.name);
    else
        snprintf(m->device_name, sizeof m->device_name, "cuda:%d", o.device);
    ctx_log(m->ctx, GRAFT_LOG_INFO, "running on %s", m->device_name);
    return GRAFT_OK;
#endif
}

graft_status model_device_open_another(graft_model *m, graft_backend *out, bool *have,
                                       graft_err *e) {
    *have = false;
    if (!m->have_device) return GRAFT_OK;
#if GRAFT_HAVE_CUDA
    cuda_backend_options o = backend_options(m, m->device_index);
    TRY(cuda_backend_create(&o, out, e));
    *have = true;
    return GRAFT_OK;
#else
    (void)out;
    return err_set(e, GRAFT_E_INTERNAL, "a device model in a build without CUDA");
#endif
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
