/* test_device.c: choosing where a model runs: cpu, auto (GPU or one warning and the CPU),
 * cuda[:N] (that GPU or a clear error), nonsense rejected; the GPU list agrees with the build. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft.h"
#include "onnx.pb-c.h"
#include "test_util.h"

typedef struct {
    int warnings;
    char last[1024];
} log_capture;

static void capture(graft_log_level level, const char *msg, void *user) {
    log_capture *c = user;
    if (level >= GRAFT_LOG_WARN) c->warnings++;
    snprintf(c->last, sizeof c->last, "%s", msg);
}

static graft_ctx *ctx_on(const char *device, log_capture *c) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = device;
    o.log_fn = capture;
    o.log_user = c;
    graft_ctx *ctx = NULL;
    return graft_ctx_create(&o, &ctx) == GRAFT_OK ? ctx : NULL;
}

static void check_auto(const char *model, int gpus, const char *why) {
    log_capture c = {0};
    graft_ctx *ctx = ctx_on("auto", &c);
    graft_model *a = NULL, *b = NULL;
    graft_status s1 = graft_model_load(ctx, model, &a);
    graft_status s2 = graft_model_load(ctx, model, &b);
    CHECK("device_auto_loads", s1 == GRAFT_OK && s2 == GRAFT_OK, "%s", graft_last_error(ctx));
    const char *d = graft_model_device(a);
    if (gpus > 0) {
        CHECK("device_auto_takes_gpu", strncmp(d, "cuda:0 (", 8) == 0, "device '%s'", d);
        CHECK("device_auto_gpu_no_warning", c.warnings == 0, "%d warnings: %s", c.warnings, c.last);
    } else {
        CHECK("device_auto_falls_back", strcmp(d, "cpu") == 0, "device '%s'", d);
        CHECK("device_auto_one_warning",
              c.warnings == 1 && strstr(c.last, "running on the CPU") && strstr(c.last, why),
              "%d warnings, last '%s' (want one naming '%s')", c.warnings, c.last, why);
    }
    graft_model_free(a);
    graft_model_free(b);
    graft_ctx_free(ctx);
}

static void check_explicit(const char *model, int gpus) {
    const char *devices[] = {"cuda", "cuda:0", "cuda:7"};
    for (int i = 0; i < 3; i++) {
        log_capture c = {0};
        graft_ctx *ctx = ctx_on(devices[i], &c);
        graft_model *m = NULL;
        graft_status st = graft_model_load(ctx, model, &m);
        char name[64];
        snprintf(name, sizeof name, "device_%s", devices[i]);
        bool exists = gpus > (i == 2 ? 7 : 0);
        if (exists)
            CHECK(name, st == GRAFT_OK && strncmp(graft_model_device(m), "cuda:", 5) == 0, "%s",
                  graft_last_error(ctx));
        else
            CHECK(
                name,
                st != GRAFT_OK && !m && strstr(graft_last_error(ctx), devices[i]) &&
                    (strstr(graft_last_error(ctx), "GPU") || strstr(graft_last_error(ctx), "CUDA")),
                "status %d, error '%s'", (int)st, graft_last_error(ctx));
        graft_model_free(m);
        graft_ctx_free(ctx);
    }
}

/* A model (opset 17) of `graph`: packed bytes, malloc'ed. */
static uint8_t *pack_model(Onnx__GraphProto *graph, size_t *len) {
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.domain = "", opset.has_version = 1, opset.version = 17;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = 1, model.ir_version = 8, model.graph = graph;
    model.n_opset_import = 1, model.opset_import = opsets;
    *len = onnx__model_proto__get_packed_size(&model);
    uint8_t *buf = malloc(*len);
    if (buf) onnx__model_proto__pack(&model, buf);
    return buf;
}

/* A model of one node `op` (named `name`) reading node_in (initializers first, then the 1-D
 * int64 graph input `in_name` of in_len elements) and writing the float output "y". Packed
 * bytes, malloc'ed. */
static uint8_t *one_node_model(const char *op, const char *name, const char *in_name,
                               int64_t in_len, char **node_in, int n_node_in,
                               Onnx__TensorProto **inits, int n_inits, size_t *len) {
    Onnx__TensorShapeProto__Dimension dim = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    dim.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    dim.dim_value = in_len;
    Onnx__TensorShapeProto__Dimension *dims[] = {&dim};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 1, shape.dim = dims;
    Onnx__TypeProto__Tensor in_tt = ONNX__TYPE_PROTO__TENSOR__INIT, out_tt = in_tt;
    in_tt.has_elem_type = 1, in_tt.elem_type = GRAFT_DTYPE_I64, in_tt.shape = &shape;
    out_tt.has_elem_type = 1, out_tt.elem_type = GRAFT_DTYPE_F32;
    Onnx__TypeProto in_type = ONNX__TYPE_PROTO__INIT, out_type = in_type;
    in_type.value_case = out_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    in_type.tensor_type = &in_tt, out_type.tensor_type = &out_tt;
    Onnx__ValueInfoProto in = ONNX__VALUE_INFO_PROTO__INIT, out = in;
    in.name = (char *)in_name, in.type = &in_type, out.name = "y", out.type = &out_type;
    Onnx__ValueInfoProto *ins[] = {&in}, *outs[] = {&out};
    char *node_out[] = {"y"};
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
    node.n_input = (size_t)n_node_in, node.input = node_in, node.n_output = 1;
    node.output = node_out, node.op_type = (char *)op, node.name = (char *)name;
    Onnx__NodeProto *nodes[] = {&node};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = (char *)name, graph.n_node = 1, graph.node = nodes;
    graph.n_input = 1, graph.input = ins, graph.n_output = 1, graph.output = outs;
    graph.n_initializer = (size_t)n_inits, graph.initializer = inits;
    return pack_model(&graph, len);
}

/* One ConstantOfShape reading its shape from the input "shape" (2 int64s): asked for a
 * (200000, 1000000) float output it needs 800 GB. */
static uint8_t *constant_of_shape_model(size_t *len) {
    char *node_in[] = {"shape"};
    return one_node_model("ConstantOfShape", "fill", "shape", 2, node_in, 1, NULL, 0, len);
}

/* One Gather (axis 0) of a constant (5, 2) float table (row r = {r, 10 r}) by the int64 input
 * "idx" of 3 indices. */
static uint8_t *gather_model(size_t *len) {
    float rows[10];
    for (int r = 0; r < 5; r++) rows[2 * r] = (float)r, rows[2 * r + 1] = 10.0f * (float)r;
    int64_t table_dims[2] = {5, 2};
    Onnx__TensorProto table = ONNX__TENSOR_PROTO__INIT;
    table.name = "table", table.has_data_type = 1, table.data_type = GRAFT_DTYPE_F32;
    table.n_dims = 2, table.dims = table_dims, table.n_float_data = 10, table.float_data = rows;
    Onnx__TensorProto *inits[] = {&table};
    char *node_in[] = {"table", "idx"};
    return one_node_model("Gather", "lookup", "idx", 3, node_in, 2, inits, 1, len);
}

/* Asking the GPU for more than it has is an error naming the sizes, and the model still runs
 * afterwards. */
static void check_out_of_memory(int gpus) {
    if (gpus == 0) {
        SKIP("device_out_of_memory", "no usable GPU");
        return;
    }
    size_t len = 0;
    uint8_t *bytes = constant_of_shape_model(&len);
    log_capture c = {0};
    graft_ctx *ctx = ctx_on("cuda:0", &c);
    graft_model *m = NULL;
    graft_status st = graft_model_load_memory(ctx, bytes, len, NULL, &m);
    int64_t huge[2] = {200000, 1000000}, small[2] = {2, 3};
    graft_named_tensor in = {"shape", {GRAFT_DTYPE_I64, 1, {2}, huge}};
    if (st == GRAFT_OK) st = graft_model_run(m, &in, 1);
    const char *msg = graft_last_error(ctx);
    CHECK("device_out_of_memory",
          st == GRAFT_E_OUT_OF_MEMORY && strstr(msg, "out of GPU memory") &&
              strstr(msg, "needed") && strstr(msg, "free"),
          "status %d, '%s'", (int)st, msg);
    in.tensor.data = small;
    st = m ? graft_model_run(m, &in, 1) : GRAFT_E_INVALID_ARGUMENT;
    const graft_tensor *y = NULL;
    if (st == GRAFT_OK) st = graft_model_output(m, 0, &y);
    CHECK("device_runs_after_out_of_memory",
          st == GRAFT_OK && y->ndim == 2 && y->dims[0] == 2 && y->dims[1] == 3 &&
              ((const float *)y->data)[5] == 0.0f,
          "status %d, '%s'", (int)st, graft_last_error(ctx));
    graft_model_free(m);
    graft_ctx_free(ctx);
    free(bytes);
}

/* An index out of range is an error naming it, on the CPU (before anything runs) and on the GPU
 * (raised by the kernel, reported when the run synchronizes), and the model runs correctly
 * afterwards: the GPU's flag is cleared. */
static void check_gather_index(const char *device, int gpus) {
    char name[64], after[64];
    snprintf(name, sizeof name, "device_gather_index_%s", device);
    snprintf(after, sizeof after, "device_gather_after_bad_index_%s", device);
    if (strcmp(device, "cpu") != 0 && gpus == 0) {
        SKIP(name, "no usable GPU");
        return;
    }
    size_t len = 0;
    uint8_t *bytes = gather_model(&len);
    log_capture c = {0};
    graft_ctx *ctx = ctx_on(device, &c);
    graft_model *m = NULL;
    graft_status st = graft_model_load_memory(ctx, bytes, len, NULL, &m);
    int64_t bad[3] = {1, 7, -2}, good[3] = {4, -1, 0};
    graft_named_tensor in = {"idx", {GRAFT_DTYPE_I64, 1, {3}, bad}};
    for (int r = 0; r < 2 && st == GRAFT_OK; r++) { /* again once a plan is recorded */
        st = graft_model_run(m, &in, 1);
        const char *msg = graft_last_error(ctx);
        CHECK(name, st == GRAFT_E_INVALID_ARGUMENT && strstr(msg, "7") && strstr(msg, "5"),
              "run %d: status %d, '%s'", r, (int)st, msg);
        in.tensor.data = good;
        st = graft_model_run(m, &in, 1);
        const graft_tensor *y = NULL;
        if (st == GRAFT_OK) st = graft_model_output(m, 0, &y);
        const float *v = st == GRAFT_OK ? y->data : NULL;
        CHECK(after, v && v[0] == 4.0f && v[1] == 40.0f && v[2] == 4.0f && v[4] == 0.0f,
              "status %d, '%s'", (int)st, graft_last_error(ctx));
        in.tensor.data = bad;
    }
    graft_model_free(m);
    graft_ctx_free(ctx);
    free(bytes);
}

/* One run of the digits CNN on a batch of 4 seeded inputs: its logits (at most 40) into out,
 * their count into *n. */
static graft_status run_digits(graft_model *m, float *out, int64_t *n) {
    float x[4 * 64];
    uint32_t r = 12345;
    for (int i = 0; i < 4 * 64; i++)
        r = r * 1103515245u + 12345u, x[i] = (float)(r >> 16) / 4096.0f;
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {4, 1, 8, 8}, x}};
    const graft_tensor *y = NULL;
    graft_status st = graft_model_run(m, &in, 1);
    if (st == GRAFT_OK) st = graft_model_output(m, 0, &y);
    *n = st == GRAFT_OK ? graft_tensor_numel(y) : 0;
    if (*n > 40) *n = 40;
    if (st == GRAFT_OK) memcpy(out, y->data, sizeof(float) * (size_t)*n);
    return st;
}

/* Pruning a half-precision model is refused with a message naming the weights' dtype, and the
 * model runs as before. */
static void check_prune_refused(graft_model *m, graft_ctx *ctx, const char *name) {
    float before[40], after[40];
    int64_t n = 0;
    graft_status st = run_digits(m, before, &n);
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_MAGNITUDE, o.sparsity = 0.6;
    graft_prune_report rep;
    if (st == GRAFT_OK) st = graft_model_prune(m, &o, &rep);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", graft_last_error(ctx));
    bool runs = run_digits(m, after, &n) == GRAFT_OK && n > 0 &&
                memcmp(before, after, sizeof(float) * (size_t)n) == 0;
    CHECK(name, st == GRAFT_E_UNSUPPORTED && strstr(msg, "float16") && strstr(msg, "fp32") && runs,
          "status %d, '%s', runs as before %d", (int)st, msg, runs);
}

/* The same on the CPU's reference kernels (where half precision runs for tests). */
static void check_prune_refused_cpu(const char *model) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = "cpu";
    o.use_reference_kernels = 1;
    graft_ctx *ctx = NULL;
    graft_model *m = NULL;
    graft_status st = graft_ctx_create(&o, &ctx);
    if (st == GRAFT_OK) st = graft_model_load(ctx, model, &m);
    if (st == GRAFT_OK) st = graft_model_set_precision(m, GRAFT_DTYPE_F16);
    if (st == GRAFT_OK)
        check_prune_refused(m, ctx, "device_prune_refuses_half_weights_cpu");
    else
        CHECK("device_prune_refuses_half_weights_cpu", 0, "setup: %s", graft_last_error(ctx));
    graft_model_free(m);
    graft_ctx_free(ctx);
}

/* Pruning a model that already ran on the GPU edits its weights in place: the next GPU runs
 * match the CPU's pruned model (fp32), and so does the pruned model set to fp16 afterwards
 * (channels-last convolutions, their filter copies made anew) within half precision; pruning
 * the fp16 model itself is refused with a message, and it still runs. */
static void check_prune_on_gpu(const char *model, int gpus) {
    if (gpus == 0) {
        SKIP("device_prune_after_gpu_runs", "no usable GPU");
        return;
    }
    log_capture c = {0};
    graft_ctx *gctx = ctx_on("cuda:0", &c), *cctx = ctx_on("cpu", &c);
    graft_model *g = NULL, *m = NULL;
    graft_status st = graft_model_load(gctx, model, &g);
    if (st == GRAFT_OK) st = graft_model_load(cctx, model, &m);
    float dense[40], gpu[40], half[40], cpu[40];
    int64_t n = 0;
    for (int r = 0; r < 2 && st == GRAFT_OK; r++) st = run_digits(g, dense, &n);
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_MAGNITUDE, o.sparsity = 0.6;
    graft_prune_report rep;
    if (st == GRAFT_OK) st = graft_model_prune(g, &o, &rep);
    if (st == GRAFT_OK) st = graft_model_prune(m, &o, &rep);
    for (int r = 0; r < 2 && st == GRAFT_OK; r++) st = run_digits(g, gpu, &n);
    if (st == GRAFT_OK) st = run_digits(m, cpu, &n);
    if (st == GRAFT_OK) st = graft_model_set_precision(g, GRAFT_DTYPE_F16);
    for (int r = 0; r < 2 && st == GRAFT_OK; r++) st = run_digits(g, half, &n);
    double d32 = 0.0, d16 = 0.0, moved = 0.0, scale = 0.0;
    for (int i = 0; st == GRAFT_OK && i < n; i++) {
        d32 = fmax(d32, fabs(gpu[i] - cpu[i]));
        d16 = fmax(d16, fabs(half[i] - cpu[i]));
        moved = fmax(moved, fabs(dense[i] - cpu[i]));
        scale = fmax(scale, fabs(cpu[i]));
    }
    CHECK("device_prune_after_gpu_runs",
          st == GRAFT_OK && n > 0 && d32 <= 1e-4 * scale && d16 <= 2e-2 * scale &&
              moved > 0.1 * scale,
          "status %d '%s%s': fp32 %.3g, fp16 %.3g off the CPU; pruning moved %.3g; scale %.3g",
          (int)st, graft_last_error(gctx), graft_last_error(cctx), d32, d16, moved, scale);
    check_prune_refused(g, gctx, "device_prune_refuses_half_weights");
    graft_model_free(g);
    graft_model_free(m);
    graft_ctx_free(gctx);
    graft_ctx_free(cctx);
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "models/digits_cnn.onnx";
    char why[256] = "";
    int gpus = graft_gpu_count(why, sizeof why);
    CHECK("device_gpu_count_says_why", gpus > 0 || why[0], "no GPU and no reason");
    CHECK("device_cuda_built_agrees", graft_cuda_built() || gpus == 0, "GPUs in a CPU build");
    graft_gpu_info info;
    graft_status st = graft_gpu_info_get(gpus, &info);
    CHECK("device_info_out_of_range", st != GRAFT_OK, "cuda:%d answered", gpus);
    if (gpus > 0) {
        st = graft_gpu_info_get(0, &info);
        CHECK("device_info",
              st == GRAFT_OK && info.name[0] && info.total_bytes > 0 && info.cc_major >= 5 &&
                  info.cudnn_version > 0,
              "status %d", (int)st);
    }
    log_capture c = {0};
    graft_ctx *ctx = ctx_on("cpu", &c);
    graft_model *m = NULL;
    st = graft_model_load(ctx, model, &m);
    CHECK("device_cpu",
          st == GRAFT_OK && strcmp(graft_model_device(m), "cpu") == 0 && c.warnings == 0, "%s",
          graft_last_error(ctx));
    st = graft_model_set_precision(m, GRAFT_DTYPE_F16);
    CHECK("device_half_needs_gpu",
          st == GRAFT_E_UNSUPPORTED && strstr(graft_last_error(ctx), "GPU"), "status %d, '%s'",
          (int)st, graft_last_error(ctx));
    st = graft_model_set_precision(m, GRAFT_DTYPE_I64);
    CHECK("device_precision_rejects_int", st == GRAFT_E_INVALID_ARGUMENT, "status %d", (int)st);
    CHECK("device_fp32_is_noop", graft_model_set_precision(m, GRAFT_DTYPE_F32) == GRAFT_OK, "%s",
          graft_last_error(ctx));
    graft_model_free(m);
    graft_ctx_free(ctx);
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA"};
    for (int i = 0; i < 5; i++) {
        ctx = ctx_on(bad[i], &c);
        m = NULL;
        st = graft_model_load(ctx, model, &m);
        char name[64];
        snprintf(name, sizeof name, "device_rejects_%s", bad[i]);
        CHECK(name, st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), bad[i]),
              "status %d, '%s'", (int)st, graft_last_error(ctx));
        graft_ctx_free(ctx);
    }
    check_auto(model, gpus, why);
    check_explicit(model, gpus);
    check_out_of_memory(gpus);
    check_gather_index("cpu", gpus);
    check_gather_index("cuda:0", gpus);
    check_prune_refused_cpu(model);
    check_prune_on_gpu(model, gpus);
    return test_failures ? 1 : 0;
}
