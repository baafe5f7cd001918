/* test_export_opset.c: writing an opset-9 graph of attribute-form ops (Unsqueeze, ReduceSum,
 * Squeeze, Slice, Pad, Clip, Split, ReduceMean, Softmax, Dropout) once as it is and once raised to
 * opset 18 by a newer node: graft gives the same outputs for both files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/onnx/onnx_write.h"
#include "test_util.h"

void opset_upgrade_tests(const char *dir);

static int value(ir_graph *g, const char *name) {
    int v = ir_find_value(g, name);
    if (v < 0) ir_add_value(g, name, &v, NULL);
    return v;
}

static ir_attr ints_attr(const char *name, int n, const int64_t *vals) {
    ir_attr a = {.name = ir_strdup(name), .type = IR_ATTR_INTS, .n = n};
    a.ints = malloc(sizeof(int64_t) * (size_t)n);
    memcpy(a.ints, vals, sizeof(int64_t) * (size_t)n);
    return a;
}

static ir_attr int_attr(const char *name, int64_t v) {
    return (ir_attr){.name = ir_strdup(name), .type = IR_ATTR_INT, .i = v};
}

static ir_attr float_attr(const char *name, float v) {
    return (ir_attr){.name = ir_strdup(name), .type = IR_ATTR_FLOAT, .f = v};
}

/* Add node op(ins) -> outs at `opset`, with up to four attributes. */
static void node(ir_graph *g, const char *op, int opset, const char *ins, const char *outs,
                 int n_attrs, const ir_attr *attrs) {
    ir_node n;
    memset(&n, 0, sizeof n);
    n.op_type = ir_strdup(op);
    n.domain = ir_strdup("");
    n.inputs = malloc(sizeof(int) * 4);
    n.outputs = malloc(sizeof(int) * 4);
    n.attrs = calloc(4, sizeof(ir_attr));
    char buf[256];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(buf, sizeof buf, "%s", pass ? outs : ins);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (pass)
                n.outputs[n.n_out++] = value(g, tok);
            else
                n.inputs[n.n_in++] = value(g, tok);
        }
    }
    n.name = ir_strdup(g->values[n.outputs[0]].name);
    n.n_attrs = n_attrs;
    if (n_attrs) memcpy(n.attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
    n.opset = opset;
    ir_add_node(g, &n, NULL, NULL);
}

/* The opset-9 graph; the last node (Identity) is at `last_opset`. */
static void build(ir_graph *g, int last_opset) {
    ir_graph_init(g);
    g->ir_version = 4;
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0] = (ir_opset){ir_strdup(""), 9};
    g->n_opsets = 1;
    int x = value(g, "x");
    g->values[x].dtype = GRAFT_DTYPE_F32;
    g->values[x].ndim = 3;
    g->values[x].dims[0] = 2, g->values[x].dims[1] = 3, g->values[x].dims[2] = 4;
    g->values[x].is_graph_input = true;
    node(g, "Unsqueeze", 9, "x", "u", 1, (ir_attr[]){ints_attr("axes", 1, (int64_t[]){0})});
    node(g, "ReduceSum", 9, "u", "rs", 2,
         (ir_attr[]){ints_attr("axes", 1, (int64_t[]){3}), int_attr("keepdims", 0)});
    node(g, "Squeeze", 9, "rs", "sq", 1, (ir_attr[]){ints_attr("axes", 1, (int64_t[]){0})});
    node(g, "Slice", 9, "sq", "sl", 3,
         (ir_attr[]){ints_attr("starts", 2, (int64_t[]){0, 1}),
                     ints_attr("ends", 2, (int64_t[]){2, 3}),
                     ints_attr("axes", 2, (int64_t[]){0, 1})});
    node(g, "Pad", 9, "sl", "pd", 2,
         (ir_attr[]){ints_attr("pads", 4, (int64_t[]){0, 1, 0, 1}), float_attr("value", 0.25f)});
    node(g, "Clip", 9, "pd", "cl", 2,
         (ir_attr[]){float_attr("min", -1.0f), float_attr("max", 1.5f)});
    node(g, "Split", 9, "cl", "s1,s2", 2,
         (ir_attr[]){int_attr("axis", 1), ints_attr("split", 2, (int64_t[]){1, 3})});
    node(g, "ReduceMean", 9, "s2", "rm", 1, (ir_attr[]){ints_attr("axes", 1, (int64_t[]){1})});
    int cl = value(g, "cl"); /* Softmax's upgrade needs the input's rank */
    g->values[cl].ndim = 2, g->values[cl].dims[0] = 2, g->values[cl].dims[1] = 4;
    node(g, "Softmax", 9, "cl", "sm", 0, NULL);
    node(g, "Dropout", 9, "sm", "dr", 1, (ir_attr[]){float_attr("ratio", 0.3f)});
    node(g, "Identity", last_opset, "dr", "probs", 0, NULL);
    const char *outs[] = {"s1", "rm", "probs"};
    g->outputs = malloc(sizeof(int) * 3);
    for (int i = 0; i < 3; i++) {
        g->outputs[g->n_outputs++] = value(g, outs[i]);
        ir_value *v = &g->values[g->outputs[i]];
        v->dtype = GRAFT_DTYPE_F32;
        v->ndim = 2, v->dims[0] = 2, v->dims[1] = i < 2 ? 1 : 4; /* (2, 1), (2, 1), (2, 4) */
        g->values[g->outputs[i]].is_graph_output = true;
    }
    g->inputs = malloc(sizeof(int));
    g->inputs[g->n_inputs++] = x;
    ir_link_producers(g);
}

/* Write the graph, load it in graft and run it on x; outputs copied into out (3 tensors). */
static int write_and_run(const char *path, int last_opset, const graft_tensor *x, graft_tensor *out,
                         char *why, size_t why_size) {
    ir_graph g;
    graft_err e = {0};
    build(&g, last_opset);
    graft_status st = onnx_write_model(&g, path, NULL, &e);
    ir_graph_free(&g);
    if (st != GRAFT_OK) return snprintf(why, why_size, "writing: %.800s", e.msg), -1;
    graft_ctx *ctx;
    graft_model *m = NULL;
    graft_ctx_create(NULL, &ctx);
    graft_named_tensor in = {"x", *x};
    st = graft_model_load(ctx, path, &m);
    if (st == GRAFT_OK) st = graft_model_run(m, &in, 1);
    for (int i = 0; st == GRAFT_OK && i < 3; i++) {
        const graft_tensor *t;
        graft_model_output(m, i, &t);
        out[i] = *t;
        out[i].data = malloc((size_t)tensor_nbytes(t) + 1);
        memcpy(out[i].data, t->data, (size_t)tensor_nbytes(t));
    }
    if (st != GRAFT_OK) snprintf(why, why_size, "%s", graft_last_error(ctx));
    graft_model_free(m);
    graft_ctx_free(ctx);
    return st == GRAFT_OK ? 0 : -1;
}

static void save(const char *dir, const char *name, const graft_tensor *x, const graft_tensor *o) {
    const char *outs[] = {"s1", "rm", "probs"};
    char p[1200], err[256];
    snprintf(p, sizeof p, "%s/%s.in.x.npy", dir, name);
    npy_write(p, x, err, sizeof err);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s.graft.%s.npy", dir, name, outs[i]);
        npy_write(p, &o[i], err, sizeof err);
    }
    printf("EXPORTED %s/%s.onnx\n", dir, name);
}

void opset_upgrade_tests(const char *dir) {
    float xd[24];
    for (int i = 0; i < 24; i++) xd[i] = (float)sin(i * 0.7) * 0.8f;
    graft_tensor x = {GRAFT_DTYPE_F32, 3, {2, 3, 4}, xd};
    graft_tensor a[3], b[3];
    char pa[1100], pb[1100], why[900] = "";
    snprintf(pa, sizeof pa, "%s/opset9.onnx", dir);
    snprintf(pb, sizeof pb, "%s/opset9_raised.onnx", dir);
    int ok_a = write_and_run(pa, 9, &x, a, why, sizeof why) == 0;
    CHECK("export_opset9_attribute_forms", ok_a, "%s", why);
    int ok_b = write_and_run(pb, 18, &x, b, why, sizeof why) == 0;
    CHECK("export_opset_raised_to_18", ok_b, "%s", why);
    if (!ok_a || !ok_b) return;
    int same = 1;
    for (int i = 0; i < 3; i++) {
        same &= shapes_equal(a[i].ndim, a[i].dims, b[i].ndim, b[i].dims);
        for (int64_t k = 0; same && k < graft_tensor_numel(&a[i]); k++)
            same &= fabsf(((float *)a[i].data)[k] - ((float *)b[i].data)[k]) <= 1e-6f;
    }
    CHECK("export_opset_raised_same_outputs", same, "outputs differ after raising the opset");
    save(dir, "opset9", &x, a);
    save(dir, "opset9_raised", &x, a);
    for (int i = 0; i < 3; i++) free(a[i].data), free(b[i].data);
}
