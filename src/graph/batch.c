/* batch.c: the batch a graph accepts, found at load by shape inference at a probe batch (a
 * Reshape whose constant target holds the traced batch pins it), and runs of any batch in chunks
 * of a pinned batch, the outputs concatenated. */
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "model.h"

#define PROBE_MAX_ELEMS 1024 /* values evaluated while probing: shape computations only */

/* Every input has a leading dim; their common declared value (0: some are symbolic, -1: they
 * have none in common or one has rank 0). */
static int64_t declared_batch(const ir_graph *g) {
    int64_t d = 0;
    if (g->n_inputs == 0) return -1;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (v->ndim < 1) return -1;
        int64_t b = v->dims[0] > 0 ? v->dims[0] : 0;
        if (i == 0)
            d = b;
        else if (b != d)
            return -1;
    }
    return d;
}

static void relax(graft_model *m) {
    ir_graph *g = &m->g;
    model_batch *b = &m->batch;
    b->declared = declared_batch(g);
    if (b->declared <= 0) return;
    b->relaxed = calloc((size_t)g->n_outputs + 1, 1);
    if (!b->relaxed) {
        b->declared = 0; /* keep the declared batch: nothing is lost but the chunking */
        return;
    }
    b->n_relaxed = g->n_outputs;
    for (int i = 0; i < g->n_inputs; i++) g->values[g->inputs[i]].dims[0] = -1;
    for (int i = 0; i < g->n_outputs; i++) {
        ir_value *v = &g->values[g->outputs[i]];
        if (v->ndim >= 1 && v->dims[0] == b->declared) {
            v->dims[0] = -1;
            b->relaxed[i] = 1;
        }
    }
}

/* Put the declared batch back on the inputs and on the outputs that declared it. */
static void unrelax(graft_model *m) {
    ir_graph *g = &m->g;
    model_batch *b = &m->batch;
    for (int i = 0; i < g->n_inputs; i++) g->values[g->inputs[i]].dims[0] = b->declared;
    for (int i = 0; i < g->n_outputs && i < b->n_relaxed; i++)
        if (b->relaxed[i]) g->values[g->outputs[i]].dims[0] = b->declared;
}

typedef struct probe_result {
    int failed;        /* the node whose inference fails at the probe batch, or -1 */
    char node[256];    /* its name and op */
    int64_t solved;    /* the batch the failing Reshape's target holds, or 0 */
    bool all_known;    /* every value's shape is known */
    bool per_sample;   /* every output leads with the probe batch */
    bool failed_known; /* (for a given node) its outputs' shapes are known */
} probe_result;

typedef struct saved_shape {
    graft_dtype dtype;
    int ndim;
    int64_t dims[GRAFT_MAX_DIMS];
} saved_shape;

static int64_t numel_of(int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (dims[i] > 0 && n > INT64_MAX / dims[i])) return -1;
        n *= dims[i];
    }
    return n;
}

/* The batch a Reshape's known target takes for an input (P, ...): its element count over the
 * elements of one sample. 0 when it cannot tell. */
static int64_t solve_reshape(const ir_node *n, const value_info *in, int64_t probe) {
    if (strcmp(n->op_type, "Reshape") != 0 || n->n_in < 2 || !in[0].present || !in[1].value ||
        in[0].ndim < 1 || in[0].dims[0] != probe)
        return 0;
    int64_t t[GRAFT_MAX_DIMS];
    int nt = op_read_ints(in[1].value, t, GRAFT_MAX_DIMS);
    int64_t per = numel_of(in[0].ndim - 1, in[0].dims + 1), total = 1;
    if (nt < 1 || per <= 0) return 0;
    for (int j = 0; j < nt; j++) {
        int64_t d = t[j] == 0 && j < in[0].ndim ? in[0].dims[j] : t[j];
        if (d <= 0) return 0; /* -1 (or an unknown copied dim): any count fits */
        total *= d;
    }
    return total % per == 0 ? total / per : 0;
}

/* Evaluate a small shape computation whose inputs are known (constants, values evaluated here,
 * or for Shape a fully known shape), so that targets computed from shapes are known too. */
static void evaluate(const ir_graph *g, const ir_node *n, const value_info *in,
                     const value_info *out, tensor *vals) {
    const tensor *in_t[64];
    tensor stand_in[64], outs[64];
    tensor *out_t[64];
    bool shape = strcmp(n->op_type, "Shape") == 0;
    if (!n->op->reference) return;
    for (int k = 0; k < n->n_in; k++) {
        in_t[k] = in[k].present ? in[k].value : NULL;
        if (!in[k].present || in[k].value) continue;
        if (!(shape && k == 0 && in[k].ndim >= 0 && op_shape_known(&in[k]))) return;
        memset(&stand_in[k], 0, sizeof stand_in[k]);
        stand_in[k].dtype = in[k].dtype;
        stand_in[k].ndim = in[k].ndim;
        memcpy(stand_in[k].dims, in[k].dims, sizeof in[k].dims);
        in_t[k] = &stand_in[k];
    }
    for (int k = 0; k < n->n_out; k++) {
        int64_t c = out[k].present && out[k].ndim >= 0 ? numel_of(out[k].ndim, out[k].dims) : -1;
        if (n->outputs[k] >= 0 && (c < 0 || c > PROBE_MAX_ELEMS)) return;
    }
    graft_err e;
    memset(outs, 0, sizeof outs);
    bool ok = true;
    for (int k = 0; k < n->n_out && ok; k++) {
        out_t[k] = &outs[k];
        ok = out[k].present && out[k].ndim >= 0 &&
             tensor_make(&outs[k], out[k].dtype, out[k].ndim, out[k].dims, &e) == GRAFT_OK;
    }
    op_call call = {n, in_t, n->n_in, out_t, n->n_out, &e};
    ok = ok && n->op->reference(&call) == GRAFT_OK;
    for (int k = 0; k < n->n_out; k++) {
        int v = n->outputs[k];
        if (ok && v >= 0 && !g->values[v].is_const) {
            tensor_release(&vals[v]);
            vals[v] = outs[k];
        } else {
            tensor_release(&outs[k]);
        }
    }
}

/* Infer every node with each input's batch set to `probe`, evaluating shape computations on
 * the way; the graph's shapes are put back afterwards. watch >= 0: report whether that node's
 * outputs came out known. */
static graft_status probe_batch(ir_graph *g, int64_t probe, int watch, probe_result *r,
                                graft_err *e) {
    memset(r, 0, sizeof *r);
    r->failed = -1;
    size_t nv = (size_t)g->n_values + 1;
    saved_shape *saved = malloc(nv * sizeof *saved);
    tensor *vals = calloc(nv, sizeof *vals);
    if (!saved || !vals) {
        free(saved), free(vals);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory probing the batch");
    }
    for (int v = 0; v < g->n_values; v++) {
        saved[v].dtype = g->values[v].dtype;
        saved[v].ndim = g->values[v].ndim;
        memcpy(saved[v].dims, g->values[v].dims, sizeof saved[v].dims);
    }
    for (int i = 0; i < g->n_inputs; i++) g->values[g->inputs[i]].dims[0] = probe;
    value_info in[64], out[64];
    for (int i = 0; i < g->n_nodes && r->failed < 0; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || n->n_in > 64 || n->n_out > 64) continue;
        for (int k = 0; k < n->n_in; k++) {
            graph_value_info(g, n->inputs[k], &in[k]);
            if (n->inputs[k] >= 0 && vals[n->inputs[k]].data) in[k].value = &vals[n->inputs[k]];
        }
        memset(out, 0, sizeof(value_info) * (size_t)n->n_out);
        graft_err quiet;
        if (n->op->infer(n, in, n->n_in, out, n->n_out, &quiet) != GRAFT_OK) {
            r->failed = i;
            snprintf(r->node, sizeof r->node, "'%s' (%s)", n->name, n->op_type);
            r->solved = solve_reshape(n, in, probe);
            break;
        }
        if (i == watch) r->failed_known = true;
        for (int k = 0; k < n->n_out; k++) {
            if (n->outputs[k] < 0 || g->values[n->outputs[k]].is_const) continue;
            ir_value *v = &g->values[n->outputs[k]];
            v->dtype = out[k].present ? out[k].dtype : GRAFT_DTYPE_UNDEFINED;
            v->ndim = out[k].present ? out[k].ndim : -1;
            for (int d = 0; d < v->ndim; d++) v->dims[d] = out[k].dims[d];
            if (i == watch && (v->ndim < 0 || numel_of(v->ndim, v->dims) < 0))
                r->failed_known = false;
        }
        evaluate(g, n, in, out, vals);
    }
    r->all_known = r->failed < 0;
    for (int v = 0; v < g->n_values && r->all_known; v++) {
        const ir_value *val = &g->values[v];
        if (!val->is_const && (val->ndim < 0 || numel_of(val->ndim, val->dims) < 0))
            r->all_known = false;
    }
    r->per_sample = r->failed < 0;
    for (int i = 0; i < g->n_outputs && r->per_sample; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        r->per_sample = v->ndim >= 1 && v->dims[0] == probe;
    }
    for (int v = 0; v < g->n_values; v++) {
        tensor_release(&vals[v]);
        if (g->values[v].is_const) continue;
        g->values[v].dtype = saved[v].dtype;
        g->values[v].ndim = saved[v].ndim;
        memcpy(g->values[v].dims, saved[v].dims, sizeof saved[v].dims);
    }
    free(saved), free(vals);
    return GRAFT_OK;
}

/* Name the unknown leading dims "batch" (inputs, and the outputs that lead with it). */
static void name_batch_dims(graft_model *m) {
    ir_graph *g = &m->g;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? g->n_outputs : g->n_inputs;
        for (int i = 0; i < n; i++) {
            ir_value *v = &g->values[pass ? g->outputs[i] : g->inputs[i]];
            if (v->ndim < 1 || v->dims[0] >= 0 || v->dim_names[0]) continue;
            if (pass && (i >= m->batch.n_relaxed || !m->batch.relaxed[i])) continue;
            v->dim_names[0] = strdup("batch"); /* NULL on failure: written as unk_N */
        }
    }
}

/* Shapes fixed again: infer and fold anew (Shape results become constants). */
static graft_status refold(graft_model *m, graft_err *e) {
    TRY(graph_infer_shapes(&m->g, e));
    return model_optimize(m, e);
}

/* The inputs declared batch D: keep it unknown when nothing pins it, else put it back. */
static graft_status settle_declared(graft_model *m, graft_err *e) {
    model_batch *b = &m->batch;
    probe_result r;
    TRY(probe_batch(&m->g, 2 * b->declared + 3, -1, &r, e));
    if (r.failed < 0 && r.all_known && r.per_sample) {
        name_batch_dims(m);
        snprintf(b->why, sizeof b->why,
                 "any (the inputs declare %lld; nothing in the graph depends on it)",
                 (long long)b->declared);
        ctx_log(m->ctx, GRAFT_LOG_INFO, "the inputs declare batch %lld, but the graph takes any",
                (long long)b->declared);
        return GRAFT_OK;
    }
    unrelax(m);
    TRY(refold(m, e));
    b->fixed = b->declared;
    if (r.failed >= 0)
        snprintf(b->why, sizeof b->why, "fixed at %lld (the graph pins it in node %s)",
                 (long long)b->fixed, r.node);
    else
        snprintf(b->why, sizeof b->why,
                 "fixed at %lld (as the inputs declare: shape inference cannot show that the "
                 "graph takes another)",
                 (long long)b->fixed);
    return GRAFT_OK;
}

/* A symbolic batch that a node pins anyway (a TorchScript export whose Reshape targets hold the
 * traced batch): set it to the pinned value. */
static graft_status settle_symbolic(graft_model *m, graft_err *e) {
    model_batch *b = &m->batch;
    ir_graph *g = &m->g;
    const int64_t probe = 5;
    probe_result r, c;
    TRY(probe_batch(g, probe, -1, &r, e));
    if (r.failed < 0) return GRAFT_OK; /* the common case: any batch */
    int64_t candidates[3] = {r.solved, 1, 2}, batch = 0;
    for (int k = 0; k < 3 && !batch; k++) {
        if (candidates[k] <= 0 || candidates[k] == probe) continue;
        TRY(probe_batch(g, candidates[k], r.failed, &c, e));
        if (c.failed < 0 && c.failed_known) batch = candidates[k];
    }
    if (!batch) {
        ctx_log(m->ctx, GRAFT_LOG_WARN,
                "shape inference at batch %lld fails in node %s; batches other than the one "
                "the model was exported with may fail",
                (long long)probe, r.node);
        return GRAFT_OK;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        ir_value *v = &g->values[g->inputs[i]];
        v->dims[0] = batch;
        free(v->dim_names[0]);
        v->dim_names[0] = NULL;
    }
    TRY(refold(m, e));
    b->fixed = batch;
    snprintf(b->why, sizeof b->why,
             "fixed at %lld (the inputs declare it symbolic, but the graph pins it in node %s)",
             (long long)batch, r.node);
    return GRAFT_OK;
}

graft_status model_batch_optimize(graft_model *m, graft_err *e) {
    model_batch *b = &m->batch;
    relax(m);
    graft_status st = model_optimize(m, e);
    if (st != GRAFT_OK && b->declared > 0) {
        /* Something needs the declared batch to infer: keep it and chunk. */
        unrelax(m);
        err_clear(e);
        st = refold(m, e);
        if (st != GRAFT_OK) return st;
        b->fixed = b->declared;
        snprintf(b->why, sizeof b->why, "fixed at %lld (as the inputs declare)",
                 (long long)b->fixed);
        b->declared = -1; /* settled */
    } else if (st != GRAFT_OK) {
        return st;
    }
    if (b->declared > 0)
        st = settle_declared(m, e);
    else if (b->declared == 0)
        st = settle_symbolic(m, e);
    if (st == GRAFT_OK && b->fixed > 0)
        ctx_log(m->ctx, GRAFT_LOG_INFO, "batch %s: larger batches run in chunks", b->why);
    return st;
}

void model_batch_free(model_batch *b) {
    for (int i = 0; i < b->n_out; i++) free(b->out[i].data);
    for (int i = 0; i < b->n_pad; i++) free(b->pad[i]);
    free(b->out), free(b->out_cap), free(b->pad), free(b->pad_cap), free(b->relaxed);
    memset(b, 0, sizeof *b);
}

/* Buffers for n outputs and n_in pad copies (kept across runs). */
static graft_status ensure_slots(model_batch *b, int n_out, int n_in, graft_err *e) {
    if (b->n_out != n_out) {
        for (int i = 0; i < b->n_out; i++) free(b->out[i].data);
        free(b->out), free(b->out_cap);
        b->out = calloc((size_t)n_out + 1, sizeof *b->out);
        b->out_cap = calloc((size_t)n_out + 1, sizeof *b->out_cap);
        b->n_out = b->out && b->out_cap ? n_out : 0;
        if (!b->n_out && n_out) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    if (b->n_pad != n_in) {
        for (int i = 0; i < b->n_pad; i++) free(b->pad[i]);
        free(b->pad), free(b->pad_cap);
        b->pad = calloc((size_t)n_in + 1, sizeof *b->pad);
        b->pad_cap = calloc((size_t)n_in + 1, sizeof *b->pad_cap);
        b->n_pad = b->pad && b->pad_cap ? n_in : 0;
        if (!b->n_pad && n_in) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    return GRAFT_OK;
}

static graft_status reserve(void **buf, size_t *cap, size_t bytes, graft_err *e) {
    if (bytes <= *cap && *buf) return GRAFT_OK;
    void *p = realloc(*buf, bytes ? bytes : 1);
    if (!p)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for a batch of %zu bytes", bytes);
    *buf = p, *cap = bytes;
    return GRAFT_OK;
}

/* Chunk `at` of the bound inputs: a view of `fixed` rows, or the remaining rows copied and the
 * last repeated up to `fixed`. */
static graft_status make_chunk(graft_model *m, const tensor *bound, int64_t n, int64_t at,
                               tensor *chunk, graft_err *e) {
    model_batch *b = &m->batch;
    int64_t rows = n - at < b->fixed ? n - at : b->fixed;
    for (int i = 0; i < m->g.n_inputs; i++) {
        size_t row = (size_t)(tensor_nbytes(&bound[i]) / n);
        chunk[i] = bound[i];
        chunk[i].dims[0] = b->fixed;
        const char *src = (const char *)bound[i].data + (size_t)at * row;
        if (rows == b->fixed) {
            chunk[i].data = (void *)src;
            continue;
        }
        TRY(reserve(&b->pad[i], &b->pad_cap[i], row * (size_t)b->fixed, e));
        char *dst = b->pad[i];
        memcpy(dst, src, row * (size_t)rows);
        for (int64_t r = rows; r < b->fixed; r++)
            memcpy(dst + row * (size_t)r, src + row * (size_t)(rows - 1), row);
        chunk[i].data = dst;
    }
    return GRAFT_OK;
}

/* After the first chunk: every output must lead with the chunk's batch; size the results. */
static graft_status start_outputs(graft_model *m, int64_t n, graft_err *e) {
    model_batch *b = &m->batch;
    for (int o = 0; o < m->g.n_outputs; o++) {
        const ir_value *v = &m->g.values[m->g.outputs[o]];
        const tensor *t = &m->exec.vals[m->g.outputs[o]];
        if (t->ndim < 1 || t->dims[0] != b->fixed) {
            char s[256];
            shape_str(s, sizeof s, t->ndim, t->dims);
            return err_set(e, GRAFT_E_SHAPE,
                           "the model takes batches of %lld only, and its output '%s' %s does "
                           "not lead with the batch, so a batch of %lld cannot run in chunks",
                           (long long)b->fixed, v->name, s, (long long)n);
        }
        tensor *out = &b->out[o];
        void *data = out->data;
        *out = *t;
        out->data = data;
        out->dims[0] = n;
        int64_t bytes = tensor_nbytes(out);
        if (bytes < 0) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "output '%s' overflows", v->name);
        TRY(reserve(&out->data, &b->out_cap[o], (size_t)bytes, e));
    }
    return GRAFT_OK;
}

/* Copy the first `rows` rows of this chunk's outputs to row `at` of the results. */
static graft_status gather_outputs(graft_model *m, int64_t at, int64_t rows, graft_err *e) {
    model_batch *b = &m->batch;
    for (int o = 0; o < m->g.n_outputs; o++) {
        const tensor *t = &m->exec.vals[m->g.outputs[o]];
        tensor *out = &b->out[o];
        bool same = t->ndim == out->ndim && t->dtype == out->dtype && t->dims[0] == b->fixed;
        for (int d = 1; same && d < t->ndim; d++) same = t->dims[d] == out->dims[d];
        if (!same)
            return err_set(e, GRAFT_E_SHAPE,
                           "output '%s' changed shape between chunks of one batch",
                           m->g.values[m->g.outputs[o]].name);
        size_t row = (size_t)(tensor_nbytes(t) / b->fixed);
        memcpy((char *)out->data + (size_t)at * row, t->data, row * (size_t)rows);
    }
    return GRAFT_OK;
}

static graft_status run_chunks(graft_model *m, const tensor *bound, int64_t n, graft_err *e) {
    model_batch *b = &m->batch;
    TRY(ensure_slots(b, m->g.n_outputs, m->g.n_inputs, e));
    tensor *chunk = calloc((size_t)m->g.n_inputs + 1, sizeof *chunk);
    if (!chunk) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = GRAFT_OK;
    for (int64_t at = 0; at < n && st == GRAFT_OK; at += b->fixed) {
        int64_t rows = n - at < b->fixed ? n - at : b->fixed;
        st = make_chunk(m, bound, n, at, chunk, e);
        if (st == GRAFT_OK) st = exec_run(&m->exec, chunk, e);
        if (st == GRAFT_OK && at == 0) st = start_outputs(m, n, e);
        if (st == GRAFT_OK) st = gather_outputs(m, at, rows, e);
    }
    free(chunk);
    b->chunked = st == GRAFT_OK;
    return st;
}

graft_status model_batch_run(graft_model *m, const tensor *bound, graft_err *e) {
    model_batch *b = &m->batch;
    b->chunked = false;
    const ir_graph *g = &m->g;
    if (b->fixed <= 0 || g->n_inputs == 0 || bound[0].ndim < 1 || bound[0].dims[0] == b->fixed)
        return exec_run(&m->exec, bound, e);
    int64_t n = bound[0].dims[0];
    for (int i = 0; i < g->n_inputs; i++)
        if (bound[i].ndim < 1 || bound[i].dims[0] != n)
            return err_set(e, GRAFT_E_SHAPE,
                           "input '%s' has %lld rows but '%s' has %lld: the inputs must agree on "
                           "the batch",
                           g->values[g->inputs[i]].name,
                           (long long)(bound[i].ndim ? bound[i].dims[0] : 0),
                           g->values[g->inputs[0]].name, (long long)n);
    if (n == 0)
        return err_set(e, GRAFT_E_SHAPE, "an empty batch (the model takes batches of %lld)",
                       (long long)b->fixed);
    return run_chunks(m, bound, n, e);
}
