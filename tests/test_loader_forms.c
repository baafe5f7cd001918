/* test_loader_forms.c: initializers in every storage form (typed repeated fields of each kind,
 * raw data, an attribute tensor), IR 3 style inputs, and metadata_props, in a model built in
 * memory with protobuf-c and loaded through the public API. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/half.h"
#include "graft.h"
#include "onnx.pb-c.h"
#include "test_util.h"

typedef struct builder {
    Onnx__TensorProto tensors[8];
    Onnx__TensorProto *tensor_ptrs[8];
    int n_tensors;
    Onnx__NodeProto nodes[16];
    Onnx__NodeProto *node_ptrs[16];
    char *node_io[16][4];
    int n_nodes;
} builder;

static int64_t two[1] = {2};

static Onnx__TensorProto *add_tensor(builder *b, const char *name, int dtype) {
    Onnx__TensorProto *t = &b->tensors[b->n_tensors];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = 1;
    t->dims = two;
    b->tensor_ptrs[b->n_tensors++] = t;
    return t;
}

/* node: op(in0[, in1]) -> out, with an optional int attribute. */
static Onnx__NodeProto *add_node(builder *b, const char *op, const char *in0, const char *in1,
                                 const char *out) {
    Onnx__NodeProto *n = &b->nodes[b->n_nodes];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    char **io = b->node_io[b->n_nodes];
    io[0] = (char *)in0;
    io[1] = (char *)in1;
    io[2] = (char *)out;
    n->n_input = in1 ? 2 : 1;
    n->input = io;
    n->n_output = 1;
    n->output = &io[2];
    b->node_ptrs[b->n_nodes++] = n;
    return n;
}

int main(void) {
    builder b;
    memset(&b, 0, sizeof b);
    float f32[2] = {1.0f, 2.0f};
    int32_t f16[2] = {f32_to_f16(1.5f), f32_to_f16(-2.0f)};
    int64_t i64[2] = {3, 4};
    double f64[2] = {0.25, 0.5};
    uint64_t u64[2] = {10, 20};
    float raw[2] = {100.0f, 200.0f};
    Onnx__TensorProto *t = add_tensor(&b, "w_f32", 1);
    t->n_float_data = 2, t->float_data = f32;
    t = add_tensor(&b, "w_f16", 10);
    t->n_int32_data = 2, t->int32_data = f16;
    t = add_tensor(&b, "w_i64", 7);
    t->n_int64_data = 2, t->int64_data = i64;
    t = add_tensor(&b, "w_f64", 11);
    t->n_double_data = 2, t->double_data = f64;
    t = add_tensor(&b, "w_u32", 12);
    t->n_uint64_data = 2, t->uint64_data = u64;
    t = add_tensor(&b, "w_raw", 1);
    t->has_raw_data = 1, t->raw_data.len = sizeof raw, t->raw_data.data = (uint8_t *)raw;

    /* Casts of each typed initializer to float, summed with x. */
    Onnx__AttributeProto to_float = ONNX__ATTRIBUTE_PROTO__INIT;
    to_float.name = "to";
    to_float.has_type = 1;
    to_float.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    to_float.has_i = 1;
    to_float.i = 1;
    Onnx__AttributeProto *attrs[1] = {&to_float};
    const char *casts[4][2] = {
        {"w_f16", "c_f16"}, {"w_i64", "c_i64"}, {"w_f64", "c_f64"}, {"w_u32", "c_u32"}};
    for (int i = 0; i < 4; i++) {
        Onnx__NodeProto *n = add_node(&b, "Cast", casts[i][0], NULL, casts[i][1]);
        n->n_attribute = 1;
        n->attribute = attrs;
    }
    add_node(&b, "Add", "x", "w_f32", "s0");
    add_node(&b, "Add", "s0", "c_f16", "s1");
    add_node(&b, "Add", "s1", "c_i64", "s2");
    add_node(&b, "Add", "s2", "c_f64", "s3");
    add_node(&b, "Add", "s3", "c_u32", "s4");
    add_node(&b, "Add", "s4", "w_raw", "y");

    Onnx__TensorShapeProto__Dimension dim = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    dim.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    dim.dim_value = 2;
    Onnx__TensorShapeProto__Dimension *dims[1] = {&dim};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 1, shape.dim = dims;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1, tt.elem_type = 1, tt.shape = &shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, type.tensor_type = &tt;
    Onnx__ValueInfoProto x = ONNX__VALUE_INFO_PROTO__INIT, y = ONNX__VALUE_INFO_PROTO__INIT,
                         w_in = ONNX__VALUE_INFO_PROTO__INIT;
    x.name = "x", x.type = &type;
    y.name = "y", y.type = &type;
    w_in.name = "w_f32", w_in.type = &type; /* IR 3: initializers are listed as inputs too */
    Onnx__ValueInfoProto *inputs[2] = {&x, &w_in}, *outputs[1] = {&y};

    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = "forms";
    g.n_node = (size_t)b.n_nodes, g.node = b.node_ptrs;
    g.n_initializer = (size_t)b.n_tensors, g.initializer = b.tensor_ptrs;
    g.n_input = 2, g.input = inputs;
    g.n_output = 1, g.output = outputs;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.domain = "", opset.has_version = 1, opset.version = 13;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    Onnx__StringStringEntryProto meta = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    meta.key = "graft.classes", meta.value = "cat,dog";
    Onnx__StringStringEntryProto *metas[1] = {&meta};
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    mp.has_ir_version = 1, mp.ir_version = 3;
    mp.n_opset_import = 1, mp.opset_import = opsets;
    mp.graph = &g;
    mp.n_metadata_props = 1, mp.metadata_props = metas;

    size_t size = onnx__model_proto__get_packed_size(&mp);
    uint8_t *buf = malloc(size);
    onnx__model_proto__pack(&mp, buf);

    graft_ctx *ctx;
    graft_model *m = NULL;
    graft_ctx_create(NULL, &ctx);
    graft_status st = graft_model_load_memory(ctx, buf, size, NULL, &m);
    CHECK("typed_fields_load", st == GRAFT_OK, "%s", graft_last_error(ctx));
    if (st == GRAFT_OK) {
        CHECK("ir3_initializer_not_an_input", graft_model_input_count(m) == 1, "%d inputs",
              graft_model_input_count(m));
        const char *k = NULL, *v = NULL;
        graft_model_metadata(m, 0, &k, &v);
        CHECK("metadata_props",
              graft_model_metadata_count(m) == 1 && k && !strcmp(k, "graft.classes") && v &&
                  !strcmp(v, "cat,dog"),
              "count %d", graft_model_metadata_count(m));
        float xv[2] = {0.5f, -0.5f};
        graft_named_tensor in = {"x", {GRAFT_DTYPE_F32, 1, {2}, xv}};
        const graft_tensor *out = NULL;
        st = graft_model_run(m, &in, 1);
        if (st == GRAFT_OK) graft_model_output(m, 0, &out);
        float want0 = 0.5f + 1.0f + 1.5f + 3 + 0.25f + 10 + 100;
        float want1 = -0.5f + 2.0f - 2.0f + 4 + 0.5f + 20 + 200;
        CHECK("typed_fields_values",
              out && fabsf(((float *)out->data)[0] - want0) < 1e-5f &&
                  fabsf(((float *)out->data)[1] - want1) < 1e-5f,
              "status %d: %s", st, graft_last_error(ctx));
    }
    graft_model_free(m);
    /* The same model with a float_data count that disagrees with the shape. */
    b.tensors[0].n_float_data = 1;
    size = onnx__model_proto__get_packed_size(&mp);
    onnx__model_proto__pack(&mp, buf);
    st = graft_model_load_memory(ctx, buf, size, NULL, &m);
    CHECK("typed_fields_count_mismatch",
          st == GRAFT_E_MALFORMED_MODEL && strstr(graft_last_error(ctx), "w_f32"), "status %d: %s",
          st, graft_last_error(ctx));
    free(buf);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
