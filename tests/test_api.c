/* test_api.c: the public API's error paths on bad models and bad inputs (each a clear error, no
 * crash, nothing lost), loading from memory, the memory planner and the load-time passes. */
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "onnx.pb-c.h"
#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/onnx/onnx_io.h"
#include "test_util.h"

static const char *dir;

static void expect_load_error(graft_ctx *ctx, const char *file, graft_status want,
                              const char *needle1, const char *needle2) {
    char path[1024], name[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(name, sizeof name, "load_error_%s", file);
    graft_model *m = (graft_model *)0x1;
    graft_status st = graft_model_load(ctx, path, &m);
    const char *msg = graft_last_error(ctx);
    CHECK(name,
          st == want && m == NULL && strstr(msg, needle1) && (!needle2 || strstr(msg, needle2)),
          "status %d (%s), want %d; message: %s", st, graft_status_str(st), want, msg);
    printf("  message: %s\n", msg);
}

static int read_input(const char *file, graft_named_tensor *t) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    t->name = "input";
    if (npy_read(path, &t->tensor, err, sizeof err) != 0) {
        printf("FAIL read_%s: %s\n", file, err);
        test_failures++;
        return -1;
    }
    return 0;
}

static void run_errors(graft_ctx *ctx) {
    char path[1024];
    snprintf(path, sizeof path, "%s/valid_small.onnx", dir);
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        CHECK("load_valid_small", 0, "%s", graft_last_error(ctx));
        return;
    }
    graft_named_tensor good, wrong_shape, wrong_dtype;
    if (read_input("valid_small.in.input.npy", &good) ||
        read_input("wrong_shape.npy", &wrong_shape) ||
        read_input("wrong_dtype.npy", &wrong_dtype)) {
        graft_model_free(m);
        return;
    }
    graft_status st = graft_model_run(m, &good, 1);
    CHECK("run_valid_small", st == GRAFT_OK, "%s", graft_last_error(ctx));
    const graft_tensor *out;
    graft_model_output(m, 0, &out);
    int64_t n = graft_tensor_numel(out);
    float *first = malloc(sizeof(float) * (size_t)n);
    memcpy(first, out->data, sizeof(float) * (size_t)n);

    st = graft_model_run(m, &wrong_shape, 1);
    CHECK("run_wrong_shape", st == GRAFT_E_SHAPE && strstr(graft_last_error(ctx), "input"),
          "status %d: %s", st, graft_last_error(ctx));
    printf("  message: %s\n", graft_last_error(ctx));
    st = graft_model_run(m, &wrong_dtype, 1);
    CHECK("run_wrong_dtype", st == GRAFT_E_DTYPE && strstr(graft_last_error(ctx), "float64"),
          "status %d: %s", st, graft_last_error(ctx));
    printf("  message: %s\n", graft_last_error(ctx));
    st = graft_model_run(m, NULL, 0);
    CHECK("run_missing_input", st == GRAFT_E_NOT_FOUND, "status %d: %s", st, graft_last_error(ctx));
    graft_named_tensor extra[2] = {good, good};
    extra[1].name = "no_such_input";
    st = graft_model_run(m, extra, 2);
    CHECK("run_unknown_input",
          st == GRAFT_E_NOT_FOUND && strstr(graft_last_error(ctx), "no_such_input"),
          "status %d: %s", st, graft_last_error(ctx));

    /* Nothing was lost: the model still runs, now from its cached memory plan, same result. */
    st = graft_model_run(m, &good, 1);
    graft_run_stats stats;
    graft_model_run_stats(m, &stats);
    graft_model_output(m, 0, &out);
    CHECK("run_after_errors_planned",
          st == GRAFT_OK && stats.planned &&
              memcmp(first, out->data, sizeof(float) * (size_t)n) == 0,
          "status %d planned %d", st, stats.planned);
    free(first);
    free(good.tensor.data), free(wrong_shape.tensor.data), free(wrong_dtype.tensor.data);
    graft_model_free(m);
}

static void load_from_memory(graft_ctx *ctx) {
    char path[1024];
    snprintf(path, sizeof path, "%s/valid_small.onnx", dir);
    void *data;
    size_t size;
    graft_err e;
    if (read_file(path, &data, &size, &e) != GRAFT_OK) {
        CHECK("load_memory", 0, "%s", e.msg);
        return;
    }
    graft_model *m = NULL;
    graft_status st = graft_model_load_memory(ctx, data, size, NULL, &m);
    CHECK("load_memory", st == GRAFT_OK && graft_model_input_count(m) == 1, "%s",
          graft_last_error(ctx));
    graft_model_free(m);
    st = graft_model_load_memory(ctx, data, size / 2, NULL, &m);
    CHECK("load_memory_truncated", st == GRAFT_E_MALFORMED_MODEL, "status %d", st);
    free(data);
}

static int count_op(const graft_model *m, const char *op) {
    int c = 0;
    for (int i = 0; i < m->g.n_nodes; i++) c += strcmp(m->g.nodes[i].op_type, op) == 0;
    return c;
}

/* On ResNet-18: BN is folded into Conv; the liveness plan keeps peak memory far below total. */
static void resnet_passes_and_planner(graft_ctx *ctx, const char *gen) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/resnet18.onnx", gen);
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING("resnet18_passes", "resnet18.onnx not generated");
        return;
    }
    CHECK("resnet18_bn_folded", count_op(m, "BatchNormalization") == 0,
          "%d BatchNormalization nodes left", count_op(m, "BatchNormalization"));
    graft_named_tensor in = {"input", {0}};
    snprintf(path, sizeof path, "%s/resnet18.in.input.npy", gen);
    if (npy_read(path, &in.tensor, err, sizeof err) == 0) {
        graft_run_stats s1, s2;
        graft_status st = graft_model_run(m, &in, 1);
        graft_model_run_stats(m, &s1);
        st |= graft_model_run(m, &in, 1);
        graft_model_run_stats(m, &s2);
        CHECK("resnet18_memory_plan",
              st == GRAFT_OK && s2.planned &&
                  s2.peak_activation_bytes * 3 < s2.total_activation_bytes,
              "planned %d, peak %lld of total %lld", s2.planned,
              (long long)s2.peak_activation_bytes, (long long)s2.total_activation_bytes);
        printf("  heap run peak %.1f MB, planned peak %.1f MB, sum of activations %.1f MB\n",
               s1.peak_activation_bytes / 1e6, s2.peak_activation_bytes / 1e6,
               s2.total_activation_bytes / 1e6);
        free(in.tensor.data);
    }
    graft_model_free(m);
}

/* conv_acts: its two zero Pads become their Convs' padding; the Pad of 0.5 stays. */
static void pads_folded(graft_ctx *ctx, const char *gen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/conv_acts.onnx", gen);
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING("conv_acts_pad_folded", "conv_acts.onnx not generated");
        return;
    }
    CHECK("conv_acts_pad_folded", count_op(m, "Pad") == 1, "%d Pad nodes left (want 1: 0.5)",
          count_op(m, "Pad"));
    graft_model_free(m);
}

static void bert_shape_chains_folded(graft_ctx *ctx, const char *gen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/bert_tiny_decomposed.onnx", gen);
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING("bert_tiny_folding", "bert_tiny_decomposed.onnx not generated");
        return;
    }
    CHECK("bert_tiny_folding", m->g.n_nodes < m->original_node_count,
          "%d nodes after passes, %lld before", m->g.n_nodes, (long long)m->original_node_count);
    printf("  %lld nodes in the file, %d after passes\n", (long long)m->original_node_count,
           m->g.n_nodes);
    graft_model_free(m);
}

/* A serialized model of one node `op` (float input x of 5 elements, output y) importing the
 * default domain at `opset`. The caller frees *size bytes at the returned pointer. */
static void *one_node_model(const char *op, int64_t opset, size_t *size) {
    Onnx__TensorShapeProto__Dimension dim = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    dim.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    dim.dim_value = 5;
    Onnx__TensorShapeProto__Dimension *dims[1] = {&dim};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 1;
    shape.dim = dims;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = GRAFT_DTYPE_F32; /* graft's dtype codes are ONNX's element types */
    tt.shape = &shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type.tensor_type = &tt;
    Onnx__ValueInfoProto in = ONNX__VALUE_INFO_PROTO__INIT, out = ONNX__VALUE_INFO_PROTO__INIT;
    in.name = "x";
    in.type = &type;
    out.name = "y";
    out.type = &type;
    Onnx__ValueInfoProto *ins[1] = {&in}, *outs[1] = {&out};
    char *node_in[1] = {"x"}, *node_out[1] = {"y"};
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
    node.n_input = node.n_output = 1;
    node.input = node_in;
    node.output = node_out;
    node.name = "act_node";
    node.op_type = (char *)op;
    Onnx__NodeProto *nodes[1] = {&node};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = "one_node";
    graph.n_node = graph.n_input = graph.n_output = 1;
    graph.node = nodes;
    graph.input = ins;
    graph.output = outs;
    Onnx__OperatorSetIdProto set = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    set.domain = "";
    set.has_version = 1;
    set.version = opset;
    Onnx__OperatorSetIdProto *sets[1] = {&set};
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = sets;
    model.graph = &graph;
    *size = onnx__model_proto__get_packed_size(&model);
    void *buf = malloc(*size);
    if (buf) onnx__model_proto__pack(&model, buf);
    return buf;
}

/* An op outside ONNX's opset range for it is refused at load, naming the node, op and opset. */
static void opset_out_of_range(graft_ctx *ctx) {
    static const struct {
        const char *op;
        int64_t opset;
        const char *opset_text;
    } cs[] = {{"HardSwish", 13, "opset 13"},
              {"Mish", 17, "opset 17"},
              {"Celu", 11, "opset 11"},
              {"GreaterOrEqual", 11, "opset 11"},
              {"Relu", 22, "opset 22"}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        size_t size;
        void *buf = one_node_model(cs[i].op, cs[i].opset, &size);
        graft_model *m = (graft_model *)0x1;
        graft_status st = graft_model_load_memory(ctx, buf, size, NULL, &m);
        const char *msg = graft_last_error(ctx);
        char name[96];
        snprintf(name, sizeof name, "opset_out_of_range_%s_%lld", cs[i].op, (long long)cs[i].opset);
        CHECK(name,
              st == GRAFT_E_UNSUPPORTED && m == NULL && strstr(msg, "act_node") &&
                  strstr(msg, cs[i].op) && strstr(msg, cs[i].opset_text),
              "status %d; message: %s", st, msg);
        printf("  message: %s\n", msg);
        free(buf);
    }
}

/* Inside the range the same models load and run: HardSwish 14 and Mish 18 (which ONNX 1.12's
 * node tests lack) against their formulas in double. */
static void opset_in_range_runs(graft_ctx *ctx) {
    static const float x[5] = {-4.0f, -1.0f, 0.0f, 1.5f, 25.0f};
    static const struct {
        const char *op;
        int64_t opset;
    } cs[] = {{"HardSwish", 14}, {"Mish", 18}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        size_t size;
        void *buf = one_node_model(cs[i].op, cs[i].opset, &size);
        graft_model *m = NULL;
        graft_named_tensor in = {"x", {GRAFT_DTYPE_F32, 1, {5}, (void *)x}};
        const graft_tensor *y = NULL;
        graft_status st = graft_model_load_memory(ctx, buf, size, NULL, &m);
        if (st == GRAFT_OK) st = graft_model_run(m, &in, 1);
        if (st == GRAFT_OK) st = graft_model_output(m, 0, &y);
        double worst = 0.0;
        for (int k = 0; st == GRAFT_OK && k < 5; k++) {
            double v = x[k], want;
            if (cs[i].op[0] == 'H')
                want = v * fmin(1.0, fmax(0.0, v / 6.0 + 0.5));
            else
                want = v * tanh(log1p(exp(v)));
            double err = fabs(((const float *)y->data)[k] - want) / fmax(1.0, fabs(want));
            worst = fmax(worst, err);
        }
        char name[64];
        snprintf(name, sizeof name, "opset_in_range_%s_%lld", cs[i].op, (long long)cs[i].opset);
        CHECK(name, st == GRAFT_OK && worst < 1e-6, "status %d (%s), worst error %g", st,
              graft_last_error(ctx), worst);
        graft_model_free(m);
        free(buf);
    }
}

/* tools/make_bad_models.py's hostile/ inputs: each a clear error (or a load that allocates
 * nothing large), never a crash, a hang or gigabytes allocated. */
static void hostile_models(graft_ctx *ctx) {
    expect_load_error(ctx, "hostile/deep_if.onnx", GRAFT_E_MALFORMED_MODEL, "subgraphs", "64");
    expect_load_error(ctx, "hostile/deep_type.onnx", GRAFT_E_MALFORMED_MODEL, "messages", "256");
    expect_load_error(ctx, "hostile/huge_initializer.onnx", GRAFT_E_MALFORMED_MODEL, "float_data",
                      "274877906944");
    expect_load_error(ctx, "hostile/ext_link/outside.onnx", GRAFT_E_MALFORMED_MODEL,
                      "outside the model's folder", "weights.bin");
    expect_load_error(ctx, "hostile/fifo_external.onnx", GRAFT_E_IO, "not a regular file",
                      "fifo_weights.bin");
    char path[1024];
    graft_model *m = NULL;
    snprintf(path, sizeof path, "%s/hostile/ext_link/inside.onnx", dir);
    graft_status st = graft_model_load(ctx, path, &m);
    CHECK("load_external_link_inside_folder", st == GRAFT_OK, "%s", graft_last_error(ctx));
    graft_model_free(m);
    /* Folding it would allocate 4 GB at load: it is left to run time (still one node). */
    m = NULL;
    snprintf(path, sizeof path, "%s/hostile/constant_of_shape_huge.onnx", dir);
    st = graft_model_load(ctx, path, &m);
    CHECK("constant_of_shape_huge_not_folded",
          st == GRAFT_OK && count_op(m, "ConstantOfShape") == 1, "status %d: %s", st,
          graft_last_error(ctx));
    graft_model_summary sum;
    if (m) {
        st = graft_model_summarize(m, &sum);
        CHECK("constant_of_shape_huge_summary", st == GRAFT_OK && sum.flops_per_sample < 0,
              "status %d, FLOPs %g", st, sum.flops_per_sample);
    }
    graft_model_free(m);
    static const char *npys[][2] = {{"npy_no_colon.npy", "no ':' after 'fortran_order'"},
                                    {"npy_overflow_shape.npy", "overflows"},
                                    {"npy_beyond_file.npy", "needs 4294967296 bytes"}};
    for (int i = 0; i < 3; i++) {
        char err[512] = "", name[96];
        graft_tensor t;
        snprintf(path, sizeof path, "%s/hostile/%s", dir, npys[i][0]);
        snprintf(name, sizeof name, "npy_%s", npys[i][0]);
        int rc = npy_read(path, &t, err, sizeof err);
        CHECK(name, rc != 0 && t.data == NULL && strstr(err, npys[i][1]), "rc %d: %s", rc, err);
        printf("  message: %s\n", err);
        if (rc == 0) free(t.data);
    }
}

/* A graph of no nodes (its output is its input) loads and runs: no memcpy to a NULL node
 * array (UBSan). */
static void empty_graph(graft_ctx *ctx) {
    size_t size;
    void *buf = one_node_model("Identity", 17, &size);
    Onnx__ModelProto *mp = buf ? onnx__model_proto__unpack(NULL, size, buf) : NULL;
    free(buf);
    if (!mp) {
        CHECK("empty_graph", 0, "%s", "cannot build the model");
        return;
    }
    onnx__node_proto__free_unpacked(mp->graph->node[0], NULL);
    mp->graph->n_node = 0;
    free(mp->graph->output[0]->name);
    mp->graph->output[0]->name = strdup("x");
    size = onnx__model_proto__get_packed_size(mp);
    buf = malloc(size);
    onnx__model_proto__pack(mp, buf);
    onnx__model_proto__free_unpacked(mp, NULL);
    graft_model *m = NULL;
    graft_status st = graft_model_load_memory(ctx, buf, size, NULL, &m);
    CHECK("empty_graph_loads", st == GRAFT_OK && m->g.n_nodes == 0, "status %d: %s", st,
          graft_last_error(ctx));
    graft_model_free(m);
    free(buf);
}

int main(int argc, char **argv) {
    dir = argc > 1 ? argv[1] : "tests/data/gen/bad";
    const char *gen = argc > 2 ? argv[2] : "tests/data/gen";
    graft_ctx *ctx;
    CHECK("ctx_create_bad_options", graft_ctx_create(NULL, NULL) == GRAFT_E_INVALID_ARGUMENT, "%s",
          "wrong status");
    graft_ctx_create(NULL, &ctx);
    graft_model_free(NULL);
    expect_load_error(ctx, "does_not_exist.onnx", GRAFT_E_IO, "does_not_exist.onnx", NULL);
    expect_load_error(ctx, "truncated.onnx", GRAFT_E_MALFORMED_MODEL, "truncated.onnx", NULL);
    expect_load_error(ctx, "not_protobuf.onnx", GRAFT_E_MALFORMED_MODEL, "not_protobuf.onnx", NULL);
    expect_load_error(ctx, "size_mismatch.onnx", GRAFT_E_MALFORMED_MODEL, "bytes", NULL);
    expect_load_error(ctx, "overflow_shape.onnx", GRAFT_E_MALFORMED_MODEL, "overflow", NULL);
    expect_load_error(ctx, "unsupported_op.onnx", GRAFT_E_UNSUPPORTED, "FancyUnknownOp",
                      "mystery_node");
    expect_load_error(ctx, "missing_external.onnx", GRAFT_E_IO, "external data", NULL);
    run_errors(ctx);
    hostile_models(ctx);
    empty_graph(ctx);
    load_from_memory(ctx);
    opset_out_of_range(ctx);
    opset_in_range_runs(ctx);
    resnet_passes_and_planner(ctx, gen);
    bert_shape_chains_folded(ctx, gen);
    pads_folded(ctx, gen);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
