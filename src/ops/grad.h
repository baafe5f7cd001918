/* grad.h: backward rules of the ops a trainable head and fine-tuned last blocks use (Gemm,
 * MatMul, Conv, BatchNormalization, pools, element-wise ops and activations, LayerNormalization,
 * Softmax, reductions, shape and data movement), in f32 and f64, checked by finite differences. */
#ifndef GRAFT_OPS_GRAD_H
#define GRAFT_OPS_GRAD_H

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
 * - PRelu's slope broadcasts to X; its gradient is summed back to the slope's shape.
 * - Conv: 1-D to 3-D, with the forward's strides, pads / auto_pad, dilations and group; dX, dW and
 *   (when B is given) dB.
 * - BatchNormalization: inference mode (the running mean and var normalise) unless the node asks
 *   for batch statistics: training_mode = 1 from opset 14, or (before opset 14) any of the
 *   statistics outputs 1..4 being present, as the forward reads it. Training mode follows
 *   PyTorch: biased batch variance, dX through the batch mean and variance; the mean and var
 *   inputs then get a zero gradient, and gradients arriving at the statistics outputs are
 *   ignored (PyTorch does not differentiate its running statistics). In inference mode dMean and
 *   dVar are the exact derivatives, should a caller ask for them. Per-activation parameters
 *   (spatial=0, opsets 7 and 8) are supported in both modes.
 * - MaxPool sends each dY to the tap the forward picked: the first maximum in scan order (ties
 *   go to the earliest tap; a NaN first tap wins). AveragePool divides as the forward does
 *   (count_include_pad counts the padded taps inside pads, never those beyond ceil_mode's end).
 *   GlobalMaxPool (no forward kernel in graft yet) picks the first maximum in memory order.
 * - Clip follows PyTorch's clamp: dX = dY where min <= x <= max (the bounds pass the gradient;
 *   hardtanh would stop it there), 0 outside; min and max (opset 11+ inputs) get the sums of dY
 *   where x < min, resp. x > max (min > max: all of it goes to max, which Y equals).
 * - Pow follows PyTorch: no base gradient where the exponent is 0, no exponent gradient where
 *   the base is 0 and the exponent >= 0; the exponent's gradient is computed only when asked
 *   (it may be an integer tensor, which takes none).
 * - Shape inputs (Reshape's shape, Squeeze/Unsqueeze axes, Slice's starts..steps, ReduceMean's
 *   axes, Expand's shape) and Gather's indices take no gradient: pass NULL for them; neither
 *   does Where's condition (input 0). Split's absent output gradients count as zeros. */
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
/* Float to float only: dX = dY converted to X's dtype (any float dtype). */
graft_status grad_Cast(const grad_call *c);
graft_status grad_LayerNormalization(const grad_call *c);
graft_status grad_Softmax(const grad_call *c);
graft_status grad_Conv(const grad_call *c);
graft_status grad_BatchNormalization(const grad_call *c);
graft_status grad_MaxPool(const grad_call *c);
graft_status grad_AveragePool(const grad_call *c);
graft_status grad_GlobalAveragePool(const grad_call *c);
graft_status grad_GlobalMaxPool(const grad_call *c);
graft_status grad_Mul(const grad_call *c);
graft_status grad_Sub(const grad_call *c);
graft_status grad_Div(const grad_call *c);
graft_status grad_Pow(const grad_call *c);
graft_status grad_Sqrt(const grad_call *c);
graft_status grad_Erf(const grad_call *c);
graft_status grad_Neg(const grad_call *c);
graft_status grad_Exp(const grad_call *c);
graft_status grad_Clip(const grad_call *c);
graft_status grad_ReduceMean(const grad_call *c);
graft_status grad_ReduceSum(const grad_call *c);
graft_status grad_Identity(const grad_call *c);
graft_status grad_Flatten(const grad_call *c);
graft_status grad_Reshape(const grad_call *c);
graft_status grad_Squeeze(const grad_call *c);
graft_status grad_Unsqueeze(const grad_call *c);
graft_status grad_Transpose(const grad_call *c);
graft_status grad_Slice(const grad_call *c);
graft_status grad_Pad(const grad_call *c);
graft_status grad_Concat(const grad_call *c);
graft_status grad_Gather(const grad_call *c);
graft_status grad_Expand(const grad_call *c);
graft_status grad_Split(const grad_call *c);
graft_status grad_Where(const grad_call *c);

#endif
