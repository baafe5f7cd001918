/* exec_internal.h: what the executor's files share: placement, buffers in either place. */
#ifndef GRAFT_GRAPH_EXEC_INTERNAL_H
#define GRAFT_GRAPH_EXEC_INTERNAL_H

#include "exec.h"

graft_status exec_place_nodes(executor *x, graft_err *e);
graft_status exec_buffer_alloc(executor *x, bool dev, size_t bytes, void **out, graft_err *e);
void exec_buffer_free(executor *x, bool dev, void *p);
/* Free v's copy in the other place (a constant's kept copy only when kept_too). */
void exec_free_copy(executor *x, int v, bool kept_too);
/* Free v's own buffer when the executor owns it on the heap. */
void exec_free_primary(executor *x, int v);
graft_status exec_value_at(executor *x, int v, bool dev, tensor *view, graft_err *e);
graft_status exec_outputs_to_host(executor *x, graft_err *e);
/* With outputs_on_device: every graph output in device memory (host-computed ones copied). */
graft_status exec_outputs_to_device(executor *x, graft_err *e);
/* Where the run leaves its outputs: exec_outputs_to_host or _to_device. */
graft_status exec_outputs_place(executor *x, graft_err *e);

/* Reshapes as views in the memory plan (exec_view.c). Whether v gets planned bytes in that
 * place; the value w is a view of (its reshape's input), or -1; and, with slot[] holding the
 * plan's buffer of every value with its own, each view's buffer (slot), its life lengthened. */
bool exec_plans_value(const executor *x, int v, bool dev);
int exec_view_source(const executor *x, int w, bool dev);
void exec_plan_views(const executor *x, bool dev, int *slot, int *last);
/* Fused groups' outputs written over an input they read last (the backend's
 * group_inplace_input, e.g. a convolution's residual): src[w] = that input, else -1; such a w is
 * planned as a view of it. */
void exec_plan_inplace(const executor *x, bool dev, int *src);

/* Profiling (exec_profile.c). */
double exec_now(void);
/* What a node's profiled time is listed under: its op type, or the fused group it ends. */
const char *exec_profile_label(const executor *x, int node_index);
void exec_profile_add(executor *x, const char *op, double seconds);
/* Node i's floating-point operations (node_flops) under the label of the group it ends in. */
void exec_profile_add_flops(executor *x, int node_index, double flops);
int exec_profile_get(const executor *x, graft_op_time *out, int max);

/* Plans per input-shape signature (exec_plans.c). The signature of inputs (ndim then dims per
 * input) into sig (NULL: only its length). */
int exec_signature_of(const ir_graph *g, const tensor *inputs, int64_t *sig);
/* Make the plan of these inputs' shapes the current one (from the cache when it is there) and
 * count the run; false when there is none (the current plan, if any, is cached: the run then
 * goes from the heap and learns one). */
bool exec_plan_select(executor *x, const tensor *inputs);
void exec_plan_free(executor *x, exec_plan *p);
void exec_plans_free_all(executor *x);
/* The shared arenas at least as large as the current plan's; false when memory ran out. Growing
 * the device arena drops every recording (they point into the old one). */
bool exec_arenas_ensure(executor *x);

/* CUDA graphs (exec_graph.c). */
/* Free plan p's recording, its staged inputs and the device copies of host inputs it reads. */
void exec_plan_graph_free(executor *x, exec_plan *p);
/* The recordings of every plan, current and cached. */
void exec_graphs_free_all(executor *x);
bool exec_graph_can_record(const executor *x, bool planned);
/* Copy the graph inputs the device reads into buffers that stay (the graph reads them). */
graft_status exec_graph_stage_inputs(executor *x, const tensor *inputs, graft_err *e);
graft_status exec_graph_replay(executor *x, const tensor *inputs, graft_err *e);
/* Whether the current plan's recording reads every device input flagged in input_on_device from
 * the buffer `inputs` pass now. */
bool exec_graph_inputs_in_place(const executor *x, const tensor *inputs);
/* Keep what replays need after a recorded run: the outputs' device tensors. */
graft_status exec_graph_keep(executor *x, void *graph, graft_err *e);
void exec_graph_free(executor *x);

#endif
