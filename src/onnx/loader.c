/* loader.c: ONNX ModelProto (protobuf-c) to graph IR: opsets, initializers, inputs with symbolic
 * dims, nodes with attributes, metadata. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "onnx_io.h"

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
}

static graft_status get_value(ir_graph *g, const char *name, int *index, graft_err *e) {
    int v = ir_find_value(g, name);
    if (v >= 0) {
        *index = v;
        return GRAFT_OK;
    }
    return ir_add_value(g, name, index, e);
}

/* Fill dtype and shape of value v from a ValueInfoProto; unknown parts stay unknown. */
static graft_status apply_type(ir_value *v, const Onnx__ValueInfoProto *vi, graft_err *e) {
    const Onnx__TypeProto *tp = vi->type;
    if (!tp) return GRAFT_OK;
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "value '%s' is not a tensor (sequences, maps and optionals are not "
                       "supported)",
                       v->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type && tt->elem_type != 0) {
        if (!dtype_is_valid((graft_dtype)tt->elem_type))
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "value '%s' has element type %d, which graft "
                           "does not support",
                           v->name, (int)tt->elem_type);
        v->dtype = (graft_dtype)tt->elem_type;
    }
    if (!tt->shape) return GRAFT_OK;
    if (tt->shape->n_dim > GRAFT_MAX_DIMS)
        return err_set(e, GRAFT_E_UNSUPPORTED, "value '%s' has rank %zu (at most %d supported)",
                       v->name, tt->shape->n_dim, GRAFT_MAX_DIMS);
    v->ndim = (int)tt->shape->n_dim;
    for (int i = 0; i < v->ndim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        v->dims[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return err_set(e, GRAFT_E_MALFORMED_MODEL, "value '%s' has negative dim %lld",
                               v->name, (long long)d->dim_value);
            v->dims[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   d->dim_param && d->dim_param[0]) {
            free(v->dim_names[i]);
            v->dim_names[i] = ir_strdup(d->dim_param);
            if (!v->dim_names[i]) return oom(e);
        }
    }
    return GRAFT_OK;
}

static graft_status convert_attr(const Onnx__AttributeProto *ap, ir_attr *a, graft_err *e) {
    memset(a, 0, sizeof *a);
    a->name = ir_strdup(ap->name);
    if (!a->name) return oom(e);
    a->type = (ir_attr_type)ap->type;
    if (ap->ref_attr_name)
        return err_set(e, GRAFT_E_UNSUPPORTED, "attribute '%s' refers to a function attribute",
                       a->name);
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->f = ap->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->i = ap->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->s = malloc(ap->s.len + 1);
        if (!a->s) return oom(e);
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = '\0';
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (!ap->t)
            return err_set(e, GRAFT_E_MALFORMED_MODEL, "tensor attribute '%s' is empty", a->name);
        TRY(onnx_tensor_from_proto(ap->t, NULL, &a->t, e));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->n = (int64_t)ap->n_floats;
        a->floats = malloc(sizeof(float) * (ap->n_floats + 1));
        if (!a->floats) return oom(e);
        if (ap->n_floats) memcpy(a->floats, ap->floats, sizeof(float) * ap->n_floats);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->n = (int64_t)ap->n_ints;
        a->ints = malloc(sizeof(int64_t) * (ap->n_ints + 1));
        if (!a->ints) return oom(e);
        if (ap->n_ints) memcpy(a->ints, ap->ints, sizeof(int64_t) * ap->n_ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->strings = calloc(ap->n_strings + 1, sizeof(char *));
        if (!a->strings) return oom(e);
        a->n = (int64_t)ap->n_strings;
        for (size_t i = 0; i < ap->n_strings; i++) {
            a->strings[i] = malloc(ap->strings[i].len + 1);
            if (!a->strings[i]) return oom(e);
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = '\0';
        }
        break;
    default:
        /* Graphs (If/Loop bodies), sparse tensors and type protos: kept as present but empty, so
         * the op that needs them reports it; no op graft runs takes them. */
        break;
    }
    return GRAFT_OK;
}

static graft_status convert_node(ir_graph *g, const Onnx__NodeProto *np, int index, graft_err *e) {
    ir_node n;
    memset(&n, 0, sizeof n);
    graft_status st = GRAFT_OK;
    char fallback[64];
    snprintf(fallback, sizeof fallback, "#%d", index);
    n.name = ir_strdup(np->name && np->name[0] ? np->name : fallback);
    n.op_type = ir_strdup(np->op_type);
    n.domain = ir_strdup(np->domain);
    n.inputs = malloc(sizeof(int) * (np->n_input + 1));
    n.outputs = malloc(sizeof(int) * (np->n_output + 1));
    n.attrs = calloc(np->n_attribute + 1, sizeof(ir_attr));
    if (!n.name || !n.op_type || !n.domain || !n.inputs || !n.outputs || !n.attrs) {
        ir_node_free(&n);
        return oom(e);
    }
    if (!np->op_type || !np->op_type[0]) {
        st = err_set(e, GRAFT_E_MALFORMED_MODEL, "node '%s' has no op type", n.name);
        goto fail;
    }
    n.n_in = (int)np->n_input;
    for (size_t i = 0; i < np->n_input; i++) {
        n.inputs[i] = -1;
        if (np->input[i] && np->input[i][0] && (st = get_value(g, np->input[i], &n.inputs[i], e)))
            goto fail;
    }
    n.n_out = (int)np->n_output;
    for (size_t i = 0; i < np->n_output; i++) {
        n.outputs[i] = -1;
        if (np->output[i] && np->output[i][0] &&
            (st = get_value(g, np->output[i], &n.outputs[i], e)))
            goto fail;
    }
    for (size_t i = 0; i < np->n_attribute; i++) {
        n.n_attrs = (int)i + 1;
        if ((st = convert_attr(np->attribute[i], &n.attrs[i], e))) goto fail;
    }
    n.opset = (int)ir_opset_version(g, n.domain);
    if ((st = ir_add_node(g, &n, NULL, e))) goto fail;
    return GRAFT_OK;
fail:
    err_prefix(e, "node '%s' (%s)", n.name, n.op_type);
    ir_node_free(&n);
    return st;
}

static graft_status convert_header(const Onnx__ModelProto *mp, ir_graph *g, graft_err *e) {
    g->ir_version = mp->ir_version;
    if (!mp->has_ir_version || mp->ir_version < 3)
        return err_set(e, GRAFT_E_UNSUPPORTED, "IR version %lld is not supported (3 to 10 are)",
                       (long long)mp->ir_version);
    g->producer_name = ir_strdup(mp->producer_name);
    g->producer_version = ir_strdup(mp->producer_version);
    g->graph_name = ir_strdup(mp->graph->name);
    g->opsets = calloc(mp->n_opset_import + 1, sizeof *g->opsets);
    g->metadata = calloc(mp->n_metadata_props + 1, sizeof *g->metadata);
    if (!g->producer_name || !g->producer_version || !g->graph_name || !g->opsets || !g->metadata)
        return oom(e);
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        g->opsets[i].domain = ir_strdup(mp->opset_import[i]->domain);
        if (!g->opsets[i].domain) return oom(e);
        g->opsets[i].version = mp->opset_import[i]->version;
        g->n_opsets++;
    }
    if (ir_opset_version(g, "") < 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "the model imports no ai.onnx opset");
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        g->metadata[i].key = ir_strdup(mp->metadata_props[i]->key);
        g->metadata[i].value = ir_strdup(mp->metadata_props[i]->value);
        if (!g->metadata[i].key || !g->metadata[i].value) return oom(e);
        g->n_metadata++;
    }
    return GRAFT_OK;
}

static graft_status convert_initializers(Onnx__GraphProto *gp, const char *base_dir, ir_graph *g,
                                         graft_err *e) {
    if (gp->n_sparse_initializer)
        return err_set(e, GRAFT_E_UNSUPPORTED, "sparse initializers are not supported");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !tp->name[0])
            return err_set(e, GRAFT_E_MALFORMED_MODEL, "initializer #%zu has no name", i);
        int v;
        TRY(get_value(g, tp->name, &v, e));
        ir_value *val = &g->values[v];
        if (val->is_const)
            return err_set(e, GRAFT_E_MALFORMED_MODEL, "initializer '%s' is given twice", tp->name);
        graft_status st = onnx_tensor_from_proto(tp, base_dir, &val->data, e);
        if (st) return err_prefix(e, "initializer '%s'", tp->name);
        /* the parsed copy of the bytes goes as soon as the graph has its own: a load holds
         * about one model's weights beside the file's bytes, not two */
        free(tp->raw_data.data);
        tp->raw_data.data = NULL;
        tp->raw_data.len = 0;
        val->is_const = true;
        val->dtype = val->data.dtype;
        val->ndim = val->data.ndim;
        memcpy(val->dims, val->data.dims, sizeof val->dims);
    }
    return GRAFT_OK;
}

static graft_status convert_io(const Onnx__GraphProto *gp, ir_graph *g, graft_err *e) {
    g->inputs = malloc(sizeof(int) * (gp->n_input + 1));
    g->outputs = malloc(sizeof(int) * (gp->n_output + 1));
    if (!g->inputs || !g->outputs) return oom(e);
    for (size_t i = 0; i < gp->n_input; i++) {
        int v;
        TRY(get_value(g, gp->input[i]->name, &v, e));
        if (g->values[v].is_const) continue; /* IR < 4 lists initializers as inputs too */
        TRY(apply_type(&g->values[v], gp->input[i], e));
        if (g->values[v].dtype == GRAFT_DTYPE_UNDEFINED)
            return err_set(e, GRAFT_E_MALFORMED_MODEL, "graph input '%s' has no element type",
                           gp->input[i]->name);
        g->values[v].is_graph_input = true;
        g->inputs[g->n_inputs++] = v;
    }
    if (gp->n_output == 0) return err_set(e, GRAFT_E_MALFORMED_MODEL, "the graph has no outputs");
    for (size_t i = 0; i < gp->n_output; i++) {
        int v;
        TRY(get_value(g, gp->output[i]->name, &v, e));
        TRY(apply_type(&g->values[v], gp->output[i], e));
        g->values[v].is_graph_output = true;
        g->outputs[g->n_outputs++] = v;
    }
    return GRAFT_OK;
}

static graft_status convert_model(Onnx__ModelProto *mp, const char *base_dir, ir_graph *g,
                                  graft_err *e) {
    if (!mp->graph) return err_set(e, GRAFT_E_MALFORMED_MODEL, "the model has no graph");
    TRY(convert_header(mp, g, e));
    Onnx__GraphProto *gp = mp->graph;
    TRY(convert_initializers(gp, base_dir, g, e));
    TRY(convert_io(gp, g, e));
    for (size_t i = 0; i < gp->n_node; i++) TRY(convert_node(g, gp->node[i], (int)i, e));
    /* value_info carries exporter-inferred types; use them as hints for intermediate values. */
    for (size_t i = 0; i < gp->n_value_info; i++) {
        int v = ir_find_value(g, gp->value_info[i]->name);
        if (v >= 0 && !g->values[v].is_const && !g->values[v].is_graph_input) {
            graft_err ignored;
            if (apply_type(&g->values[v], gp->value_info[i], &ignored) != GRAFT_OK) {
                g->values[v].ndim = -1;
                g->values[v].dtype = GRAFT_DTYPE_UNDEFINED;
            }
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int o = 0; o < g->nodes[i].n_out; o++) {
            int v = g->nodes[i].outputs[o];
            if (v < 0) continue;
            if (g->values[v].producer >= 0 || g->values[v].is_const || g->values[v].is_graph_input)
                return err_set(e, GRAFT_E_MALFORMED_MODEL,
                               "value '%s' is produced twice (again "
                               "by node '%s')",
                               g->values[v].name, g->nodes[i].name);
            g->values[v].producer = i;
        }
    return GRAFT_OK;
}

graft_status onnx_parse_model(const void *data, size_t size, const char *base_dir, const char *what,
                              ir_graph *g, graft_err *e) {
    return onnx_parse_model_owned(data, size, NULL, base_dir, what, g, e);
}

/* The file's size and nesting checked before it is parsed. */
static graft_status check_bytes(const void *data, size_t size, const char *what, graft_err *e) {
    if (size == 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "%s: the file is empty, not an ONNX model",
                       what);
    if ((uint64_t)size > (uint64_t)ONNX_MAX_FILE_BYTES)
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "%s: %zu bytes is over graft's limit of %lld bytes for a model file (put "
                       "large weights in external data)",
                       what, size, (long long)ONNX_MAX_FILE_BYTES);
    return onnx_check_nesting(data, size, what, e);
}

graft_status onnx_parse_model_owned(const void *data, size_t size, void *owned,
                                    const char *base_dir, const char *what, ir_graph *g,
                                    graft_err *e) {
    ir_graph_init(g);
    graft_status checked = check_bytes(data, size, what, e);
    Onnx__ModelProto *mp = checked == GRAFT_OK ? onnx__model_proto__unpack(NULL, size, data) : NULL;
    free(owned); /* the message holds its own copy of every byte */
    if (checked != GRAFT_OK) return checked;
    if (!mp)
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "%s: not a valid ONNX model (the %zu bytes do not parse as a ModelProto; "
                       "truncated or not an ONNX file)",
                       what, size);
    graft_status st = convert_model(mp, base_dir, g, e);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (st != GRAFT_OK) {
        err_prefix(e, "%s", what);
        ir_graph_free(g);
    }
    return st;
}
