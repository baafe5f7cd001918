/* exec.c: the executor: binds inputs, infers shapes at run time, allocates outputs from the
 * liveness plan (or on the heap while learning it), calls the backend, frees at last use. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"

void exec_free_primary(executor *x, int v) {
    if (x->owned[v] == 1) exec_buffer_free(x, x->on_dev[v], x->vals[v].data);
    x->owned[v] = 0;
    x->vals[v].data = NULL;
}

static void free_owned(executor *x, int v) {
    exec_free_copy(x, v, false);
    exec_free_primary(x, v);
    x->on_dev[v] = 0;
}

graft_status exec_init(executor *x, ir_graph *g, graft_backend *host, graft_backend *device,
                       graft_err *e) {
    memset(x, 0, sizeof *x);
    x->g = g;
    x->be = host;
    x->device = device;
    x->n_values = g->n_values;
    x->n_nodes = g->n_nodes;
    size_t nv = (size_t)g->n_values + 1;
    x->vals = calloc(nv, sizeof *x->vals);
    x->owned = calloc(nv, 1);
    x->on_dev = calloc(nv, 1);
    x->copy = calloc(nv, sizeof *x->copy);
    x->copy_kept = calloc(nv, 1);
    x->last_use = malloc(nv * sizeof(int));
    x->group_first = malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    x->seen_bytes = malloc(nv * sizeof(int64_t));
    if (!x->vals || !x->owned || !x->on_dev || !x->copy || !x->copy_kept || !x->last_use ||
        !x->seen_bytes || !x->group_first) {
        exec_free(x);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory creating the executor");
    }
    const char *views = getenv("GRAFT_PLAN_VIEWS");
    x->plan_views = !(views && strcmp(views, "0") == 0);
    const char *poison = getenv("GRAFT_POISON_OUTPUTS");
    x->poison_outputs = poison && strcmp(poison, "1") == 0;
    const char *cache = getenv("GRAFT_PLAN_CACHE");
    x->plan_cache = cache && *cache ? atoi(cache) : EXEC_PLAN_CACHE;
    if (x->plan_cache < 0 || x->plan_cache > EXEC_PLAN_CACHE) x->plan_cache = EXEC_PLAN_CACHE;
    graft_status st = exec_place_nodes(x, e);
    if (st != GRAFT_OK) {
        exec_free(x);
        return st;
    }
    for (int v = 0; v < g->n_values; v++) x->last_use[v] = g->values[v].producer;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] >= 0) x->last_use[g->nodes[i].inputs[k]] = i;
    for (int i = 0; i < g->n_outputs; i++) x->last_use[g->outputs[i]] = g->n_nodes;
    /* A fused group's members may run only when its last member does: what they read and
     * write lives until then. */
    for (int i = 0; i < g->n_nodes; i++) x->group_first[i] = i;
    for (int i = 0; i < g->n_nodes; i++)
        if (x->group_end[i] > i && x->group_first[x->group_end[i]] > i)
            x->group_first[x->group_end[i]] = i;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        int end = x->group_end[i];
        if (end == i) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] >= 0 && x->last_use[n->inputs[k]] < end)
                x->last_use[n->inputs[k]] = end;
        for (int k = 0; k < n->n_out; k++)
            if (n->outputs[k] >= 0 && x->last_use[n->outputs[k]] < end)
                x->last_use[n->outputs[k]] = end;
    }
    return GRAFT_OK;
}

static void release_all(executor *x) {
    for (int v = 0; v < x->n_values; v++) free_owned(x, v);
}

void exec_free(executor *x) {
    if (!x) return;
    if (x->vals && x->owned && x->on_dev && x->copy && x->copy_kept) {
        release_all(x);
        exec_drop_device_copies(x);
    }
    exec_plans_free_all(x);
    if (x->device) x->device->synchronize(x->device->impl, NULL);
    free(x->vals);
    free(x->owned);
    free(x->on_dev);
    free(x->copy);
    free(x->copy_kept);
    for (int i = 0; i < EXEC_MAX_OUTPUTS; i++) {
        if (x->out_host_pinned)
            x->device->host_free(x->out_host[i]);
        else
            free(x->out_host[i]);
    }
    free(x->node_on_dev);
    free(x->node_fallback);
    free(x->group_end);
    free(x->group_first);
    free(x->last_use);
    free(x->seen_bytes);
    memset(x, 0, sizeof *x);
}

/* Lay out the intermediates of one place (host or device) in one arena. */
static graft_status plan_place(executor *x, bool dev, int *which, int64_t *sizes, int *first,
                               int *last, int64_t *offs, int *slot, graft_err *e) {
    const ir_graph *g = x->g;
    exec_plan *p = &x->plan;
    int n = 0;
    int *src = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!src) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory planning memory");
    exec_plan_inplace(x, dev, src);
    x->inplace_src = src; /* exec_view_source answers in-place outputs too, while planning */
    for (int v = 0; v < g->n_values; v++) {
        if (!exec_plans_value(x, v, dev) || exec_view_source(x, v, dev) >= 0) continue;
        const ir_value *val = &g->values[v];
        which[n] = v;
        sizes[n] = x->seen_bytes[v];
        first[n] = val->producer;
        last[n] = x->last_use[v] > val->producer ? x->last_use[v] : val->producer;
        slot[v] = n++;
    }
    exec_plan_views(x, dev, slot, last);
    x->inplace_src = NULL;
    free(src);
    TRY(plan_memory(n, sizes, first, last, offs, dev ? &p->device_arena_bytes : &p->arena_bytes,
                    e));
    for (int v = 0; v < g->n_values; v++) {
        if (!exec_plans_value(x, v, dev)) continue;
        p->offsets[v] = offs[slot[v]];
        p->bytes[v] = x->seen_bytes[v];
        p->view[v] = which[slot[v]] != v;
    }
    return GRAFT_OK;
}

/* After a heap-allocated run, lay out every intermediate value in one arena per place. */
static graft_status learn_plan(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    exec_plan *p = &x->plan;
    exec_plan_free(x, p);
    int nv = g->n_values;
    int sl = exec_signature_of(g, inputs, NULL);
    p->signature = malloc(sizeof(int64_t) * ((size_t)sl + 1));
    p->offsets = calloc((size_t)nv + 1, sizeof(int64_t));
    p->bytes = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    p->view = calloc((size_t)nv + 1, 1);
    int *slot = malloc(sizeof(int) * ((size_t)nv + 1));
    int *first = malloc(sizeof(int) * ((size_t)nv + 1)),
        *last = malloc(sizeof(int) * ((size_t)nv + 1));
    int64_t *sizes = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    int *which = malloc(sizeof(int) * ((size_t)nv + 1));
    int64_t *offs = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    graft_status st = GRAFT_OK;
    if (!p->signature || !p->offsets || !p->bytes || !p->view || !slot || !first || !last ||
        !sizes || !which || !offs)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory planning memory");
    for (int v = 0; st == GRAFT_OK && v < nv; v++) p->bytes[v] = -1;
    if (st == GRAFT_OK) st = plan_place(x, false, which, sizes, first, last, offs, slot, e);
    if (st == GRAFT_OK && x->device)
        st = plan_place(x, true, which, sizes, first, last, offs, slot, e);
    if (st == GRAFT_OK) {
        p->signature_len = exec_signature_of(g, inputs, p->signature);
        p->last_run = x->runs;
        p->valid = true;
    }
    free(first), free(last), free(sizes), free(which), free(offs), free(slot);
    if (st != GRAFT_OK) exec_plan_free(x, p);
    return st;
}

typedef struct run_state {
    bool planned;
    int64_t live, peak, total;
} run_state;

static graft_status alloc_output(executor *x, run_state *rs, int v, bool dev,
                                 const value_info *info, const ir_node *n, graft_err *e) {
    tensor *t = &x->vals[v];
    if (!info->present || info->ndim < 0 || !op_shape_known(info))
        return op_error(n, e, GRAFT_E_INTERNAL, "output '%s' has no known shape at run time",
                        x->g->values[v].name);
    free_owned(x, v);
    memset(t, 0, sizeof *t);
    t->dtype = info->dtype;
    t->ndim = info->ndim;
    memcpy(t->dims, info->dims, sizeof(int64_t) * (size_t)info->ndim);
    int64_t bytes = tensor_nbytes(t);
    if (bytes < 0) return op_error(n, e, GRAFT_E_OUT_OF_MEMORY, "output size overflows");
    x->seen_bytes[v] = bytes;
    x->on_dev[v] = dev;
    rs->total += bytes;
    void *arena = dev ? x->device_arena : x->arena;
    if (rs->planned && x->plan.bytes[v] == bytes && arena) {
        t->data = (char *)arena + x->plan.offsets[v];
        if (!dev && !x->plan.view[v] && x->poison_outputs) /* a view holds data */
            memset(t->data, 0xFF, (size_t)bytes);
        x->owned[v] = 2;
        return GRAFT_OK;
    }
    TRY(exec_buffer_alloc(x, dev, (size_t)bytes, &t->data, e));
    x->owned[v] = 1;
    rs->live += bytes;
    if (rs->live > rs->peak) rs->peak = rs->live;
    return GRAFT_OK;
}

static void release_value(executor *x, run_state *rs, int v) {
    if (x->owned[v] == 1) rs->live -= x->seen_bytes[v];
    if (x->owned[v] == 2 || x->owned[v] == 1) {
        free_owned(x, v);
    } else {
        exec_free_copy(x, v, false); /* a graph input's copy on the device */
    }
}

static void release_node_values(executor *x, run_state *rs, int j, int node_index) {
    const ir_node *n = &x->g->nodes[j];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->inputs[k];
        if (v >= 0 && x->last_use[v] == node_index) release_value(x, rs, v);
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = n->outputs[k];
        if (v >= 0 && x->last_use[v] == node_index) release_value(x, rs, v); /* nothing reads it */
    }
}

/* Free what node_index was the last to need: its own values and, at the end of a fused group,
 * the values of the group's earlier members. */
static void release_after(executor *x, run_state *rs, int node_index) {
    for (int j = x->group_first[node_index]; j < node_index; j++)
        if (x->group_end[j] == node_index) release_node_values(x, rs, j, node_index);
    release_node_values(x, rs, node_index, node_index);
}

/* The inputs of node i, each in the place the node reads it from. */
static graft_status bind_inputs(executor *x, int i, value_info *in, tensor *views,
                                const tensor **in_t, graft_err *e) {
    ir_node *n = &x->g->nodes[i];
    bool dev = x->node_on_dev[i];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->inputs[k];
        memset(&in[k], 0, sizeof in[k]);
        in_t[k] = NULL;
        if (v < 0) continue;
        bool want_dev = dev && !node_input_on_host(n, k);
        if (op_input_data_unused(n->op_type, k)) {
            views[k] = x->vals[v];
            want_dev = x->on_dev[v];
        } else {
            TRY(exec_value_at(x, v, want_dev, &views[k], e));
        }
        const tensor *t = &views[k];
        in[k].present = true;
        in[k].dtype = t->dtype;
        in[k].ndim = t->ndim;
        memcpy(in[k].dims, t->dims, sizeof t->dims);
        in[k].value = want_dev ? NULL : t; /* inference reads values on the host only */
        in_t[k] = t;
    }
    return GRAFT_OK;
}

/* A node's argument arrays: on the stack for up to NODE_IO_STACK inputs and outputs, on the
 * heap for larger nodes (the optimizer's step reads every parameter). */
#define NODE_IO_STACK 64
typedef struct node_io {
    value_info *in, *out;
    const tensor **in_t;
    tensor *views, **out_t, *scratch;
    int *scratch_used;
} node_io;

static graft_status run_node_io(executor *x, run_state *rs, int i, const node_io *io,
                                graft_err *e) {
    ir_node *n = &x->g->nodes[i];
    bool dev = x->node_on_dev[i];
    graft_backend *be = dev ? x->device : x->be;
    value_info *in = io->in, *out = io->out;
    const tensor **in_t = io->in_t;
    tensor *views = io->views, **out_t = io->out_t, *scratch = io->scratch;
    int *scratch_used = io->scratch_used;
    memset(scratch_used, 0, sizeof(int) * (size_t)(n->n_out > 0 ? n->n_out : 1));
    TRY(bind_inputs(x, i, in, views, in_t, e));
    memset(out, 0, sizeof(value_info) * (size_t)n->n_out);
    TRY(n->op->infer(n, in, n->n_in, out, n->n_out, e));
    graft_status st = GRAFT_OK;
    for (int k = 0; k < n->n_out && st == GRAFT_OK; k++) {
        int v = n->outputs[k];
        out_t[k] = NULL;
        if (v >= 0) {
            st = alloc_output(x, rs, v, dev, &out[k], n, e);
            out_t[k] = &x->vals[v];
        } else if (out[k].present && out[k].ndim >= 0 && op_shape_known(&out[k])) {
            memset(&scratch[k], 0, sizeof scratch[k]);
            scratch[k].dtype = out[k].dtype;
            scratch[k].ndim = out[k].ndim;
            memcpy(scratch[k].dims, out[k].dims, sizeof(int64_t) * (size_t)out[k].ndim);
            int64_t bytes = tensor_nbytes(&scratch[k]);
            st = bytes < 0 ? op_error(n, e, GRAFT_E_OUT_OF_MEMORY, "output size overflows")
                           : exec_buffer_alloc(x, dev, (size_t)bytes, &scratch[k].data, e);
            scratch_used[k] = st == GRAFT_OK;
            out_t[k] = &scratch[k];
        }
    }
    if (st == GRAFT_OK) {
        op_call call = {n, in_t, n->n_in, out_t, n->n_out, e};
        st = be->run(be->impl, i, &call);
        if (st == GRAFT_OK && (x->count_flops || x->profile.on)) {
            double f = node_flops(n, in_t, n->n_in, (const tensor *const *)out_t, n->n_out);
            if (x->count_flops) x->flops += f;
            if (x->profile.on) exec_profile_add_flops(x, i, f);
        }
    }
    for (int k = 0; k < n->n_out; k++)
        if (scratch_used[k]) exec_buffer_free(x, dev, scratch[k].data);
    return st;
}

static graft_status run_node(executor *x, run_state *rs, int i, graft_err *e) {
    const ir_node *n = &x->g->nodes[i];
    if (n->n_in <= NODE_IO_STACK && n->n_out <= NODE_IO_STACK) {
        value_info in[NODE_IO_STACK], out[NODE_IO_STACK];
        const tensor *in_t[NODE_IO_STACK];
        tensor views[NODE_IO_STACK], *out_t[NODE_IO_STACK], scratch[NODE_IO_STACK];
        int scratch_used[NODE_IO_STACK];
        node_io io = {in, out, in_t, views, out_t, scratch, scratch_used};
        return run_node_io(x, rs, i, &io, e);
    }
    size_t ni = (size_t)n->n_in + 1, no = (size_t)n->n_out + 1;
    node_io io = {malloc(sizeof(value_info) * ni), malloc(sizeof(value_info) * no),
                  malloc(sizeof(tensor *) * ni),   malloc(sizeof(tensor) * ni),
                  malloc(sizeof(tensor *) * no),   malloc(sizeof(tensor) * no),
                  malloc(sizeof(int) * no)};
    graft_status st =
        io.in && io.out && io.in_t && io.views && io.out_t && io.scratch && io.scratch_used
            ? run_node_io(x, rs, i, &io, e)
            : op_error(n, e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    free(io.in), free(io.out), free((void *)io.in_t), free(io.views), free(io.out_t);
    free(io.scratch), free(io.scratch_used);
    return st;
}

static void ensure_arenas(executor *x, run_state *rs) {
    if (rs->planned && !exec_arenas_ensure(x)) rs->planned = false;
}

/* A graph output that is an input or a constant is copied so the caller owns a stable one. */
static graft_status own_outputs(executor *x, graft_err *e) {
    const ir_graph *g = x->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (x->owned[v] == 1 || x->owned[v] == 3 || (x->on_dev[v] && x->owned[v] == 2)) continue;
        tensor copy;
        TRY(tensor_clone(&copy, &x->vals[v], e));
        x->vals[v] = copy;
        x->owned[v] = 1;
    }
    return GRAFT_OK;
}

/* Whether node i reads a value held in device memory. */
static bool reads_device(const executor *x, int i) {
    const ir_node *n = &x->g->nodes[i];
    for (int k = 0; k < n->n_in; k++)
        if (n->inputs[k] >= 0 && x->on_dev[n->inputs[k]]) return true;
    return false;
}

/* Host node i timed by the wall clock, after the device's queued work it may wait for. */
static graft_status run_host_timed(executor *x, run_state *rs, int i, graft_err *e) {
    graft_backend *d = x->device;
    if (d && reads_device(x, i)) TRY(d->synchronize(d->impl, e));
    double t0 = exec_now();
    TRY(run_node(x, rs, i, e));
    if (x->node_on_dev[i]) TRY(d->synchronize(d->impl, e));
    exec_profile_add(x, exec_profile_label(x, i), exec_now() - t0);
    return GRAFT_OK;
}

/* The pause after node i, when one is set there (exec.h). */
static graft_status pause_at(executor *x, int i, graft_err *e) {
    if (!x->pause_fn || i != x->pause_after) return GRAFT_OK;
    if (x->device) TRY(x->device->synchronize(x->device->impl, e));
    return x->pause_fn(x->pause_user, x, e);
}

/* Profiling: a device node's time is the device's between marks queued before and after it
 * (nothing waits between nodes, so the device runs as it would unprofiled, except for the gaps
 * while it waits for a node's launches); a host node's is its wall time. Without marks, each
 * device node is waited for. */
static graft_status run_nodes_profiled(executor *x, run_state *rs, graft_err *e) {
    graft_backend *d = x->device;
    bool marks = d && d->mark && d->mark_seconds;
    int *timed = marks ? malloc(sizeof(int) * ((size_t)x->g->n_nodes + 1)) : NULL;
    if (marks && !timed) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory profiling");
    int n_timed = 0;
    graft_status st = GRAFT_OK;
    for (int i = 0; i < x->g->n_nodes && st == GRAFT_OK; i++) {
        if (marks && x->node_on_dev[i]) {
            st = d->mark(d->impl, 2 * n_timed, e);
            if (st == GRAFT_OK) st = run_node(x, rs, i, e);
            if (st == GRAFT_OK) st = d->mark(d->impl, 2 * n_timed + 1, e);
            if (st == GRAFT_OK) timed[n_timed++] = i;
        } else {
            st = run_host_timed(x, rs, i, e);
        }
        if (st == GRAFT_OK) release_after(x, rs, i);
        if (st == GRAFT_OK) st = pause_at(x, i, e);
    }
    for (int k = 0; k < n_timed && st == GRAFT_OK; k++) {
        double secs = 0;
        st = d->mark_seconds(d->impl, 2 * k, 2 * k + 1, &secs, e);
        if (st == GRAFT_OK) exec_profile_add(x, exec_profile_label(x, timed[k]), secs);
    }
    free(timed);
    return st;
}

static graft_status run_nodes(executor *x, run_state *rs, graft_err *e) {
    if (x->profile.on) return run_nodes_profiled(x, rs, e);
    graft_status st = GRAFT_OK;
    for (int i = 0; i < x->g->n_nodes && st == GRAFT_OK; i++) {
        st = run_node(x, rs, i, e);
        if (st == GRAFT_OK) release_after(x, rs, i);
        if (st == GRAFT_OK) st = pause_at(x, i, e);
    }
    return st;
}

/* Run node by node while the device records; then launch the recording once. A failure while
 * recording (a node that cannot be recorded) turns recording off; the caller runs again. */
static graft_status run_recorded(executor *x, run_state *rs, const tensor *inputs, bool *retry,
                                 graft_err *e) {
    *retry = false;
    TRY(exec_graph_stage_inputs(x, inputs, e));
    TRY(x->device->capture_begin(x->device->impl, e));
    graft_status st = run_nodes(x, rs, e);
    void *graph = NULL;
    graft_status cst = x->device->capture_end(x->device->impl, &graph, NULL);
    if (st != GRAFT_OK || cst != GRAFT_OK) {
        if (graph) x->device->graph_free(x->device->impl, graph);
        exec_graph_free(x); /* the staged inputs too: normal runs copy inputs every time */
        x->graph_off = true;
        *retry = true;
        return GRAFT_OK;
    }
    st = x->device->replay(x->device->impl, graph, e);
    if (st == GRAFT_OK) st = x->device->synchronize(x->device->impl, e);
    if (st == GRAFT_OK) return exec_graph_keep(x, graph, e);
    x->device->graph_free(x->device->impl, graph);
    return st;
}

static void finish_stats(executor *x, const run_state *rs) {
    x->stats.nodes_run = x->g->n_nodes;
    x->stats.total_activation_bytes = rs->total;
    x->stats.planned = rs->planned;
    x->stats.peak_activation_bytes =
        rs->planned ? x->plan.arena_bytes + x->plan.device_arena_bytes + rs->peak : rs->peak;
}

/* Device inputs that graft_model_copy_async is still filling: the run's work waits for those
 * copies on the device (before anything is recorded or replayed). */
static graft_status wait_input_uploads(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    if (!x->device || !x->device->wait_uploads) return GRAFT_OK;
    for (int i = 0; i < g->n_inputs; i++)
        if (x->on_dev[g->inputs[i]] && inputs[i].data)
            TRY(x->device->wait_uploads(x->device->impl, inputs[i].data,
                                        (size_t)tensor_nbytes(&inputs[i]), e));
    return GRAFT_OK;
}

graft_status exec_run(executor *x, const tensor *inputs, graft_err *e) {
    ir_graph *g = x->g;
    release_all(x);
    run_state rs = {exec_plan_select(x, inputs), 0, 0, 0};
    ensure_arenas(x, &rs);
    for (int v = 0; v < g->n_values; v++) {
        x->seen_bytes[v] = -1;
        if (g->values[v].is_const) x->vals[v] = g->values[v].data;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        x->vals[g->inputs[i]] = inputs[i];
        x->on_dev[g->inputs[i]] =
            x->device && (x->input_on_device ? x->input_on_device[i] : x->inputs_on_device);
    }
    x->flops = 0.0;
    graft_status st = wait_input_uploads(x, inputs, e);
    if (st != GRAFT_OK) return st;
    if (x->plan.graph && !exec_graph_inputs_in_place(x, inputs))
        exec_graph_free(x); /* recorded over another buffer: record again */
    if (rs.planned && x->plan.graph && !x->count_flops && !x->profile.on && !x->pause_fn) {
        x->replays++;
        st = exec_graph_replay(x, inputs, e);
        if (st == GRAFT_OK) st = own_outputs(x, e);
        if (st != GRAFT_OK) release_all(x);
        return st;
    }
    int64_t fallbacks =
        x->device && x->device->fallback_count ? x->device->fallback_count(x->device->impl) : 0;
    if (exec_graph_can_record(x, rs.planned)) {
        bool retry = false;
        st = run_recorded(x, &rs, inputs, &retry, e);
        if (retry) return exec_run(x, inputs, e); /* recording is off now */
    } else {
        st = run_nodes(x, &rs, e);
        if (st == GRAFT_OK && x->device) st = x->device->synchronize(x->device->impl, e);
    }
    x->last_clean = !x->device || !x->device->fallback_count ||
                    x->device->fallback_count(x->device->impl) == fallbacks;
    if (st == GRAFT_OK) st = exec_outputs_place(x, e);
    if (st == GRAFT_OK) st = own_outputs(x, e);
    if (st != GRAFT_OK) {
        release_all(x);
        if (x->device) x->device->synchronize(x->device->impl, NULL);
        return st;
    }
    finish_stats(x, &rs);
    /* Intermediates no longer needed; outputs stay until the next run. */
    for (int v = 0; v < g->n_values; v++)
        if (!g->values[v].is_graph_output && x->owned[v] == 2) x->owned[v] = 0;
    if (rs.planned) return GRAFT_OK;
    x->plans_learned++;
    return learn_plan(x, inputs, e);
}
