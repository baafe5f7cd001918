/* ir.h: the graph IR: values (dtype, shape, constant data), nodes with parsed attributes, graphs.
 */
#ifndef GRAFT_GRAPH_IR_H
#define GRAFT_GRAPH_IR_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/tensor.h"

/* Attribute kinds, numbered as ONNX's AttributeProto.AttributeType. */
typedef enum ir_attr_type {
    IR_ATTR_UNDEFINED = 0,
    IR_ATTR_FLOAT = 1,
    IR_ATTR_INT = 2,
    IR_ATTR_STRING = 3,
    IR_ATTR_TENSOR = 4,
    IR_ATTR_GRAPH = 5,
    IR_ATTR_FLOATS = 6,
    IR_ATTR_INTS = 7,
    IR_ATTR_STRINGS = 8,
} ir_attr_type;

typedef struct ir_attr {
    char *name;
    ir_attr_type type;
    float f;
    int64_t i;
    char *s; /* NUL-terminated copy of the bytes */
    tensor t;
    int64_t n; /* count for FLOATS / INTS / STRINGS */
    float *floats;
    int64_t *ints;
    char **strings;
} ir_attr;

typedef struct ir_value {
    char *name;
    graft_dtype dtype;            /* GRAFT_DTYPE_UNDEFINED when not known */
    int ndim;                     /* -1 when the rank is not known */
    int64_t dims[GRAFT_MAX_DIMS]; /* -1 where a dimension is not known until run time */
    char *dim_names[GRAFT_MAX_DIMS];
    bool is_const; /* initializer, Constant output or folded: `data` holds the value */
    tensor data;
    int producer; /* index of the producing node, -1 for graph inputs and constants */
    bool is_graph_input;
    bool is_graph_output;
} ir_value;

typedef struct ir_node {
    char *name;
    char *op_type;
    char *domain;
    int n_in, n_out;
    int *inputs;  /* value indices; -1 marks an omitted optional input */
    int *outputs; /* value indices; -1 marks an omitted optional output */
    int n_attrs;
    ir_attr *attrs;
    int opset;               /* the model's opset version for this node's domain */
    const struct op_def *op; /* resolved at load time */
    bool dead;               /* removed by a pass; compacted away by ir_compact */
    /* Conv only, for channel pruning after the passes have rewritten the graph: */
    float *bn_gamma;         /* (output channels) gamma of the BatchNormalization folded into
                                this Conv, or NULL; channel pruning slices it with the filters */
    int64_t loaded_channels; /* output channels before the first channel pruning (0: unpruned) */
} ir_node;

typedef struct ir_kv {
    char *key;
    char *value;
} ir_kv;

typedef struct ir_opset {
    char *domain;
    int64_t version;
} ir_opset;

typedef struct ir_graph {
    ir_value *values;
    int n_values, cap_values;
    ir_node *nodes;
    int n_nodes, cap_nodes;
    int *inputs; /* graph inputs that are not initializers */
    int n_inputs;
    int *outputs;
    int n_outputs;
    ir_opset *opsets;
    int n_opsets;
    ir_kv *metadata;
    int n_metadata;
    int64_t ir_version;
    char *producer_name, *producer_version, *graph_name;
    /* name -> value index, open addressing */
    int *name_table;
    int name_table_cap;
} ir_graph;

void ir_graph_init(ir_graph *g);
void ir_graph_free(ir_graph *g);
void ir_attr_free(ir_attr *a);
void ir_node_free(ir_node *n);
/* A deep copy of src (dst is overwritten; freed with ir_attr_free). */
graft_status ir_attr_copy(ir_attr *dst, const ir_attr *src, graft_err *e);

/* A deep copy of node src into *dst whose inputs and outputs are map[src index] (map covers every
 * value src names; -1 entries stay -1). Not copied: the pruning record (bn_gamma). */
graft_status ir_node_clone(ir_node *dst, const ir_node *src, const int *map, graft_err *e);
/* A copy of value src (name, dtype, shape, dim names, constant data) appended to g: *index. */
graft_status ir_value_clone(ir_graph *g, const ir_value *src, int *index, graft_err *e);

/* Find a value by name (-1 when absent) or add a new one (its index). */
int ir_find_value(const ir_graph *g, const char *name);
graft_status ir_add_value(ir_graph *g, const char *name, int *index, graft_err *e);
/* Append a node (takes ownership of its fields); returns its index in *index. */
graft_status ir_add_node(ir_graph *g, const ir_node *node, int *index, graft_err *e);

/* Sort nodes so every node comes after the producers of its inputs; fails on cycles or on an
 * input that nothing produces. Also sets each value's `producer`. */
graft_status ir_toposort(ir_graph *g, graft_err *e);
/* Drop dead nodes (and renumber producers). */
void ir_compact(ir_graph *g);
/* Set `producer` of every value from the nodes. */
void ir_link_producers(ir_graph *g);

int64_t ir_opset_version(const ir_graph *g, const char *domain);

/* Attribute access. Absent attributes give the default (or -1 counts / NULL). */
const ir_attr *ir_node_attr(const ir_node *n, const char *name);
int64_t attr_i(const ir_node *n, const char *name, int64_t dflt);
float attr_f(const ir_node *n, const char *name, float dflt);
const char *attr_s(const ir_node *n, const char *name, const char *dflt);
int64_t attr_ints(const ir_node *n, const char *name, const int64_t **vals);
int64_t attr_floats(const ir_node *n, const char *name, const float **vals);
const tensor *attr_t(const ir_node *n, const char *name);

char *ir_strdup(const char *s);

#endif
