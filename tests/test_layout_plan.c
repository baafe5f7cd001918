/* test_layout_plan.c: the channels-last plan (src/graph/layout_plan.c) on generated models made
 * fp16 on the CPU's reference kernels (the GPU's plan), and fp32 (the CPU's plan): ResNet's conv
 * activations go NHWC with NCHW edges (graph input and output, the GlobalAveragePool result), every
 * marked value is written and read natively, a node placed on the host turns its neighbourhood back
 * to NCHW, fp32 and BERT get none. Usage: test_layout_plan GEN_DIR */
#include <stdlib.h>
#include <string.h>

#include "../src/graph/layout_plan.h"
#include "../src/graph/model.h"
#include "test_util.h"

static graft_model *load(graft_ctx *ctx, const char *dir, const char *name, bool half) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fclose(f);
    graft_model *m = NULL;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) return NULL;
    if (half && graft_model_set_precision(m, GRAFT_DTYPE_F16) != GRAFT_OK) {
        graft_model_free(m);
        return NULL;
    }
    return m;
}

/* The plan with every node on the device: *on (per node) and *nhwc (per value), to free. */
static void plan_all_on_device(const ir_graph *g, bool f32, unsigned char **on,
                               unsigned char **nhwc) {
    *on = malloc((size_t)g->n_nodes + 1);
    *nhwc = malloc((size_t)g->n_values + 1);
    memset(*on, 1, (size_t)g->n_nodes + 1);
    layout_plan_nhwc(g, *on, f32, *nhwc);
}

static int count_op_outputs(const ir_graph *g, const unsigned char *nhwc, const char *op,
                            int *total) {
    int n = 0;
    *total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].op_type, op) == 0 && g->nodes[i].outputs[0] >= 0) {
            ++*total;
            n += nhwc[g->nodes[i].outputs[0]];
        }
    return n;
}

/* Every marked value: 4-D fp16, not a graph input or output, written by a device node of an
 * NHWC kind, and each reader on the device reads it natively (a Conv's X, GlobalAveragePool, or
 * a pool / layout-free op whose output is marked too) or only reads its shape. */
static bool plan_consistent(const ir_graph *g, const unsigned char *on_dev,
                            const unsigned char *nhwc, graft_dtype dt, char *why, size_t n) {
    for (int v = 0; v < g->n_values; v++) {
        if (!nhwc[v]) continue;
        const ir_value *val = &g->values[v];
        int p = val->producer;
        if (val->ndim != 4 || val->dtype != dt || val->is_graph_output || p < 0 || !on_dev[p] ||
            layout_op_kind(&g->nodes[p]) == LAYOUT_NONE ||
            layout_op_kind(&g->nodes[p]) == LAYOUT_GLOBAL) {
            snprintf(why, n, "value '%s' should not be channels-last", val->name);
            return false;
        }
        for (int i = 0; i < g->n_nodes; i++) {
            const ir_node *r = &g->nodes[i];
            for (int k = 0; k < r->n_in; k++) {
                if (r->inputs[k] != v || strcmp(r->op_type, "Shape") == 0) continue;
                layout_kind kind = layout_op_kind(r);
                bool ok =
                    on_dev[i] &&
                    ((kind == LAYOUT_CONV && k == 0) || (kind == LAYOUT_GLOBAL && k == 0) ||
                     ((kind == LAYOUT_POOL || kind == LAYOUT_UNARY || kind == LAYOUT_BINARY) &&
                      nhwc[r->outputs[0]]));
                if (!ok) {
                    snprintf(why, n, "'%s' is read by '%s' (%s), which cannot take NHWC", val->name,
                             r->name, r->op_type);
                    return false;
                }
            }
        }
    }
    return true;
}

/* f32: the CPU's plan on the fp32 model; else the GPU's on the model made fp16. */
static void check_resnet(graft_ctx *ctx, const char *dir, const char *name, bool f32) {
    char test[128], why[512] = "";
    graft_model *m = load(ctx, dir, name, !f32);
    const char *kind = f32 ? "_f32" : "";
    graft_dtype dt = f32 ? GRAFT_DTYPE_F32 : GRAFT_DTYPE_F16;
    snprintf(test, sizeof test, "layout_plan_%s%s", name, kind);
    if (!m) {
        MISSING(test, "model not generated (run tools/make_models.py)");
        return;
    }
    const ir_graph *g = &m->g;
    unsigned char *on, *nhwc;
    plan_all_on_device(g, f32, &on, &nhwc);
    int convs, relus, adds, pools, gaps;
    int c = count_op_outputs(g, nhwc, "Conv", &convs);
    int r = count_op_outputs(g, nhwc, "Relu", &relus);
    int a = count_op_outputs(g, nhwc, "Add", &adds);
    int p = count_op_outputs(g, nhwc, "MaxPool", &pools);
    int gp = count_op_outputs(g, nhwc, "GlobalAveragePool", &gaps);
    bool edges = true;
    for (int i = 0; i < g->n_inputs; i++) edges = edges && !nhwc[g->inputs[i]];
    for (int i = 0; i < g->n_outputs; i++) edges = edges && !nhwc[g->outputs[i]];
    CHECK(test,
          convs > 0 && c == convs && r == relus && a == adds && p == pools && gp == 0 && edges,
          "NHWC outputs: Conv %d/%d, Relu %d/%d, Add %d/%d, MaxPool %d/%d, GAP %d/%d, edges %d", c,
          convs, r, relus, a, adds, p, pools, gp, gaps, edges);
    snprintf(test, sizeof test, "layout_plan_%s%s_consistent", name, kind);
    CHECK(test, plan_consistent(g, on, nhwc, dt, why, sizeof why), "%s", why);

    /* A Relu in the middle on the host: it reads and writes NCHW, and so do the values next to
     * it; the rest keeps NHWC and stays consistent. */
    int mid = -1, seen = 0;
    for (int i = 0; i < g->n_nodes && mid < 0; i++)
        if (strcmp(g->nodes[i].op_type, "Relu") == 0 && ++seen == relus / 2) mid = i;
    on[mid] = 0;
    layout_plan_nhwc(g, on, f32, nhwc);
    const ir_node *h = &g->nodes[mid];
    int still = count_op_outputs(g, nhwc, "Conv", &convs);
    snprintf(test, sizeof test, "layout_plan_%s%s_host_node", name, kind);
    CHECK(test,
          !nhwc[h->inputs[0]] && !nhwc[h->outputs[0]] && still > 0 && still < convs &&
              plan_consistent(g, on, nhwc, dt, why, sizeof why),
          "host Relu '%s': in %d out %d, NHWC Conv outputs %d of %d; %s", h->name,
          nhwc[h->inputs[0]], nhwc[h->outputs[0]], still, convs, why);
    free(on);
    free(nhwc);
    graft_model_free(m);
}

/* fp32 models and models without 2-D convolutions keep everything NCHW. */
static void check_none(graft_ctx *ctx, const char *dir, const char *name, bool half) {
    char test[128];
    snprintf(test, sizeof test, "layout_plan_none_%s%s", name, half ? "_fp16" : "_fp32");
    graft_model *m = load(ctx, dir, name, half);
    if (!m) {
        MISSING(test, "model not generated (run tools/make_models.py)");
        return;
    }
    const ir_graph *g = &m->g;
    unsigned char *on, *nhwc;
    plan_all_on_device(g, false, &on, &nhwc);
    int marked = 0;
    for (int v = 0; v < g->n_values; v++) marked += nhwc[v];
    CHECK(test, marked == 0, "%d values marked channels-last", marked);
    free(on);
    free(nhwc);
    graft_model_free(m);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/gen";
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.use_reference_kernels = 1; /* half precision on the CPU: the reference kernels only */
    o.device = "cpu";
    graft_ctx *ctx = NULL;
    if (graft_ctx_create(&o, &ctx) != GRAFT_OK) {
        CHECK("layout_plan_ctx", 0, "no context");
        return 1;
    }
    check_resnet(ctx, dir, "resnet18", false);
    check_resnet(ctx, dir, "resnet50", false);
    check_resnet(ctx, dir, "resnet18", true);
    check_resnet(ctx, dir, "resnet50", true);
    check_none(ctx, dir, "resnet18", false);
    check_none(ctx, dir, "bert_tiny_decomposed", true);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
