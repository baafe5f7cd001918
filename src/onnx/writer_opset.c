/* writer_opset.c: rewriting a node proto from its own opset to the newer one the whole model is
 * written at (attribute-form axes, splits, pads and bounds become constant inputs). */
#include <stdio.h>
#include <string.h>

#include "writer.h"

static void drop_attr(Onnx__NodeProto *np, const char *name) {
    size_t w = 0;
    for (size_t i = 0; i < np->n_attribute; i++)
        if (strcmp(np->attribute[i]->name, name) != 0) np->attribute[w++] = np->attribute[i];
    np->n_attribute = w;
}

/* Input `index` of np becomes `name`; missing inputs before it become "" (omitted). */
static graft_status set_input(writer *w, Onnx__NodeProto *np, size_t index, char *name) {
    if (!name) return w->e->status;
    if (index >= np->n_input) {
        char **grown = w_alloc(w, sizeof(char *) * (index + 1));
        if (!grown) return w->e->status;
        for (size_t i = 0; i <= index; i++) grown[i] = i < np->n_input ? np->input[i] : "";
        np->input = grown;
        np->n_input = index + 1;
    }
    np->input[index] = name;
    return GRAFT_OK;
}

/* Set int attribute `name` (replacing it when present). */
static graft_status set_attr_int(writer *w, Onnx__NodeProto *np, const char *name, int64_t v) {
    drop_attr(np, name);
    Onnx__AttributeProto **grown = w_alloc(w, sizeof *grown * (np->n_attribute + 1));
    Onnx__AttributeProto *ap = w_alloc(w, sizeof *ap);
    if (!grown || !ap) return w->e->status;
    onnx__attribute_proto__init(ap);
    ap->name = w_strdup(w, name);
    if (!ap->name) return w->e->status;
    ap->has_type = 1;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    ap->has_i = 1;
    ap->i = v;
    if (np->n_attribute) memcpy(grown, np->attribute, sizeof *grown * np->n_attribute);
    grown[np->n_attribute++] = ap;
    np->attribute = grown;
    return GRAFT_OK;
}

/* The ints attribute `attr`, when the node has it, becomes constant input `index`. */
static graft_status ints_to_input(writer *w, const ir_node *n, Onnx__NodeProto *np,
                                  const char *attr, size_t index) {
    const int64_t *vals;
    int64_t count = attr_ints(n, attr, &vals);
    if (count < 0) return GRAFT_OK;
    char base[512];
    snprintf(base, sizeof base, "%s/%s", n->name, attr);
    TRY(set_input(w, np, index, w_add_const_i64(w, base, vals, count)));
    drop_attr(np, attr);
    return GRAFT_OK;
}

/* A scalar constant of dtype dt (the node's data input's, float32 when unknown) as input `index`. */
static graft_status scalar_input(writer *w, const ir_node *n, Onnx__NodeProto *np, const char *what,
                                 double value, size_t index) {
    graft_dtype dt = GRAFT_DTYPE_F32;
    if (n->n_in > 0 && n->inputs[0] >= 0 && w->g->values[n->inputs[0]].dtype != 0)
        dt = w->g->values[n->inputs[0]].dtype;
    uint64_t storage = 0;
    tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.data = &storage;
    tensor_set_f64(&t, 0, value);
    char base[512];
    snprintf(base, sizeof base, "%s/%s", n->name, what);
    return set_input(w, np, index, w_add_const(w, base, &t));
}

static bool crosses(const writer *w, const ir_node *n, int since) {
    return n->opset < since && w->opset >= since;
}

static graft_status upgrade_split(writer *w, const ir_node *n, Onnx__NodeProto *np) {
    if (crosses(w, n, 13)) TRY(ints_to_input(w, n, np, "split", 1));
    bool have_split = np->n_input > 1 && np->input[1][0];
    if (crosses(w, n, 18) && !have_split && !ir_node_attr(n, "num_outputs"))
        TRY(set_attr_int(w, np, "num_outputs", n->n_out));
    return GRAFT_OK;
}

static graft_status upgrade_clip(writer *w, const ir_node *n, Onnx__NodeProto *np) {
    const ir_attr *lo = ir_node_attr(n, "min"), *hi = ir_node_attr(n, "max");
    if (lo) TRY(scalar_input(w, n, np, "min", lo->f, 1));
    if (hi) TRY(scalar_input(w, n, np, "max", hi->f, 2));
    drop_attr(np, "min");
    drop_attr(np, "max");
    return GRAFT_OK;
}

/* Before opset 13 Softmax flattens to 2-D at `axis` (default 1); that equals the new per-axis
 * form only when axis is the last dimension. */
static graft_status upgrade_softmax(writer *w, const ir_node *n, Onnx__NodeProto *np) {
    int rank = n->n_in > 0 && n->inputs[0] >= 0 ? w->g->values[n->inputs[0]].ndim : -1;
    int64_t axis = attr_i(n, "axis", 1);
    if (rank >= 0 && axis < 0) axis += rank;
    if (rank < 0 || axis != rank - 1)
        return err_set(w->e, GRAFT_E_UNSUPPORTED,
                       "%s over axis %lld of a rank-%d input has no opset-13 equivalent",
                       n->op_type, (long long)axis, rank);
    return set_attr_int(w, np, "axis", -1);
}

static graft_status upgrade_batchnorm(writer *w, const ir_node *n, Onnx__NodeProto *np) {
    if (crosses(w, n, 9) && attr_i(n, "spatial", 1) == 0)
        return err_set(w->e, GRAFT_E_UNSUPPORTED, "spatial=0 has no opset-9 equivalent");
    if (crosses(w, n, 14) && n->n_out > 1)
        return err_set(w->e, GRAFT_E_UNSUPPORTED,
                       "running-statistics outputs have no opset-14 inference equivalent");
    drop_attr(np, "spatial");
    return GRAFT_OK;
}

graft_status w_upgrade_node(writer *w, const ir_node *n, Onnx__NodeProto *np) {
    const char *op = n->op_type;
    if ((strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0 ||
         strcmp(op, "ReduceSum") == 0) &&
        crosses(w, n, 13))
        return ints_to_input(w, n, np, "axes", 1);
    if (strcmp(op, "ReduceMean") == 0 && crosses(w, n, 18))
        return ints_to_input(w, n, np, "axes", 1);
    if (strcmp(op, "Split") == 0) return upgrade_split(w, n, np);
    if (strcmp(op, "Slice") == 0 && crosses(w, n, 10)) {
        TRY(ints_to_input(w, n, np, "starts", 1));
        TRY(ints_to_input(w, n, np, "ends", 2));
        return ints_to_input(w, n, np, "axes", 3);
    }
    if (strcmp(op, "Pad") == 0 && crosses(w, n, 11)) {
        TRY(ints_to_input(w, n, np, "pads", 1));
        TRY(scalar_input(w, n, np, "value", attr_f(n, "value", 0.0f), 2));
        drop_attr(np, "value");
        return GRAFT_OK;
    }
    if (strcmp(op, "Clip") == 0 && crosses(w, n, 11)) return upgrade_clip(w, n, np);
    if (strcmp(op, "Dropout") == 0 && crosses(w, n, 12)) {
        drop_attr(np, "ratio"); /* inference ignores it */
        return GRAFT_OK;
    }
    if ((strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0) && crosses(w, n, 13))
        return upgrade_softmax(w, n, np);
    if (strcmp(op, "BatchNormalization") == 0) return upgrade_batchnorm(w, n, np);
    return GRAFT_OK;
}
