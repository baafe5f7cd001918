/* train_exec.c: running a training graph with graph/exec on a CPU backend of its own. */
#include "train_exec.h"

#include <stdlib.h>
#include <string.h>

#include "../core/device_kind.h"
#include "../cpu/cpu_backend.h"
#include "../graph/model.h"

/* A backend on `device` ("cuda:1") through the registry; nothing for the CPU. */
static graft_status open_named(train_exec *t, const char *device, int num_threads, graft_err *e) {
    if (!device || !strcmp(device, "cpu")) return GRAFT_OK;
    const device_kind *k = device_kind_of(device);
    int index = device_index_of(device);
    if (!k || index < 0)
        return err_set(e, GRAFT_E_UNSUPPORTED, "device '%s': not a device of this build", device);
    device_backend_options o = {.device = index, .num_threads = num_threads};
    TRY(k->create(&o, &t->device, e));
    t->have_device = true;
    return GRAFT_OK;
}

static graft_status init_on(train_exec *t, ir_graph *g, bool reference_only, int num_threads,
                            graft_model *m, const char *device, graft_err *e) {
    memset(t, 0, sizeof *t);
    t->g = g;
    TRY(cpu_backend_create(num_threads, reference_only, &t->cpu, e));
    t->have_cpu = true;
    graft_status st = m ? model_device_open_another(m, &t->device, &t->have_device, e)
                        : open_named(t, device, num_threads, e);
    if (st == GRAFT_OK) st = exec_init(&t->x, g, &t->cpu, t->have_device ? &t->device : NULL, e);
    if (st != GRAFT_OK) {
        train_exec_free(t);
        return st;
    }
    t->have_x = true;
    /* node by node: the runs with a pause could not replay a recording anyway, and the batch
     * size of the evaluation runs changes at an epoch's last batch */
    exec_disable_graphs(&t->x);
    t->x.pin_outputs = t->have_device; /* the gradients: large, read after every run */
    return GRAFT_OK;
}

graft_status train_exec_init(train_exec *t, ir_graph *g, bool reference_only, int num_threads,
                             graft_err *e) {
    return init_on(t, g, reference_only, num_threads, NULL, NULL, e);
}

graft_status train_exec_init_device(train_exec *t, ir_graph *g, int num_threads, graft_model *m,
                                    graft_err *e) {
    return init_on(t, g, false, num_threads, m, NULL, e);
}

graft_status train_exec_init_named(train_exec *t, ir_graph *g, const char *device, int num_threads,
                                   graft_err *e) {
    return init_on(t, g, false, num_threads, NULL, device, e);
}

/* Entry i of a per-input or per-output flag array (made on first use, shared with the
 * executor's field `exec_flags`). */
static graft_status set_flag(train_exec *t, unsigned char **flags, unsigned char **exec_flags,
                             int count, int i, bool on_device, const char *what, graft_err *e) {
    if (i < 0 || i >= count || (on_device && !t->have_device))
        return err_set(e, GRAFT_E_INTERNAL, "training graph %s %d: no device to keep it on", what,
                       i);
    if (!*flags) {
        *flags = calloc((size_t)count + 1, 1);
        if (!*flags) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        *exec_flags = *flags;
    }
    (*flags)[i] = on_device;
    return GRAFT_OK;
}

graft_status train_exec_input_on_device(train_exec *t, int i, bool on_device, graft_err *e) {
    return set_flag(t, &t->input_on_device, &t->x.input_on_device, t->g->n_inputs, i, on_device,
                    "input", e);
}

graft_status train_exec_output_on_device(train_exec *t, int i, bool on_device, graft_err *e) {
    return set_flag(t, &t->output_on_device, &t->x.output_on_device, t->g->n_outputs, i, on_device,
                    "output", e);
}

bool train_exec_output_is_on_device(const train_exec *t, int i) {
    const ir_graph *g = t->g;
    return i >= 0 && i < g->n_outputs && t->x.on_dev && t->x.on_dev[g->outputs[i]];
}

static graft_status need_device(const train_exec *t, graft_err *e) {
    return t->have_device ? GRAFT_OK
                          : err_set(e, GRAFT_E_INTERNAL, "device memory for a CPU training run");
}

graft_status train_exec_device_alloc(train_exec *t, size_t bytes, void **out, graft_err *e) {
    TRY(need_device(t, e));
    return t->device.alloc(t->device.impl, bytes ? bytes : 1, out, e);
}

void train_exec_device_free(train_exec *t, void *ptr) {
    if (ptr && t->have_device) t->device.free(t->device.impl, ptr);
}

graft_status train_exec_upload(train_exec *t, void *dst, const void *src, size_t bytes,
                               graft_err *e) {
    TRY(need_device(t, e));
    return bytes ? t->device.copy_to_device(t->device.impl, dst, src, bytes, e) : GRAFT_OK;
}

graft_status train_exec_download(train_exec *t, void *dst, const void *src, size_t bytes,
                                 graft_err *e) {
    TRY(need_device(t, e));
    return bytes ? t->device.copy_to_host(t->device.impl, dst, src, bytes, e) : GRAFT_OK;
}

void train_exec_keep_kernel_state(train_exec *t) {
    if (t->have_device) return;
    ((cpu_backend *)t->cpu.impl)->weights_vary = true;
    t->keep_state = true;
}

bool train_exec_on_device(const train_exec *t) {
    return t->have_device;
}

static bool pins(const train_exec *t) {
    return t->have_device && t->device.host_alloc && t->device.host_free;
}

void *train_exec_host_alloc(train_exec *t, size_t bytes) {
    void *p = NULL;
    if (!pins(t)) return malloc(bytes ? bytes : 1);
    return t->device.host_alloc(t->device.impl, bytes, &p, NULL) == GRAFT_OK ? p : NULL;
}

void train_exec_host_free(const train_exec *t, void *ptr) {
    if (pins(t))
        t->device.host_free(ptr);
    else
        free(ptr);
}

void train_exec_free(train_exec *t) {
    if (!t) return;
    if (t->have_x) exec_free(&t->x);
    if (t->have_device && t->device.destroy) t->device.destroy(t->device.impl);
    if (t->have_cpu && t->cpu.destroy) t->cpu.destroy(t->cpu.impl);
    free(t->input_on_device);
    free(t->output_on_device);
    memset(t, 0, sizeof *t);
}

graft_status train_exec_run(train_exec *t, const tensor *inputs, graft_err *e) {
    const ir_graph *g = t->g;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        bool ok = inputs[i].data && inputs[i].dtype == v->dtype && inputs[i].ndim == v->ndim;
        for (int d = 0; ok && d < v->ndim; d++)
            ok = v->dims[d] < 0 || v->dims[d] == inputs[i].dims[d];
        if (!ok) {
            char want[256], got[256];
            return err_set(
                e, GRAFT_E_SHAPE, "training graph input %d ('%s'): expected %s %s, got %s %s", i,
                v->name, graft_dtype_name(v->dtype), shape_str(want, sizeof want, v->ndim, v->dims),
                graft_dtype_name(inputs[i].dtype),
                shape_str(got, sizeof got, inputs[i].ndim, inputs[i].dims));
        }
    }
    if (!t->keep_state && t->cpu.release_state) t->cpu.release_state(t->cpu.impl);
    return exec_run(&t->x, inputs, e);
}

const tensor *train_exec_output(const train_exec *t, int i) {
    const ir_graph *g = t->g;
    return i >= 0 && i < g->n_outputs ? &t->x.vals[g->outputs[i]] : NULL;
}
