/* fusion_bert_match.h: matching BERT's fused groups (src/graph/fusion_bert_match.c), shared by the
 * CUDA backend's (src/cuda/cuda_fuse_bert.c) and the CPU's (src/cpu/dnnl_fuse_bert.c) tables. */
#ifndef GRAFT_GRAPH_FUSION_BERT_MATCH_H
#define GRAFT_GRAPH_FUSION_BERT_MATCH_H

#include <stdbool.h>

#include "ir.h"

/* A live `op` node with n_in inputs and at least one output. */
bool fb_is_op(const ir_node *n, const char *op, int n_in);
/* The first live node after `after` that reads value v, or -1. */
int fb_next_reader(const ir_graph *g, int v, int after);
/* Node i's only output (other outputs absent), or -1. */
int fb_sole_output(const ir_graph *g, int i);
/* The sole reader of v (v read once, not a graph output) when it is a live `op` node with n_in
 * inputs, or -1. */
int fb_sole_reader(const ir_graph *g, const int *readers, int v, int after, const char *op,
                   int n_in);
bool fb_is_const_value(const ir_graph *g, int v);
bool fb_is_const_scalar(const ir_graph *g, int v);
/* The input of a two-input node that is not v, or -1 (also when both are v). */
int fb_other_input(const ir_node *n, int v);
/* Whether Add(a, b) may broadcast, judging by the shapes known at load time. */
bool fb_may_broadcast(const ir_graph *g, int a, int b);
/* Every member runs on the planning backend. */
bool fb_all_on_dev(const unsigned char *on_dev, const int *members, int n);

/* fusion_rule matchers (src/graph/fusion_groups.h): MatMul(A, W) with W a constant 2-D weight
 * -> Add(., bias) with a constant 1-D bias of W's columns (2 members); the same followed by a
 * GELU: a Gelu node (3 members) or PyTorch's erf chain Div(v, c0), Erf, Add(., c1), Mul(v, .),
 * Mul(., c2) (7 members). */
int fusion_match_matmul_bias(const ir_graph *g, int first, const unsigned char *on_dev,
                             const int *readers, int *members, int max);
int fusion_match_matmul_bias_gelu(const ir_graph *g, int first, const unsigned char *on_dev,
                                  const int *readers, int *members, int max);
/* The erf chain reading v (the bias Add's output, node `add`): members m[0..5), or false. */
bool fusion_match_erf_chain(const ir_graph *g, const int *readers, int add, int v, int *m);

#endif
