#!/usr/bin/env python3
"""Write the training-graph cases that tests/test_gpu_backward.c runs on the GPU against the CPU.

Each case is a small ONNX model (onnx helper API, seeded random weights, a free batch axis N):
its input `x` is scaled by a weight `p` first (so a gradient flows back through every op after
it), then come the ops under test with their own weights. The test builds the training graph
from `x` to the output, runs it (forward and every Backward node) on the device and on the CPU
with the same inputs and output gradient, and compares the output and every weight's gradient.
The ops are those of ResNet and BERT blocks, with the variants the backward kernels must get
right: strides, pads, dilations, groups and depthwise convolutions, pools with padding and
ceil_mode, broadcasting element-wise ops, batched and broadcast products, attention, LayerNorm,
and the ops that pick elements: Gather (a CLS token, duplicate and negative indices), Slice
(channel splits, steps of either sign), Pad (constant, negative pads).

cases.txt: '#' comments, then one line per case: name model from to flags
  flags  comma-separated ('-': none): keep-bn (load with keep_batchnorm, so BatchNormalization
         stays a node and trains its scale and bias), fallback-ok (a Backward node may run on
         the CPU without failing the case: a form the GPU rules leave to the reference)

Usage: python3 tools/make_backward_cases.py --out DIR
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Builder:
    """Nodes and seeded weights of one case."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def weight(self, shape, scale=None, positive=False):
        name = f"w{len(self.inits)}"
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        v = self.rng.standard_normal(shape).astype(np.float32) * s
        if positive:
            v = np.abs(v) + 0.5
        self.inits.append(numpy_helper.from_array(v.astype(np.float32), name))
        return name

    def const(self, values, dtype=np.int64):
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        self.n += 1
        outs = [f"t{self.n}_{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"n{self.n}", **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, x_shape, out, out_rank):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + list(x_shape))
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N"] + [None] * (out_rank - 1))
        g = helper.make_graph(self.nodes, "case", [x], [y], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def scaled_input(b, shape):
    """x * p with p broadcasting over the batch (the first op: its weight takes the gradient)."""
    return b.op("Mul", ["x", b.weight([1] + list(shape), scale=1.0)])


def conv_case(kernel, stride, pads, group, dilation=1, bias=True, c_in=8, c_out=8, size=9):
    def make(b):
        h = scaled_input(b, [c_in, size, size])
        w = b.weight([c_out, c_in // group, kernel, kernel])
        ins = [h, w] + ([b.weight([c_out], scale=0.1)] if bias else [])
        h = b.op("Conv", ins, kernel_shape=[kernel, kernel], strides=[stride, stride], pads=pads,
                 group=group, dilations=[dilation, dilation])
        return b.model([c_in, size, size], b.op("Relu", [h]), 4)
    return make


def conv1d_case(b):
    h = scaled_input(b, [4, 12])
    h = b.op("Conv", [h, b.weight([6, 4, 3]), b.weight([6], scale=0.1)], kernel_shape=[3],
             strides=[2], pads=[1, 1])
    return b.model([4, 12], h, 3)


def pool_case(op, **attrs):
    def make(b):
        h = scaled_input(b, [4, 9, 9])
        h = b.op("Conv", [h, b.weight([4, 4, 3, 3])], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        return b.model([4, 9, 9], b.op(op, [h], **attrs), 4)
    return make


def basic_block(b):
    """ResNet's basic block with a strided 1x1 shortcut, BN kept, global pool and a Gemm."""
    h = scaled_input(b, [8, 8, 8])
    def conv_bn(h, c_in, c_out, k, s, p):
        h = b.op("Conv", [h, b.weight([c_out, c_in, k, k])], kernel_shape=[k, k],
                 strides=[s, s], pads=[p] * 4)
        return b.op("BatchNormalization", [h, b.weight([c_out], positive=True),
                                           b.weight([c_out], scale=0.1),
                                           b.weight([c_out], scale=0.1),
                                           b.weight([c_out], positive=True)], epsilon=1e-5)
    y = b.op("Relu", [conv_bn(h, 8, 16, 3, 2, 1)])
    y = conv_bn(y, 16, 16, 3, 1, 1)
    y = b.op("Relu", [b.op("Add", [y, conv_bn(h, 8, 16, 1, 2, 0)])])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    y = b.op("Gemm", [y, b.weight([10, 16]), b.weight([10], scale=0.1)], transB=1)
    return b.model([8, 8, 8], y, 2)


def gemm_case(b):
    h = b.op("Flatten", [scaled_input(b, [3, 4, 5])], axis=1)
    h = b.op("Gemm", [h, b.weight([60, 32]), b.weight([32], scale=0.1)], alpha=0.5)
    h = b.op("Relu", [h])
    h = b.op("Gemm", [h, b.weight([7, 32]), b.weight([1, 7], scale=0.1)], transB=1, beta=2.0)
    return b.model([3, 4, 5], h, 2)


def broadcast_case(b):
    """Sub, Mul and Div with weights broadcasting over several axes, Sqrt, Pow, ReduceMean."""
    h = scaled_input(b, [4, 6])
    h = b.op("Sub", [h, b.weight([6])])
    h = b.op("Mul", [h, b.weight([4, 1])])
    h = b.op("Div", [h, b.weight([1, 6], positive=True)])
    h = b.op("Add", [b.op("Pow", [h, b.const(2.0, np.float32)]), b.weight([4, 6], positive=True)])
    h = b.op("Sqrt", [h])
    h = b.op("Tanh", [h])
    h = b.op("Sigmoid", [b.op("Mul", [h, b.weight([4, 6])])])
    h = b.op("ReduceMean", [h], axes=[1], keepdims=1)
    return b.model([4, 6], h, 3)


def encoder_layer(b):
    """A BERT layer as the exporters write it: products, heads by Reshape and Transpose, scaled
    softmax attention with an additive mask, erf GELU, residual Add + LayerNormalization."""
    s, d, heads = 5, 16, 2
    x = scaled_input(b, [s, d])
    def heads_of(t):
        t = b.op("Reshape", [t, b.const([0, 0, heads, d // heads])])
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])
    def linear(t, n_in, n_out):
        return b.op("Add", [b.op("MatMul", [t, b.weight([n_in, n_out])]),
                            b.weight([n_out], scale=0.1)])
    q, k, v = (heads_of(linear(x, d, d)) for _ in range(3))
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.op("Div", [scores, b.const(np.sqrt(d / heads), np.float32)])
    mask = np.zeros([1, 1, 1, s], np.float32)
    mask[..., -1] = -10000.0
    scores = b.op("Add", [scores, b.const(mask, np.float32)])
    ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), b.const([0, 0, d])])
    def add_norm(t, res):
        return b.op("LayerNormalization", [b.op("Add", [t, res]), b.weight([d], positive=True),
                                           b.weight([d], scale=0.1)], axis=-1, epsilon=1e-12)
    h = add_norm(linear(ctx, d, d), x)
    u = linear(h, d, 2 * d)
    gelu = b.op("Mul", [b.op("Mul", [u, b.const(0.5, np.float32)]),
                        b.op("Add", [b.op("Erf", [b.op("Div", [u, b.const(np.sqrt(2.0), np.float32)])]),
                                     b.const(1.0, np.float32)])])
    h = add_norm(linear(gelu, 2 * d, d), h)
    h = b.op("Squeeze", [b.op("Unsqueeze", [h, b.const([1])]), b.const([1])])
    return b.model([s, d], h, 3)


def batched_matmul(b):
    """MatMul of two activations with a broadcast batch axis, and a 3-D by 2-D product."""
    h = scaled_input(b, [3, 4, 5])
    other = b.op("Mul", [b.op("Transpose", [h], perm=[0, 1, 3, 2]), b.weight([1, 1, 5, 4])])
    h = b.op("MatMul", [h, b.op("ReduceMean", [other], axes=[1], keepdims=1)])
    h = b.op("MatMul", [h, b.weight([4, 6])])
    return b.model([3, 4, 5], h, 4)


def gather_cls(b):
    """BERT's CLS token: Gather axis 1 with a scalar index 0 on (N, S, H), then a pooler Gemm."""
    h = scaled_input(b, [5, 8])
    h = b.op("Gather", [h, b.const(0)], axis=1)
    h = b.op("Gemm", [h, b.weight([6, 8]), b.weight([6], scale=0.1)], transB=1)
    return b.model([5, 8], b.op("Tanh", [h]), 2)


def gather_rows_dup(b):
    """Gather axis 1 with 2-D int32 indices holding a duplicate and a negative index, then Gather
    on the last axis (rows of one element) with int64 repeats, and a MatMul with a weight."""
    h = scaled_input(b, [6, 4])
    h = b.op("Gather", [h, b.const([[2, -1], [2, 0], [5, -4]], np.int32)], axis=1)
    h = b.op("Gather", [h, b.const([3, 0, 3, -1, 1])], axis=-1)
    return b.model([6, 4], b.op("MatMul", [h, b.weight([5, 4])]), 4)


def slice_channels(b):
    """ShuffleNet's channel split (both halves of NCHW's channels, the second with a clamped end),
    a step of 2 on H, a negative step on W (negative axis), then Concat and a 1x1 Conv."""
    h = scaled_input(b, [8, 6, 6])
    lo = b.op("Slice", [h, b.const([0]), b.const([4]), b.const([1])])
    hi = b.op("Slice", [h, b.const([4]), b.const([1000]), b.const([1])])
    lo = b.op("Slice", [lo, b.const([-1, 0]), b.const([-100, 6]), b.const([-1, 2]),
                        b.const([-1, 2])])
    hi = b.op("Slice", [hi, b.const([1]), b.const([6]), b.const([2]), b.const([2])])
    h = b.op("Concat", [lo, hi], axis=1)
    h = b.op("Conv", [h, b.weight([8, 8, 1, 1]), b.weight([8], scale=0.1)], kernel_shape=[1, 1])
    return b.model([8, 6, 6], b.op("Relu", [h]), 4)


def pad_constant(b):
    """Pad in constant mode (pads and value as inputs) with asymmetric pads, one begin and one
    end negative (crops), then a 3x3 Conv."""
    h = scaled_input(b, [4, 5, 5])
    h = b.op("Pad", [h, b.const([0, 1, 2, -1, 0, 0, -1, 3]), b.const(0.5, np.float32)],
             mode="constant")
    h = b.op("Conv", [h, b.weight([4, 5, 3, 3])], kernel_shape=[3, 3])
    return b.model([4, 5, 5], b.op("Relu", [h]), 4)


CASES = [
    ("conv3x3_bias", conv_case(3, 1, [1, 1, 1, 1], 1), ""),
    ("conv3x3_s2_nobias", conv_case(3, 2, [1, 1, 1, 1], 1, bias=False), ""),
    ("conv1x1_s2", conv_case(1, 2, [0, 0, 0, 0], 1, c_out=16), ""),
    ("conv7x7_s2_stem", conv_case(7, 2, [3, 3, 3, 3], 1, c_in=3, c_out=8, size=16), ""),
    ("conv_grouped", conv_case(3, 1, [1, 1, 1, 1], 2), ""),
    ("conv_depthwise", conv_case(3, 2, [1, 1, 1, 1], 8), ""),
    ("conv_dilated", conv_case(3, 1, [2, 2, 2, 2], 1, dilation=2), ""),
    ("conv_asym_pads", conv_case(3, 2, [0, 0, 1, 1], 1), "fallback-ok"),
    ("conv1d", conv1d_case, "fallback-ok"),
    ("maxpool3_s2_p1", pool_case("MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                                 pads=[1, 1, 1, 1]), ""),
    ("maxpool2_ceil", pool_case("MaxPool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), ""),
    ("avgpool3_s2_p1", pool_case("AveragePool", kernel_shape=[3, 3], strides=[2, 2],
                                 pads=[1, 1, 1, 1]), ""),
    ("avgpool3_s2_p1_incl", pool_case("AveragePool", kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[1, 1, 1, 1], count_include_pad=1), ""),
    ("global_avgpool", pool_case("GlobalAveragePool"), ""),
    ("basic_block_bn", basic_block, "keep-bn"),
    ("basic_block_folded", basic_block, ""),
    ("gemm_alpha_beta", gemm_case, ""),
    ("broadcast_eltwise", broadcast_case, ""),
    ("encoder_layer", encoder_layer, ""),
    ("batched_matmul", batched_matmul, ""),
    ("gather_cls", gather_cls, ""),
    ("gather_rows_dup", gather_rows_dup, ""),
    ("slice_channels", slice_channels, ""),
    ("pad_constant", pad_constant, ""),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lines = ["# name model from to flags (tools/make_backward_cases.py)"]
    for i, (name, make, flags) in enumerate(CASES):
        b = Builder(1000 + i)
        m = make(b)
        path = os.path.join(args.out, name + ".onnx")
        onnx.save(m, path)
        lines.append(f"{name} {name}.onnx x {m.graph.output[0].name} {flags or '-'}")
    with open(os.path.join(args.out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"make_backward_cases: {len(CASES)} cases in {args.out}")


if __name__ == "__main__":
    main()
