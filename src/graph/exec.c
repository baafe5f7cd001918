/* exec.c: the executor: binds inputs, infers shapes at run time, allocates outputs from the
 * liveness plan (or on the heap while learning it), calls the backend, frees at last use. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

static void free_owned(executor *x, int v) {
    if (x->owned[v] == 1) free(x->vals[v].data);
    x->owned[v] = 0;
    x->vals[v].data = NULL;
}

static void plan_free(exec_plan *p) {
    free(p->signature);
    free(p->offsets);
    free(p->bytes);
    free(p->arena);
    memset(p, 0, sizeof *p);
}

graft_status exec_init(executor *x, ir_graph *g, graft_backend *be, graft_err *e) {
    memset(x, 0, sizeof *x);
    x->g = g;
    x->be = be;
    x->n_values = g->n_values;
    size_t nv = (size_t)g->n_values + 1;
    x->vals = calloc(nv, sizeof *x->vals);
    x->owned = calloc(nv, 1);
    x->last_use = malloc(nv * sizeof(int));
    x->seen_bytes = malloc(nv * sizeof(int64_t));
    if (!x->vals || !x->owned || !x->last_use || !x->seen_bytes) {
        exec_free(x);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory creating the executor");
    }
    for (int v = 0; v < g->n_values; v++) x->last_use[v] = g->values[v].producer;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] >= 0) x->last_use[g->nodes[i].inputs[k]] = i;
    for (int i = 0; i < g->n_outputs; i++) x->last_use[g->outputs[i]] = g->n_nodes;
    return GRAFT_OK;
}

static void release_all(executor *x) {
    for (int v = 0; v < x->n_values; v++) free_owned(x, v);
}

void exec_free(executor *x) {
    if (!x) return;
    if (x->vals && x->owned) release_all(x);
    free(x->vals);
    free(x->owned);
    free(x->last_use);
    free(x->seen_bytes);
    plan_free(&x->plan);
    memset(x, 0, sizeof *x);
}

static int signature_of(const ir_graph *g, const tensor *inputs, int64_t *sig) {
    int n = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        if (sig) sig[n] = inputs[i].ndim;
        n++;
        for (int d = 0; d < inputs[i].ndim; d++, n++)
            if (sig) sig[n] = inputs[i].dims[d];
    }
    return n;
}

static bool plan_matches(const executor *x, const tensor *inputs) {
    if (!x->plan.valid) return false;
    int64_t sig[GRAFT_MAX_DIMS * 64 + 64];
    if (x->g->n_inputs > 64) return false;
    int n = signature_of(x->g, inputs, sig);
    return n == x->plan.signature_len &&
           memcmp(sig, x->plan.signature, sizeof(int64_t) * (size_t)n) == 0;
}

/* After a heap-allocated run, lay out every intermediate value in one arena. */
static graft_status learn_plan(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    exec_plan *p = &x->plan;
    plan_free(p);
    int nv = g->n_values;
    int sl = signature_of(g, inputs, NULL);
    p->signature = malloc(sizeof(int64_t) * ((size_t)sl + 1));
    p->offsets = calloc((size_t)nv + 1, sizeof(int64_t));
    p->bytes = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    int *first = malloc(sizeof(int) * ((size_t)nv + 1)),
        *last = malloc(sizeof(int) * ((size_t)nv + 1));
    int64_t *sizes = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    int *which = malloc(sizeof(int) * ((size_t)nv + 1));
    int64_t *offs = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    graft_status st = GRAFT_OK;
    if (!p->signature || !p->offsets || !p->bytes || !first || !last || !sizes || !which || !offs)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory planning memory");
    int n = 0;
    for (int v = 0; st == GRAFT_OK && v < nv; v++) {
        p->bytes[v] = -1;
        const ir_value *val = &g->values[v];
        if (val->is_const || val->is_graph_input || val->is_graph_output || val->producer < 0 ||
            x->seen_bytes[v] < 0)
            continue;
        which[n] = v;
        sizes[n] = x->seen_bytes[v];
        first[n] = val->producer;
        last[n] = x->last_use[v] > val->producer ? x->last_use[v] : val->producer;
        n++;
    }
    if (st == GRAFT_OK) st = plan_memory(n, sizes, first, last, offs, &p->arena_bytes, e);
    if (st == GRAFT_OK) {
        for (int i = 0; i < n; i++) {
            p->offsets[which[i]] = offs[i];
            p->bytes[which[i]] = sizes[i];
        }
        p->signature_len = signature_of(g, inputs, p->signature);
        p->valid = true;
    }
    free(first), free(last), free(sizes), free(which), free(offs);
    if (st != GRAFT_OK) plan_free(p);
    return st;
}

typedef struct run_state {
    bool planned;
    int64_t live, peak, total;
} run_state;

static graft_status alloc_output(executor *x, run_state *rs, int v, const value_info *info,
                                 const ir_node *n, graft_err *e) {
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
    x->seen_bytes[v] = bytes;
    rs->total += bytes > 0 ? bytes : 0;
    if (rs->planned && x->plan.bytes[v] == bytes && x->plan.arena) {
        t->data = (char *)x->plan.arena + x->plan.offsets[v];
        memset(t->data, 0, (size_t)bytes);
        x->owned[v] = 2;
        return GRAFT_OK;
    }
    TRY(tensor_alloc(t, e));
    x->owned[v] = 1;
    rs->live += bytes;
    if (rs->live > rs->peak) rs->peak = rs->live;
    return GRAFT_OK;
}

static void release_after(executor *x, run_state *rs, int node_index) {
    const ir_node *n = &x->g->nodes[node_index];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->inputs[k];
        if (v < 0 || x->last_use[v] != node_index || x->owned[v] != 1) continue;
        rs->live -= x->seen_bytes[v];
        free_owned(x, v);
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = n->outputs[k];
        if (v < 0 || x->last_use[v] != node_index || x->owned[v] != 1) continue;
        rs->live -= x->seen_bytes[v]; /* an output nothing reads */
        free_owned(x, v);
    }
}

static graft_status run_node(executor *x, run_state *rs, int i, graft_err *e) {
    ir_node *n = &x->g->nodes[i];
    value_info in[64], out[64];
    const tensor *in_t[64];
    tensor *out_t[64];
    tensor scratch[64];
    int scratch_used[64] = {0};
    for (int k = 0; k < n->n_in; k++) {
        int v = n->inputs[k];
        memset(&in[k], 0, sizeof in[k]);
        in_t[k] = NULL;
        if (v < 0) continue;
        const tensor *t = &x->vals[v];
        in[k].present = true;
        in[k].dtype = t->dtype;
        in[k].ndim = t->ndim;
        memcpy(in[k].dims, t->dims, sizeof t->dims);
        in[k].value = t;
        in_t[k] = t;
    }
    memset(out, 0, sizeof(value_info) * (size_t)n->n_out);
    TRY(n->op->infer(n, in, n->n_in, out, n->n_out, e));
    graft_status st = GRAFT_OK;
    for (int k = 0; k < n->n_out && st == GRAFT_OK; k++) {
        int v = n->outputs[k];
        if (v >= 0) {
            st = alloc_output(x, rs, v, &out[k], n, e);
            out_t[k] = &x->vals[v];
        } else if (out[k].present && out[k].ndim >= 0 && op_shape_known(&out[k])) {
            st = tensor_make(&scratch[k], out[k].dtype, out[k].ndim, out[k].dims, e);
            scratch_used[k] = st == GRAFT_OK;
            out_t[k] = &scratch[k];
        } else {
            out_t[k] = NULL;
        }
    }
    if (st == GRAFT_OK) {
        op_call call = {n, in_t, n->n_in, out_t, n->n_out, e};
        st = x->be->run(x->be->impl, i, &call);
        if (st == GRAFT_OK && x->count_flops)
            x->flops += node_flops(n, in_t, n->n_in, (const tensor *const *)out_t, n->n_out);
    }
    for (int k = 0; k < n->n_out; k++)
        if (scratch_used[k]) tensor_release(&scratch[k]);
    return st;
}

graft_status exec_run(executor *x, const tensor *inputs, graft_err *e) {
    ir_graph *g = x->g;
    release_all(x);
    run_state rs = {plan_matches(x, inputs), 0, 0, 0};
    if (rs.planned && !x->plan.arena && x->plan.arena_bytes > 0) {
        x->plan.arena = malloc((size_t)x->plan.arena_bytes);
        if (!x->plan.arena) rs.planned = false;
    }
    for (int v = 0; v < g->n_values; v++) {
        x->seen_bytes[v] = -1;
        if (g->values[v].is_const) x->vals[v] = g->values[v].data;
    }
    for (int i = 0; i < g->n_inputs; i++) x->vals[g->inputs[i]] = inputs[i];
    x->flops = 0.0;
    graft_status st = GRAFT_OK;
    for (int i = 0; i < g->n_nodes && st == GRAFT_OK; i++) {
        st = run_node(x, &rs, i, e);
        if (st == GRAFT_OK) release_after(x, &rs, i);
    }
    /* A graph output that is an input or a constant is copied so the caller owns a stable one. */
    for (int i = 0; i < g->n_outputs && st == GRAFT_OK; i++) {
        int v = g->outputs[i];
        if (x->owned[v] == 1) continue;
        tensor copy;
        st = tensor_clone(&copy, &x->vals[v], e);
        if (st == GRAFT_OK) {
            x->vals[v] = copy;
            x->owned[v] = 1;
        }
    }
    if (st != GRAFT_OK) {
        release_all(x);
        return st;
    }
    x->stats.nodes_run = g->n_nodes;
    x->stats.total_activation_bytes = rs.total;
    x->stats.planned = rs.planned;
    x->stats.peak_activation_bytes = rs.planned ? x->plan.arena_bytes + rs.peak : rs.peak;
    /* Intermediates no longer needed; outputs stay until the next run. */
    for (int v = 0; v < g->n_values; v++)
        if (!g->values[v].is_graph_output && x->owned[v] == 2) x->owned[v] = 0;
    if (!rs.planned) return learn_plan(x, inputs, e);
    return GRAFT_OK;
}
