"""GPU op cases for the groups the CUDA backend fuses: BERT's (src/cuda/cuda_fuse_bert.c: Add ->
LayerNorm, MatMul -> bias (-> GELU), scale-mask-softmax, decomposed LayerNorm, attention) and
Conv's (src/cuda/cuda_fuse_conv.c: Conv -> Relu / Clip / Add (-> Relu)). Registered into
gpu_op_cases.CASES; tools/make_gpu_op_cases.py imports this module right after gpu_op_cases, so
these cases keep their place after the single-op ones."""

import numpy as np
from gpu_op_cases import OPSET, case

# --- fused groups: BERT (src/cuda/cuda_fuse_bert.c) ---
# Each case is one pattern the CUDA backend runs as a fused group; the CPU runs the nodes one by
# one. The debug log shows "fused group <name>" when the fused path ran.


def fuse_add_layernorm(name, shape, write_sum):
    @case(name)
    def build(g):
        n = shape[-1]
        x = g.input("x", "T", g.randn(*shape, scale=2.0) + 0.3)
        r = g.input("r", "T", g.randn(*shape))
        s = g.node("Add", [x, r], ["s"])
        ins = [s, g.init("scale", "T", 1.0 + g.randn(n, scale=0.1)),
               g.init("bias", "T", g.randn(n, scale=0.1))]
        g.node("LayerNormalization", ins, ["y"], axis=-1, epsilon=1e-12)
        g.output("y", "T")
        if write_sum:  # the sum is read outside the group too: the kernel writes it
            g.output("s", "T")


fuse_add_layernorm("fuse_add_layernorm", (2, 64, 768), False)
fuse_add_layernorm("fuse_add_layernorm_small", (3, 5, 40), False)
fuse_add_layernorm("fuse_add_layernorm_sum", (2, 16, 768), True)
fuse_add_layernorm("fuse_add_layernorm_long", (4, 1536), False)  # a block per row


def fuse_matmul_bias(name, a_shape, n, gelu=None):
    """MatMul by a constant weight, Add(bias, .) as PyTorch exports it, then optionally
    gelu: "chain" (Div, Erf, Add, Mul, Mul), "erf" (Gelu) or "tanh" (Gelu, tanh form)."""

    @case(name)
    def build(g):
        k = a_shape[-1]
        a = g.input("a", "T", g.randn(*a_shape))
        w = g.init("w", "T", g.randn(k, n, scale=float(1 / np.sqrt(k))))
        mm = g.node("MatMul", [a, w], ["mm"])
        out = "y" if gelu is None else "h"
        h = g.node("Add", [g.init("bias", "T", g.randn(n, scale=0.5)), mm], [out])
        if gelu == "chain":
            d = g.node("Div", [h, g.init("sqrt2", "T", np.array(1.4142135, np.float32))], ["d"])
            e = g.node("Erf", [d], ["e"])
            p = g.node("Add", [e, g.init("one", "T", np.array(1.0, np.float32))], ["p"])
            m = g.node("Mul", [h, p], ["m"])
            g.node("Mul", [m, g.init("half", "T", np.array(0.5, np.float32))], ["y"])
        elif gelu in ("erf", "tanh"):
            g.opset = 20
            g.node("Gelu", [h], ["y"], approximate="none" if gelu == "erf" else "tanh")
        g.output("y", "T")


fuse_matmul_bias("fuse_matmul_bias", (2, 32, 768), 768)
fuse_matmul_bias("fuse_matmul_bias_small", (3, 5, 24), 40)
fuse_matmul_bias("fuse_matmul_bias_2d", (17, 64), 48)
fuse_matmul_bias("fuse_matmul_bias_gelu_chain", (2, 32, 768), 3072, gelu="chain")
fuse_matmul_bias("fuse_matmul_bias_gelu_chain_small", (3, 5, 24), 40, gelu="chain")
fuse_matmul_bias("fuse_matmul_bias_gelu_erf", (2, 16, 256), 512, gelu="erf")
fuse_matmul_bias("fuse_matmul_bias_gelu_tanh", (2, 16, 256), 512, gelu="tanh")


def fuse_scaled_masked_softmax(name, shape, mask_shape, op="Div", c=8.0):
    @case(name)
    def build(g):
        x = g.input("x", "T", g.randn(*shape, scale=8.0))
        # BERT's additive mask: 0 where attended, a large negative where padded (finite in
        # fp16); every row keeps at least its first position.
        keep = g.rng.random(mask_shape) < 0.7
        keep[..., 0] = True
        mask = g.input("mask", "T", np.where(keep, 0.0, -10000.0).astype(np.float32))
        cv = g.init("c", "T", np.array(c, np.float32))
        s = g.node(op, [x, cv], ["s"])
        t = g.node("Add", [s, mask], ["t"])
        g.node("Softmax", [t], ["y"], axis=-1)
        g.output("y", "T")


fuse_scaled_masked_softmax("fuse_scaled_masked_softmax", (2, 12, 128, 128), (2, 1, 1, 128))
fuse_scaled_masked_softmax("fuse_scaled_masked_softmax_full_mask", (2, 4, 64, 64), (2, 1, 64, 64),
                           op="Mul", c=0.125)
fuse_scaled_masked_softmax("fuse_scaled_masked_softmax_small", (3, 2, 5, 7), (3, 1, 1, 7))
fuse_scaled_masked_softmax("fuse_scaled_masked_softmax_3d", (4, 9, 300), (300,), op="Mul",
                           c=0.3)


def fuse_layernorm_decomposed(name, shape, residual, opset=OPSET):
    """LayerNormalization as exports before opset 17 write it: ReduceMean, Sub, Pow 2,
    ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias (after a residual Add)."""

    @case(name)
    def build(g):
        g.opset = opset
        n = shape[-1]
        x = g.input("x", "T", g.randn(*shape, scale=2.0) + 0.3)
        if residual:
            x = g.node("Add", [x, g.input("r", "T", g.randn(*shape))], ["s"])

        def mean(src, dst):
            if opset >= 18:  # axes became an input
                return g.node("ReduceMean", [src, g.const_i64(dst + "_axes", [-1])], [dst])
            return g.node("ReduceMean", [src], [dst], axes=[-1], keepdims=1)

        mu = mean(x, "mu")
        d = g.node("Sub", [x, mu], ["d"])
        p = g.node("Pow", [d, g.init("two", "T", np.array(2.0, np.float32))], ["p"])
        var = mean(p, "var")
        ve = g.node("Add", [var, g.init("eps", "T", np.array(1e-5, np.float32))], ["ve"])
        sd = g.node("Sqrt", [ve], ["sd"])
        nrm = g.node("Div", [d, sd], ["nrm"])
        sc = g.node("Mul", [nrm, g.init("scale", "T", 1.0 + g.randn(n, scale=0.1))], ["sc"])
        g.node("Add", [sc, g.init("bias", "T", g.randn(n, scale=0.1))], ["y"])
        g.output("y", "T")


fuse_layernorm_decomposed("fuse_layernorm_decomposed", (2, 64, 768), False)
fuse_layernorm_decomposed("fuse_add_layernorm_decomposed", (2, 64, 768), True)
fuse_layernorm_decomposed("fuse_add_layernorm_decomposed_small", (3, 5, 40), True, opset=18)


def fuse_attention(name, shape, mask_shape, op="Div", c=None, swapped=False, kt_input=False):
    """BERT's self-attention core after its projections: MatMul(Q, K^T) (K^T from a Transpose,
    or an input with kt_input), Div or Mul by a constant scalar, Add(mask), Softmax over the keys,
    MatMul(P, V). In fp16 / bf16 the CUDA backend runs it as one flash-attention kernel; fp32
    keeps the two products and the scale-mask-softmax group. bf16 is compared at the "chain"
    bound: the probabilities are rounded to bf16 (8 mantissa bits) before the product with V, as
    the separate Softmax's output is, and a numpy emulation of the kernel reaches 0.9e-2 of the
    1e-2 bound (fp16: 0.1e-2); the nodes run one by one in bf16 (the CPU's half reference, also
    rounding the scores) reach 1.7e-2. Q's scale 0.5 keeps the scores moderate (BERT-like
    after the 1/sqrt(d) scale) so that the unfused half path stays inside these bounds too."""
    b, h, s, d = shape
    c = float(np.sqrt(d)) if c is None else c

    def build(g):
        q = g.input("q", "T", g.randn(b, h, s, d, scale=0.5))
        k = g.input("k", "T", g.randn(b, h, d, s) if kt_input else g.randn(b, h, s, d))
        v = g.input("v", "T", g.randn(b, h, s, d))
        keep = g.rng.random(mask_shape) < 0.7
        keep[..., 0] = True  # every row keeps a key
        mask = g.input("mask", "T", np.where(keep, 0.0, -10000.0).astype(np.float32))
        # the Transpose is folded into the group (K read as rows); with kt_input K^T is dense
        kt = k if kt_input else g.node("Transpose", [k], ["kt"], perm=[0, 1, 3, 2])
        sc = g.node("MatMul", [q, kt], ["scores"])
        cv = g.init("c", "T", np.array(c, np.float32))
        t = g.node(op, [cv, sc] if swapped else [sc, cv], ["t"])
        m = g.node("Add", [mask, t] if swapped else [t, mask], ["m"])
        p = g.node("Softmax", [m], ["p"], axis=-1)
        g.node("MatMul", [p, v], ["y"])
        g.output("y", "T")

    flags = (f"half-fused-attention-{5 if kt_input else 6}",)  # K's Transpose folded in
    case(name, dtypes=("f32", "f16"), flags=flags)(build)
    case(name, dtypes=("bf16",), tol="chain", flags=flags)(build)


fuse_attention("fuse_attention", (8, 12, 128, 64), (8, 1, 1, 128))
fuse_attention("fuse_attention_full_mask", (2, 12, 128, 64), (2, 1, 128, 128), op="Mul",
               c=0.125)
fuse_attention("fuse_attention_tail", (2, 4, 100, 64), (2, 1, 1, 100))  # S % 64 != 0
fuse_attention("fuse_attention_d32", (2, 8, 128, 32), (2, 1, 1, 128))
fuse_attention("fuse_attention_d128", (2, 4, 200, 128), (2, 1, 1, 200), op="Mul",
               c=float(1 / np.sqrt(128)))
# Small (compute-sanitizer): one partial tile; Mul(c, s) and Add(mask, .) operand order.
fuse_attention("fuse_attention_small", (2, 2, 19, 32), (2, 1, 1, 19))
fuse_attention("fuse_attention_small_swapped", (1, 3, 70, 32), (1, 1, 70, 70), op="Mul",
               c=0.17677669, swapped=True)
# S % 8 == 0 takes the register-tiled kernel (attention_mma.cu): two tiles, the second partial;
# a per-query mask; head dim 64.
fuse_attention("fuse_attention_small_mma", (1, 2, 72, 64), (1, 2, 72, 72), op="Mul", c=0.125)
fuse_attention("fuse_attention_seq384", (2, 12, 384, 64), (2, 1, 1, 384))
fuse_attention("fuse_attention_kt", (8, 12, 128, 64), (8, 1, 1, 128), kt_input=True)
fuse_attention("fuse_attention_small_kt", (1, 2, 72, 64), (1, 2, 72, 72), op="Mul", c=0.125,
               kt_input=True)




def fuse_attention_bshd(name, b, s, h, d, k_perm=(0, 2, 3, 1), fold_out=True):
    """The attention as Hugging Face's BERT exports it: Q, K and V (b, s, h * d) reshaped to
    (b, s, h, d), Transposed to (b, h, s, d) (K to K^T (b, h, d, s) by k_perm), the core, and the
    output Transposed back and reshaped to (b, s, h * d). The CUDA group folds the four
    Transposes into the kernel's strides (without fold_out the output's Transpose has a second
    reader and stays outside); a grid too small for the kernel, or a sequence length it does not
    take, runs the Transposes as copies inside the group."""

    def build(g):
        x = {n: g.input(n, "T", g.randn(b, s, h * d, scale=0.5 if n == "q" else 1.0))
             for n in ("q", "k", "v")}
        keep = g.rng.random((b, 1, 1, s)) < 0.7
        keep[..., 0] = True
        mask = g.input("mask", "T", np.where(keep, 0.0, -10000.0).astype(np.float32))
        shape4 = g.const_i64("shape4", [b, s, h, d])
        r = {n: g.node("Reshape", [x[n], shape4], [n + "4"]) for n in x}
        qt = g.node("Transpose", [r["q"]], ["qt"], perm=[0, 2, 1, 3])
        kt = g.node("Transpose", [r["k"]], ["kt"], perm=list(k_perm))
        vt = g.node("Transpose", [r["v"]], ["vt"], perm=[0, 2, 1, 3])
        sc = g.node("MatMul", [qt, kt], ["scores"])
        t = g.node("Div", [sc, g.init("c", "T", np.array(np.sqrt(d), np.float32))], ["t"])
        m = g.node("Add", [t, mask], ["m"])
        p = g.node("Softmax", [m], ["p"], axis=-1)
        ctx = g.node("MatMul", [p, vt], ["ctx"])
        ct = g.node("Transpose", [ctx], ["ct"], perm=[0, 2, 1, 3])
        g.node("Reshape", [ct, g.const_i64("shape3", [b, s, h * d])], ["y"])
        g.output("y", "T")
        if not fold_out:
            g.output("ctx", "T")

    # the group: the five core nodes and the Transposes (the output's only with fold_out)
    flags = (f"half-fused-attention-{9 if fold_out else 8}",)
    case(name, dtypes=("f32", "f16"), flags=flags)(build)
    case(name, dtypes=("bf16",), tol="chain", flags=flags)(build)


fuse_attention_bshd("fuse_attention_bshd", 8, 128, 12, 64)
# Small (compute-sanitizer, the kernel forced): two tiles, the second partial; head dim 32.
fuse_attention_bshd("fuse_attention_small_bshd", 1, 72, 2, 32)
# S % 8 != 0: not the register-tiled kernel, so the Transposes run as copies inside the group;
# the output read outside the group too (its Transpose stays outside).
fuse_attention_bshd("fuse_attention_bshd_tail", 2, 100, 4, 64, fold_out=False)


# ------------------------------------------------------------------------------------------
# Fused Conv groups (src/cuda/cuda_fuse_conv.c): each case is one group the CUDA backend runs
# fused (Conv -> Relu, Conv -> Add -> Relu, Conv -> Clip, Conv -> Add); only the group's last
# output is a graph output, so the group matches.
# ------------------------------------------------------------------------------------------


def _fuse_conv_weights(g, x_shape, w_shape, bias, scale=1.0, prefix=""):
    fan_in = int(np.prod(w_shape[1:]))
    w = g.randn(*w_shape, scale=scale * float(np.sqrt(2.0 / fan_in)))
    ins = [g.init(prefix + "w", "T", w)]
    if bias:
        ins.append(g.init(prefix + "b", "T", g.randn(w_shape[0], scale=0.1)))
    return ins


def fuse_conv(name, x_shape, w_shape, y_shape, tail, bias=True, x_scale=1.0, swap=False,
              downsample=None, **attrs):
    """tail: "relu", "clip" (ReLU6 with constant bounds), "add" or "add_relu". The residual is
    a graph input of shape y_shape, or (downsample = (w_shape, attrs)) a second Conv of x that
    comes after the first in graph order; swap puts it first in the Add. With a downsampling
    Conv the shortcut is itself rounded to the half type before the Add (a "chain" tolerance)."""

    @case(name, tol="chain" if downsample else "float")
    def build(g):
        x = g.input("x", "T", g.randn(*x_shape, scale=x_scale))
        h = g.node("Conv", [x] + _fuse_conv_weights(g, x_shape, w_shape, bias), ["h"], **attrs)
        if tail in ("add", "add_relu"):
            if downsample:
                ds_w, ds_attrs = downsample
                r = g.node("Conv", [x] + _fuse_conv_weights(g, x_shape, ds_w, True, prefix="ds_"),
                           ["r"], **ds_attrs)
            else:
                r = g.input("r", "T", g.randn(*y_shape))
            out = "y" if tail == "add" else "s"
            h = g.node("Add", [r, h] if swap else [h, r], [out])
        if tail in ("relu", "add_relu"):
            g.node("Relu", [h], ["y"])
        elif tail == "clip":
            lo = g.init("min", "T", np.array(0.0, np.float32))
            hi = g.init("max", "T", np.array(6.0, np.float32))
            g.node("Clip", [h, lo, hi], ["y"])
        g.output("y", "T")


# ResNet: the stem and a block's first conv (Conv -> Relu), a block's end (Conv -> Add -> Relu)
# with the identity shortcut and with a downsampling Conv shortcut (Add operands swapped).
fuse_conv("fuse_conv_relu", (1, 64, 28, 28), (64, 64, 3, 3), None, "relu", pads=[1, 1, 1, 1])
fuse_conv("fuse_conv_relu_stem", (1, 3, 64, 64), (64, 3, 7, 7), None, "relu", pads=[3, 3, 3, 3],
          strides=[2, 2])
fuse_conv("fuse_conv_add_relu", (1, 64, 28, 28), (64, 64, 3, 3), (1, 64, 28, 28), "add_relu",
          pads=[1, 1, 1, 1])
fuse_conv("fuse_conv_add_relu_downsample", (2, 64, 28, 28), (128, 64, 3, 3), None, "add_relu",
          swap=True, downsample=((128, 64, 1, 1), {"strides": [2, 2]}), pads=[1, 1, 1, 1],
          strides=[2, 2])
fuse_conv("fuse_conv_add_relu_1x1", (2, 256, 14, 14), (1024, 256, 1, 1), (2, 1024, 14, 14),
          "add_relu", swap=True)
# MobileNetV2: ReLU6 after a pointwise and a depthwise conv; the linear bottleneck's Conv -> Add.
fuse_conv("fuse_conv_clip", (1, 32, 28, 28), (96, 32, 1, 1), None, "clip", x_scale=3.0)
fuse_conv("fuse_conv_clip_dw", (1, 96, 28, 28), (96, 1, 3, 3), None, "clip", x_scale=3.0,
          pads=[1, 1, 1, 1], group=96)
fuse_conv("fuse_conv_add", (1, 96, 14, 14), (32, 96, 1, 1), (1, 32, 14, 14), "add", swap=True)
# Small ones (compute-sanitizer): no bias (a zero bias for cuDNN), asymmetric pads (the padded
# copy of the input), 1-D, Clip after a grouped dilated conv.
fuse_conv("fuse_conv_relu_nobias_small", (2, 4, 9, 9), (6, 4, 3, 3), None, "relu", bias=False,
          pads=[1, 1, 1, 1])
fuse_conv("fuse_conv_add_relu_asympad_small", (2, 4, 9, 9), (6, 4, 3, 3), (2, 6, 8, 8),
          "add_relu", pads=[0, 1, 1, 0])
fuse_conv("fuse_conv_add_small_1d", (2, 4, 17), (5, 4, 3), (2, 5, 17), "add", pads=[1, 1])
fuse_conv("fuse_conv_clip_small", (1, 4, 11, 11), (6, 2, 3, 3), None, "clip", x_scale=4.0,
          group=2, dilations=[2, 2], pads=[2, 2, 2, 2])
