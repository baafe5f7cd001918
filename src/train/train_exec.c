/* train_exec.c: running a training graph with graph/exec on a CPU backend of its own. */
#include "train_exec.h"

#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu_backend.h"
#include "../graph/model.h"

static graft_status init_on(train_exec *t, train_graph *tg, bool reference_only, int num_threads,
                            graft_model *m, graft_err *e) {
    memset(t, 0, sizeof *t);
    t->tg = tg;
    TRY(cpu_backend_create(num_threads, reference_only, &t->cpu, e));
    t->have_cpu = true;
    graft_status st = m ? model_device_open_another(m, &t->device, &t->have_device, e) : GRAFT_OK;
    if (st == GRAFT_OK)
        st = exec_init(&t->x, &tg->g, &t->cpu, t->have_device ? &t->device : NULL, e);
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

graft_status train_exec_init(train_exec *t, train_graph *tg, bool reference_only, int num_threads,
                             graft_err *e) {
    return init_on(t, tg, reference_only, num_threads, NULL, e);
}

graft_status train_exec_init_device(train_exec *t, train_graph *tg, int num_threads, graft_model *m,
                                    graft_err *e) {
    return init_on(t, tg, false, num_threads, m, e);
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
    memset(t, 0, sizeof *t);
}

graft_status train_exec_run(train_exec *t, const tensor *inputs, graft_err *e) {
    const ir_graph *g = &t->tg->g;
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
    const ir_graph *g = &t->tg->g;
    return i >= 0 && i < g->n_outputs ? &t->x.vals[g->outputs[i]] : NULL;
}
