/* train_graph.h: the trainable part of a model (the nodes from a freeze point to an output) and
 * its backward pass as one IR graph that graph/exec runs (docs/training.md "The training
 * graph").
 *
 * The trainable part: the model's nodes needed to compute `to` that depend (transitively) on
 * `from`. Parameters: float constants those nodes read with more than one element, except
 * shape-like inputs (op_input_on_host) and BatchNormalization's running mean and var (inputs 3
 * and 4); they become graph inputs, so no backend prepacks them and the caller owns (and updates)
 * them. Every other constant stays a constant of the training graph. Side inputs: the other
 * non-constant values trainable nodes read that the trainable part does not compute (a BERT
 * attention mask made from a model input); the caller supplies them.
 *
 * Graph inputs, in order: `from`, the side inputs, the parameters, then d_<to> (d(loss)/d(to),
 * `to`'s shape). Outputs: `to`, then d(loss)/d(parameter) for each parameter, in the parameters'
 * order, named grad/<parameter>, then grad/<from> when asked (options.grad_from: the gradient a
 * model part before `from` would need; a head's training graph gives it to the blocks). Values keep
 * the model's names. Without a backward pass (train_graph_options.forward_only) there is no d_<to>
 * input and `to` is the only output. */
#ifndef GRAFT_TRAIN_TRAIN_GRAPH_H
#define GRAFT_TRAIN_TRAIN_GRAPH_H

#include "../graph/ir.h"

typedef struct train_graph_options {
    bool forward_only;  /* the trainable part alone: for evaluation and finite differences */
    bool grad_from;     /* also output d(loss)/d(from), after the parameters' gradients */
    bool scalar_params; /* one-element float constants are parameters too (a head's bias of one
                           output); by default they stay constants (epsilons, GELU's factors) */
    const char *const *param_names; /* float constants with these names are parameters whatever
                                       their size (a head's one-output bias above blocks) */
    int n_param_names;
    /* GRAFT_DTYPE_BF16 or F16: emulate that precision by rounding `from`, every parameter and
     * every f32 output of a trainable node through a Cast there and back (the model's names go
     * to the rounded values; Cast's backward rounds the gradients at the same points). Side
     * inputs stay exact (an additive attention mask's extremes would overflow). 0: none. */
    graft_dtype round_to;
} train_graph_options;

typedef struct train_graph {
    ir_graph g;
    int from, to, d_to; /* value indices in g (d_to -1 when forward_only) */
    int grad_from;      /* d(loss)/d(from) (options.grad_from; else -1) */
    int n_side, n_params;
    int *side;         /* (n_side) value indices in g, in input order */
    int *params;       /* (n_params) value indices in g, in input order */
    int *grads;        /* (n_params) value indices in g of the parameters' gradients */
    int *model_side;   /* (n_side) the same values' indices in the model graph */
    int *model_params; /* (n_params) in the model graph: their data is the initial value */
    int n_forward_nodes, n_backward_nodes; /* Backward nodes (Add nodes summing not counted) */
} train_graph;

/* Build tg from `model` (a loaded, shape-inferred, topologically sorted graph; it is not
 * changed). Errors name the tensor or node: unknown names, `from` not upstream of `to`, a node
 * on the gradient's path whose op has no backward rule. o NULL: defaults. */
graft_status train_graph_build(const ir_graph *model, const char *from, const char *to,
                               const train_graph_options *o, train_graph *tg, graft_err *e);
/* Gradients that accumulate where they are kept (a device): one more input per parameter after
 * d_<to>, acc/<parameter> (the sum so far, the parameter's shape), and output 1 + i becomes
 * grad/<parameter> + acc/<parameter> (grad_acc/<parameter>), which the caller copies back over
 * the sum. A graph with a backward pass only; tg->grads then name the sums. */
graft_status train_graph_accumulate_grads(train_graph *tg, graft_err *e);
void train_graph_free(train_graph *tg);

#endif
