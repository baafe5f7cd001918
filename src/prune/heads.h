/* heads.h: attention heads and feed-forward neurons of BERT-style encoders: the matched blocks,
 * the units chosen for removal, and the rewrite (shared by heads.c, heads_match.c and tests). */
#ifndef GRAFT_PRUNE_HEADS_H
#define GRAFT_PRUNE_HEADS_H

#include "prune.h"

/* One self-attention block: Q/K/V projections (MatMul x W + bias) reshaped to (b, s, heads,
 * head_dim), attention, merged back by ctx_reshape and projected by `out`. */
typedef struct heads_attn {
    int proj[3];     /* Q, K, V MatMul nodes (weight (in, hidden)) */
    int bias[3];     /* their bias constants (value index), -1 when there is none */
    int reshape[3];  /* the split Reshape of Q, K, V */
    int ctx_reshape; /* the merge Reshape back to (b, s, hidden) */
    int out;         /* output projection MatMul (weight (hidden, out)) */
    int n_heads, head_dim;
    bool *keep; /* n_heads flags */
    int n_kept;
} heads_attn;

/* One feed-forward block: up MatMul (+ bias), an element-wise activation, down MatMul. */
typedef struct heads_ffn {
    int up, down; /* MatMul nodes: weights (hidden, n) and (n, out) */
    int bias;     /* the up projection's bias constant, -1 when there is none */
    int n;        /* neurons */
    bool *keep;
    int n_kept;
} heads_ffn;

typedef struct heads_plan {
    heads_attn *attn;
    int n_attn;
    heads_ffn *ffn;
    int n_ffn;
    int skipped_attn; /* Softmax nodes whose block did not match the pattern or is excluded */
    int skipped_ffn;  /* matched feed-forward blocks left alone because the options exclude them */
} heads_plan;

/* Keep flags for n units by importance: the round(sparsity * n) least important go (ties: the
 * lower index first), at least one stays. Returns the number kept. */
int heads_select(const double *importance, int n, double sparsity, bool *keep);

/* Find the blocks of g and choose what to remove (g is not changed). */
graft_status heads_plan_build(const ir_graph *g, const graft_prune_options *o, heads_plan *p,
                              graft_err *e);
void heads_plan_free(heads_plan *p);

/* Per-unit importance (norm of the unit's weights) of a block, into imp (n_heads / n entries). */
void heads_attn_importance(const ir_graph *g, const heads_attn *a, graft_importance how,
                           double *imp);
void heads_ffn_importance(const ir_graph *g, const heads_ffn *f, graft_importance how, double *imp);

/* Position pos of a Reshape's target shape: where it lives (a constant value and the element in
 * it, reached through a Concat of 1-D pieces when the shape is built at run time). Returns false
 * when that element is not a constant. */
typedef struct heads_shape_ref {
    int shape;  /* the Reshape's shape input */
    int concat; /* the Concat node building it, -1 when the shape is itself constant */
    int piece;  /* the Concat input holding pos (when concat >= 0) */
    int value;  /* the constant holding pos */
    int64_t index, element;
} heads_shape_ref;
bool heads_shape_elem(const ir_graph *g, int reshape, int pos, heads_shape_ref *r);

#endif
