#!/usr/bin/env python3
"""Build the small models the pruning tests need beyond tools/make_models.py's, with ONNX Runtime's
outputs.

Models (into --out, default tests/data/gen/prune/ under the repository root):
  concat_block   a DenseNet/Inception-like block: two Conv->BN->ReLU branches joined by a Concat
                 (12 + 10 channels), a depthwise Conv over the joined channels, a 1x1 Conv
                 reading them, a second Concat of that Conv's output with the stem's (whose
                 channels stay: the first convolution is kept dense), a strided Conv, global
                 pooling and a classifier. Opset 13, input `input` (batch, 3, 16, 16), output
                 `logits` (batch, 5). BatchNormalization is left unfolded, with gammas spread
                 over [0.1, 1.5] so that ranking channels by |gamma| means something.

For each model NAME it writes NAME.onnx, NAME.in.input.npy (seeded, batch 2) and
NAME.out.logits.npy (ONNX Runtime, CPU, graph optimisations off). Deterministic: the same files
every run (a run whose files exist is skipped unless --force).

Usage: python3 tools/make_prune_models.py [--out DIR] [--force]
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "gen" / "prune"


class Graph:
    """Nodes and initializers with torch-like scoped names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    def node(self, name, op, inputs, **attrs):
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def conv_bn_relu(self, scope, x, cin, cout, k, stride=1, group=1):
        w = self.rng.standard_normal((cout, cin // group, k, k)).astype(np.float32)
        w *= np.float32(math.sqrt(2.0 / (cin // group * k * k)))
        y = self.node(f"{scope}/Conv", "Conv", [x, self.init(f"{scope}.weight", w)],
                      kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride],
                      group=group)
        rng = self.rng
        bn = [self.init(f"{scope}.bn.{p}", a) for p, a in (
            ("weight", rng.uniform(0.1, 1.5, cout)),
            ("bias", rng.normal(0.0, 0.1, cout)),
            ("running_mean", rng.normal(0.0, 0.2, cout)),
            ("running_var", rng.uniform(0.5, 1.5, cout)))]
        y = self.node(f"{scope}/BatchNormalization", "BatchNormalization", [y] + bn, epsilon=1e-5)
        return self.node(f"{scope}/Relu", "Relu", [y])


def concat_block():
    g = Graph(seed=6)
    s = g.conv_bn_relu("/stem", "input", 3, 8, 3)
    a = g.conv_bn_relu("/branch_a", s, 8, 12, 1)
    b = g.conv_bn_relu("/branch_b", s, 8, 10, 3)
    cat = g.node("/Concat", "Concat", [a, b], axis=1)
    d = g.conv_bn_relu("/depthwise", cat, 22, 22, 3, group=22)
    c = g.conv_bn_relu("/mix", d, 22, 16, 1)
    cat2 = g.node("/Concat_1", "Concat", [c, s], axis=1)
    e = g.conv_bn_relu("/down", cat2, 24, 14, 3, stride=2)
    p = g.node("/GlobalAveragePool", "GlobalAveragePool", [e])
    f = g.node("/Flatten", "Flatten", [p], axis=1)
    w = g.rng.standard_normal((5, 14)).astype(np.float32) * np.float32(1 / math.sqrt(14))
    bias = g.rng.normal(0.0, 0.1, 5)
    g.nodes.append(helper.make_node("Gemm", [f, g.init("fc.weight", w), g.init("fc.bias", bias)],
                                    ["logits"], name="/fc/Gemm", alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(
        g.nodes, "concat_block",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 5])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="graft tools/make_prune_models.py")
    model.ir_version = 7
    onnx.checker.check_model(model)
    feeds = {"input": np.random.default_rng(7).standard_normal((2, 3, 16, 16)).astype(np.float32)}
    return model, feeds


def write(name, model, feeds, out_dir, force):
    path = out_dir / f"{name}.onnx"
    outputs = [o.name for o in model.graph.output]
    files = [path] + [out_dir / f"{name}.in.{k}.npy" for k in feeds] + \
        [out_dir / f"{name}.out.{o}.npy" for o in outputs]
    if not force and all(f.exists() for f in files):
        print(f"{name}: up to date")
        return
    import onnxruntime as ort
    onnx.save(model, path)
    for k, v in feeds.items():
        np.save(out_dir / f"{name}.in.{k}.npy", v)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    for o, v in zip(outputs, sess.run(outputs, feeds)):
        np.save(out_dir / f"{name}.out.{o}.npy", v)
    print(f"{name}: wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model, feeds = concat_block()
    write("concat_block", model, feeds, args.out, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
