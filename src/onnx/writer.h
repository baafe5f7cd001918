/* writer.h: state shared by the ONNX writer (writer.c) and its opset upgrades (writer_opset.c). */
#ifndef GRAFT_ONNX_WRITER_H
#define GRAFT_ONNX_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "../graph/ir.h"
#include "onnx.pb-c.h"

/* Everything the writer allocates is recorded in `allocs` and freed at the end, so building the
 * protobuf-c structures needs no per-field cleanup. */
typedef struct writer {
    const ir_graph *g;
    const graft_export_options *opts;
    graft_err *e;
    int64_t opset; /* the ai.onnx opset every node is written at */
    void **allocs;
    size_t n_allocs, cap_allocs;
    Onnx__TensorProto **inits; /* capacity fixed up front, see writer.c */
    size_t n_inits, cap_inits;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    const char **read_name; /* per value: the name readers use (a Cast output for fp16) */
    char **new_names;       /* names the writer made up, kept unique against the graph's */
    size_t n_new, cap_new;
    int n_unknown_dims;
} writer;

void *w_alloc(writer *w, size_t size); /* zeroed; NULL (and the error set) when out of memory */
char *w_strdup(writer *w, const char *s);
/* A value name not used by the graph nor by the writer: base, base_1, base_2... */
char *w_unique_name(writer *w, const char *base);
/* Add an initializer holding t (copied) under a fresh name derived from base; returns the name. */
char *w_add_const(writer *w, const char *base, const tensor *t);
char *w_add_const_i64(writer *w, const char *base, const int64_t *vals, int64_t n);

/* Bring node proto np (written from node n) from n->opset up to w->opset. */
graft_status w_upgrade_node(writer *w, const ir_node *n, Onnx__NodeProto *np);

#endif
