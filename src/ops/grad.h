/* grad.h: backward rules of the ops a trainable head uses (Gemm, MatMul, Add, activations incl.
 * the fine-tuned blocks' HardSwish, HardSigmoid, Elu, Softplus, PRelu, Dropout,
 * LayerNormalization, Softmax), in f32 and f64, checked by finite differences. */
#ifndef GRAFT_TRAIN_GRAD_H
#define GRAFT_TRAIN_GRAD_H

#include "../graph/ir.h"

/* One backward call. `in` / `out` are the forward node's inputs and outputs as the forward ran
 * (NULL where omitted); `dout[i]` is d(loss)/d(out[i]) with out[i]'s shape (NULL where no
 * gradient flows: treated as zero); `din[i]` receives d(loss)/d(in[i]), pre-allocated with
 * in[i]'s dtype and shape, or NULL when that gradient is not wanted. A rule overwrites din[i]
 * (it never accumulates): the caller sums over a value's consumers. Every tensor must be f32 or
 * f64 (one dtype per call); rules compute in double. */
typedef struct grad_call {
    const ir_node *node;
    const tensor *const *in;
    int n_in;
    const tensor *const *out;
    int n_out;
    const tensor *const *dout; /* n_out entries */
    tensor *const *din;        /* n_in entries */
    graft_err *err;
} grad_call;

typedef graft_status (*grad_fn)(const grad_call *c);

/* The backward rule of an op type, or NULL when graft has none. */
grad_fn grad_find(const char *op_type);

/* The rules themselves (grad_find returns these). Notes on semantics:
 * - Dropout: training mode is the optional third input (training_mode) being true; then out[1]
 *   (the mask the forward drew) is required and dX = dY * mask / (1 - ratio), the ratio coming
 *   from input 1 (or the `ratio` attribute before opset 12, default 0.5). Otherwise dX = dY.
 * - Softmax uses out[0] (the forward's probabilities); axis semantics follow the node's opset.
 * - LayerNormalization recomputes mean and 1/std from X (the optional outputs are not needed).
 * - Relu's gradient at exactly 0 is 0, as in PyTorch.
 * - PRelu's slope broadcasts to X; its gradient is summed back to the slope's shape. */
graft_status grad_Gemm(const grad_call *c);
graft_status grad_MatMul(const grad_call *c);
graft_status grad_Add(const grad_call *c);
graft_status grad_Relu(const grad_call *c);
graft_status grad_Gelu(const grad_call *c);
graft_status grad_Tanh(const grad_call *c);
graft_status grad_Sigmoid(const grad_call *c);
graft_status grad_HardSigmoid(const grad_call *c);
graft_status grad_HardSwish(const grad_call *c);
graft_status grad_Elu(const grad_call *c);
graft_status grad_Softplus(const grad_call *c);
graft_status grad_PRelu(const grad_call *c);
graft_status grad_Dropout(const grad_call *c);
graft_status grad_LayerNormalization(const grad_call *c);
graft_status grad_Softmax(const grad_call *c);

#endif
