/* train_exec.h: running a training graph (train_graph.h) with graph/exec on a CPU backend of its
 * own, or on a device backend of its own beside it (nodes the device lacks run on the CPU). */
#ifndef GRAFT_TRAIN_TRAIN_EXEC_H
#define GRAFT_TRAIN_TRAIN_EXEC_H

#include "../graph/exec.h"
#include "train_graph.h"

typedef struct train_exec {
    graft_backend cpu;
    bool have_cpu;
    graft_backend device; /* another backend on a model's device (model_device_open_another) */
    bool have_device;
    executor x;
    bool have_x;
    bool keep_state;                 /* train_exec_keep_kernel_state: no release before a run */
    const ir_graph *g;               /* the graph run (a training graph's, or the optimizer's) */
    unsigned char *input_on_device;  /* per graph input (train_exec_input_on_device), or NULL */
    unsigned char *output_on_device; /* per graph output (train_exec_output_on_device), or NULL */
} train_exec;

/* An executor for g (a training graph's train_graph.g) on a CPU backend of its own (reference
 * kernels only when asked; threads as cpu_backend_create takes them, 0: the default). g must
 * outlive it. */
graft_status train_exec_init(train_exec *t, ir_graph *g, bool reference_only, int num_threads,
                             graft_err *e);
/* The same on the device model m runs on (its own backend there; the CPU one for what the
 * device cannot run), or on the CPU alone when m runs there. Inputs and outputs stay host
 * memory: the executor copies them. */
graft_status train_exec_init_device(train_exec *t, ir_graph *g, int num_threads, graft_model *m,
                                    graft_err *e);
/* The same on a device named as graft_ctx_options.device names it ("cuda:0"; NULL or "cpu":
 * the CPU alone). */
graft_status train_exec_init_named(train_exec *t, ir_graph *g, const char *device, int num_threads,
                                   graft_err *e);
void train_exec_free(train_exec *t);
/* Graph input i's data is device memory the caller keeps there between runs (a device run
 * only): parameters and optimizer state that stay resident, updated in place. */
graft_status train_exec_input_on_device(train_exec *t, int i, bool on_device, graft_err *e);
/* Graph output i, when the device computes it, stays in device memory after a run (a device run
 * only; train_exec_output's data is then device memory where train_exec_output_is_on_device). */
graft_status train_exec_output_on_device(train_exec *t, int i, bool on_device, graft_err *e);
bool train_exec_output_is_on_device(const train_exec *t, int i);
/* Device memory for such inputs, and copies to and from it (a device run only). */
graft_status train_exec_device_alloc(train_exec *t, size_t bytes, void **out, graft_err *e);
void train_exec_device_free(train_exec *t, void *ptr);
graft_status train_exec_upload(train_exec *t, void *dst, const void *src, size_t bytes,
                               graft_err *e);
graft_status train_exec_download(train_exec *t, void *dst, const void *src, size_t bytes,
                                 graft_err *e);
/* Keep the CPU backend's kernel state (oneDNN primitives) from run to run, for a graph whose
 * only weight-keeping kernels are MatMul and Gemm (a head): those repack their B on every run
 * (cpu_backend.weights_vary), so parameters updated in place are read afresh. Without it (the
 * blocks: Conv keeps reordered weights), all kernel state is dropped before each run. */
void train_exec_keep_kernel_state(train_exec *t);
/* Whether the graph runs on a device backend. */
bool train_exec_on_device(const train_exec *t);
/* Host memory for the runs' inputs: pinned on a device (copied at full speed), else malloc's;
 * NULL when out of memory. Free it with train_exec_host_free. */
void *train_exec_host_alloc(train_exec *t, size_t bytes);
void train_exec_host_free(const train_exec *t, void *ptr);
/* One run. inputs follow tg's input order: from, side inputs, parameters, then d_<to> (absent
 * when forward-only); all borrowed host tensors. The parameters may change between runs: kernel
 * state (oneDNN's packed weights, checked only by a sampled fingerprint) is dropped first. On
 * success output i (to, then the parameters' gradients) is train_exec_output(t, i), valid until
 * the next run. */
graft_status train_exec_run(train_exec *t, const tensor *inputs, graft_err *e);
const tensor *train_exec_output(const train_exec *t, int i);

#endif
