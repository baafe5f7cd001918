/* summary.c: facts about a loaded model for tools: parameters, op histogram, opsets, metadata,
 * FLOPs per sample (measured on a dummy run) and the tensor the `auto` cut would pick. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define ASSUMED_SEQ_LEN 128

/* Build zero-filled inputs with symbolic dims replaced: the first by 1 (batch), others by the
 * assumed sequence length. */
static graft_status dummy_inputs(const graft_model *m, graft_named_tensor *in, graft_err *e) {
    for (int i = 0; i < m->g.n_inputs; i++) {
        const ir_value *v = &m->g.values[m->g.inputs[i]];
        in[i].name = v->name;
        tensor *t = &in[i].tensor;
        int64_t dims[GRAFT_MAX_DIMS];
        int nd = v->ndim < 0 ? 0 : v->ndim;
        for (int d = 0; d < nd; d++)
            dims[d] = v->dims[d] >= 0 ? v->dims[d] : (d == 0 ? 1 : ASSUMED_SEQ_LEN);
        TRY(tensor_make(t, v->dtype, nd, dims, e));
    }
    return GRAFT_OK;
}

/* The FLOPs run is skipped (FLOPs unknown) when one value's known size is over this: a summary
 * never allocates gigabytes for a hostile model (docs/engine.md "Limits"). */
#define SUMMARY_MAX_VALUE_BYTES ((int64_t)1 << 30)

static bool too_large_to_measure(const graft_model *m) {
    for (int v = 0; v < m->g.n_values; v++) {
        const ir_value *val = &m->g.values[v];
        if (val->is_const || val->ndim < 0) continue;
        int64_t bytes = dtype_bytes(val->dtype, dims_numel(val->ndim, val->dims));
        bool known = true;
        for (int i = 0; i < val->ndim; i++) known &= val->dims[i] >= 0;
        if (known && val->dtype != GRAFT_DTYPE_UNDEFINED &&
            (bytes < 0 || bytes > SUMMARY_MAX_VALUE_BYTES))
            return true;
    }
    return false;
}

/* The FLOPs probe runs one sample; a buffer larger than this (a value whose size only the run
 * shows, in a hostile or unusual graph) ends it with the FLOPs unknown rather than allocating. */
#define SUMMARY_PROBE_MAX_BUFFER ((size_t)256 << 20)

static double measure_flops(graft_model *m) {
    graft_err e;
    if (too_large_to_measure(m)) return -1.0;
    graft_named_tensor *in = calloc((size_t)m->g.n_inputs + 1, sizeof *in);
    double flops = -1.0;
    if (!in) return flops;
    if (dummy_inputs(m, in, &e) == GRAFT_OK) {
        tensor *bound = calloc((size_t)m->g.n_inputs + 1, sizeof *bound);
        if (bound && model_bind_inputs(m, in, m->g.n_inputs, bound, &e) == GRAFT_OK) {
            m->exec.count_flops = true;
            m->exec.max_buffer_bytes = SUMMARY_PROBE_MAX_BUFFER;
            /* A fixed batch (the dummy's leading dim) counts as that many samples. */
            int64_t batch =
                m->g.n_inputs && bound[0].ndim > 0 && bound[0].dims[0] > 0 ? bound[0].dims[0] : 1;
            if (exec_run(&m->exec, bound, &e) == GRAFT_OK) flops = m->exec.flops / (double)batch;
            m->exec.count_flops = false;
            m->exec.max_buffer_bytes = 0;
        }
        free(bound);
    }
    for (int i = 0; i < m->g.n_inputs; i++) tensor_release(&in[i].tensor);
    free(in);
    return flops;
}

graft_status model_probe_output_dims(graft_model *m, int output, int *ndim, int64_t *dims,
                                     graft_err *e) {
    if (output < 0 || output >= m->g.n_outputs)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no output %d", output);
    graft_named_tensor *in = calloc((size_t)m->g.n_inputs + 1, sizeof *in);
    if (!in) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = dummy_inputs(m, in, e);
    if (st == GRAFT_OK) st = graft_model_run(m, in, m->g.n_inputs);
    const graft_tensor *out = NULL;
    if (st == GRAFT_OK) st = graft_model_output(m, output, &out);
    if (st == GRAFT_OK) {
        *ndim = out->ndim;
        memcpy(dims, out->dims, sizeof(int64_t) * (size_t)out->ndim);
    }
    for (int i = 0; i < m->g.n_inputs; i++) tensor_release(&in[i].tensor);
    free(in);
    return st;
}

graft_status graft_model_summarize(const graft_model *cm, graft_model_summary *out) {
    if (!cm || !out) return GRAFT_E_INVALID_ARGUMENT;
    graft_model *m = (graft_model *)cm; /* caches the summary; runs the model once */
    if (!m->summary_ready) {
        graft_model_summary *s = &m->summary;
        memset(s, 0, sizeof *s);
        s->ir_version = m->g.ir_version;
        s->producer_name = m->g.producer_name;
        s->producer_version = m->g.producer_version;
        s->default_opset = ir_opset_version(&m->g, "");
        s->node_count = m->original_node_count;
        for (int v = 0; v < m->g.n_values; v++) {
            const ir_value *val = &m->g.values[v];
            if (!val->is_const || !val->data.data || !dtype_is_float(val->data.dtype)) continue;
            s->parameter_count += tensor_numel(&val->data);
            s->parameter_bytes += tensor_nbytes(&val->data);
        }
        s->assumed_seq_len = ASSUMED_SEQ_LEN;
        s->flops_per_sample = measure_flops(m);
        m->summary_ready = true;
    }
    *out = m->summary;
    return GRAFT_OK;
}

int graft_model_op_type_count(const graft_model *m) {
    return m ? m->n_op_counts : 0;
}

graft_status graft_model_op_type(const graft_model *m, int index, const char **op, int64_t *count) {
    if (!m || index < 0 || index >= m->n_op_counts) return GRAFT_E_INVALID_ARGUMENT;
    if (op) *op = m->op_counts[index].op;
    if (count) *count = m->op_counts[index].count;
    return GRAFT_OK;
}

int graft_model_opset_count(const graft_model *m) {
    return m ? m->g.n_opsets : 0;
}

graft_status graft_model_opset(const graft_model *m, int index, const char **domain,
                               int64_t *version) {
    if (!m || index < 0 || index >= m->g.n_opsets) return GRAFT_E_INVALID_ARGUMENT;
    if (domain) *domain = m->g.opsets[index].domain[0] ? m->g.opsets[index].domain : "ai.onnx";
    if (version) *version = m->g.opsets[index].version;
    return GRAFT_OK;
}

int graft_model_metadata_count(const graft_model *m) {
    return m ? m->g.n_metadata : 0;
}

graft_status graft_model_metadata(const graft_model *m, int index, const char **key,
                                  const char **value) {
    if (!m || index < 0 || index >= m->g.n_metadata) return GRAFT_E_INVALID_ARGUMENT;
    if (key) *key = m->g.metadata[index].key;
    if (value) *value = m->g.metadata[index].value;
    return GRAFT_OK;
}

graft_status graft_model_set_metadata(graft_model *m, const char *key, const char *value) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (!key || !key[0] || !value)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "metadata needs a key and a value");
    ir_graph *g = &m->g;
    for (int i = 0; i < g->n_metadata; i++)
        if (strcmp(g->metadata[i].key, key) == 0) {
            char *v = strdup(value);
            if (!v) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
            free(g->metadata[i].value);
            g->metadata[i].value = v;
            return GRAFT_OK;
        }
    ir_kv *kv = realloc(g->metadata, sizeof *kv * (size_t)(g->n_metadata + 1));
    if (!kv) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    g->metadata = kv;
    kv[g->n_metadata].key = strdup(key);
    kv[g->n_metadata].value = strdup(value);
    if (!kv[g->n_metadata].key || !kv[g->n_metadata].value) {
        free(kv[g->n_metadata].key), free(kv[g->n_metadata].value);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    g->n_metadata++;
    return GRAFT_OK;
}

/* Whether value v is the graph input `input`, directly or through shape-only or type-only ops. */
static bool reads_input(const ir_graph *g, int v, int input) {
    static const char *const pass_through[] = {"Cast", "Reshape", "Unsqueeze", "Squeeze",
                                               "Flatten"};
    for (int depth = 0; depth < 8 && v >= 0; depth++) {
        if (v == input) return true;
        int p = g->values[v].producer;
        if (p < 0 || g->nodes[p].n_in < 1) return false;
        bool through = false;
        for (size_t k = 0; k < sizeof pass_through / sizeof *pass_through; k++)
            through |= strcmp(g->nodes[p].op_type, pass_through[k]) == 0;
        if (!through) return false;
        v = g->nodes[p].inputs[0];
    }
    return false;
}

graft_status graft_model_embedding_rows(const graft_model *m, const char *input, int64_t *rows,
                                        const char **table_name) {
    if (!m || !input || !rows) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    const ir_graph *g = &m->g;
    int in = ir_find_value(g, input);
    if (in < 0 || !g->values[in].is_graph_input)
        return err_set(e, GRAFT_E_NOT_FOUND, "the model has no input '%s'", input);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || strcmp(n->op_type, "Gather") != 0 || n->n_in < 2 || n->inputs[0] < 0 ||
            attr_i(n, "axis", 0) != 0)
            continue;
        const ir_value *table = &g->values[n->inputs[0]];
        if (!table->is_const || table->ndim != 2 || !reads_input(g, n->inputs[1], in)) continue;
        *rows = table->dims[0];
        if (table_name) *table_name = table->name;
        return GRAFT_OK;
    }
    return err_set(e, GRAFT_E_NOT_FOUND, "no embedding table is indexed by input '%s'", input);
}
