#!/usr/bin/env python3
"""tools/make_fixed_batch_models.py OUTDIR: small models whose batch is fixed in the graph, as
exporters write them (seeded random weights), for tests/test_cli_fixbatch.sh:

- fixed_cnn.onnx: input 'x' declared (1, 3, 16, 16) and a Reshape to [1, 8] (the dynamo
  exporter's flatten): batch fixed at 1.
- pinned_cnn.onnx: input 'input.1' declared ('batch', 3, 16, 16), but a channel shuffle whose
  Reshape targets hold batch 1 (one constant, one computed from Shape as TorchScript writes it):
  ShuffleNet's case.
- declared_cnn.onnx: input declared (1, 3, 16, 16), nothing in the graph depends on it (Flatten):
  graft lets the declared batch go.
- fixed_text_b1.onnx, fixed_text_b2.onnx: input_ids and attention_mask declared (B, 16), an
  embedding, a head split whose Reshapes hold B, a masked output 'hidden' (B, 16, 16).
- bad_output.onnx: batch 1 fixed and an output that does not lead with the batch.
- computed_flatten_cnn.onnx: input ('batch', 3, 16, 16), a zero Pad before a Conv, and the
  flatten as TorchScript writes `x.view(input.size(0), -1)`: a Reshape to Concat(Shape(input)[0],
  -1), whose feature size shape inference cannot carry to load time (EfficientNet-Lite's case)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def weights(rng, name, *shape):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return const(name, (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32))


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="graft-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def conv_stem(rng, x):
    """Conv 3 -> 8 (3x3, same padding): nodes and initializers."""
    nodes = [helper.make_node("Conv", [x, "conv.w", "conv.b"], ["conv"], name="conv",
                              pads=[1, 1, 1, 1])]
    inits = [weights(rng, "conv.w", 8, 3, 3, 3), weights(rng, "conv.b", 8)]
    return nodes, inits


def head(rng, pooled_2d, out, classes=4):
    nodes = [helper.make_node("Gemm", [pooled_2d, "fc.w", "fc.b"], [out], name="fc", transB=1)]
    return nodes, [weights(rng, "fc.w", classes, 8), weights(rng, "fc.b", classes)]


def fixed_cnn(path):
    rng = np.random.default_rng(1)
    n, i = conv_stem(rng, "x")
    n += [helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
          helper.make_node("GlobalAveragePool", ["relu"], ["gap"], name="gap"),
          helper.make_node("Reshape", ["gap", "flat_shape"], ["flat"], name="pin")]
    i += [const("flat_shape", np.array([1, 8], np.int64))]
    hn, hi = head(rng, "flat", "logits")
    g = helper.make_graph(n + hn, "fixed_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])],
                          i + hi)
    save(g, path)


def pinned_cnn(path):
    rng = np.random.default_rng(2)
    n, i = conv_stem(rng, "input.1")
    # channel shuffle: (N, 8, H, W) -> (1, 2, 4, H, W) -> swap groups -> (1, 8, H, W)
    n += [helper.make_node("Reshape", ["conv", "split_shape"], ["split"], name="shuffle_split"),
          helper.make_node("Transpose", ["split"], ["swapped"], name="shuffle_swap",
                           perm=[0, 2, 1, 3, 4]),
          helper.make_node("Shape", ["conv"], ["conv_shape"], name="shape"),
          helper.make_node("Slice", ["conv_shape", "one", "four"], ["chw"], name="chw"),
          helper.make_node("Concat", ["batch_one", "chw"], ["merge_shape"], name="merge_shape",
                           axis=0),
          helper.make_node("Reshape", ["swapped", "merge_shape"], ["merged"],
                           name="shuffle_merge"),
          helper.make_node("Relu", ["merged"], ["relu"], name="relu"),
          helper.make_node("GlobalAveragePool", ["relu"], ["gap"], name="gap"),
          helper.make_node("Flatten", ["gap"], ["flat"], name="flatten")]
    i += [const("split_shape", np.array([1, 2, 4, 16, 16], np.int64)),
          const("one", np.array([1], np.int64)), const("four", np.array([4], np.int64)),
          const("batch_one", np.array([1], np.int64))]
    hn, hi = head(rng, "flat", "logits")
    g = helper.make_graph(
        n + hn, "pinned_cnn",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])], i + hi)
    save(g, path)


def declared_cnn(path):
    rng = np.random.default_rng(3)
    n, i = conv_stem(rng, "x")
    n += [helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
          helper.make_node("GlobalAveragePool", ["relu"], ["gap"], name="gap"),
          helper.make_node("Flatten", ["gap"], ["flat"], name="flatten")]
    hn, hi = head(rng, "flat", "logits")
    g = helper.make_graph(n + hn, "declared_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])],
                          i + hi)
    save(g, path)


def fixed_text(path, b):
    rng = np.random.default_rng(4)
    s, h = 16, 16
    n = [helper.make_node("Gather", ["emb", "input_ids"], ["embedded"], name="embed", axis=0),
         helper.make_node("MatMul", ["embedded", "proj"], ["projected"], name="proj"),
         helper.make_node("Reshape", ["projected", "heads_shape"], ["heads"], name="heads_split"),
         helper.make_node("Transpose", ["heads"], ["heads_t"], name="heads_t", perm=[0, 2, 1, 3]),
         helper.make_node("Tanh", ["heads_t"], ["heads_act"], name="tanh"),
         helper.make_node("Transpose", ["heads_act"], ["heads_back"], name="heads_back",
                          perm=[0, 2, 1, 3]),
         helper.make_node("Reshape", ["heads_back", "merge_shape"], ["merged"],
                          name="heads_merge"),
         helper.make_node("Cast", ["attention_mask"], ["mask_f"], name="mask_f",
                          to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["mask_f", "axes_2"], ["mask_3"], name="mask_3"),
         helper.make_node("Mul", ["merged", "mask_3"], ["hidden"], name="hidden")]
    i = [weights(rng, "emb", 1000, h), weights(rng, "proj", h, h),
         const("heads_shape", np.array([b, s, 2, h // 2], np.int64)),
         const("merge_shape", np.array([b, s, h], np.int64)),
         const("axes_2", np.array([2], np.int64))]
    g = helper.make_graph(
        n, "fixed_text",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [b, s]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [b, s])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [b, s, h])], i)
    save(g, path)


def bad_output(path):
    n = [helper.make_node("GlobalAveragePool", ["x"], ["gap"], name="gap"),
         helper.make_node("Reshape", ["gap", "shape"], ["per_channel"], name="pin")]
    g = helper.make_graph(
        n, "bad_output",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("per_channel", TensorProto.FLOAT, [3])],
        [const("shape", np.array([3], np.int64))])
    save(g, path)


def computed_flatten_cnn(path):
    rng = np.random.default_rng(6)
    n = [helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad", mode="constant"),
         helper.make_node("Conv", ["padded", "conv.w", "conv.b"], ["conv"], name="conv"),
         helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
         helper.make_node("GlobalAveragePool", ["relu"], ["gap"], name="gap"),
         helper.make_node("Shape", ["x"], ["shape"], name="shape"),
         helper.make_node("Gather", ["shape", "zero"], ["n"], name="gather", axis=0),
         helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"),
         helper.make_node("Concat", ["n1", "minus1"], ["flat_shape"], name="concat", axis=0),
         helper.make_node("Reshape", ["gap", "flat_shape"], ["flat"], name="flatten")]
    i = [const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
         weights(rng, "conv.w", 8, 3, 3, 3), weights(rng, "conv.b", 8),
         const("zero", np.array(0, np.int64)), const("axes0", np.array([0], np.int64)),
         const("minus1", np.array([-1], np.int64))]
    hn, hi = head(rng, "flat", "logits")
    g = helper.make_graph(n + hn, "computed_flatten_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         ["batch", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                         ["batch", 4])], i + hi)
    save(g, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    fixed_cnn(os.path.join(out, "fixed_cnn.onnx"))
    pinned_cnn(os.path.join(out, "pinned_cnn.onnx"))
    declared_cnn(os.path.join(out, "declared_cnn.onnx"))
    fixed_text(os.path.join(out, "fixed_text_b1.onnx"), 1)
    fixed_text(os.path.join(out, "fixed_text_b2.onnx"), 2)
    bad_output(os.path.join(out, "bad_output.onnx"))
    computed_flatten_cnn(os.path.join(out, "computed_flatten_cnn.onnx"))
    print("wrote 7 models to", out)


if __name__ == "__main__":
    main()
