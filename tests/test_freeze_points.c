/* test_freeze_points.c: the candidate freeze points of generated models and of the model zoo: what
 * each `--unfreeze N` takes (exact tensor names per model), and for each point checks that do
 * not use the rule's code: blocking it disconnects the cut from the data inputs, the training
 * graph from it to the cut builds with side inputs that do not depend on the data, and its
 * parameters are the trainable count reported. The zoo's models (with weights, as
 * tools/zoo_fill.py writes them) one by one with --zoo, or a folder of them after GEN. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "../src/graph/model.h"
#include "../src/train/train_graph.h"
#include "test_util.h"

/* Whether `cut` is reachable from the data inputs (every input but one named *mask*) over
 * computed values when `blocked` is removed; Shape and Size outputs carry no data. */
static bool reaches_cut(const ir_graph *g, int blocked, int cut, bool *reach) {
    memset(reach, 0, sizeof *reach * (size_t)g->n_values);
    for (int i = 0; i < g->n_inputs; i++)
        if (!strstr(g->values[g->inputs[i]].name, "mask")) reach[g->inputs[i]] = true;
    if (blocked >= 0) reach[blocked] = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size")) continue;
        bool any = false;
        for (int k = 0; k < n->n_in; k++) any |= n->inputs[k] >= 0 && reach[n->inputs[k]];
        for (int k = 0; any && k < n->n_out; k++)
            if (n->outputs[k] >= 0 && n->outputs[k] != blocked) reach[n->outputs[k]] = true;
    }
    return reach[cut];
}

/* The checks of one point that do not use the rule: a cut vertex, a training graph whose side
 * inputs do not depend on the data, the same parameter count. Returns "" or what failed. */
static const char *check_point(const graft_model *m, const char *tensor, int64_t params, char *why,
                               size_t size) {
    const ir_graph *g = &m->g;
    graft_auto_cut_info cut;
    if (graft_model_auto_cut_info(m, &cut) != GRAFT_OK) return "no auto cut";
    int t = ir_find_value(g, tensor), c = ir_find_value(g, cut.tensor);
    bool *reach = malloc(sizeof *reach * (size_t)g->n_values);
    why[0] = 0;
    if (t < 0 || c < 0 || reaches_cut(g, t, c, reach)) {
        snprintf(why, size, "'%s' is not on every path from the inputs to '%s'", tensor,
                 cut.tensor);
        free(reach);
        return why;
    }
    reaches_cut(g, -1, c, reach); /* the values that depend on the data */
    train_graph tg;
    train_graph_options o = {.forward_only = true};
    graft_err e = {0};
    if (train_graph_build(g, tensor, cut.tensor, &o, &tg, &e) != GRAFT_OK) {
        snprintf(why, size, "train_graph_build from '%s': %s", tensor, e.msg);
        free(reach);
        return why;
    }
    int64_t count = 0;
    for (int i = 0; i < tg.n_params; i++)
        count += tensor_numel(&g->values[tg.model_params[i]].data);
    for (int i = 0; i < tg.n_side && !why[0]; i++)
        if (reach[tg.model_side[i]])
            snprintf(why, size, "side input '%s' depends on the data",
                     g->values[tg.model_side[i]].name);
    if (!why[0] && count != params)
        snprintf(why, size, "%lld trainable parameters reported, the training graph has %lld",
                 (long long)params, (long long)count);
    train_graph_free(&tg);
    free(reach);
    return why;
}

typedef struct expected {
    const char *model;
    const char *kind; /* "stage", "layer" or NULL (none recognised) */
    int count;        /* candidates (0: not checked) */
    const char *unfreeze[13];
} expected;

static const expected models[] = {
    {"resnet18",
     "stage",
     19,
     {"/layer3/layer3.1/relu_1/Relu_output_0", "/layer2/layer2.1/relu_1/Relu_output_0",
      "/layer1/layer1.1/relu_1/Relu_output_0", "/maxpool/MaxPool_output_0"}},
    {"resnet50",
     "stage",
     35,
     {"/layer3/layer3.5/relu_2/Relu_output_0", "/layer2/layer2.3/relu_2/Relu_output_0",
      "/layer1/layer1.2/relu_2/Relu_output_0", "/maxpool/MaxPool_output_0"}},
    {"mobilenet_tiny",
     "stage",
     30,
     {"/features/features.5/Add_output_0", "/features/features.3/Add_output_0",
      "/features/features.2/conv/conv.2/Conv_output_0"}},
    /* Decomposed LayerNorm: each layer's output is the LN's last Add ("143", "25" as exported). */
    {"bert_tiny_decomposed", "layer", 25, {"143", "25"}},
    {"bert_base",
     "layer",
     50,
     {"/encoder/layer.10/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.9/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.8/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.7/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.6/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.5/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.4/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.3/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.2/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.1/output/LayerNorm/LayerNormalization_output_0",
      "/encoder/layer.0/output/LayerNorm/LayerNormalization_output_0",
      "/embeddings/LayerNorm/LayerNormalization_output_0"}},
};

/* The parameter elements that nodes named with one of the prefixes read: a stage's parameters
 * as torchvision names them. */
static int64_t params_named(const graft_model *m, const char *const *prefixes, int n) {
    const ir_graph *g = &m->g;
    bool *seen = calloc((size_t)g->n_values, sizeof *seen);
    int64_t total = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        bool match = false;
        for (int p = 0; p < n; p++)
            match |= !strncmp(g->nodes[i].name, prefixes[p], strlen(prefixes[p]));
        for (int k = 0; match && k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].inputs[k];
            if (v < 0 || seen[v] || !g->values[v].is_const ||
                g->values[v].dtype != GRAFT_DTYPE_F32 || tensor_numel(&g->values[v].data) < 2)
                continue;
            seen[v] = true;
            total += tensor_numel(&g->values[v].data);
        }
    }
    free(seen);
    return total;
}

/* Unit N's parameters, counted independently: ResNet's layer(5-N)..layer4 by name; an encoder's
 * layers are alike, so N layers hold N times the last one's. */
static void check_unit_parameters(const graft_model *m, const expected *x, int n, int64_t got,
                                  int64_t first) {
    char name[128];
    snprintf(name, sizeof name, "freeze_%s_unfreeze_%d_parameters", x->model, n);
    int64_t want = -1;
    if (!strncmp(x->model, "resnet", 6)) {
        const char *const layers[] = {"/layer4/", "/layer3/", "/layer2/", "/layer1/"};
        want = params_named(m, layers, n);
    } else if (!strcmp(x->kind, "layer")) {
        want = first * n;
    } else {
        return;
    }
    CHECK(name, got == want, "%lld, want %lld", (long long)got, (long long)want);
}

static void check_model(graft_ctx *ctx, const char *gen, const expected *x) {
    char path[1024], name[160], why[1200];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, x->model);
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING(x->model, path);
        return;
    }
    int n = graft_model_freeze_point_count(m), units = -1, want_units = 0;
    while (want_units < 13 && x->unfreeze[want_units]) want_units++;
    const char *kind = NULL, *t = NULL;
    graft_model_unfreeze_point(m, 1, &t, &units, &kind);
    snprintf(name, sizeof name, "freeze_%s_units", x->model);
    CHECK(name, n == x->count && units == want_units && kind && !strcmp(kind, x->kind),
          "%d candidates, %d %ss; want %d, %d %ss", n, units, kind ? kind : "(none)", x->count,
          want_units, x->kind);
    int64_t first = 0;
    for (int u = 1; u <= want_units && n > 0; u++) {
        graft_model_unfreeze_point(m, u, &t, NULL, NULL);
        snprintf(name, sizeof name, "freeze_%s_unfreeze_%d", x->model, u);
        CHECK(name, t && !strcmp(t, x->unfreeze[u - 1]), "'%s', want '%s'", t ? t : "(none)",
              x->unfreeze[u - 1]);
        graft_freeze_point_info p = {0};
        for (int i = 0; i < n; i++)
            if (graft_model_freeze_point(m, i, &p) == GRAFT_OK && p.unit == u) break;
        if (u == 1) first = p.trainable_parameters;
        check_unit_parameters(m, x, u, p.trainable_parameters, first);
        if (strcmp(x->model, "bert_base") == 0 && u > 1 && u < want_units) continue; /* slow */
        snprintf(name, sizeof name, "freeze_%s_unfreeze_%d_trainable_part", x->model, u);
        const char *bad =
            check_point(m, p.tensor ? p.tensor : "", p.trainable_parameters, why, sizeof why);
        CHECK(name, !bad[0], "%s", bad);
    }
    graft_status st = graft_model_unfreeze_point(m, want_units + 1, &t, NULL, NULL);
    char want[64];
    snprintf(want, sizeof want, "has %d %ss", want_units, x->kind);
    snprintf(name, sizeof name, "freeze_%s_unfreeze_out_of_range", x->model);
    CHECK(name, st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), want), "%s: %s",
          graft_status_str(st), graft_last_error(ctx));
    graft_model_free(m);
}

/* Every candidate of a small model is a cut vertex with a clean trainable part; a model with
 * no blocks lists them but has no --unfreeze. */
static void check_plain_cnn(graft_ctx *ctx, const char *path) {
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING("freeze_digits_cnn", path);
        return;
    }
    int n = graft_model_freeze_point_count(m), units = -1, bad_points = 0;
    char why[1200];
    const char *t = NULL, *kind = "";
    graft_status st = graft_model_unfreeze_point(m, 1, &t, &units, &kind);
    CHECK("freeze_digits_cnn_no_units",
          n == 7 && st == GRAFT_E_NOT_FOUND && units == 0 && !kind &&
              strstr(graft_last_error(m->ctx), "no stages or layers"),
          "%d candidates, status %s, %d units: %s", n, graft_status_str(st), units,
          graft_last_error(m->ctx));
    for (int i = 0; i < n; i++) {
        graft_freeze_point_info p;
        graft_model_freeze_point(m, i, &p);
        const char *bad = check_point(m, p.tensor, p.trainable_parameters, why, sizeof why);
        if (bad[0] && bad_points++ == 0) printf("  %s\n", bad);
    }
    CHECK("freeze_digits_cnn_every_point", n > 0 && bad_points == 0, "%d of %d points fail",
          bad_points, n);
    graft_freeze_point_info p;
    st = graft_model_freeze_point(m, n, &p);
    CHECK("freeze_api_index_out_of_range",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(m->ctx), "7 candidates") &&
              graft_model_freeze_point_count(NULL) == GRAFT_E_INVALID_ARGUMENT &&
              graft_model_unfreeze_point(m, 1, NULL, NULL, NULL) == GRAFT_E_INVALID_ARGUMENT,
          "%s: %s", graft_status_str(st), graft_last_error(m->ctx));
    /* A cut changes the graph: the points are found again on it (no stale names). */
    int before = n;
    st = graft_model_cut(m, "auto", GRAFT_POOLING_AUTO);
    n = graft_model_freeze_point_count(m);
    bool names_ok = true;
    for (int i = 0; i < n; i++)
        names_ok &=
            graft_model_freeze_point(m, i, &p) == GRAFT_OK && ir_find_value(&m->g, p.tensor) >= 0;
    CHECK("freeze_api_after_cut", st == GRAFT_OK && n != 0 && names_ok,
          "cut %s, %d points (%d before): %s", graft_status_str(st), n, before,
          graft_last_error(m->ctx));
    graft_model_free(m);
}

/* What the rule gives on zoo models of each kind of structure (view runs in ShuffleNet's channel
 * shuffle and ViT's patches, Concat blocks, windowed attention, unfolded BatchNorm, exporters'
 * names): candidates, units and --unfreeze 1. */
typedef struct zoo_expected {
    const char *model;
    int count, units;
    const char *unfreeze1;
} zoo_expected;

static const zoo_expected zoo_models[] = {
    {"hf_bert__dynamo", 10, 2, "layer_norm_2"},
    {"hf_distilbert__optimum", 10, 2,
     "/transformer/layer.0/output_layer_norm/LayerNormalization_output_0"},
    {"hf_roberta__ts14", 24, 2, "/model/encoder/layer.0/output/LayerNorm/Add_1_output_0"},
    {"tv_convnext_tiny__ts17", 27, 4, "/features/features.5/features.5.8/Add_output_0"},
    {"tv_densenet121__ts17", 21, 4, "/features/denseblock3/Concat_output_0"},
    {"tv_efficientnet_b0__ts17", 53, 5, "/features/features.5/features.5.2/Add_output_0"},
    {"tv_mobilenet_v2__ts17", 47, 5, "/features/features.13/Add_output_0"},
    {"tv_mobilenet_v3_small__dynamo", 39, 4, "add_3"},
    {"tv_regnet_y_400mf__ts17", 34, 4, "/trunk_output/block3/block3-5/activation/Relu_output_0"},
    {"tv_resnet50__dynamo", 35, 4, "relu_39"},
    {"tv_shufflenet_v2_x0_5__ts17", 21, 3, "/stage3/stage3.7/Concat_output_0"},
    {"tv_squeezenet1_0__ts14", 28, 3, "/features/features.11/MaxPool_output_0"},
    {"tv_swin_t_small__ts17", 15, 4, "/features/features.3/features.3.0/Add_1_output_0"},
    {"tv_vit_b_16_l2__ts17", 8, 2, "/encoder/layers/encoder_layer_0/Add_1_output_0"},
};

static void check_zoo_expected(const char *model, int n, int units, const char *unfreeze1) {
    for (size_t i = 0; i < sizeof zoo_models / sizeof *zoo_models; i++) {
        const zoo_expected *x = &zoo_models[i];
        if (strcmp(x->model, model) != 0) continue;
        char name[300];
        snprintf(name, sizeof name, "freeze_zoo_%s_exact", model);
        CHECK(name,
              n == x->count && units == x->units && unfreeze1 && !strcmp(unfreeze1, x->unfreeze1),
              "%d candidates, %d units, --unfreeze 1 '%s'; want %d, %d, '%s'", n, units,
              unfreeze1 ? unfreeze1 : "(none)", x->count, x->units, x->unfreeze1);
    }
}

/* A zoo model: candidates and stages or layers; --unfreeze 1 passes the checks. One line per
 * model for docs/training.md's table. */
static void check_zoo_model(graft_ctx *ctx, const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int len = (int)strlen(base) - 5;
    char name[300], why[1200];
    snprintf(name, sizeof name, "freeze_zoo_%.*s", len, base);
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        CHECK(name, 0, "load: %s", graft_last_error(ctx));
        return;
    }
    int n = graft_model_freeze_point_count(m), units = 0;
    const char *t = NULL, *kind = NULL, *bad = "no unit";
    graft_model_unfreeze_point(m, 1, &t, &units, &kind);
    for (int i = 0; i < n && t; i++) {
        graft_freeze_point_info p;
        graft_model_freeze_point(m, i, &p);
        if (p.unit == 1) bad = check_point(m, p.tensor, p.trainable_parameters, why, sizeof why);
    }
    CHECK(name, n > 0 && units > 0 && !bad[0], "%d candidates, %d units: %s", n, units,
          n < 0 ? graft_last_error(ctx) : bad);
    printf("  zoo %-40.*s %2d %-5ss --unfreeze 1: %s\n", len, base, units, kind ? kind : "none",
           t ? t : "-");
    char model[256];
    snprintf(model, sizeof model, "%.*s", len, base);
    check_zoo_expected(model, n, units, t);
    graft_model_free(m);
}

/* Every NAME.onnx in dir. */
static void check_zoo_dir(graft_ctx *ctx, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        MISSING("freeze_zoo", dir);
        return;
    }
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t len = strlen(ent->d_name);
        if (len < 6 || strcmp(ent->d_name + len - 5, ".onnx")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        check_zoo_model(ctx, path);
    }
    closedir(d);
}

/* test_freeze_points GEN [ZOO_DIR]: the generated models (and a folder of zoo models);
 * test_freeze_points --zoo MODEL.onnx...: those zoo models only. */
int main(int argc, char **argv) {
    const char *gen = argc > 1 ? argv[1] : "tests/data/gen";
    graft_ctx *ctx;
    if (graft_ctx_create(NULL, &ctx) != GRAFT_OK) return 1;
    if (!strcmp(gen, "--zoo")) {
        for (int i = 2; i < argc; i++) check_zoo_model(ctx, argv[i]);
        graft_ctx_free(ctx);
        return test_failures ? 1 : 0;
    }
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) check_model(ctx, gen, &models[i]);
    check_plain_cnn(ctx, "models/digits_cnn.onnx");
    if (argc > 2) check_zoo_dir(ctx, argv[2]);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
