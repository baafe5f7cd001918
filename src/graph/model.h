/* model.h: the graft_model handle: the optimized graph, its backend and executor. */
#ifndef GRAFT_GRAPH_MODEL_H
#define GRAFT_GRAPH_MODEL_H

#include "../core/context.h"
#include "batch.h"
#include "exec.h"

typedef struct op_count_entry {
    const char *op;
    int64_t count;
} op_count_entry;

struct graft_model {
    graft_ctx *ctx;
    ir_graph g;
    graft_backend backend; /* the CPU */
    bool have_backend;
    graft_backend device; /* a GPU, when the context asks for one and it is usable */
    bool have_device;
    int device_index;                      /* the device's index in its kind when have_device */
    const struct device_kind *device_kind; /* the registry's kind of that device */
    char device_name[300];
    graft_dtype precision; /* what float tensors compute in (UNDEFINED: fp32, as loaded) */
    executor exec;
    op_count_entry *op_counts; /* histogram of the original model's op types */
    int n_op_counts;
    int64_t original_node_count;
    model_batch batch; /* the batch the graph takes, and chunked runs (batch.c) */
    graft_model_summary summary;
    bool summary_ready;
    char auto_cut_why[512];                   /* graft_model_auto_cut_info's last why text */
    struct freeze_points *freeze;             /* the auto cut's freeze points, once asked for */
    bool inputs_on_device, outputs_on_device; /* graft_model_set_device_io */
    bool keep_batchnorm; /* the context's keep_batchnorm at load: passes leave BN nodes */
};

/* Create the device backend the context asks for (or settle on the CPU). */
graft_status model_open_device(graft_model *m, graft_err *e);
/* The device backend, or NULL. */
graft_backend *model_device(graft_model *m);
/* Another backend on m's device (its own stream, memory pool and kernel state), for a second
 * graph that runs beside m's own (the training graph's); *have false when m runs on the CPU.
 * The caller destroys it. */
graft_status model_device_open_another(graft_model *m, graft_backend *out, bool *have,
                                       graft_err *e);
/* Drop kernel state and device copies of weights (after weights changed in place), and the
 * outputs of the last chunked run. */
void model_release_state(graft_model *m);
/* Log, once, the ops that run on the CPU because the device has no kernel for them. */
void model_note_fallbacks(graft_model *m);

/* Check caller tensors against the declared inputs and order them as g->inputs. */
/* The shape output `output` has when the model runs once on zero-filled inputs (the first
 * symbolic dim 1, others 128): for sizes shape inference cannot carry to load time (a Reshape
 * whose target is computed from a symbolic batch). */
graft_status model_probe_output_dims(graft_model *m, int output, int *ndim, int64_t *dims,
                                     graft_err *e);
graft_status model_bind_inputs(const graft_model *m, const graft_named_tensor *inputs, int n_inputs,
                               tensor *bound, graft_err *e);

/* A model of its own over graph g (taken over: g is emptied, also on failure), prepared as a
 * loaded one is (passes, backends as ctx asks, executor). what names it in errors. */
graft_status model_from_graph(graft_ctx *ctx, ir_graph *g, const char *what, graft_model **out,
                              graft_err *e);
/* graph_optimize on the model's graph with the model's settings (keep_batchnorm): what every
 * re-optimization of a loaded model calls. */
graft_status model_optimize(graft_model *m, graft_err *e);
/* Fold BatchNormalization into the Conv before it now (a model loaded with keep_batchnorm,
 * after fine-tuning, before export), re-run the passes and rebuild the executor; later
 * re-optimizations fold too. */
graft_status model_fold_batchnorm(graft_model *m, graft_err *e);

/* Make value the model's only output: drop what no longer feeds it and inputs nothing reads,
 * re-run the passes and rebuild the executor (node indices change, so kernel state goes). */
graft_status model_set_output(graft_model *m, int value, graft_err *e);
/* For an only output that leads with the batch (a head's rows): its unnamed symbolic leading
 * dim takes the name the inputs' leading dims share ("batch"), so an export declares one batch
 * dim for input and output rather than an invented "unk_N". Nothing changes where the inputs'
 * names differ or the output's dim is fixed or named. */
graft_status model_name_output_batch(graft_model *m, graft_err *e);

#endif
