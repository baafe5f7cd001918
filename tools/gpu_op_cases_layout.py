"""GPU op cases for channels-last activations (src/graph/layout_plan.c, src/cuda/cuda_layout.c):
conv chains whose inner activations the CUDA backend keeps NHWC in fp16/bf16 (fp32 stays NCHW),
with NCHW graph inputs and outputs at the edges, pools, GlobalAveragePool, fused groups and a
broadcasting Add that must run on NCHW copies. Registered into gpu_op_cases.CASES."""

import numpy as np
from gpu_op_cases import case
from gpu_op_cases_fused import _fuse_conv_weights


def _conv(g, x, x_shape, w_shape, prefix, **attrs):
    return g.node("Conv", [x] + _fuse_conv_weights(g, x_shape, w_shape, True, prefix=prefix),
                  [prefix + "out"], **attrs)


def _symbolic(g, dims):
    """Make the last input's dims symbolic where dims names them (None: keep the size)."""
    shape = g.inputs[-1].type.tensor_type.shape
    for d, name in zip(shape.dim, dims):
        if name:
            d.ClearField("dim_value")
            d.dim_param = name


@case("nhwc_resnet_block", tol="chain")
def _(g):
    # stem conv reads an NCHW input; Conv -> Relu, Conv -> Add -> Relu in NHWC (the shortcut is
    # the first Relu's output); the last Conv writes the NCHW graph output.
    x = g.input("x", "T", g.randn(2, 16, 20, 20))
    a = g.node("Relu", [_conv(g, x, None, (32, 16, 3, 3), "c1_", pads=[1, 1, 1, 1])], ["a"])
    b = _conv(g, a, None, (32, 32, 3, 3), "c2_", pads=[1, 1, 1, 1])
    s = g.node("Relu", [g.node("Add", [b, a], ["s0"])], ["s"])
    _conv(g, s, None, (8, 32, 1, 1), "c3_")
    g.nodes[-1].output[0] = "y"
    g.output("y", "T")


@case("nhwc_stem_pool_gap", tol="chain")
def _(g):
    # a 3-channel stem (7x7, stride 2), MaxPool and AveragePool in NHWC, then GlobalAveragePool
    # reads NHWC and Flatten its (N, C, 1, 1) output.
    x = g.input("x", "T", g.randn(2, 3, 48, 48))
    h = g.node("Relu", [_conv(g, x, None, (16, 3, 7, 7), "c1_", pads=[3, 3, 3, 3],
                              strides=[2, 2])], ["h"])
    p = g.node("MaxPool", [h], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    q = g.node("Relu", [_conv(g, p, None, (24, 16, 3, 3), "c2_", pads=[1, 1, 1, 1])], ["q"])
    r = g.node("AveragePool", [q], ["r"], kernel_shape=[2, 2], strides=[2, 2])
    s = g.node("Relu", [_conv(g, r, None, (40, 24, 1, 1), "c3_")], ["s"])
    t = g.node("GlobalAveragePool", [s], ["t"])
    g.node("Flatten", [t], ["y"])
    g.output("y", "T")


@case("nhwc_mobilenet_block", tol="chain")
def _(g):
    # MobileNetV2: pointwise Conv -> Clip, depthwise Conv -> Clip, pointwise Conv -> Add with a
    # shortcut Conv, then Sigmoid (layout-free) and a Conv back to NCHW.
    x = g.input("x", "T", g.randn(1, 16, 14, 14, scale=2.0))
    lo = g.init("min", "T", np.array(0.0, np.float32))
    hi = g.init("max", "T", np.array(6.0, np.float32))
    a = g.node("Clip", [_conv(g, x, None, (48, 16, 1, 1), "pw1_"), lo, hi], ["a"])
    b = g.node("Clip", [_conv(g, a, None, (48, 1, 3, 3), "dw_", pads=[1, 1, 1, 1], group=48),
                        lo, hi], ["b"])
    c = _conv(g, b, None, (16, 48, 1, 1), "pw2_")
    d = g.node("Add", [_conv(g, x, None, (16, 16, 1, 1), "sc_"), c], ["d"])
    e = g.node("Sigmoid", [d], ["e"])
    _conv(g, e, None, (4, 16, 3, 3), "out_", pads=[1, 1, 1, 1])
    g.nodes[-1].output[0] = "y"
    g.output("y", "T")


@case("nhwc_broadcast_add_small", tol="chain")
def _(g):
    # With symbolic H and W the plan cannot see that the second Conv's output is 1x1: the Add
    # broadcasts at run time and runs on NCHW copies of its channels-last operands.
    x = g.input("x", "T", g.randn(2, 4, 8, 8))
    _symbolic(g, (None, None, "H", "W"))
    a = g.node("Relu", [_conv(g, x, None, (6, 4, 3, 3), "c1_", pads=[1, 1, 1, 1])], ["a"])
    b = _conv(g, a, None, (6, 6, 1, 1), "c2_", strides=[64, 64])
    s = g.node("Relu", [g.node("Add", [a, b], ["s0"])], ["s"])
    _conv(g, s, None, (3, 6, 3, 3), "c3_", pads=[1, 1, 1, 1])
    g.nodes[-1].output[0] = "y"
    g.output("y", "T")


@case("nhwc_chain_small", tol="chain")
def _(g):
    # the small one for compute-sanitizer: NCHW -> NHWC at the first Conv, a fused
    # Conv -> Add -> Relu, MaxPool, back to NCHW at the last Conv.
    x = g.input("x", "T", g.randn(1, 4, 9, 9))
    a = g.node("Relu", [_conv(g, x, None, (8, 4, 3, 3), "c1_", pads=[1, 1, 1, 1])], ["a"])
    b = _conv(g, a, None, (8, 8, 3, 3), "c2_", pads=[1, 1, 1, 1])
    s = g.node("Relu", [g.node("Add", [a, b], ["s0"])], ["s"])
    p = g.node("MaxPool", [s], ["p"], kernel_shape=[2, 2], strides=[2, 2])
    _conv(g, p, None, (3, 8, 1, 1), "c3_")
    g.nodes[-1].output[0] = "y"
    g.output("y", "T")

