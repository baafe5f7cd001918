/* ir.c: building, looking up, freeing and topologically sorting the graph IR. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

char *ir_strdup(const char *s) {
    return strdup(s ? s : "");
}

void ir_graph_init(ir_graph *g) {
    memset(g, 0, sizeof *g);
}

void ir_attr_free(ir_attr *a) {
    free(a->name);
    free(a->s);
    tensor_release(&a->t);
    free(a->floats);
    free(a->ints);
    for (int64_t i = 0; a->strings && i < a->n; i++) free(a->strings[i]);
    free(a->strings);
    memset(a, 0, sizeof *a);
}

graft_status ir_attr_copy(ir_attr *dst, const ir_attr *src, graft_err *e) {
    memset(dst, 0, sizeof *dst);
    dst->type = src->type;
    dst->f = src->f;
    dst->i = src->i;
    dst->n = src->n;
    size_t n = src->n > 0 ? (size_t)src->n : 0;
    bool ok = (dst->name = ir_strdup(src->name)) != NULL;
    if (ok && src->s) ok = (dst->s = ir_strdup(src->s)) != NULL;
    if (ok && src->floats) ok = (dst->floats = malloc(sizeof(float) * (n ? n : 1))) != NULL;
    if (ok && src->floats) memcpy(dst->floats, src->floats, sizeof(float) * n);
    if (ok && src->ints) ok = (dst->ints = malloc(sizeof(int64_t) * (n ? n : 1))) != NULL;
    if (ok && src->ints) memcpy(dst->ints, src->ints, sizeof(int64_t) * n);
    if (ok && src->strings) ok = (dst->strings = calloc(n ? n : 1, sizeof(char *))) != NULL;
    for (size_t k = 0; ok && src->strings && k < n; k++)
        ok = (dst->strings[k] = ir_strdup(src->strings[k])) != NULL;
    if (ok && src->type == IR_ATTR_TENSOR && src->t.data)
        ok = tensor_clone(&dst->t, &src->t, NULL) == GRAFT_OK;
    if (ok) return GRAFT_OK;
    ir_attr_free(dst);
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory copying attribute '%s'",
                   src->name ? src->name : "");
}

void ir_node_free(ir_node *n) {
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    for (int i = 0; i < n->n_attrs; i++) ir_attr_free(&n->attrs[i]);
    free(n->attrs);
    free(n->bn_gamma);
    memset(n, 0, sizeof *n);
}

graft_status ir_node_clone(ir_node *dst, const ir_node *src, const int *map, graft_err *e) {
    ir_node n;
    memset(&n, 0, sizeof n);
    n.name = ir_strdup(src->name);
    n.op_type = ir_strdup(src->op_type);
    n.domain = ir_strdup(src->domain);
    n.inputs = malloc(sizeof(int) * (size_t)(src->n_in > 0 ? src->n_in : 1));
    n.outputs = malloc(sizeof(int) * (size_t)(src->n_out > 0 ? src->n_out : 1));
    n.attrs = calloc((size_t)(src->n_attrs > 0 ? src->n_attrs : 1), sizeof(ir_attr));
    n.opset = src->opset;
    n.op = src->op;
    n.loaded_channels = src->loaded_channels;
    graft_status st = GRAFT_OK;
    if (!n.name || !n.op_type || !n.domain || !n.inputs || !n.outputs || !n.attrs)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory copying node '%s'", src->name);
    for (int k = 0; st == GRAFT_OK && k < src->n_in; k++, n.n_in++)
        n.inputs[k] = src->inputs[k] >= 0 ? map[src->inputs[k]] : -1;
    for (int k = 0; st == GRAFT_OK && k < src->n_out; k++, n.n_out++)
        n.outputs[k] = src->outputs[k] >= 0 ? map[src->outputs[k]] : -1;
    for (int k = 0; st == GRAFT_OK && k < src->n_attrs; k++, n.n_attrs++)
        st = ir_attr_copy(&n.attrs[k], &src->attrs[k], e);
    if (st != GRAFT_OK) {
        ir_node_free(&n);
        return st;
    }
    *dst = n;
    return GRAFT_OK;
}

graft_status ir_value_clone(ir_graph *g, const ir_value *src, int *index, graft_err *e) {
    TRY(ir_add_value(g, src->name, index, e));
    ir_value *v = &g->values[*index];
    v->dtype = src->dtype;
    v->ndim = src->ndim;
    memcpy(v->dims, src->dims, sizeof v->dims);
    for (int d = 0; d < GRAFT_MAX_DIMS; d++) {
        if (!src->dim_names[d]) continue;
        v->dim_names[d] = ir_strdup(src->dim_names[d]);
        if (!v->dim_names[d]) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    if (!src->is_const) return GRAFT_OK;
    v->is_const = true;
    return tensor_clone(&v->data, &src->data, e);
}

static void value_free(ir_value *v) {
    free(v->name);
    for (int i = 0; i < GRAFT_MAX_DIMS; i++) free(v->dim_names[i]);
    tensor_release(&v->data);
}

void ir_graph_free(ir_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) value_free(&g->values[i]);
    free(g->values);
    for (int i = 0; i < g->n_nodes; i++) ir_node_free(&g->nodes[i]);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    for (int i = 0; i < g->n_opsets; i++) free(g->opsets[i].domain);
    free(g->opsets);
    for (int i = 0; i < g->n_metadata; i++) {
        free(g->metadata[i].key);
        free(g->metadata[i].value);
    }
    free(g->metadata);
    free(g->producer_name);
    free(g->producer_version);
    free(g->graph_name);
    free(g->name_table);
    memset(g, 0, sizeof *g);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static graft_status rehash(ir_graph *g, graft_err *e) {
    int cap = g->name_table_cap ? g->name_table_cap * 2 : 256;
    int *t = malloc(sizeof(int) * (size_t)cap);
    if (!t) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory growing the name table");
    for (int i = 0; i < cap; i++) t[i] = -1;
    for (int v = 0; v < g->n_values; v++) {
        uint64_t h = hash_str(g->values[v].name);
        int slot = (int)(h & (uint64_t)(cap - 1));
        while (t[slot] >= 0) slot = (slot + 1) & (cap - 1);
        t[slot] = v;
    }
    free(g->name_table);
    g->name_table = t;
    g->name_table_cap = cap;
    return GRAFT_OK;
}

int ir_find_value(const ir_graph *g, const char *name) {
    if (!g->name_table_cap || !name) return -1;
    int cap = g->name_table_cap;
    int slot = (int)(hash_str(name) & (uint64_t)(cap - 1));
    while (g->name_table[slot] >= 0) {
        int v = g->name_table[slot];
        if (strcmp(g->values[v].name, name) == 0) return v;
        slot = (slot + 1) & (cap - 1);
    }
    return -1;
}

graft_status ir_add_value(ir_graph *g, const char *name, int *index, graft_err *e) {
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        ir_value *nv = realloc(g->values, sizeof *nv * (size_t)cap);
        if (!nv) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding value '%s'", name);
        g->values = nv;
        g->cap_values = cap;
    }
    if ((g->n_values + 1) * 2 > g->name_table_cap) TRY(rehash(g, e));
    ir_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = ir_strdup(name);
    if (!v->name) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    v->ndim = -1;
    v->producer = -1;
    int cap = g->name_table_cap;
    int slot = (int)(hash_str(v->name) & (uint64_t)(cap - 1));
    while (g->name_table[slot] >= 0) slot = (slot + 1) & (cap - 1);
    g->name_table[slot] = g->n_values;
    *index = g->n_values++;
    return GRAFT_OK;
}

graft_status ir_add_node(ir_graph *g, const ir_node *node, int *index, graft_err *e) {
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        ir_node *nn = realloc(g->nodes, sizeof *nn * (size_t)cap);
        if (!nn) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding a node");
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = *node;
    if (index) *index = g->n_nodes;
    g->n_nodes++;
    return GRAFT_OK;
}

void ir_link_producers(ir_graph *g) {
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int n = 0; n < g->n_nodes; n++)
        for (int o = 0; o < g->nodes[n].n_out; o++)
            if (g->nodes[n].outputs[o] >= 0) g->values[g->nodes[n].outputs[o]].producer = n;
}

void ir_compact(ir_graph *g) {
    int w = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        if (g->nodes[n].dead) {
            ir_node_free(&g->nodes[n]);
            continue;
        }
        g->nodes[w++] = g->nodes[n];
    }
    g->n_nodes = w;
    ir_link_producers(g);
}

/* Kahn's algorithm, stable with respect to the file's order. */
graft_status ir_toposort(ir_graph *g, graft_err *e) {
    ir_link_producers(g);
    int n = g->n_nodes;
    int *pending = calloc((size_t)n + 1, sizeof(int));
    int *order = malloc(sizeof(int) * ((size_t)n + 1));
    char *done = calloc((size_t)n + 1, 1);
    if (!pending || !order || !done) {
        free(pending), free(order), free(done);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory sorting the graph");
    }
    for (int i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            const ir_value *val = &g->values[v];
            if (val->producer < 0 && !val->is_const && !val->is_graph_input) {
                free(pending), free(order), free(done);
                return err_set(e, GRAFT_E_MALFORMED_MODEL,
                               "node '%s' (%s) reads '%s', which no node, input or initializer "
                               "provides",
                               nd->name, nd->op_type, val->name);
            }
            if (val->producer >= 0) pending[i]++;
        }
    }
    int count = 0;
    /* Repeated scans keep the original order among ready nodes; graphs are small enough. */
    bool progress = true;
    while (count < n && progress) {
        progress = false;
        for (int i = 0; i < n; i++) {
            if (done[i] || pending[i] > 0) continue;
            done[i] = 1;
            order[count++] = i;
            progress = true;
            const ir_node *nd = &g->nodes[i];
            for (int j = 0; j < n; j++) {
                if (done[j]) continue;
                for (int k = 0; k < g->nodes[j].n_in; k++) {
                    int v = g->nodes[j].inputs[k];
                    for (int o = 0; v >= 0 && o < nd->n_out; o++)
                        if (nd->outputs[o] == v) pending[j]--;
                }
            }
        }
    }
    graft_status st = GRAFT_OK;
    if (count < n) {
        int bad = 0;
        while (bad < n && done[bad]) bad++;
        st = err_set(e, GRAFT_E_MALFORMED_MODEL, "the graph has a cycle through node '%s' (%s)",
                     g->nodes[bad].name, g->nodes[bad].op_type);
    } else {
        ir_node *sorted = malloc(sizeof *sorted * ((size_t)n + 1));
        if (!sorted)
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory sorting the graph");
        else {
            for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
            if (n > 0) memcpy(g->nodes, sorted, sizeof *sorted * (size_t)n); /* nodes may be NULL */
            free(sorted);
            ir_link_producers(g);
        }
    }
    free(pending), free(order), free(done);
    return st;
}

int64_t ir_opset_version(const ir_graph *g, const char *domain) {
    const char *d = domain && strcmp(domain, "ai.onnx") != 0 ? domain : "";
    for (int i = 0; i < g->n_opsets; i++) {
        const char *od = g->opsets[i].domain && strcmp(g->opsets[i].domain, "ai.onnx") != 0
                             ? g->opsets[i].domain
                             : "";
        if (strcmp(od, d) == 0) return g->opsets[i].version;
    }
    return -1;
}

const ir_attr *ir_node_attr(const ir_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t attr_i(const ir_node *n, const char *name, int64_t dflt) {
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->type == IR_ATTR_INT ? a->i : dflt;
}

float attr_f(const ir_node *n, const char *name, float dflt) {
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->type == IR_ATTR_FLOAT ? a->f : dflt;
}

const char *attr_s(const ir_node *n, const char *name, const char *dflt) {
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->type == IR_ATTR_STRING ? a->s : dflt;
}

int64_t attr_ints(const ir_node *n, const char *name, const int64_t **vals) {
    const ir_attr *a = ir_node_attr(n, name);
    if (!a || a->type != IR_ATTR_INTS) return -1;
    if (vals) *vals = a->ints;
    return a->n;
}

int64_t attr_floats(const ir_node *n, const char *name, const float **vals) {
    const ir_attr *a = ir_node_attr(n, name);
    if (!a || a->type != IR_ATTR_FLOATS) return -1;
    if (vals) *vals = a->floats;
    return a->n;
}

const tensor *attr_t(const ir_node *n, const char *name) {
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->type == IR_ATTR_TENSOR ? &a->t : NULL;
}
