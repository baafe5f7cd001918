/* exec.h: the executor: runs a planned graph on a backend, node by node, with run-time shape
 * inference, liveness-based freeing and a cached static memory plan per input-shape signature.
 * With a device backend, each node is placed on the device or the host and tensors are moved
 * where the node reading them runs. */
#ifndef GRAFT_GRAPH_EXEC_H
#define GRAFT_GRAPH_EXEC_H

#include "../core/backend.h"
#include "graph.h"

/* The memory plan of one input-shape signature, and its CUDA-graph recording. Plans share the
 * executor's arenas (one run at a time), sized for the largest plan. */
typedef struct exec_plan {
    bool valid;
    int64_t *signature; /* per graph input: ndim then dims */
    int signature_len;
    int64_t *offsets;    /* per value, in the arena of the value's location */
    int64_t *bytes;      /* per value; -1 for values no arena holds */
    unsigned char *view; /* per value: shares its input's bytes (a reshape's output, exec_view.c) */
    int64_t arena_bytes, device_arena_bytes;
    uint64_t last_run; /* the executor's run count when this plan last ran */
    /* CUDA-graph replay of this plan (exec_graph.c) */
    void *graph;       /* recorded for this signature, or NULL */
    tensor *graph_out; /* per graph output: its device tensor (data in the arena) */
    void **staged;     /* per graph input: the buffer a recorded graph reads a device input from */
    size_t *staged_bytes;
    void **input_copy; /* while cached: per graph input, the device copy of a host input that the
                          recording reads (the current plan's are in the executor's copy[]) */
    void **in_place;   /* per graph input: the device buffer a recording reads in place (inputs
                          flagged in input_on_device), or NULL; another buffer drops the recording */
} exec_plan;

/* Plans kept besides the current one, so that inputs whose shapes alternate (texts padded to
 * their batch's longest) replan and re-record only once per shape (GRAFT_PLAN_CACHE=N, 0: off). */
#define EXEC_PLAN_CACHE 16

#define EXEC_PROFILE_MAX 96
#define EXEC_MAX_OUTPUTS 64
typedef struct exec_profile {
    bool on;
    int n;
    graft_op_time ops[EXEC_PROFILE_MAX];
} exec_profile;

typedef struct executor {
    ir_graph *g;
    graft_backend *be;     /* the host (CPU) backend */
    graft_backend *device; /* a device backend, or NULL */
    int n_values;          /* values when the executor was made (the graph may grow later) */
    int n_nodes;
    tensor *vals;                 /* per value, the run-time tensor */
    unsigned char *owned;         /* per value: 0 borrowed, 1 heap, 2 in an arena */
    unsigned char *on_dev;        /* per value: vals[v].data is device memory */
    void **copy;                  /* per value: the same data in the other place, or NULL */
    unsigned char *copy_kept;     /* per value: the copy is a constant's and stays across runs */
    unsigned char *node_on_dev;   /* per node: runs on the device backend */
    unsigned char *node_fallback; /* per node: on the host because the device lacks the op */
    int *group_end;               /* per node: the last node of its fused group (itself alone) */
    int *group_first; /* per node: the first member of the group it ends (itself otherwise) */
    int *last_use;    /* per value: index of the last node reading it (n_nodes: a graph output) */
    int64_t *seen_bytes;
    /* reshapes' outputs share their inputs' planned bytes (GRAFT_PLAN_VIEWS=0: not) */
    bool plan_views;
    int *inplace_src;     /* while planning a place: per value, the input it overwrites, or -1 */
    bool poison_outputs;  /* fill each host output with 0xFF bytes before its node runs */
    int n_fallback_nodes; /* nodes placed on the host because the device has no kernel */
    /* CUDA-graph replay of the planned forward (exec_graph.c) */
    bool graph_safe;      /* placement allows recording: no device node reads host-computed data */
    char unsafe_why[320]; /* why not, naming the node or input ("" when it does) */
    bool graph_off;       /* recording failed or is disabled */
    bool last_clean;      /* the last run had no CPU fallback */
    exec_plan plan;       /* the current plan (of the last run's shapes) */
    exec_plan cached[EXEC_PLAN_CACHE]; /* other shapes' plans (exec_plans.c) */
    int plan_cache;                    /* how many may be cached (GRAFT_PLAN_CACHE) */
    uint64_t runs;
    int64_t plan_hits;     /* runs that found their shapes' plan among the cached ones */
    int64_t plans_learned; /* runs that went from the heap to learn a plan */
    int64_t replays;       /* runs that replayed a recording */
    /* The arenas every plan lays its values out in, sized for the largest plan so far. */
    void *arena, *device_arena;
    int64_t arena_cap, device_arena_cap;
    exec_profile profile;
    void *out_host[EXEC_MAX_OUTPUTS]; /* host buffers for device-computed graph outputs */
    size_t out_host_bytes[EXEC_MAX_OUTPUTS];
    /* out_host from the device's host_alloc (pinned: copied at full speed; large outputs read
     * every run, the training graph's gradients) */
    bool pin_outputs, out_host_pinned;
    bool count_flops;
    double flops;
    size_t max_buffer_bytes; /* 0: no cap; else a larger buffer is refused (probe runs) */
    /* Device-resident I/O (a device backend only): graph inputs' data are device memory, and
     * graph outputs are left in device memory (graft_model_set_device_io). */
    bool inputs_on_device, outputs_on_device;
    /* Per graph input (NULL: inputs_on_device for all): its data is device memory. A training
     * step's parameters and optimizer state stay on the device this way, between runs, and the
     * nodes that update them in place (OptimizerStep) write the caller's buffers. */
    unsigned char *input_on_device;
    /* Per graph output (NULL: outputs_on_device for all): a device-computed output stays in
     * device memory (a training step's gradients, consumed there by the optimizer's step);
     * one computed on the host stays there (check on_dev). Owned by the caller. */
    unsigned char *output_on_device;
    graft_run_stats stats;
    /* A pause between nodes (the training graph's, between its forward and backward): after
     * node `pause_after` the executor calls pause_fn, which may write into the memory of graph
     * inputs the nodes after it read (e.g. the gradient arriving at the forward's output). Runs
     * with a pause never replay a CUDA-graph recording. pause_fn NULL: none. */
    int pause_after;
    graft_status (*pause_fn)(void *user, struct executor *x, graft_err *e);
    void *pause_user;
} executor;

graft_status exec_init(executor *x, ir_graph *g, graft_backend *host, graft_backend *device,
                       graft_err *e);
void exec_free(executor *x);
/* Never record CUDA graphs (every run goes node by node). */
void exec_disable_graphs(executor *x);
/* Record again (after exec_disable_graphs): each plan's second run records, later runs with the
 * same input shapes replay. A device input flagged in input_on_device is read in place, so a run
 * that passes another buffer for it records afresh. */
void exec_enable_graphs(executor *x);
/* Drop device copies of constants (after weights were edited in place). */
void exec_drop_device_copies(executor *x);
/* inputs[i] binds g->inputs[i] (borrowed; host memory, or device memory with inputs_on_device).
 * On success the graph outputs are in x->vals[g->outputs[i]] (host memory, or device memory with
 * outputs_on_device), valid until the next run. */
graft_status exec_run(executor *x, const tensor *inputs, graft_err *e);

#endif
