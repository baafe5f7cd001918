/* channel_groups.h: which convolution output channels channel pruning may remove together (groups
 * tied through residual Adds, Concats and depthwise convolutions) and which of them it removes. */
#ifndef GRAFT_PRUNE_CHANNEL_GROUPS_H
#define GRAFT_PRUNE_CHANNEL_GROUPS_H

#include "prune.h"

/* A run of channels along a tensor's channel axis (axis 1) owned by one group; group -1: channels
 * no prunable group owns (they are always kept). */
typedef struct chan_seg {
    int group;
    int64_t len;
} chan_seg;

/* A value's channel axis as segments, in order; n == 0: the value's channels are not tracked. */
typedef struct chan_segs {
    int n;
    chan_seg *s;
} chan_segs;

/* What a node does with tracked channels (bit set). */
enum {
    CHAN_SOURCE = 1,    /* Conv whose output channels start a group (weights sliced on axis 0) */
    CHAN_DEPTHWISE = 2, /* depthwise Conv tied to its input's channels (axis 0, group shrinks) */
    CHAN_CONV_IN = 4,   /* Conv reading tracked channels (weights sliced on axis 1) */
    CHAN_BN = 8,        /* unfolded BatchNormalization (its parameters sliced) */
    CHAN_ELTWISE = 16,  /* element-wise op with a per-channel constant (the constant sliced) */
    CHAN_FC = 32,       /* Gemm/MatMul reading flattened channels (its input features sliced) */
};

typedef struct chan_role {
    int roles;
    int const_input;    /* CHAN_ELTWISE: which input is the constant */
    int fc_value;       /* CHAN_FC: the value whose channels were flattened */
    int64_t fc_spatial; /* CHAN_FC: features per channel after the flatten */
} chan_role;

typedef struct chan_plan {
    int n_values, n_nodes;
    chan_segs *segs;  /* per value */
    chan_role *roles; /* per node */
    int n_groups;
    int *parent;     /* union-find over groups */
    int64_t *size;   /* channels of each group */
    bool *bad;       /* a root that cannot be pruned (a reader it cannot shrink, or excluded) */
    bool *excluded;  /* a root left dense because a member is excluded by the options */
    bool **keep;     /* per root: which channels stay (NULL: all) */
    int64_t *loaded; /* channels of each group as the model was loaded (before any pruning) */
    bool *joined;    /* a root a residual Add ties to another group (out of the inner scope) */
    int groups_total, groups_pruned, groups_unprunable, groups_excluded;
    int groups_out_of_scope;  /* prunable roots the options' scope leaves alone */
    int64_t channels_removed; /* by this plan, summed over pruned groups (a tied group once) */
    int64_t channels_loaded;  /* over the groups this plan may prune, as loaded */
    int64_t channels_gone;    /* of those, removed by earlier calls and this plan together */
} chan_plan;

/* Analyse g and choose the channels to remove for options o (sparsity, importance, scope,
 * exclusions): each group loses round(sparsity * C) of the C channels it had when loaded, less
 * what earlier calls removed (at least one channel stays). Deterministic: the same graph and
 * options give the same plan. Free with chan_plan_free. */
graft_status chan_plan_build(const ir_graph *g, const graft_prune_options *o, chan_plan *p,
                             graft_err *e);
void chan_plan_free(chan_plan *p);
/* Root of group id. */
int chan_group_root(const chan_plan *p, int group);
/* Which channels of value v stay: *keep malloc'ed with *len entries, *kept of them true; *keep
 * NULL when v is not tracked or keeps every channel. */
graft_status chan_value_keep(const chan_plan *p, int v, bool **keep, int64_t *len, int64_t *kept,
                             graft_err *e);

#endif
