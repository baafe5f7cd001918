/* model_hash.c: the content hash of a graph that keys the feature cache (feature_cache.h):
 * opsets, every value, live node and attribute, the graph's inputs and outputs. */
#include <string.h>

#include "../core/hash.h"
#include "../core/tensor.h"
#include "feature_cache.h"

/* feature_cache.c's FC_SEED ^ 3, as when this was part of it: the same hashes, so the caches
 * made before stay valid. */
#define MODEL_HASH_SEED (0x6772616674666331ull ^ 3)

static void hash_tensor(hash64_state *s, const tensor *t) {
    hash64_update_u64(s, (uint64_t)t->dtype);
    hash64_update_u64(s, (uint64_t)(int64_t)t->ndim);
    for (int d = 0; d < t->ndim && d < GRAFT_MAX_DIMS; d++)
        hash64_update_u64(s, (uint64_t)t->dims[d]);
    int64_t nb = t->data ? tensor_nbytes(t) : -1;
    hash64_update_u64(s, (uint64_t)nb);
    if (nb > 0) hash64_update(s, t->data, (size_t)nb);
}

static void hash_attr(hash64_state *s, const ir_attr *a) {
    hash64_update_str(s, a->name);
    hash64_update_u64(s, (uint64_t)a->type);
    uint32_t fbits;
    switch (a->type) {
    case IR_ATTR_FLOAT:
        memcpy(&fbits, &a->f, 4);
        hash64_update_u64(s, fbits);
        break;
    case IR_ATTR_INT:
        hash64_update_u64(s, (uint64_t)a->i);
        break;
    case IR_ATTR_STRING:
        hash64_update_str(s, a->s);
        break;
    case IR_ATTR_TENSOR:
        hash_tensor(s, &a->t);
        break;
    case IR_ATTR_FLOATS:
    case IR_ATTR_INTS:
    case IR_ATTR_STRINGS:
        hash64_update_u64(s, (uint64_t)a->n);
        for (int64_t k = 0; k < a->n; k++) {
            if (a->type == IR_ATTR_FLOATS && a->floats) {
                memcpy(&fbits, &a->floats[k], 4);
                hash64_update_u64(s, fbits);
            } else if (a->type == IR_ATTR_INTS && a->ints) {
                hash64_update_u64(s, (uint64_t)a->ints[k]);
            } else if (a->type == IR_ATTR_STRINGS && a->strings) {
                hash64_update_str(s, a->strings[k]);
            }
        }
        break;
    default:
        break;
    }
}

static void hash_value(hash64_state *s, const ir_value *v) {
    hash64_update_str(s, v->name);
    hash64_update_u64(s, (uint64_t)v->dtype);
    hash64_update_u64(s, (uint64_t)(int64_t)v->ndim);
    for (int d = 0; d < v->ndim && d < GRAFT_MAX_DIMS; d++) {
        hash64_update_u64(s, (uint64_t)v->dims[d]);
        hash64_update_str(s, v->dim_names[d]);
    }
    hash64_update_u64(s, (uint64_t)v->is_const | (uint64_t)v->is_graph_input << 1 |
                             (uint64_t)v->is_graph_output << 2);
    if (v->is_const) hash_tensor(s, &v->data);
}

static void hash_node(hash64_state *s, const ir_node *n) {
    hash64_update_str(s, n->op_type);
    hash64_update_str(s, n->domain);
    hash64_update_str(s, n->name);
    hash64_update_u64(s, (uint64_t)(int64_t)n->opset);
    hash64_update_u64(s, (uint64_t)(int64_t)n->n_in);
    for (int k = 0; k < n->n_in; k++) hash64_update_u64(s, (uint64_t)(int64_t)n->inputs[k]);
    hash64_update_u64(s, (uint64_t)(int64_t)n->n_out);
    for (int k = 0; k < n->n_out; k++) hash64_update_u64(s, (uint64_t)(int64_t)n->outputs[k]);
    hash64_update_u64(s, (uint64_t)(int64_t)n->n_attrs);
    for (int k = 0; k < n->n_attrs; k++) hash_attr(s, &n->attrs[k]);
}

uint64_t feature_cache_model_hash(const ir_graph *g) {
    hash64_state s;
    hash64_init(&s, MODEL_HASH_SEED);
    if (!g) return hash64_final(&s);
    hash64_update_u64(&s, (uint64_t)g->n_opsets);
    for (int i = 0; i < g->n_opsets; i++) {
        hash64_update_str(&s, g->opsets[i].domain);
        hash64_update_u64(&s, (uint64_t)g->opsets[i].version);
    }
    hash64_update_u64(&s, (uint64_t)g->n_values);
    for (int i = 0; i < g->n_values; i++) hash_value(&s, &g->values[i]);
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].dead;
    hash64_update_u64(&s, (uint64_t)live);
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead) hash_node(&s, &g->nodes[i]);
    hash64_update_u64(&s, (uint64_t)g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++) hash64_update_u64(&s, (uint64_t)(int64_t)g->inputs[i]);
    hash64_update_u64(&s, (uint64_t)g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) hash64_update_u64(&s, (uint64_t)(int64_t)g->outputs[i]);
    return hash64_final(&s);
}
