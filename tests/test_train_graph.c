/* test_train_graph.c: the training graph (src/train/train_graph.c) run by graph/exec: the last
 * blocks of generated models against central finite differences in f64, a head-shaped graph
 * against src/train/head.c, and the builder's errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/graph/build.h"
#include "../src/graph/graph.h"
#include "../src/graph/model.h"
#include "../src/onnx/onnx_write.h"
#include "../src/train/head.h"
#include "../src/train/train_exec.h"
#include "../src/train/train_graph.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) { /* in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static uint64_t irand(uint64_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 17) % n;
}

/* dst: the first `rows` rows (dim 0; all of them when rows <= 0) of src, converted to dt. */
static void convert_rows(tensor *dst, const tensor *src, int64_t rows, graft_dtype dt) {
    int64_t dims[GRAFT_MAX_DIMS];
    memcpy(dims, src->dims, sizeof dims);
    if (rows > 0 && src->ndim > 0 && rows < dims[0]) dims[0] = rows;
    tensor_make(dst, dtype_is_float(src->dtype) ? dt : src->dtype, src->ndim, dims, NULL);
    for (int64_t i = 0; i < tensor_numel(dst); i++)
        if (dtype_is_float(src->dtype))
            tensor_set_f64(dst, i, tensor_get_f64(src, i));
        else
            memcpy((char *)dst->data + i * dtype_bytes(src->dtype, 1),
                   (const char *)src->data + i * dtype_bytes(src->dtype, 1),
                   (size_t)dtype_bytes(src->dtype, 1));
}

/* Every f32 value and constant of g in f64 (the reference kernels and grad rules take f64). */
static graft_status graph_to_f64(ir_graph *g, graft_err *e) {
    for (int v = 0; v < g->n_values; v++) {
        ir_value *val = &g->values[v];
        if (val->dtype != GRAFT_DTYPE_F32) continue;
        val->dtype = GRAFT_DTYPE_F64;
        if (!val->is_const) continue;
        tensor t;
        convert_rows(&t, &val->data, 0, GRAFT_DTYPE_F64);
        tensor_release(&val->data);
        val->data = t;
    }
    return graph_infer_shapes(g, e);
}

/* The model's value `name` for the recorded inputs (f32): a second load, cut there. */
static int activation(const char *model, const char *name, tensor *out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, model);
    loaded l;
    if (loaded_open(&l, path, gen, model) != 0) return -1;
    graft_err e = {0};
    int v = ir_find_value(&l.m->g, name), rc = -1;
    graft_named_tensor in[8];
    int n = 0;
    if (v >= 0 && model_set_output(l.m, v, &e) == GRAFT_OK) {
        for (int i = 0; i < graft_model_input_count(l.m); i++) {
            graft_value_info info;
            graft_model_input_info(l.m, i, &info);
            for (int j = 0; j < l.n_in; j++)
                if (!strcmp(l.in[j].name, info.name)) in[n++] = l.in[j];
        }
        const graft_tensor *t;
        if (graft_model_run(l.m, in, n) == GRAFT_OK && graft_model_output(l.m, 0, &t) == GRAFT_OK)
            rc = tensor_clone(out, t, NULL) == GRAFT_OK ? 0 : -1;
    }
    loaded_close(&l);
    return rc;
}

static double dot(const tensor *a, const tensor *b) {
    double s = 0.0;
    for (int64_t i = 0; i < tensor_numel(b); i++) s += tensor_get_f64(a, i) * tensor_get_f64(b, i);
    return s;
}

/* max |a - b| / max |b| */
static double rel_err(const tensor *a, const tensor *b) {
    double num = 0.0, den = 1e-300;
    for (int64_t i = 0; i < tensor_numel(b); i++) {
        num = fmax(num, fabs(tensor_get_f64(a, i) - tensor_get_f64(b, i)));
        den = fmax(den, fabs(tensor_get_f64(b, i)));
    }
    return num / den;
}

/* ---- generated models' last blocks against finite differences ---------------------------- */

typedef struct model_case {
    const char *test, *model, *from, *to;
    int to_output; /* which model output `to` is */
    int64_t rows;  /* samples kept (the recorded inputs' first rows) */
    int elems;     /* elements checked per parameter: the largest gradient's, then random ones */
    bool keep_bn;  /* loaded with keep_batchnorm: BatchNormalization nodes train scale and bias */
} model_case;

/* L = sum(to * r) of the forward-only graph, with inputs `in`. */
static double loss_at(train_exec *fx, const tensor *in, const tensor *r) {
    graft_err e = {0};
    if (train_exec_run(fx, in, &e) != GRAFT_OK) return NAN;
    return dot(train_exec_output(fx, 0), r);
}

/* Central differences of L in parameter p's sampled elements against grad: the worst error,
 * relative to the parameter's largest gradient or `floor`, whichever is larger (a gradient
 * that is zero in exact arithmetic, as the attention key bias's, leaves only rounding). */
static double check_param(const model_case *c, train_exec *fx, tensor *in, const tensor *r,
                          tensor *p, const tensor *grad, double floor) {
    int64_t n = tensor_numel(p), top = 0;
    double gmax = 0.0, worst = 0.0;
    for (int64_t j = 0; j < n; j++)
        if (fabs(tensor_get_f64(grad, j)) > gmax) gmax = fabs(tensor_get_f64(grad, j)), top = j;
    for (int s = 0; s < c->elems; s++) {
        int64_t j = s == 0 ? top : (int64_t)irand((uint64_t)n);
        double *x = (double *)p->data + j, keep = *x, h = 1e-6 * fmax(1.0, fabs(keep));
        *x = keep + h;
        double lp = loss_at(fx, in, r);
        *x = keep - h;
        double lm = loss_at(fx, in, r);
        *x = keep;
        double fd = (lp - lm) / (2.0 * h), d = fabs(fd - tensor_get_f64(grad, j));
        worst = fmax(worst, d / fmax(gmax, floor));
        if (isnan(fd)) worst = NAN;
    }
    return worst;
}

/* The inputs in the training graph's order, in f64: `from` and the side inputs from the
 * model's activations (first rows), the parameters' model values, d_to random. */
static int make_inputs(const model_case *c, const train_graph *tg, const ir_graph *model,
                       const tensor *to_ref, tensor *in) {
    tensor t;
    if (activation(c->model, model->values[ir_find_value(model, c->from)].name, &t)) return -1;
    convert_rows(&in[0], &t, c->rows, GRAFT_DTYPE_F64);
    tensor_release(&t);
    for (int i = 0; i < tg->n_side; i++) {
        if (activation(c->model, model->values[tg->model_side[i]].name, &t)) return -1;
        convert_rows(&in[1 + i], &t, c->rows, GRAFT_DTYPE_F64);
        tensor_release(&t);
    }
    for (int i = 0; i < tg->n_params; i++)
        convert_rows(&in[1 + tg->n_side + i], &model->values[tg->model_params[i]].data, 0,
                     GRAFT_DTYPE_F64);
    tensor *r = &in[tg->g.n_inputs - 1];
    tensor_make(r, GRAFT_DTYPE_F64, to_ref->ndim, to_ref->dims, NULL);
    for (int64_t i = 0; i < tensor_numel(r); i++) ((double *)r->data)[i] = urand();
    return 0;
}

/* The gradients of every parameter (sampled) against finite differences. */
static void check_grads(const model_case *c, train_graph *tg, train_exec *x, train_exec *fx,
                        tensor *in) {
    char name[256], worst_name[256] = "";
    double worst = 0.0;
    const tensor *r = &in[tg->g.n_inputs - 1];
    double all = 1e-300; /* the largest gradient of any parameter */
    for (int i = 0; i < tg->n_params; i++) {
        const tensor *g = train_exec_output(x, 1 + i);
        for (int64_t j = 0; j < tensor_numel(g); j++) all = fmax(all, fabs(tensor_get_f64(g, j)));
    }
    for (int i = 0; i < tg->n_params; i++) {
        double w = check_param(c, fx, in, r, &in[1 + tg->n_side + i], train_exec_output(x, 1 + i),
                               1e-3 * all);
        if (!(w <= worst)) {
            worst = w;
            snprintf(worst_name, sizeof worst_name, "%s", tg->g.values[tg->params[i]].name);
        }
    }
    /* f64 throughout, h = 1e-6 (relative above 1): rounding and truncation stay near 1e-8 of
     * the largest gradient (1e-3 of the largest of all parameters at least); a wrong rule is
     * off by O(1) there. */
    snprintf(name, sizeof name, "%s_grads (%d parameters, %d elements each, worst %.2g)", c->test,
             tg->n_params, c->elems, worst);
    CHECK(name, worst < 1e-5, "parameter %s: |fd - analytic| / max|grad| = %.3g", worst_name,
          worst);
}

/* Every value has the dtype and shape the model's graph gives it (where it knew them); every
 * gradient has a dtype and a rank. */
static void check_shapes(const model_case *c, const ir_graph *model, const train_graph *tg) {
    char why[512] = "";
    for (int v = 0; v < tg->g.n_values && !why[0]; v++) {
        const ir_value *t = &tg->g.values[v];
        int mv = ir_find_value(model, t->name);
        if (mv < 0) {
            if (t->dtype == GRAFT_DTYPE_UNDEFINED || t->ndim < 0)
                snprintf(why, sizeof why, "'%s' has no dtype or rank", t->name);
            continue;
        }
        const ir_value *m = &model->values[mv];
        bool same = t->dtype == m->dtype && t->ndim == m->ndim;
        for (int d = 0; same && d < m->ndim; d++) same = m->dims[d] < 0 || m->dims[d] == t->dims[d];
        if (!same) snprintf(why, sizeof why, "'%s' differs from the model's value", t->name);
    }
    char name[256];
    snprintf(name, sizeof name, "%s_shapes (%d values)", c->test, tg->g.n_values);
    CHECK(name, !why[0], "%s", why);
}

static int build_pair(const model_case *c, const ir_graph *model, train_graph *tg, train_graph *fwd,
                      train_exec *x, train_exec *fx) {
    graft_err e = {0};
    train_graph_options fo = {.forward_only = true};
    graft_status st = train_graph_build(model, c->from, c->to, NULL, tg, &e);
    if (st == GRAFT_OK) st = train_graph_build(model, c->from, c->to, &fo, fwd, &e);
    if (st == GRAFT_OK) check_shapes(c, model, tg);
    if (st == GRAFT_OK) st = graph_to_f64(&tg->g, &e);
    if (st == GRAFT_OK) st = graph_to_f64(&fwd->g, &e);
    if (st == GRAFT_OK) st = train_exec_init(x, &tg->g, true, 0, &e);
    if (st == GRAFT_OK) st = train_exec_init(fx, &fwd->g, true, 0, &e);
    if (st != GRAFT_OK) {
        printf("FAIL %s: building the training graph: %s\n", c->test, e.msg);
        test_failures++;
        return -1;
    }
    return 0;
}

/* The f32 graph on the default CPU backend (oneDNN where built: its fused groups, channels-last
 * activations and packed weights around the Backward nodes) against the f64 reference run x. */
static void check_f32(const model_case *c, const ir_graph *model, const train_exec *x,
                      const tensor *in64) {
    train_graph tg;
    train_exec fx;
    memset(&fx, 0, sizeof fx);
    graft_err e = {0};
    graft_status st = train_graph_build(model, c->from, c->to, NULL, &tg, &e);
    tensor *in = calloc((size_t)tg.g.n_inputs + 1, sizeof *in);
    for (int i = 0; st == GRAFT_OK && i < tg.g.n_inputs; i++)
        convert_rows(&in[i], &in64[i], 0, GRAFT_DTYPE_F32);
    if (st == GRAFT_OK) st = train_exec_init(&fx, &tg.g, false, 0, &e);
    for (int k = 0; k < 2 && st == GRAFT_OK; k++) st = train_exec_run(&fx, in, &e); /* planned */
    double worst = 0.0, all = 1e-300;
    for (int i = 1; st == GRAFT_OK && i < tg.g.n_outputs; i++) {
        const tensor *g = train_exec_output(x, i);
        for (int64_t j = 0; j < tensor_numel(g); j++) all = fmax(all, fabs(tensor_get_f64(g, j)));
    }
    for (int i = 0; st == GRAFT_OK && i < tg.g.n_outputs; i++) {
        const tensor *a = train_exec_output(&fx, i), *b = train_exec_output(x, i);
        double num = 0.0, den = i == 0 ? 1e-300 : 1e-3 * all;
        for (int64_t j = 0; j < tensor_numel(b); j++) {
            num = fmax(num, fabs(tensor_get_f64(a, j) - tensor_get_f64(b, j)));
            den = fmax(den, fabs(tensor_get_f64(b, j)));
        }
        worst = fmax(worst, num / den);
    }
    char name[256];
    snprintf(name, sizeof name, "%s_f32_default_backend (rel err %.2g)", c->test, worst);
    /* f32 rounding through a block or a layer and its backward */
    CHECK(name, st == GRAFT_OK && worst < 1e-3, "%s; worst output %.3g", e.msg, worst);
    for (int i = 0; i < tg.g.n_inputs; i++) tensor_release(&in[i]);
    free(in);
    train_exec_free(&fx);
    train_graph_free(&tg);
}

/* train_graph_accumulate_grads: output 1 + i is parameter i's gradient plus its acc/ input,
 * exactly (the same nodes before the sums, on the reference kernels). */
static void check_accumulate(const model_case *c, const ir_graph *model, const tensor *in64) {
    train_graph tg, ta;
    train_exec xp = {0}, xa = {0};
    graft_err e = {0};
    graft_status st = train_graph_build(model, c->from, c->to, NULL, &tg, &e);
    if (st == GRAFT_OK) st = train_graph_build(model, c->from, c->to, NULL, &ta, &e);
    if (st == GRAFT_OK) st = train_graph_accumulate_grads(&ta, &e);
    int n = st == GRAFT_OK ? ta.g.n_inputs : 0, np = st == GRAFT_OK ? ta.n_params : 0;
    tensor *in = calloc((size_t)n + 1, sizeof *in);
    for (int i = 0; st == GRAFT_OK && i < tg.g.n_inputs; i++)
        convert_rows(&in[i], &in64[i], 0, GRAFT_DTYPE_F32);
    for (int i = 0; st == GRAFT_OK && i < np; i++) { /* acc/: 0.25 everywhere */
        tensor *a = &in[tg.g.n_inputs + i];
        st = tensor_make(a, GRAFT_DTYPE_F32, in[1 + tg.n_side + i].ndim, in[1 + tg.n_side + i].dims,
                         &e);
        for (int64_t j = 0; st == GRAFT_OK && j < tensor_numel(a); j++)
            ((float *)a->data)[j] = 0.25f;
    }
    if (st == GRAFT_OK) st = train_exec_init(&xp, &tg.g, true, 0, &e);
    if (st == GRAFT_OK) st = train_exec_init(&xa, &ta.g, true, 0, &e);
    if (st == GRAFT_OK) st = train_exec_run(&xp, in, &e);
    if (st == GRAFT_OK) st = train_exec_run(&xa, in, &e);
    int64_t wrong = 0;
    for (int i = 0; st == GRAFT_OK && i < np; i++) {
        const tensor *g = train_exec_output(&xp, 1 + i), *sum = train_exec_output(&xa, 1 + i);
        for (int64_t j = 0; j < tensor_numel(g); j++)
            wrong += ((const float *)sum->data)[j] != ((const float *)g->data)[j] + 0.25f;
    }
    char name[256];
    snprintf(name, sizeof name, "%s_accumulate_grads", c->test);
    CHECK(name, st == GRAFT_OK && np > 0 && wrong == 0, "%s; %lld sums differ", e.msg,
          (long long)wrong);
    for (int i = 0; i < n; i++) tensor_release(&in[i]);
    free(in);
    train_exec_free(&xp), train_exec_free(&xa);
    train_graph_free(&tg), train_graph_free(&ta);
}

/* keep_bn: every BatchNormalization node of the trainable part has its scale and bias among
 * the parameters, its running mean and var not (and there is at least one such node). */
static void check_bn_params(const model_case *c, const ir_graph *model, const train_graph *tg) {
    int n_bn = 0, wrong = -1;
    for (int i = 0; i < tg->g.n_nodes; i++) {
        const ir_node *n = &tg->g.nodes[i];
        if (strcmp(n->op_type, "BatchNormalization") != 0) continue;
        n_bn++;
        for (int k = 1; k < 5 && k < n->n_in; k++) {
            bool is_param = false;
            for (int p = 0; p < tg->n_params; p++)
                is_param |= !strcmp(model->values[tg->model_params[p]].name,
                                    tg->g.values[n->inputs[k]].name);
            if (is_param != (k <= 2)) wrong = i;
        }
    }
    char name[256];
    snprintf(name, sizeof name, "%s_bn_params (%d BatchNormalization nodes, %d parameters)",
             c->test, n_bn, tg->n_params);
    CHECK(name, n_bn > 0 && wrong < 0, "node '%s': scale/bias not parameters or mean/var are",
          wrong >= 0 ? tg->g.nodes[wrong].name : "(no BatchNormalization node)");
}

static void check_model(const model_case *c) {
    char path[1024], name[256];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, c->model);
    loaded l;
    graft_ctx_options opts = GRAFT_CTX_OPTIONS_INIT;
    opts.keep_batchnorm = c->keep_bn;
    if (access(path, R_OK) != 0 || loaded_open_opts(&l, path, gen, c->model, &opts) != 0) {
        MISSING(c->test, path);
        return;
    }
    train_graph tg, fwd;
    train_exec x, fx;
    memset(&x, 0, sizeof x), memset(&fx, 0, sizeof fx);
    memset(&tg, 0, sizeof tg), memset(&fwd, 0, sizeof fwd);
    tensor to_ref = {0}, *in = NULL;
    const graft_tensor *mo;
    graft_err e = {0};
    if (build_pair(c, &l.m->g, &tg, &fwd, &x, &fx) != 0) goto done;
    if (c->keep_bn) check_bn_params(c, &l.m->g, &tg);
    if (graft_model_run(l.m, l.in, l.n_in) != GRAFT_OK ||
        graft_model_output(l.m, c->to_output, &mo) != GRAFT_OK) {
        MISSING(c->test, "the model's output for its recorded inputs");
        goto done;
    }
    convert_rows(&to_ref, mo, c->rows, GRAFT_DTYPE_F64);
    in = calloc((size_t)tg.g.n_inputs, sizeof *in);
    if (make_inputs(c, &tg, &l.m->g, &to_ref, in) != 0) {
        MISSING(c->test, "the activations at the freeze point");
        goto done;
    }
    graft_status st = train_exec_run(&x, in, &e);
    snprintf(name, sizeof name, "%s_runs (%d forward nodes, %d backward, %d side inputs)", c->test,
             tg.n_forward_nodes, tg.n_backward_nodes, tg.n_side);
    CHECK(name, st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) goto done;
    /* the model computes f32, the training graph f64 */
    double d = rel_err(train_exec_output(&x, 0), &to_ref);
    snprintf(name, sizeof name, "%s_output (rel err %.2g)", c->test, d);
    CHECK(name, d < 1e-4, "'%s' differs from the model's output by %.3g", c->to, d);
    check_f32(c, &l.m->g, &x, in);
    check_accumulate(c, &l.m->g, in);
    check_grads(c, &tg, &x, &fx, in);
done:
    for (int i = 0; in && i < tg.g.n_inputs; i++) tensor_release(&in[i]);
    free(in);
    tensor_release(&to_ref);
    train_exec_free(&x), train_exec_free(&fx);
    train_graph_free(&tg), train_graph_free(&fwd);
    loaded_close(&l);
}

/* ---- a head-shaped graph against src/train/head.c ----------------------------------------- */

/* x (n, in) -> Gemm(transB) -> act -> Gemm(transB) -> logits, the weights copied from h. */
static graft_status mlp_graph(ir_graph *g, const head *h, const char *act, int64_t n,
                              graft_err *e) {
    ir_graph_init(g);
    int x, cur;
    TRY(graph_add_value(g, "x", &x, e));
    g->values[x].dtype = GRAFT_DTYPE_F32;
    g->values[x].ndim = 2;
    g->values[x].dims[0] = n;
    g->values[x].dims[1] = h->layers[0].in;
    g->values[x].is_graph_input = true;
    g->inputs = malloc(sizeof(int));
    g->outputs = malloc(sizeof(int));
    if (!g->inputs || !g->outputs) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    g->inputs[g->n_inputs++] = cur = x;
    for (int i = 0; i < h->n_layers; i++) {
        const head_layer *l = &h->layers[i];
        tensor w, b;
        TRY(tensor_clone(&w, &l->w, e));
        TRY(tensor_clone(&b, &l->b, e));
        char nm[64];
        int ins[3] = {cur, -1, -1};
        snprintf(nm, sizeof nm, "head.%d.weight", i);
        TRY(graph_add_const(g, nm, &w, &ins[1], e));
        snprintf(nm, sizeof nm, "head.%d.bias", i);
        TRY(graph_add_const(g, nm, &b, &ins[2], e));
        bool last = i == h->n_layers - 1;
        snprintf(nm, sizeof nm, "gemm%d", i);
        TRY(graph_add_node(g, "Gemm", 13, ins, 3, last ? "logits" : nm, "transB", 1, &cur, e));
        if (last) break;
        snprintf(nm, sizeof nm, "act%d", i);
        int z = cur; /* graph_add_node writes its output before it reads ins */
        TRY(graph_add_node(g, act, 13, &z, 1, nm, NULL, 0, &cur, e));
    }
    g->outputs[g->n_outputs++] = cur;
    g->values[cur].is_graph_output = true;
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

static void test_head(void) {
    graft_head_options o = GRAFT_HEAD_OPTIONS_INIT;
    o.n_outputs = 3;
    o.n_hidden = 1;
    o.hidden[0] = 7;
    o.seed = 11;
    head h;
    graft_err e = {0};
    const int64_t n = 5, in_dim = 6;
    ir_graph g;
    ir_graph_init(&g);
    train_graph tg;
    memset(&tg, 0, sizeof tg);
    train_exec x;
    memset(&x, 0, sizeof x);
    tensor in[6];
    memset(in, 0, sizeof in);
    int64_t xd[2] = {n, in_dim}, rd[2] = {n, 3};
    tensor_make(&in[0], GRAFT_DTYPE_F32, 2, xd, NULL);
    tensor_make(&in[5], GRAFT_DTYPE_F32, 2, rd, NULL);
    for (int64_t i = 0; i < n * in_dim; i++) ((float *)in[0].data)[i] = (float)urand();
    for (int64_t i = 0; i < n * 3; i++) ((float *)in[5].data)[i] = (float)urand();
    const float *logits;
    graft_status st = head_init(&h, in_dim, &o, GRAFT_PRECISION_FP32, &e);
    if (st == GRAFT_OK) st = head_forward(&h, in[0].data, n, false, &logits, &e);
    if (st == GRAFT_OK) st = head_backward(&h, in[5].data, n, &e);
    if (st == GRAFT_OK) st = mlp_graph(&g, &h, "Relu", n, &e);
    if (st == GRAFT_OK) st = train_graph_build(&g, "x", "logits", NULL, &tg, &e);
    if (st == GRAFT_OK)
        st = tg.n_params == 4 ? GRAFT_OK
                              : err_set(&e, GRAFT_E_INTERNAL, "%d parameters", tg.n_params);
    const tensor *want[4] = {&h.layers[0].w, &h.layers[0].b, &h.layers[1].w, &h.layers[1].b};
    for (int i = 0; st == GRAFT_OK && i < 4; i++) in[1 + i] = *want[i]; /* borrowed */
    if (st == GRAFT_OK) st = train_exec_init(&x, &tg.g, true, 0, &e);
    if (st == GRAFT_OK) st = train_exec_run(&x, in, &e);
    CHECK("head_graph_runs", st == GRAFT_OK, "%s", e.msg);
    if (st == GRAFT_OK) {
        tensor lg = {.dtype = GRAFT_DTYPE_F32, .ndim = 2, .dims = {n, 3}, .data = (void *)logits};
        const tensor *grads[4] = {&h.layers[0].dw, &h.layers[0].db, &h.layers[1].dw,
                                  &h.layers[1].db};
        double worst = rel_err(train_exec_output(&x, 0), &lg);
        for (int i = 0; i < 4; i++)
            worst = fmax(worst, rel_err(train_exec_output(&x, 1 + i), grads[i]));
        char name[128];
        snprintf(name, sizeof name, "head_graph_matches_head_backward (rel err %.2g)", worst);
        /* the same kernels and rules in the same order: equal but for summation order */
        CHECK(name, worst < 1e-6, "logits or a gradient differs from head.c's by %.3g", worst);
    }
    tensor_release(&in[0]), tensor_release(&in[5]);
    train_exec_free(&x);
    train_graph_free(&tg);
    ir_graph_free(&g);
    head_free(&h);
}

/* ---- errors -----------------------------------------------------------------------------------
 */

static void expect_error(const char *test, const ir_graph *g, const char *from, const char *to,
                         graft_status want, const char *a, const char *b) {
    train_graph tg;
    graft_err e = {0};
    graft_status st = train_graph_build(g, from, to, NULL, &tg, &e);
    CHECK(test, st == want && strstr(e.msg, a) && (!b || strstr(e.msg, b)),
          "status %d (want %d), message: %s", st, want, e.msg);
    if (st == GRAFT_OK) train_graph_free(&tg);
}

/* A model file with an ai.onnx node named Backward: the loader refuses it. */
static void test_backward_in_model(const ir_graph *mlp) {
    ir_graph g = *mlp; /* the same graph, one node's op renamed for the file */
    ir_node *relu = &g.nodes[1];
    char *keep = relu->op_type;
    relu->op_type = (char *)"Backward";
    char path[256];
    snprintf(path, sizeof path, "/tmp/graft_test_train_graph_%d.onnx", (int)getpid());
    graft_err e = {0};
    graft_export_options eo = GRAFT_EXPORT_OPTIONS_INIT;
    graft_status st = onnx_write_model(&g, path, &eo, &e);
    relu->op_type = keep;
    if (st != GRAFT_OK) {
        CHECK("backward_node_in_onnx_model_rejected", false, "writing the model: %s", e.msg);
        return;
    }
    graft_ctx *ctx = NULL;
    graft_ctx_create(NULL, &ctx);
    graft_model *m = NULL;
    st = graft_model_load(ctx, path, &m);
    const char *msg = graft_last_error(ctx);
    CHECK("backward_node_in_onnx_model_rejected",
          st == GRAFT_E_UNSUPPORTED && strstr(msg, "act0") && strstr(msg, "internal training op"),
          "status %d, message: %s", st, msg);
    graft_model_free(m);
    graft_ctx_free(ctx);
    remove(path);
}

static void test_errors(void) {
    graft_head_options o = GRAFT_HEAD_OPTIONS_INIT;
    o.n_outputs = 2;
    o.n_hidden = 1;
    o.hidden[0] = 3;
    head h;
    graft_err e = {0};
    ir_graph g, leaky;
    ir_graph_init(&g), ir_graph_init(&leaky);
    graft_status st = head_init(&h, 4, &o, GRAFT_PRECISION_FP32, &e);
    if (st == GRAFT_OK) st = mlp_graph(&g, &h, "Relu", 2, &e);
    if (st == GRAFT_OK) st = mlp_graph(&leaky, &h, "LeakyRelu", 2, &e);
    CHECK("error_graphs_built", st == GRAFT_OK, "%s", e.msg);
    if (st == GRAFT_OK) {
        expect_error("error_unknown_from", &g, "nope", "logits", GRAFT_E_INVALID_ARGUMENT, "'nope'",
                     "train from");
        expect_error("error_unknown_to", &g, "x", "nope", GRAFT_E_INVALID_ARGUMENT, "'nope'",
                     "output");
        expect_error("error_from_not_upstream", &g, "logits", "act0", GRAFT_E_INVALID_ARGUMENT,
                     "'act0' is not computed from 'logits'", NULL);
        expect_error("error_from_is_to", &g, "logits", "logits", GRAFT_E_INVALID_ARGUMENT,
                     "is not computed from", NULL);
        expect_error("error_from_constant", &g, "head.0.weight", "logits", GRAFT_E_INVALID_ARGUMENT,
                     "is a constant", NULL);
        expect_error("error_no_backward_rule", &leaky, "x", "logits", GRAFT_E_UNSUPPORTED,
                     "node 'act0' (LeakyRelu)", "no backward rule for LeakyRelu");
        test_backward_in_model(&g);
    }
    ir_graph_free(&g), ir_graph_free(&leaky);
    head_free(&h);
}

/* argv: the generated models' folder, then "quick" for the sanitizer builds (the ResNet case
 * from its last Conv's input, the block's input then reaching the residual Add as a side input,
 * and the largest gradient of each parameter only: f64 direct convolutions at -O0 are slow). */
int main(int argc, char **argv) {
    gen = argc > 1 ? argv[1] : "tests/data/gen";
    bool quick = argc > 2 && !strcmp(argv[2], "quick");
    test_head();
    test_errors();
    /* ResNet-18 from the input of its last stage (two blocks, the first downsampling; the
     * first block's output feeds a Conv and the residual Add: summed partials) through the pool
     * and fc; the tiny BERT from the input of its last layer to the pooler (its attention mask
     * a side input); ResNet-18's last stage again, its BatchNormalization kept (not folded). */
    static const model_case cases[] = {
        {"resnet18_last_stage", "resnet18", "/layer3/layer3.1/relu_1/Relu_output_0", "logits", 0, 1,
         2, false},
        {"resnet18_last_conv", "resnet18", "/layer4/layer4.1/relu/Relu_output_0", "logits", 0, 1, 1,
         false},
        {"bert_tiny_last_layer", "bert_tiny_decomposed", "143", "pooler_output", 1, 2, 3, false},
        /* loaded with keep_batchnorm: the last stage's convs and BN scale/bias separately */
        {"resnet18_keep_bn_last_stage", "resnet18", "/layer3/layer3.1/relu_1/Relu_output_0",
         "logits", 0, 1, 1, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (quick ? (i == 1 || i == 2) : i != 1) check_model(&cases[i]);
    return test_failures ? 1 : 0;
}
