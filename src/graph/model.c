/* model.c: the public model API: load (file or memory), describe inputs and outputs, run. */
#include "model.h"

#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "../core/clock.h"
#include "../cpu/cpu_backend.h"
#include "../onnx/onnx_io.h"
#include "exec_internal.h"
#include "freeze_points.h"
#include "graft_config.h"
#if GRAFT_HAVE_OPENMP
#include <omp.h>
#endif

static int cmp_op_count(const void *a, const void *b) {
    const op_count_entry *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->op, y->op);
}

/* The op histogram is taken before passes change the graph, so it describes the file. */
static graft_status count_ops(graft_model *m, graft_err *e) {
    m->op_counts = calloc((size_t)m->g.n_nodes + 1, sizeof *m->op_counts);
    if (!m->op_counts) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < m->g.n_nodes; i++) {
        const char *op = m->g.nodes[i].op->name; /* static string from the registry */
        int j = 0;
        while (j < m->n_op_counts && strcmp(m->op_counts[j].op, op) != 0) j++;
        if (j == m->n_op_counts) m->op_counts[m->n_op_counts++] = (op_count_entry){op, 0};
        m->op_counts[j].count++;
    }
    qsort(m->op_counts, (size_t)m->n_op_counts, sizeof *m->op_counts, cmp_op_count);
    m->original_node_count = m->g.n_nodes;
    return GRAFT_OK;
}

static void log_from_cpu(void *user, int level, const char *msg) {
    ctx_log(user, (graft_log_level)level, "%s", msg);
}

/* Where a load's time went (GRAFT_LOG=debug). */
typedef struct load_times {
    double read, parse, passes, device, plan;
} load_times;

static graft_status prepare(graft_model *m, load_times *lt, graft_err *e) {
    double t0 = clock_seconds();
    TRY(graph_resolve_ops(&m->g, e));
    TRY(count_ops(m, e));
    TRY(ir_toposort(&m->g, e));
    TRY(graph_infer_shapes(&m->g, e));
    TRY(model_batch_optimize(m, e));
    const graft_ctx_options *o = &m->ctx->options;
    TRY(cpu_backend_create(o->num_threads, o->use_reference_kernels != 0, &m->backend, e));
    m->have_backend = true;
    cpu_backend_set_log(&m->backend, log_from_cpu, m->ctx);
    double t1 = clock_seconds();
    TRY(model_open_device(m, e));
    double t2 = clock_seconds();
    TRY(exec_init(&m->exec, &m->g, &m->backend, model_device(m), e));
    model_note_fallbacks(m);
    if (lt) lt->passes = t1 - t0, lt->device = t2 - t1, lt->plan = clock_seconds() - t2;
    return GRAFT_OK;
}

/* owned: data's malloc'ed buffer, freed once parsed (NULL: the caller's, kept). */
static graft_status load_common(graft_ctx *ctx, const void *data, size_t size, void *owned,
                                const char *base_dir, const char *what, load_times *lt,
                                graft_model **out) {
    graft_err *e = &ctx->err;
    graft_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(owned);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory loading %s", what);
    }
    m->ctx = ctx;
    m->keep_batchnorm = ctx->options.keep_batchnorm != 0;
    double t0 = clock_seconds();
    graft_status st = onnx_parse_model_owned(data, size, owned, base_dir, what, &m->g, e);
    lt->parse = clock_seconds() - t0;
    if (st == GRAFT_OK) {
        st = prepare(m, lt, e);
        if (st != GRAFT_OK) err_prefix(e, "%s", what);
    } else {
        ir_graph_init(&m->g);
    }
    if (st != GRAFT_OK) {
        graft_model_free(m);
        return st;
    }
#ifdef __GLIBC__
    malloc_trim(0); /* the parsed message's freed pieces back to the system, not kept in the heap */
#endif
    ctx_log(ctx, GRAFT_LOG_INFO, "loaded %s: %d nodes after passes (%lld in the file)", what,
            m->g.n_nodes, (long long)m->original_node_count);
    ctx_log(ctx, GRAFT_LOG_DEBUG,
            "loading %s: file read %.3fs, parse %.3fs, passes %.3fs, device start %.3fs (%s), "
            "executor %.3fs",
            what, lt->read, lt->parse, lt->passes, lt->device, m->device_name, lt->plan);
    *out = m;
    return GRAFT_OK;
}

graft_status model_from_graph(graft_ctx *ctx, ir_graph *g, const char *what, graft_model **out,
                              graft_err *e) {
    *out = NULL;
    graft_model *m = calloc(1, sizeof *m);
    if (!m) {
        ir_graph_free(g);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory making %s", what);
    }
    m->ctx = ctx;
    m->g = *g;
    ir_graph_init(g);
    graft_status st = prepare(m, NULL, e);
    if (st != GRAFT_OK) {
        err_prefix(e, "%s", what);
        graft_model_free(m);
        return st;
    }
    *out = m;
    return GRAFT_OK;
}

graft_status graft_model_load(graft_ctx *ctx, const char *path, graft_model **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&ctx->err);
    if (!path || !out)
        return err_set(&ctx->err, GRAFT_E_INVALID_ARGUMENT, "graft_model_load: NULL argument");
    *out = NULL;
    void *data = NULL;
    size_t size = 0;
    load_times lt = {0};
    double t0 = clock_seconds();
    TRY(read_file(path, &data, &size, &ctx->err));
    lt.read = clock_seconds() - t0;
    char *dir = strdup(path);
    if (!dir) {
        free(data);
        return err_set(&ctx->err, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    graft_status st = load_common(ctx, data, size, data, slash ? dir : ".", path, &lt, out);
    free(dir); /* data: freed as soon as it was parsed */
    return st;
}

graft_status graft_model_load_memory(graft_ctx *ctx, const void *data, size_t size,
                                     const char *base_dir, graft_model **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&ctx->err);
    if (!data || !out)
        return err_set(&ctx->err, GRAFT_E_INVALID_ARGUMENT,
                       "graft_model_load_memory: NULL argument");
    *out = NULL;
    load_times lt = {0};
    return load_common(ctx, data, size, NULL, base_dir, "<memory>", &lt, out);
}

void graft_model_free(graft_model *m) {
    if (!m) return;
    exec_free(&m->exec);
    if (m->have_device) m->device.destroy(m->device.impl);
    if (m->have_backend) m->backend.destroy(m->backend.impl);
    ir_graph_free(&m->g);
    model_batch_free(&m->batch);
    model_drop_freeze_points(m);
    free(m->op_counts);
    free(m);
}

int graft_model_input_count(const graft_model *m) {
    return m ? m->g.n_inputs : 0;
}
int graft_model_output_count(const graft_model *m) {
    return m ? m->g.n_outputs : 0;
}

static void fill_info(const ir_value *v, graft_value_info *info) {
    memset(info, 0, sizeof *info);
    info->name = v->name;
    info->dtype = v->dtype;
    info->ndim = v->ndim;
    for (int i = 0; i < v->ndim && i < GRAFT_MAX_DIMS; i++) {
        info->dims[i] = v->dims[i];
        info->dim_names[i] = v->dim_names[i];
    }
}

graft_status graft_model_input_info(const graft_model *m, int index, graft_value_info *info) {
    if (!m || !info || index < 0 || index >= m->g.n_inputs) return GRAFT_E_INVALID_ARGUMENT;
    fill_info(&m->g.values[m->g.inputs[index]], info);
    return GRAFT_OK;
}

graft_status graft_model_output_info(const graft_model *m, int index, graft_value_info *info) {
    if (!m || !info || index < 0 || index >= m->g.n_outputs) return GRAFT_E_INVALID_ARGUMENT;
    fill_info(&m->g.values[m->g.outputs[index]], info);
    return GRAFT_OK;
}

int64_t graft_model_fixed_batch(const graft_model *m, const char **why) {
    if (why) *why = m ? m->batch.why : "";
    return m ? m->batch.fixed : 0;
}

/* any_batch: the leading dim may be any size (the model runs other batches in chunks). */
static graft_status check_input(const ir_value *v, const tensor *t, bool any_batch, graft_err *e) {
    char want[256], got[256];
    shape_str(want, sizeof want, v->ndim, v->dims);
    shape_str(got, sizeof got, t->ndim, t->dims);
    if (t->dtype != v->dtype)
        return err_set(e, GRAFT_E_DTYPE, "input '%s' must be %s %s, got %s %s", v->name,
                       graft_dtype_name(v->dtype), want, graft_dtype_name(t->dtype), got);
    bool ok = t->ndim >= 0 && t->ndim <= GRAFT_MAX_DIMS && (v->ndim < 0 || v->ndim == t->ndim);
    for (int i = 0; ok && i < t->ndim; i++) {
        if (t->dims[i] < 0)
            ok = false;
        else if (v->ndim >= 0 && v->dims[i] >= 0 && v->dims[i] != t->dims[i] &&
                 !(i == 0 && any_batch))
            ok = false;
    }
    if (!ok || tensor_nbytes(t) < 0)
        return err_set(e, GRAFT_E_SHAPE, "input '%s' must have shape %s, got %s", v->name, want,
                       got);
    if (!t->data && tensor_numel(t) > 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "input '%s' has no data", v->name);
    return GRAFT_OK;
}

graft_status model_bind_inputs(const graft_model *m, const graft_named_tensor *inputs, int n_inputs,
                               tensor *bound, graft_err *e) {
    const ir_graph *g = &m->g;
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "graft_model_run: bad input array");
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        int found = -1;
        for (int j = 0; j < n_inputs; j++)
            if (inputs[j].name && strcmp(inputs[j].name, v->name) == 0) found = j;
        if (found < 0) return err_set(e, GRAFT_E_NOT_FOUND, "input '%s' was not given", v->name);
        TRY(check_input(v, &inputs[found].tensor, m->batch.fixed > 0, e));
        bound[i] = inputs[found].tensor;
    }
    for (int j = 0; j < n_inputs; j++) {
        int v = inputs[j].name ? ir_find_value(g, inputs[j].name) : -1;
        if (v < 0 || !g->values[v].is_graph_input)
            return err_set(e, GRAFT_E_NOT_FOUND, "the model has no input named '%s'",
                           inputs[j].name ? inputs[j].name : "(null)");
    }
    return GRAFT_OK;
}

graft_status graft_model_run(graft_model *m, const graft_named_tensor *inputs, int n_inputs) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    tensor *bound = calloc((size_t)m->g.n_inputs + 1, sizeof *bound);
    if (!bound) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
#if GRAFT_HAVE_OPENMP
    if (m->ctx->options.num_threads > 0) omp_set_num_threads(m->ctx->options.num_threads);
#endif
    graft_status st = model_bind_inputs(m, inputs, n_inputs, bound, e);
    m->exec.inputs_on_device = m->inputs_on_device;
    m->exec.outputs_on_device = m->outputs_on_device;
    if (st == GRAFT_OK && (m->inputs_on_device || m->outputs_on_device) && m->batch.fixed > 0 &&
        m->g.n_inputs > 0 && bound[0].ndim > 0 && bound[0].dims[0] != m->batch.fixed)
        st = err_set(e, GRAFT_E_UNSUPPORTED,
                     "the model takes batches of exactly %lld, and inputs or outputs on the "
                     "device are not split into such batches: give %lld rows",
                     (long long)m->batch.fixed, (long long)m->batch.fixed);
    if (st == GRAFT_OK) st = model_batch_run(m, bound, e);
    free(bound);
    return st;
}

graft_status graft_model_output(const graft_model *m, int index, const graft_tensor **out) {
    if (!m || !out || index < 0 || index >= m->g.n_outputs) return GRAFT_E_INVALID_ARGUMENT;
    if (m->batch.chunked && index < m->batch.n_out) {
        *out = &m->batch.out[index];
        return GRAFT_OK;
    }
    const tensor *t = &m->exec.vals[m->g.outputs[index]];
    if (!t->data && tensor_numel(t) != 0) {
        err_set(&m->ctx->err, GRAFT_E_INVALID_ARGUMENT, "the model has not been run yet");
        return GRAFT_E_INVALID_ARGUMENT;
    }
    *out = t;
    return GRAFT_OK;
}

graft_status graft_model_run_stats(const graft_model *m, graft_run_stats *out) {
    if (!m || !out) return GRAFT_E_INVALID_ARGUMENT;
    *out = m->exec.stats;
    return GRAFT_OK;
}

graft_status graft_model_set_profiling(graft_model *m, int on) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    memset(&m->exec.profile, 0, sizeof m->exec.profile);
    m->exec.profile.on = on != 0;
    return GRAFT_OK;
}

int graft_model_profile(const graft_model *m, graft_op_time *out, int max) {
    if (!m || max < 0) return 0;
    return exec_profile_get(&m->exec, out, max);
}

graft_status model_set_output(graft_model *m, int value, graft_err *e) {
    ir_graph *g = &m->g;
    exec_free(&m->exec);
    model_release_state(m);
    model_drop_freeze_points(m);
    m->summary_ready = false;
    for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].is_graph_output = false;
    g->outputs[0] = value;
    g->n_outputs = 1;
    g->values[value].is_graph_output = true;
    graft_status st = ir_toposort(g, e);
    if (st == GRAFT_OK) st = pass_remove_dead(g, NULL, e);
    char *read = st == GRAFT_OK ? calloc((size_t)g->n_values + 1, 1) : NULL;
    if (st == GRAFT_OK && !read) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK) {
        ir_compact(g);
        read[value] = 1;
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].inputs[k] >= 0) read[g->nodes[i].inputs[k]] = 1;
        int w = 0;
        for (int i = 0; i < g->n_inputs; i++) {
            if (read[g->inputs[i]])
                g->inputs[w++] = g->inputs[i];
            else
                g->values[g->inputs[i]].is_graph_input = false;
        }
        g->n_inputs = w;
        st = graph_infer_shapes(g, e);
    }
    free(read);
    if (st == GRAFT_OK) st = model_optimize(m, e);
    graft_status st2 =
        exec_init(&m->exec, g, &m->backend, model_device(m), st == GRAFT_OK ? e : NULL);
    return st != GRAFT_OK ? st : st2;
}

graft_status model_name_output_batch(graft_model *m, graft_err *e) {
    ir_graph *g = &m->g;
    if (g->n_outputs != 1 || g->n_inputs < 1) return GRAFT_OK;
    ir_value *out = &g->values[g->outputs[0]];
    if (out->ndim < 1 || out->dims[0] >= 0 || out->dim_names[0]) return GRAFT_OK;
    const char *name = NULL;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *in = &g->values[g->inputs[i]];
        if (in->ndim < 1 || in->dims[0] >= 0 || !in->dim_names[0]) return GRAFT_OK;
        if (name && strcmp(name, in->dim_names[0]) != 0) return GRAFT_OK;
        name = in->dim_names[0];
    }
    out->dim_names[0] = ir_strdup(name);
    return out->dim_names[0] ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
}

graft_status model_optimize(graft_model *m, graft_err *e) {
    graph_opt_options o = {.keep_batchnorm = m->keep_batchnorm};
    return graph_optimize_ex(&m->g, &o, e);
}

graft_status model_fold_batchnorm(graft_model *m, graft_err *e) {
    exec_free(&m->exec);
    model_release_state(m);
    model_drop_freeze_points(m);
    m->summary_ready = false;
    m->keep_batchnorm = false;
    graft_status st = model_optimize(m, e);
    graft_status st2 =
        exec_init(&m->exec, &m->g, &m->backend, model_device(m), st == GRAFT_OK ? e : NULL);
    if (st == GRAFT_OK && st2 == GRAFT_OK) model_note_fallbacks(m);
    return st != GRAFT_OK ? st : st2;
}
