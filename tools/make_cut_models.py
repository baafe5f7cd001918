#!/usr/bin/env python3
"""tools/make_cut_models.py --out DIR: small graphs with the classifier heads of each model family
(torchvision/timm ConvNeXt, SqueezeNet as TorchScript and dynamo export it, ViT's class token by
Gather and by Slice, Swin, timm MobileNetV3's conv_head, a *ForSequenceClassification, a Gemm
behind ArgMax, a segmentation net with no classifier), for tests/test_cut.c's `--cut auto` checks.
Seeded random weights (onnx helper API). For each model NAME it writes NAME.onnx, its inputs
NAME.in.<input>.npy and, where `auto` should find features, NAME.want.npy: ONNX Runtime's value of
the tensor the rule picks, pooled as the rule says. DIR/cut_models.txt lists
`NAME TENSOR POOLING FEATURES` (TENSOR `-`: no cut point should be found)."""
import argparse
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
BATCH = 2


class Graph:
    """A graph under construction: nodes, initializers (seeded), one image or text input."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def const(self, value, name=None):
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        return self.const(self.rng.normal(0, 1 / np.sqrt(fan_in), shape).astype(np.float32))

    def op(self, op_type, inputs, out=None, **attrs):
        self.count += 1
        out = out or f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.count}",
                                           **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, bias=True, out=None):
        ins = [x, self.weight(cout, cin, k, k)]
        if bias:
            ins.append(self.const(self.rng.normal(0, 0.1, cout).astype(np.float32)))
        return self.op("Conv", ins, out, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[k // 2 * (stride == 1)] * 4)

    def gemm(self, x, fin, fout, out=None):
        b = self.const(self.rng.normal(0, 0.1, fout).astype(np.float32))
        return self.op("Gemm", [x, self.weight(fout, fin), b], out, transB=1)

    def layer_norm(self, x, width, out=None):
        scale = self.const(self.rng.uniform(0.5, 1.5, width).astype(np.float32))
        bias = self.const(self.rng.normal(0, 0.1, width).astype(np.float32))
        return self.op("LayerNormalization", [x, scale, bias], out, axis=-1)

    def model(self, inputs, outputs, opset=OPSET):
        g = helper.make_graph(self.nodes, "cut_test", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="graft make_cut_models.py")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def image_input():
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])


def output(name, dims, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def convnext(seed):
    """torchvision/timm ConvNeXt: pool, LayerNorm2d (Transpose, LN, Transpose), Flatten, Linear."""
    g = Graph(seed)
    h = g.op("Relu", [g.conv("x", 3, 8, 3)])
    p = g.op("GlobalAveragePool", [h])
    t = g.op("Transpose", [p], perm=[0, 2, 3, 1])
    t = g.op("Transpose", [g.layer_norm(t, 8)], perm=[0, 3, 1, 2])
    f = g.op("Flatten", [t], "features_flat", axis=1)
    y = g.op("Softmax", [g.gemm(f, 8, 5)], "probs", axis=1)
    return g.model([image_input()], [output(y, ["N", 5])]), "features_flat", "none", 8


def squeezenet(seed, dynamo):
    """SqueezeNet's classifier: 1x1 Conv, ReLU, global pooling, Flatten (TorchScript) or
    ReduceMean over H, W and Reshape (dynamo, opset 18: axes as an input)."""
    g = Graph(seed)
    h = g.op("Relu", [g.conv("x", 3, 8, 3)], "fire_out")
    c = g.op("Relu", [g.conv(h, 8, 5, 1, bias=not dynamo)])
    if dynamo:
        m = g.op("ReduceMean", [c, g.const(np.array([-1, -2], np.int64))], keepdims=1)
        y = g.op("Reshape", [m, g.const(np.array([0, -1], np.int64))], "logits")
    else:
        y = g.op("Flatten", [g.op("GlobalAveragePool", [c])], "logits", axis=1)
    return (g.model([image_input()], [output(y, ["N", 5])], 18 if dynamo else OPSET),
            "fire_out", "spatial", 8)


def patch_tokens(g):
    """(N, 3, 8, 8) -> 4 patch tokens of width 6, layer-normed: (N, 4, 6)."""
    p = g.conv("x", 3, 6, 4, stride=4)
    s = g.op("Reshape", [p, g.const(np.array([0, 6, -1], np.int64))])
    return g.layer_norm(g.op("Transpose", [s], perm=[0, 2, 1]), 6)


def vit(seed, by_slice):
    """ViT's head: the class token (Gather at index 0 of axis 1, or Slice + Squeeze), then the
    Linear (Gemm, or MatMul + bias Add as dynamo writes it)."""
    g = Graph(seed)
    tokens = patch_tokens(g)
    if by_slice:
        one = g.const(np.array([1], np.int64))
        s = g.op("Slice", [tokens, g.const(np.array([0], np.int64)), one, one])
        cls = g.op("Squeeze", [s, one], "class_token")
        y = g.op("MatMul", [cls, g.weight(6, 5)])
        y = g.op("Add", [g.const(g.rng.normal(0, 0.1, 5).astype(np.float32)), y], "logits")
    else:
        cls = g.op("Gather", [tokens, g.const(np.array(0, np.int64))], "class_token", axis=1)
        y = g.gemm(cls, 6, 5, "logits")
    return g.model([image_input()], [output(y, ["N", 5])]), "class_token", "none", 6


def swin(seed):
    """Swin's head: LayerNorm over channels-last, permute, mean over H and W, Linear."""
    g = Graph(seed)
    h = g.op("Transpose", [g.conv("x", 3, 8, 3)], perm=[0, 2, 3, 1])
    h = g.op("Transpose", [g.layer_norm(h, 8)], perm=[0, 3, 1, 2])
    m = g.op("ReduceMean", [h], "pooled", axes=[2, 3], keepdims=0)
    y = g.gemm(m, 8, 5, "logits")
    return g.model([image_input()], [output(y, ["N", 5])]), "pooled", "none", 8


def mobilenetv3(seed):
    """timm MobileNetV3: global pooling, conv_head (1x1 Conv with bias), HardSwish, Flatten,
    Linear: the features are the Linear's input (conv_head included), not the pooled map."""
    g = Graph(seed)
    h = g.op("HardSwish", [g.conv("x", 3, 8, 3)])
    p = g.op("GlobalAveragePool", [h])
    c = g.op("HardSwish", [g.conv(p, 8, 12, 1)])
    f = g.op("Flatten", [c], "pre_logits", axis=1)
    y = g.gemm(f, 12, 5, "logits")
    return g.model([image_input()], [output(y, ["N", 5])]), "pre_logits", "none", 12


def seqcls(seed):
    """*ForSequenceClassification: embeddings, a masked layer, LayerNorm, the pooler (Gather of
    token 0, dense, Tanh), the classifier; the hidden state is an output too, and the
    classifier's input (the pooler output) wins over it."""
    g = Graph(seed)
    emb = g.op("Gather", [g.const(g.rng.normal(0, 1, (50, 8)).astype(np.float32)), "input_ids"])
    m = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT),
                           g.const(np.array([2], np.int64))])
    h = g.op("MatMul", [g.op("Mul", [emb, m]), g.weight(8, 8)])
    hidden = g.layer_norm(g.op("Add", [h, emb]), 8, "last_hidden_state")
    cls = g.op("Gather", [hidden, g.const(np.array(0, np.int64))], axis=1)
    pooled = g.op("Tanh", [g.gemm(cls, 8, 8)], "pooler_output")
    y = g.gemm(pooled, 8, 3, "logits")
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["N", "S"])
           for n in ("input_ids", "attention_mask")]
    return (g.model(ids, [output(y, ["N", 3]), output(hidden, ["N", "S", 8])]),
            "pooler_output", "none", 8)


def argmax_head(seed):
    """A classifier whose output is its ArgMax: no tail leads to it, so the older rule (a Gemm
    fed by global pooling) finds it."""
    g = Graph(seed)
    p = g.op("GlobalAveragePool", [g.op("Relu", [g.conv("x", 3, 8, 3)])])
    f = g.op("Flatten", [p], "flat", axis=1)
    y = g.op("ArgMax", [g.gemm(f, 8, 5)], "label", axis=1, keepdims=0)
    return g.model([image_input()], [output(y, ["N"], TensorProto.INT64)]), "flat", "none", 8


def segmenter(seed):
    """Per-pixel logits (a 1x1 Conv, no pooling): no classifier over samples, no cut point."""
    g = Graph(seed)
    y = g.conv(g.op("Relu", [g.conv("x", 3, 8, 3)]), 8, 5, 1, out="pixel_logits")
    return g.model([image_input()], [output(y, ["N", 5, 8, 8])]), "-", "-", -1


MODELS = {
    "cut_convnext": lambda: convnext(4001),
    "cut_squeezenet": lambda: squeezenet(4002, dynamo=False),
    "cut_squeezenet_dynamo": lambda: squeezenet(4003, dynamo=True),
    "cut_vit_gather": lambda: vit(4004, by_slice=False),
    "cut_vit_slice": lambda: vit(4005, by_slice=True),
    "cut_swin": lambda: swin(4006),
    "cut_mobilenetv3": lambda: mobilenetv3(4007),
    "cut_seqcls": lambda: seqcls(4008),
    "cut_argmax": lambda: argmax_head(4009),
    "cut_segmenter": lambda: segmenter(4010),
}


def feeds_for(model, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        if i.name == "x":
            feeds["x"] = rng.standard_normal((BATCH, 3, 8, 8)).astype(np.float32)
        elif i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 50, (BATCH, 6)).astype(np.int64)
        else:
            mask = np.ones((BATCH, 6), np.int64)
            mask[1, 4:] = 0
            feeds[i.name] = mask
    return feeds


def reference(model, tensor, pooling, feeds):
    """ONNX Runtime's value of `tensor`, pooled as the rule says."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    if tensor not in [o.name for o in probe.graph.output]:
        probe.graph.output.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT, None))
    sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    value = sess.run([tensor], feeds)[0]
    if pooling == "spatial":
        value = value.mean(axis=(2, 3))
    return value.astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for k, (name, build) in enumerate(MODELS.items()):
        model, tensor, pooling, features = build()
        onnx.save(model, str(out / f"{name}.onnx"))
        feeds = feeds_for(model, 5000 + k)
        for n, v in feeds.items():
            np.save(out / f"{name}.in.{n}.npy", v)
        if tensor != "-":
            want = reference(model, tensor, pooling, feeds)
            assert want.shape == (BATCH, features), (name, want.shape)
            np.save(out / f"{name}.want.npy", want)
        lines.append(f"{name} {tensor} {pooling} {features}")
    (out / "cut_models.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} models to {out}")


if __name__ == "__main__":
    main()
