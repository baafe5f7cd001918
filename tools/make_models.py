#!/usr/bin/env python3
"""Build the test models graft must match ONNX Runtime on, with ORT's reference outputs.

Why: graft's parity tests load real-sized models laid out the way torch.onnx.export writes
them (scoped node names, Constant nodes, Shape->Gather->Unsqueeze->Concat chains feeding
Reshape, unfolded BatchNormalization, external data, ...) and compare graft's outputs with
ONNX Runtime's. Pretrained weights cannot be downloaded in CI, so the models are built here
with the onnx helper API and seeded numpy weights (deterministic; no torch needed).

Models (into --out, default tests/data/gen/ under the repository root):
  resnet18, resnet50       torchvision ResNet, Conv(no bias) -> BatchNormalization -> Relu,
                           opset 17, IR 8, input `input` (batch, 3, 224, 224), output `logits`.
  block_parity_resnet18    resnet18 at input `x` (batch, 3, 64, 64), its own seed, BN
                           statistics from 8 calibration images; its recorded input is the 32
                           images of the block-parity test (tools/record_block_parity.py,
                           tests/test_block_parity.c): N(0, 1), seed 1516.
  block_parity_bert4       the BERT graph with 4 layers (64 hidden, 4 heads), opset 17; its
                           recorded inputs are the 32 texts of the block-parity test
                           (tools/record_block_parity_bert.py): lengths 4..16, seed 2004.
  bert_base                HF BertModel-shaped encoder (768 hidden, 12 layers, 12 heads),
                           opset 17, LayerNormalization op, weights in bert_base.onnx.data.
  bert_tiny_decomposed     the same graph, small (64 hidden, 2 layers), opset 13, IR 7,
                           LayerNorm decomposed (ReduceMean/Sub/Pow/.../Add), old numeric
                           tensor names (torch <= 1.11 style), mask fill -10000.
  mobilenet_tiny           MobileNetV2-style, BN folded into Conv bias (as torch exports in
                           eval mode), depthwise Conv, Clip(0, 6) with min/max inputs, opset 13,
                           static input (1, 3, 64, 64).
  conv_acts                every activation the CPU fuses into a Conv or runs through oneDNN's
                           eltwise: Conv -> Clip(0, 6), Sigmoid*Mul (SiLU as exporters write
                           it), HardSwish, LeakyRelu, Add -> Clip, Tanh, Elu, Gelu, Mish, and
                           stand-alone Sigmoid/Exp/Log/Sqrt/Tanh on tensors large enough for
                           oneDNN; opset 20, input (2, 8, 32, 32), output `y`.
  reshape_views            chains of Reshape / Flatten / Squeeze / Unsqueeze whose outputs the
                           executor plans as views of their inputs: a view read long after its
                           source's last reader, a source read after its views, a view that is
                           a graph output and one of another output; opset 17, input
                           (2, 16, 64), outputs `y`, `flat` and `flat_again`.
  residual_inplace         residual blocks whose Conv -> Add [-> Relu] groups the CPU writes
                           over their residual: plain ones, a chain of them, a residual the
                           group's own Conv reads, one read again later, one with a reshape
                           read later, a 1x1 Conv -> Add without activation; opset 17, input
                           (2, 16, 12, 12), outputs `y` and `z`.

Weights: random but shaped like trained ones, so that activations stay O(1) and relative-error
comparisons mean something. ResNet convs are Kaiming-normal (fan_in); BN gamma ~ 1 +- 0.1
(0.4x on the BN ending a residual branch), beta ~ N(0, 0.1), and running mean/var measured
on a seeded calibration image layer by layer (then jittered by a few percent), as training
would have left them. mobilenet_tiny's folded BN is calibrated the same way. BERT weights
are N(0, 0.02) as BERT's init (bert_tiny: 0.1, so its attention is not near-uniform); biases
and LayerNorm gamma/beta are perturbed from 0/1 so a kernel that ignores them fails.

For each model NAME it writes:
  NAME.onnx [+ NAME.onnx.data]     the model
  NAME.in.<input>.npy              fixed seeded inputs (batch 2; mobilenet_tiny: batch 1)
  NAME.out.<output>.npy            ONNX Runtime outputs (CPUExecutionProvider,
                                   graph optimisations disabled: the graph as written)
  NAME.json                        manifest: "inputs"/"outputs" (name lists, graph order),
                                   "tensors" (dtype, dims, shape, file per name), "files"
                                   (name -> size), ORT and generator versions
A model whose manifest records the current GENERATOR_VERSION and whose files all exist with
the recorded sizes is skipped, so a second run is instant (--force rebuilds).

Usage: python3 tools/make_models.py [--out DIR] [--only NAME[,NAME]] [--force] [--list]
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Bump whenever a model, its weights or its inputs change: cached outputs are then rebuilt.
GENERATOR_VERSION = "2"

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "gen"
PRODUCER = "graft tools/make_models.py"


# ----------------------------------------------------------------------------------------
# Graph builder that names things the way torch.onnx.export does
# ----------------------------------------------------------------------------------------

class Builder:
    """Collects nodes and initializers.

    naming="scoped": torch >= 1.13 style, node "/encoder/layer.0/attention/self/MatMul_1",
    value "<node name>_output_0". naming="numeric": torch <= 1.11 style, node "MatMul_42",
    values named by a running number ("187").
    """

    def __init__(self, naming="scoped"):
        self.naming = naming
        self.nodes = []
        self.initializers = []
        self._init_names = set()
        self._scoped_counts = {}
        self._node_index = 0
        self._value_index = 0
        self._onnx_param_index = 100

    def _node_name(self, scope, op):
        if self.naming == "numeric":
            name = f"{op}_{self._node_index}"
            self._node_index += 1
            return name
        base = f"{scope}/{op}"
        count = self._scoped_counts.get(base, 0)
        self._scoped_counts[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def _value_name(self, node_name, i):
        if self.naming == "numeric":
            self._value_index += 1
            return str(self._value_index)
        return f"{node_name}_output_{i}"

    def param_name(self, op):
        """Name of a parameter the exporter created itself (transposed/folded weights)."""
        self._onnx_param_index += 1
        if self.naming == "numeric":
            return str(10000 + self._onnx_param_index)
        return f"onnx::{op}_{self._onnx_param_index}"

    def node(self, scope, op, inputs, outputs=None, n_out=1, **attrs):
        name = self._node_name(scope, op)
        if outputs is None:
            outputs = [self._value_name(name, i) for i in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs), name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, scope, value, dtype=None):
        """A Constant node, as the exporter writes scalars and shape pieces."""
        arr = np.asarray(value, dtype=dtype)
        name = self._node_name(scope, "Constant")
        out = self._value_name(name, 0)
        tensor = numpy_helper.from_array(arr, name="")
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=tensor))
        return out

    def init(self, name, array):
        if name in self._init_names:
            raise ValueError(f"duplicate initializer {name}")
        self._init_names.add(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name=name))
        return name

    def model(self, graph_name, inputs, outputs, opset, ir_version, doc):
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, self.initializers)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset)],
            producer_name=PRODUCER,
            producer_version=GENERATOR_VERSION,
            doc_string=doc,
        )
        model.ir_version = ir_version
        return model


def with_value_info(model):
    """torch.onnx.export runs ONNX shape inference and keeps the results as value_info."""
    return onnx.shape_inference.infer_shapes(model)


def calibrate(model, feeds, taps):
    """Set statistics from data, as training would have: pretrained nets keep activations O(1).

    taps: (tensor name, parameter names, update) triples in topological order. ORT runs the
    model on feeds; update(mean, var, params) gets the per-channel (axis 1) mean and variance
    of the tensor and replaces entries of params (initializer name -> array). Each tap sees
    the already updated taps before it: the tuned initializers are fed as graph inputs, so
    one session serves all runs.
    """
    import onnxruntime as ort
    tuned = {n for _, names, _ in taps for n in names}
    params = {t.name: numpy_helper.to_array(t).copy()
              for t in model.graph.initializer if t.name in tuned}
    calib = onnx.ModelProto()
    calib.CopyFrom(model)
    kept = [t for t in calib.graph.initializer if t.name not in tuned]
    del calib.graph.initializer[:]
    calib.graph.initializer.extend(kept)
    calib.graph.input.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                             for n, a in params.items())
    calib.graph.output.extend(helper.make_empty_tensor_value_info(n) for n, _, _ in taps)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(calib.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    del calib
    for name, names, update in taps:
        (x,) = sess.run([name], {**feeds, **params})
        axes = tuple(i for i in range(x.ndim) if i != 1)
        x = x.astype(np.float64)
        var = x.var(axis=axes)
        # A channel fed only by dead (always clipped) inputs has ~0 variance; normalising
        # by it would blow the next layers up, so floor it at a fraction of the typical one.
        var = np.maximum(var, 0.1 * np.median(var) + 1e-6)
        update(x.mean(axis=axes), var, params)
        for n in names:
            params[n] = np.asarray(params[n], dtype=np.float32)
    for t in model.graph.initializer:
        if t.name in params:
            t.CopyFrom(numpy_helper.from_array(params[t.name], t.name))


def normal(rng, shape, std):
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)


def uniform(rng, shape, lo, hi):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


# ----------------------------------------------------------------------------------------
# ResNet (torchvision), opset 17, BatchNormalization kept separate
# ----------------------------------------------------------------------------------------

def torch_scope(module_path):
    """"layer1.0.conv1" -> "/layer1/layer1.0/conv1", as torch's scoped names nest modules.

    A Sequential's numbered child is shown as "<parent>.<index>" under the parent.
    """
    names = []
    for p in module_path.split("."):
        names.append(f"{names[-1]}.{p}" if p.isdigit() and names else p)
    return "/" + "/".join(names)


class ResNetGraph:
    """torchvision ResNet's forward as torch.onnx.export writes it, BN left unfolded."""

    # Residual branches end in a BN whose gamma is scaled down so that the residual stream
    # (identity + branch, repeated per block) stays O(1) instead of growing with depth.
    RESIDUAL_GAMMA = 0.4

    def __init__(self, rng):
        self.rng = rng
        self.g = Builder("scoped")
        self.bn_taps = []  # for calibrate(): BN inputs and the running stats they set

    def conv(self, module, x, cin, cout, k, stride, pad):
        # Kaiming normal over fan_in keeps the second moment of conv->BN->ReLU stacks O(1).
        w = normal(self.rng, (cout, cin, k, k), math.sqrt(2.0 / (cin * k * k)))
        wname = self.g.init(f"{module}.weight", w)
        return self.g.node(torch_scope(module), "Conv", [x, wname], dilations=[1, 1], group=1,
                           kernel_shape=[k, k], pads=[pad] * 4, strides=[stride, stride])

    def bn(self, module, x, c, gamma_scale=1.0):
        rng, g = self.rng, self.g
        gamma = (1.0 + 0.1 * rng.standard_normal(c, dtype=np.float32)) * np.float32(gamma_scale)
        beta = normal(rng, c, 0.1)
        names = [g.init(f"{module}.{p}", a) for p, a in
                 (("weight", gamma), ("bias", beta), ("running_mean", np.zeros(c, np.float32)),
                  ("running_var", np.ones(c, np.float32)))]
        # Running statistics are measured on calibration data (see calibrate), then jittered
        # a little so they are not exactly the batch statistics of any input.
        mean_jitter = normal(rng, c, 0.05)
        var_jitter = uniform(rng, c, 0.85, 1.15)

        def update(mean, var, params):
            params[names[2]] = mean + mean_jitter * np.sqrt(var)
            params[names[3]] = var * var_jitter
        self.bn_taps.append((x, names[2:], update))
        return g.node(torch_scope(module), "BatchNormalization", [x] + names,
                      epsilon=1e-5, momentum=0.9)

    def relu(self, module, x):
        return self.g.node(torch_scope(module), "Relu", [x])

    def block(self, kind, p, x, cin, width, stride):
        """BasicBlock or Bottleneck (stride on the 3x3 conv, torchvision's v1.5)."""
        cout = width * (1 if kind == "basic" else 4)
        if kind == "basic":
            y = self.conv(f"{p}.conv1", x, cin, width, 3, stride, 1)
            y = self.bn(f"{p}.bn1", y, width)
            y = self.relu(f"{p}.relu", y)
            y = self.conv(f"{p}.conv2", y, width, width, 3, 1, 1)
            y = self.bn(f"{p}.bn2", y, width, self.RESIDUAL_GAMMA)
            last_relu = f"{p}.relu_1"  # torch names a module's second call relu_1
        else:
            y = self.conv(f"{p}.conv1", x, cin, width, 1, 1, 0)
            y = self.bn(f"{p}.bn1", y, width)
            y = self.relu(f"{p}.relu", y)
            y = self.conv(f"{p}.conv2", y, width, width, 3, stride, 1)
            y = self.bn(f"{p}.bn2", y, width)
            y = self.relu(f"{p}.relu_1", y)
            y = self.conv(f"{p}.conv3", y, width, cout, 1, 1, 0)
            y = self.bn(f"{p}.bn3", y, cout, self.RESIDUAL_GAMMA)
            last_relu = f"{p}.relu_2"
        identity = x
        if stride != 1 or cin != cout:
            identity = self.conv(f"{p}.downsample.0", x, cin, cout, 1, stride, 0)
            identity = self.bn(f"{p}.downsample.1", identity, cout)
        y = self.g.node(torch_scope(p), "Add", [y, identity])
        return self.relu(last_relu, y), cout

    def build(self, kind, layer_counts, input_name="input"):
        g = self.g
        x = self.conv("conv1", input_name, 3, 64, 7, 2, 3)
        x = self.bn("bn1", x, 64)
        x = self.relu("relu", x)
        x = g.node("/maxpool", "MaxPool", [x], ceil_mode=0, dilations=[1, 1],
                   kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
        cin = 64
        for li, (count, width) in enumerate(zip(layer_counts, [64, 128, 256, 512]), start=1):
            for bi in range(count):
                stride = 2 if (li > 1 and bi == 0) else 1
                x, cin = self.block(kind, f"layer{li}.{bi}", x, cin, width, stride)
        x = g.node("/avgpool", "GlobalAveragePool", [x])
        x = g.node("", "Flatten", [x], axis=1)
        bound = 1.0 / math.sqrt(cin)
        fc_w = g.init("fc.weight", normal(self.rng, (1000, cin), bound))
        fc_b = g.init("fc.bias", uniform(self.rng, 1000, -bound, bound))
        g.node("/fc", "Gemm", [x, fc_w, fc_b], outputs=["logits"], alpha=1.0, beta=1.0,
               transB=1)


def build_resnet(depth, seed, hw=224, input_name="input", n_calib=1, n_feed=2):
    """Calibrated on n_calib seeded images (seed + 2); recorded input: n_feed (seed + 1)."""
    kind, layer_counts = {18: ("basic", [2, 2, 2, 2]), 50: ("bottleneck", [3, 4, 6, 3])}[depth]
    net = ResNetGraph(np.random.default_rng(seed))
    net.build(kind, layer_counts, input_name)
    inputs = [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", 3, hw, hw])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])]
    model = net.g.model("main_graph", inputs, outputs, opset=17, ir_version=8,
                        doc=f"torchvision resnet{depth} layout, random weights (seed {seed})")
    calib = np.random.default_rng(seed + 2).standard_normal((n_calib, 3, hw, hw),
                                                            dtype=np.float32)
    calibrate(model, {input_name: calib}, net.bn_taps)
    model = with_value_info(model)
    feeds = {input_name: np.random.default_rng(seed + 1).standard_normal((n_feed, 3, hw, hw),
                                                                         dtype=np.float32)}
    return model, feeds


# ----------------------------------------------------------------------------------------
# BERT (HF BertModel as torch.onnx.export writes it)
# ----------------------------------------------------------------------------------------

class BertGraph:
    """HF BertModel's forward, op by op, as torch.onnx.export writes it."""

    def __init__(self, cfg, rng):
        self.cfg, self.rng = cfg, rng
        self.g = Builder(cfg["naming"])
        self.H, self.NH = cfg["hidden"], cfg["heads"]
        self.D = self.H // self.NH

    def weight(self, shape):
        return normal(self.rng, shape, self.cfg["std"])

    def layer_norm(self, scope, prefix, x, eps=1e-12):
        g = self.g
        # gamma/beta are perturbed from BERT's 1/0 init so that a kernel ignoring them fails.
        gamma = g.init(f"{prefix}.weight", 1.0 + normal(self.rng, self.H, 0.05))
        beta = g.init(f"{prefix}.bias", normal(self.rng, self.H, 0.02))
        if not self.cfg["decomposed_ln"]:
            return g.node(scope, "LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
        # torch < 1.13 / opset < 17: layer_norm written out op by op.
        mean = g.node(scope, "ReduceMean", [x], axes=[-1], keepdims=1)
        centered = g.node(scope, "Sub", [x, mean])
        sq = g.node(scope, "Pow", [centered, g.const(scope, 2.0, np.float32)])
        var = g.node(scope, "ReduceMean", [sq], axes=[-1], keepdims=1)
        var_eps = g.node(scope, "Add", [var, g.const(scope, eps, np.float32)])
        denom = g.node(scope, "Sqrt", [var_eps])
        normed = g.node(scope, "Div", [centered, denom])
        scaled = g.node(scope, "Mul", [normed, gamma])
        return g.node(scope, "Add", [scaled, beta])

    def linear(self, scope, prefix, x, fin, fout):
        # nn.Linear on a 3-D input: the exporter stores W^T as its own initializer for MatMul
        # and adds the bias with the bias as the first Add input.
        g = self.g
        wt = g.init(g.param_name("MatMul"), self.weight((fin, fout)))
        b = g.init(f"{prefix}.bias", self.weight(fout))
        y = g.node(scope, "MatMul", [x, wt])
        return g.node(scope, "Add", [b, y])

    def runtime_dim(self, scope, x, idx):
        """Shape(x) -> Gather(idx) -> Unsqueeze(0): one runtime dim as a 1-D tensor."""
        g = self.g
        shape = g.node(scope, "Shape", [x])
        d = g.node(scope, "Gather", [shape, g.const(scope, idx, np.int64)], axis=0)
        return g.node(scope, "Unsqueeze", [d, g.const(scope, [0], np.int64)])

    def reshape_keeping_batch_seq(self, scope, x, tail):
        """x.view(x.size()[:2] + tail) with the target shape built at run time."""
        g = self.g
        pieces = [self.runtime_dim(scope, x, 0), self.runtime_dim(scope, x, 1)]
        pieces += [g.const(scope, [d], np.int64) for d in tail]
        shape = g.node(scope, "Concat", pieces, axis=0)
        # allowzero exists from opset 14; torch writes it explicitly (0) there.
        attrs = {"allowzero": 0} if self.cfg["opset"] >= 14 else {}
        return g.node(scope, "Reshape", [x, shape], **attrs)

    def embeddings(self):
        g, cfg, H = self.g, self.cfg, self.H
        word = g.init("embeddings.word_embeddings.weight", self.weight((cfg["vocab"], H)))
        pos = g.init("embeddings.position_embeddings.weight", self.weight((cfg["max_pos"], H)))
        typ = g.init("embeddings.token_type_embeddings.weight",
                     self.weight((cfg["type_vocab"], H)))
        g.init("embeddings.position_ids", np.arange(cfg["max_pos"], dtype=np.int64)[None, :])
        # position_ids = self.position_ids[:, 0:seq_length]
        sc = "/embeddings"
        seq_len = g.node("", "Gather", [g.node("", "Shape", ["input_ids"]),
                                        g.const("", 1, np.int64)], axis=0)
        seq_len_1d = g.node(sc, "Unsqueeze", [seq_len, g.const(sc, [0], np.int64)])
        position_ids = g.node(sc, "Slice", [
            "embeddings.position_ids", g.const(sc, [0], np.int64), seq_len_1d,
            g.const(sc, [1], np.int64), g.const(sc, [1], np.int64)])
        we = g.node(f"{sc}/word_embeddings", "Gather", [word, "input_ids"])
        te = g.node(f"{sc}/token_type_embeddings", "Gather", [typ, "token_type_ids"])
        emb = g.node(sc, "Add", [we, te])
        pe = g.node(f"{sc}/position_embeddings", "Gather", [pos, position_ids])
        emb = g.node(sc, "Add", [emb, pe])
        return self.layer_norm(f"{sc}/LayerNorm", "embeddings.LayerNorm", emb)

    def extended_mask(self):
        """(1.0 - attention_mask[:, None, None, :].to(float32)) * fill"""
        g = self.g
        m = g.node("", "Unsqueeze", ["attention_mask", g.const("", [1], np.int64)])
        m = g.node("", "Unsqueeze", [m, g.const("", [2], np.int64)])
        m = g.node("", "Cast", [m], to=TensorProto.FLOAT)
        m = g.node("", "Sub", [g.const("", 1.0, np.float32), m])
        return g.node("", "Mul", [m, g.const("", self.cfg["mask_fill"], np.float32)])

    def self_attention(self, sp, pp, x, mask_add):
        g, H = self.g, self.H
        att = f"{sp}/attention/self"
        q = self.linear(f"{att}/query", f"{pp}.attention.self.query", x, H, H)
        k = self.linear(f"{att}/key", f"{pp}.attention.self.key", x, H, H)
        v = self.linear(f"{att}/value", f"{pp}.attention.self.value", x, H, H)
        heads = (self.NH, self.D)
        qh = g.node(att, "Transpose", [self.reshape_keeping_batch_seq(att, q, heads)],
                    perm=[0, 2, 1, 3])
        # permute(0,2,1,3) then transpose(-1,-2): the exporter merges them into one Transpose.
        kh = g.node(att, "Transpose", [self.reshape_keeping_batch_seq(att, k, heads)],
                    perm=[0, 2, 3, 1])
        vh = g.node(att, "Transpose", [self.reshape_keeping_batch_seq(att, v, heads)],
                    perm=[0, 2, 1, 3])
        scores = g.node(att, "MatMul", [qh, kh])
        scores = g.node(att, "Div", [scores, g.const(att, math.sqrt(self.D), np.float32)])
        scores = g.node(att, "Add", [scores, mask_add])
        probs = g.node(att, "Softmax", [scores], axis=-1)
        ctx = g.node(att, "MatMul", [probs, vh])
        ctx = g.node(att, "Transpose", [ctx], perm=[0, 2, 1, 3])
        return self.reshape_keeping_batch_seq(att, ctx, (H,))

    def gelu(self, scope, h):
        """Exact GELU as torch exports it below opset 20: x * (1 + erf(x / sqrt(2))) * 0.5"""
        g = self.g
        e = g.node(scope, "Div", [h, g.const(scope, 1.4142135623730951, np.float32)])
        e = g.node(scope, "Erf", [e])
        e = g.node(scope, "Add", [e, g.const(scope, 1.0, np.float32)])
        h = g.node(scope, "Mul", [h, e])
        return g.node(scope, "Mul", [h, g.const(scope, 0.5, np.float32)])

    def layer(self, li, x, mask_add):
        g, H, F = self.g, self.H, self.cfg["ffn"]
        sp, pp = f"/encoder/layer.{li}", f"encoder.layer.{li}"
        ctx = self.self_attention(sp, pp, x, mask_add)
        out = f"{sp}/attention/output"
        y = self.linear(f"{out}/dense", f"{pp}.attention.output.dense", ctx, H, H)
        y = g.node(out, "Add", [y, x])
        x = self.layer_norm(f"{out}/LayerNorm", f"{pp}.attention.output.LayerNorm", y)
        inter = f"{sp}/intermediate"
        h = self.linear(f"{inter}/dense", f"{pp}.intermediate.dense", x, H, F)
        h = self.gelu(f"{inter}/intermediate_act_fn", h)
        out = f"{sp}/output"
        y = self.linear(f"{out}/dense", f"{pp}.output.dense", h, F, H)
        y = g.node(out, "Add", [y, x])
        return self.layer_norm(f"{out}/LayerNorm", f"{pp}.output.LayerNorm", y)

    def pooler(self, x):
        """tanh(dense(hidden[:, 0])): Gather on axis 1, then Gemm on the 2-D result."""
        g, H = self.g, self.H
        first = g.node("/pooler", "Gather", [x, g.const("/pooler", 0, np.int64)], axis=1)
        pw = g.init("pooler.dense.weight", self.weight((H, H)))
        pb = g.init("pooler.dense.bias", self.weight(H))
        pooled = g.node("/pooler/dense", "Gemm", [first, pw, pb], alpha=1.0, beta=1.0, transB=1)
        return g.node("/pooler/activation", "Tanh", [pooled], outputs=["pooler_output"])

    def build(self):
        x = self.embeddings()
        mask_add = self.extended_mask()
        for li in range(self.cfg["layers"]):
            x = self.layer(li, x, mask_add)
        self.g.nodes[-1].output[0] = "last_hidden_state"  # the last LayerNorm's output
        self.pooler("last_hidden_state")


def build_bert(cfg, seed, feeds=None):
    bert = BertGraph(cfg, np.random.default_rng(seed))
    bert.build()
    H = cfg["hidden"]
    dims = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [
        helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, dims + [H]),
        helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", H]),
    ]
    model = bert.g.model("main_graph", inputs, outputs, opset=cfg["opset"],
                         ir_version=cfg["ir_version"],
                         doc=f"HF BertModel layout ({H} hidden, {cfg['layers']} layers, "
                             f"{cfg['heads']} heads), random weights (seed {seed})")
    model = with_value_info(model)
    if feeds is not None:
        return model, feeds(seed + 1, cfg)
    return model, bert_inputs(seed + 1, batch=2, seq=cfg["seq"], vocab=cfg["vocab"])


def parity_text_inputs(seed, cfg, batch=32):
    """The block-parity problem's 32 texts: [CLS]-like first token, lengths 4..seq (padded with
    zeros after), token types 0 then 1 from the middle of each text."""
    rng = np.random.default_rng(seed)
    seq = cfg["seq"]
    ids = rng.integers(2, cfg["vocab"], size=(batch, seq), dtype=np.int64)
    ids[:, 0] = 1
    mask = np.zeros((batch, seq), dtype=np.int64)
    types = np.zeros((batch, seq), dtype=np.int64)
    for b, n in enumerate(rng.integers(4, seq + 1, batch)):
        mask[b, :n] = 1
        types[b, n // 2:n] = 1
        ids[b, n:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def bert_inputs(seed, batch, seq, vocab):
    """Random token ids with [CLS]-like first token, padded tail on the second row."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000 if vocab > 2000 else 1, vocab, size=(batch, seq), dtype=np.int64)
    ids[:, 0] = 101 if vocab > 101 else 1
    mask = np.ones((batch, seq), dtype=np.int64)
    types = np.zeros((batch, seq), dtype=np.int64)
    types[:, seq // 2:] = 1
    for b in range(1, batch):  # row 0 unpadded; later rows pad their last 3*b positions
        npad = min(3 * b, seq - 2)
        ids[b, seq - npad:] = 0
        mask[b, seq - npad:] = 0
        types[b, seq - npad:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


BERT_BASE = dict(hidden=768, layers=12, heads=12, ffn=3072, vocab=30522, max_pos=512,
                 type_vocab=2, std=0.02, decomposed_ln=False, opset=17, ir_version=8,
                 naming="scoped", mask_fill=float(np.finfo(np.float32).min), seq=16)
# Small hidden size: std 0.1 instead of BERT's 0.02 so attention is far from uniform.
BERT_TINY = dict(hidden=64, layers=2, heads=4, ffn=128, vocab=1000, max_pos=512,
                 type_vocab=2, std=0.1, decomposed_ln=True, opset=13, ir_version=7,
                 naming="numeric", mask_fill=-10000.0, seq=12)


# The block-parity BERT (tests/test_block_parity.c, tools/record_block_parity_bert.py): 4 layers,
# HF BertModel's eager attention, its finfo.min mask fill and 1e-12 LayerNorm epsilon.
BERT_PARITY = dict(hidden=64, layers=4, heads=4, ffn=128, vocab=1000, max_pos=64,
                   type_vocab=2, std=0.1, decomposed_ln=False, opset=17, ir_version=8,
                   naming="scoped", mask_fill=float(np.finfo(np.float32).min), seq=16)


# ----------------------------------------------------------------------------------------
# MobileNetV2-style (torchvision layout, BN folded into Conv bias as exported in eval mode)
# ----------------------------------------------------------------------------------------

def build_mobilenet_tiny(seed):
    rng = np.random.default_rng(seed)
    g = Builder("scoped")

    conv_taps = []

    def conv(scope, x, cin, cout, k, stride, groups, activated):
        fan_in = (cin // groups) * k * k
        w = g.init(g.param_name("Conv"), normal(rng, (cout, cin // groups, k, k),
                                                 math.sqrt(2.0 / fan_in)))
        b = g.init(g.param_name("Conv"), np.zeros(cout, np.float32))
        y = g.node(scope, "Conv", [x, w, b], dilations=[1, 1], group=groups,
                   kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride])
        # The BN that torch folded into this Conv: output = gamma * normalised + beta. Before
        # ReLU6, gamma/beta are wide enough that both ends of the Clip are hit; the linear
        # bottleneck projection is damped so the residual stream stays O(1).
        if activated:
            gamma, beta = uniform(rng, cout, 1.0, 2.0), normal(rng, cout, 1.0) + 0.5
        else:
            gamma, beta = uniform(rng, cout, 0.4, 0.8), normal(rng, cout, 0.1)

        def update(mean, var, params, w=w, b=b, gamma=gamma, beta=beta):
            scale = gamma / np.sqrt(var + 1e-5)
            params[w] = params[w] * scale[:, None, None, None]
            params[b] = (params[b] - mean) * scale + beta
        conv_taps.append((y, [w, b], update))
        return y

    def relu6(scope, x):
        return g.node(scope, "Clip", [x, g.const(scope, 0.0, np.float32),
                                      g.const(scope, 6.0, np.float32)])

    def conv_bn_relu(scope, x, cin, cout, k, stride, groups=1):
        # Conv2dNormActivation(conv .0, bn .1 folded away, ReLU6 .2)
        y = conv(f"{scope}/{scope.rsplit('/', 1)[-1]}.0", x, cin, cout, k, stride, groups, True)
        return relu6(f"{scope}/{scope.rsplit('/', 1)[-1]}.2", y)

    # (expand ratio t, channels c, repeats n, first stride s)
    config = [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 2, 1), (6, 32, 1, 2)]
    x = conv_bn_relu("/features/features.0", "input", 3, 16, 3, 2)
    cin, fi = 16, 1
    for t, c, n, s in config:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            sc = f"/features/features.{fi}"
            y, ci = x, 0
            if t != 1:
                y = conv_bn_relu(f"{sc}/conv/conv.{ci}", y, cin, hidden, 1, 1)
                ci += 1
            y = conv_bn_relu(f"{sc}/conv/conv.{ci}", y, hidden, hidden, 3, stride, groups=hidden)
            ci += 1
            # linear bottleneck projection; damped so the residual stream stays O(1)
            y = conv(f"{sc}/conv/conv.{ci}", y, hidden, c, 1, 1, 1, False)
            if stride == 1 and cin == c:
                y = g.node(sc, "Add", [x, y])
            x, cin, fi = y, c, fi + 1
    x = conv_bn_relu(f"/features/features.{fi}", x, cin, 128, 1, 1)
    x = g.node("", "GlobalAveragePool", [x])
    x = g.node("", "Flatten", [x], axis=1)
    w = g.init("classifier.1.weight", normal(rng, (10, 128), 1.0 / math.sqrt(128)))
    b = g.init("classifier.1.bias", normal(rng, 10, 0.05))
    g.node("/classifier/classifier.1", "Gemm", [x, w, b], outputs=["logits"],
           alpha=1.0, beta=1.0, transB=1)

    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])]
    model = g.model("main_graph", inputs, outputs, opset=13, ir_version=7,
                    doc=f"MobileNetV2-style tiny net, random weights (seed {seed})")
    calib = np.random.default_rng(seed + 2).standard_normal((1, 3, 64, 64), dtype=np.float32)
    calibrate(model, {"input": calib}, conv_taps)
    model = with_value_info(model)
    feeds = {"input": np.random.default_rng(seed + 1).standard_normal((1, 3, 64, 64),
                                                                      dtype=np.float32)}
    return model, feeds


def build_conv_acts(seed):
    rng = np.random.default_rng(seed)
    g = Builder("scoped")
    c = 8

    def conv(scope, x, k=3, groups=1, pads=None):
        w = g.init(f"{scope}.weight", normal(rng, (c, c // groups, k, k),
                                               math.sqrt(2.0 / (c // groups * k * k))))
        b = g.init(f"{scope}.bias", normal(rng, c, 0.2))
        return g.node(scope, "Conv", [x, w, b], group=groups, kernel_shape=[k, k],
                      pads=[k // 2] * 4 if pads is None else pads, strides=[1, 1])

    def pad(scope, x, amounts, value=None):
        ins = [x, g.init(f"{scope}.pads", np.array(amounts, np.int64))]
        if value is not None:
            ins.append(g.const(scope, value, np.float32))
        return g.node(scope, "Pad", ins, mode="constant")

    # Pads graft folds into the Conv after them (symmetric; asymmetric plus the Conv's own),
    # and one it must not (a non-zero value).
    x = conv("/p0", pad("/p0", "input", [0, 0, 1, 1, 0, 0, 1, 1]), pads=[0, 0, 0, 0])
    x = conv("/p1", pad("/p1", x, [0, 0, 2, 0, 0, 0, 0, 1], 0.0), pads=[0, 1, 0, 0])
    x = conv("/p2", pad("/p2", x, [0, 0, 1, 1, 0, 0, 1, 1], 0.5), pads=[0, 0, 0, 0])
    y = conv("/c0", x)
    x = g.node("/a0", "Clip", [y, g.const("/a0", 0.0, np.float32), g.const("/a0", 6.0, np.float32)])
    y = conv("/c1", x, groups=c)
    x = g.node("/a1", "Mul", [y, g.node("/a1", "Sigmoid", [y])])
    x = g.node("/a2", "HardSwish", [conv("/c2", x, k=1)])
    x = g.node("/a3", "LeakyRelu", [conv("/c3", x)], alpha=0.1)
    res = x
    y = conv("/c4", x)
    x = g.node("/a4", "Clip", [g.node("/a4", "Add", [y, res]), g.const("/a4", -1.0, np.float32),
                               g.const("/a4", 1.5, np.float32)])
    x = g.node("/a5", "Tanh", [conv("/c5", x)])
    x = g.node("/a6", "Elu", [conv("/c6", x)], alpha=0.7)
    x = g.node("/a7", "Gelu", [conv("/c7", x)])
    x = g.node("/a8", "Mish", [conv("/c8", x)])
    # stand-alone activations (no Conv before them)
    x = g.node("/e0", "Sigmoid", [g.node("/e0", "Mul", [x, g.const("/e0", 2.0, np.float32)])])
    x = g.node("/e1", "Log", [g.node("/e1", "Exp", [x])])
    x = g.node("/e2", "Sqrt", [g.node("/e2", "Abs", [x])])
    x = g.node("/e3", "Tanh", [g.node("/e3", "Sub", [x, g.const("/e3", 0.5, np.float32)])])
    g.node("", "Identity", [x], outputs=["y"])
    shape = [2, c, 32, 32]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    model = g.model("main_graph", inputs, outputs, opset=20, ir_version=9,
                    doc=f"Conv + activation chains, random weights (seed {seed})")
    feeds = {"input": (np.random.default_rng(seed + 1).standard_normal(shape) * 2)
             .astype(np.float32)}
    return model, feeds


def build_reshape_views(seed):
    g = Builder("scoped")
    shape = [2, 16, 64]

    def target(scope, dims):
        return g.const(scope, np.array(dims, np.int64))

    a = g.node("/a", "Relu", ["input"])
    # b views a; a is read again at the end (its buffer must outlive every view)
    b = g.node("/b", "Reshape", [a, target("/b", [2, 1024])])
    c = g.node("/c", "Unsqueeze", [b, target("/c", [1])])
    d = g.node("/d", "Squeeze", [c, target("/d", [1])])
    # v is read only by its Reshape; its view w is read after other buffers come and go
    v = g.node("/v", "Sigmoid", ["input"])
    w = g.node("/w", "Reshape", [v, target("/w", [2, 16, 64])])
    t = "input"
    for k in range(4):
        t = g.node(f"/t{k}", "Exp", [g.node(f"/t{k}", "Mul", [t, g.const(f"/t{k}", 0.25, np.float32)])])
    e = g.node("/e", "Mul", [d, g.const("/e", 2.0, np.float32)])
    f = g.node("/f", "Reshape", [e, target("/f", [2, 16, 64])])
    y = g.node("/y", "Add", [g.node("/y", "Add", [f, a]), g.node("/y", "Mul", [w, t])],
               outputs=["y"])
    flat = g.node("/flat", "Flatten", [y], outputs=["flat"], axis=1)
    g.node("/again", "Reshape", [flat, target("/again", [-1])], outputs=["flat_again"])
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape),
               helper.make_tensor_value_info("flat", TensorProto.FLOAT, [2, 1024]),
               helper.make_tensor_value_info("flat_again", TensorProto.FLOAT, [2048])]
    model = g.model("main_graph", inputs, outputs, opset=17, ir_version=8,
                    doc=f"reshape chains planned as views, seed {seed}")
    feeds = {"input": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}
    return model, feeds


def build_residual_inplace(seed):
    rng = np.random.default_rng(seed)
    g = Builder("scoped")
    c, shape = 16, [2, 16, 12, 12]

    def conv(scope, x, k=3):
        w = g.init(f"{scope}.weight", normal(rng, (c, c, k, k), math.sqrt(1.0 / (c * k * k))))
        b = g.init(f"{scope}.bias", normal(rng, c, 0.1))
        return g.node(scope, "Conv", [x, w, b], kernel_shape=[k, k], pads=[k // 2] * 4,
                      strides=[1, 1])

    def relu(scope, x):
        return g.node(scope, "Relu", [x])

    def block(scope, x, res, k=3, act=True):
        y = g.node(scope, "Add", [conv(scope, x, k), res])
        return relu(scope, y) if act else y

    a = relu("/a", conv("/a", "input"))
    b = block("/b", a, a)                        # the group's Conv reads its residual: no
    d = block("/d", relu("/d1", conv("/d1", b)), b)  # plain: over b
    f = block("/f", relu("/f1", conv("/f1", d)), d)  # a chain: over d, itself over b
    e = block("/e", relu("/e1", conv("/e1", f)), f)  # f read again below: no
    e = g.node("/e2", "Mul", [e, f])
    v = g.node("/v", "Flatten", [e], axis=1)     # a view of e read after the next block
    h = block("/h", relu("/h1", conv("/h1", e)), e)  # so not over e
    k = block("/k", relu("/k1", conv("/k1", h, k=1)), h, k=1, act=False)  # Conv -> Add
    g.node("/y", "Identity", [k], outputs=["y"])
    g.node("/z", "Mul", [v, g.const("/z", 0.5, np.float32)], outputs=["z"])
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape),
               helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, c * 144])]
    model = g.model("main_graph", inputs, outputs, opset=17, ir_version=8,
                    doc=f"residual groups written over their residual, seed {seed}")
    feeds = {"input": np.random.default_rng(seed + 1).standard_normal(shape).astype(np.float32)}
    return model, feeds


# ----------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------

MODELS = {
    "resnet18": dict(build=lambda: build_resnet(18, seed=1018), external=False),
    "resnet50": dict(build=lambda: build_resnet(50, seed=1050), external=False),
    "block_parity_resnet18": dict(build=lambda: build_resnet(18, seed=1515, hw=64, input_name="x",
                                                             n_calib=8, n_feed=32),
                                  external=False),
    "block_parity_bert4": dict(build=lambda: build_bert(BERT_PARITY, seed=2003,
                                                        feeds=parity_text_inputs),
                               external=False),
    "bert_base": dict(build=lambda: build_bert(BERT_BASE, seed=2001), external=True),
    "bert_tiny_decomposed": dict(build=lambda: build_bert(BERT_TINY, seed=2002), external=False),
    "mobilenet_tiny": dict(build=lambda: build_mobilenet_tiny(seed=3001), external=False),
    "conv_acts": dict(build=lambda: build_conv_acts(seed=3101), external=False),
    "reshape_views": dict(build=lambda: build_reshape_views(seed=3201), external=False),
    "residual_inplace": dict(build=lambda: build_residual_inplace(seed=3301), external=False),
}


def dims_of_value_info(vi):
    return [d.dim_param if d.HasField("dim_param") else d.dim_value
            for d in vi.type.tensor_type.shape.dim]


def is_up_to_date(out_dir, name):
    manifest = out_dir / f"{name}.json"
    try:
        info = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    if info.get("generator_version") != GENERATOR_VERSION:
        return False
    for fname, size in info.get("files", {}).items():
        path = out_dir / fname
        if not path.is_file() or path.stat().st_size != size:
            return False
    return True


def run_ort(model_path, feeds):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds))), ort.__version__


def build_one(out_dir, name):
    spec = MODELS[name]
    (out_dir / f"{name}.json").unlink(missing_ok=True)  # written last: marks completion
    t0 = time.time()
    model, feeds = spec["build"]()
    model_file = f"{name}.onnx"
    model_path = out_dir / model_file
    data_file = f"{name}.onnx.data"
    (out_dir / data_file).unlink(missing_ok=True)  # onnx appends to an existing data file
    if spec["external"]:
        onnx.save_model(model, str(model_path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_file, size_threshold=4096)
        os.chmod(out_dir / data_file, 0o644)  # onnx creates it owner-only
    else:
        onnx.save_model(model, str(model_path))
    onnx.checker.check_model(str(model_path), full_check=True)
    t_build = time.time() - t0

    files = [model_file] + ([data_file] if spec["external"] else [])
    entries_in = []
    for vi in model.graph.input:
        fname = f"{name}.in.{vi.name}.npy"
        np.save(out_dir / fname, feeds[vi.name])
        files.append(fname)
        entries_in.append(dict(name=vi.name, role="input", dtype=str(feeds[vi.name].dtype),
                               dims=dims_of_value_info(vi), shape=list(feeds[vi.name].shape),
                               file=fname))
    outputs, ort_version = run_ort(model_path, feeds)
    entries_out = []
    for vi in model.graph.output:
        fname = f"{name}.out.{vi.name}.npy"
        arr = outputs[vi.name]
        if not np.all(np.isfinite(arr)):
            raise RuntimeError(f"{name}: ORT output {vi.name} has non-finite values")
        np.save(out_dir / fname, arr)
        files.append(fname)
        entries_out.append(dict(name=vi.name, role="output", dtype=str(arr.dtype),
                                dims=dims_of_value_info(vi), shape=list(arr.shape), file=fname,
                                rms=float(np.sqrt(np.mean(arr.astype(np.float64) ** 2)))))
    manifest = dict(
        name=name,
        generator_version=GENERATOR_VERSION,
        model=model_file,
        external_data=data_file if spec["external"] else None,
        opset=model.opset_import[0].version,
        ir_version=model.ir_version,
        reference=dict(runtime="onnxruntime", version=ort_version,
                       provider="CPUExecutionProvider", graph_optimization="ORT_DISABLE_ALL"),
        # inputs/outputs: names in graph order (NAME.in.<name>.npy, NAME.out.<name>.npy);
        # tensors: per name, dtype, declared dims (symbolic as strings), data shape, file.
        inputs=[e["name"] for e in entries_in],
        outputs=[e["name"] for e in entries_out],
        tensors={e.pop("name"): e for e in entries_in + entries_out},
        files={f: (out_dir / f).stat().st_size for f in files},
    )
    tmp = out_dir / f"{name}.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, out_dir / f"{name}.json")
    print(f"  {name}: built in {t_build:.1f}s, total {time.time() - t0:.1f}s", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default %(default)s)")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(MODELS))
        return 0
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    for name in names:
        if not args.force and is_up_to_date(out_dir, name):
            print(f"  {name}: up to date", flush=True)
            continue
        build_one(out_dir, name)
    print(f"done in {time.time() - t0:.1f}s -> {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
