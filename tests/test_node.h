/* test_node.h: building an ir_node with attributes by hand, for tests that call op inference,
 * kernels or backward rules directly. */
#ifndef GRAFT_TEST_NODE_H
#define GRAFT_TEST_NODE_H

#include <string.h>

#include "../src/graph/ir.h"

#define TEST_NODE_MAX_ATTRS 8

typedef struct test_node {
    ir_node node;
    ir_attr attrs[TEST_NODE_MAX_ATTRS];
    int64_t ints[TEST_NODE_MAX_ATTRS][8]; /* storage of INTS attributes */
} test_node;

static inline void node_init(test_node *t, const char *op, int opset) {
    memset(t, 0, sizeof *t);
    t->node.name = (char *)"test";
    t->node.op_type = (char *)op;
    t->node.opset = opset;
    t->node.attrs = t->attrs;
}

static inline ir_attr *node_attr(test_node *t, const char *name, ir_attr_type type) {
    ir_attr *a = &t->attrs[t->node.n_attrs++];
    a->name = (char *)name;
    a->type = type;
    return a;
}

static inline void set_int(test_node *t, const char *name, int64_t v) {
    node_attr(t, name, IR_ATTR_INT)->i = v;
}

static inline void set_float(test_node *t, const char *name, float v) {
    node_attr(t, name, IR_ATTR_FLOAT)->f = v;
}

static inline void set_str(test_node *t, const char *name, const char *v) {
    node_attr(t, name, IR_ATTR_STRING)->s = (char *)v;
}

/* An INTS attribute of at most 8 values, copied into the node. */
static inline void set_ints(test_node *t, const char *name, int n, const int64_t *v) {
    int slot = t->node.n_attrs;
    ir_attr *a = node_attr(t, name, IR_ATTR_INTS);
    memcpy(t->ints[slot], v, (size_t)n * sizeof(int64_t));
    a->ints = t->ints[slot];
    a->n = n;
}

#endif
