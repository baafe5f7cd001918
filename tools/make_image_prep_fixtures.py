#!/usr/bin/env python3
"""make_image_prep_fixtures.py OUT_DIR: fixtures for tests/test_cli_images.sh (image folders and
preprocessing defaults). Writes:
  OUT_DIR/fixed32.onnx       a small CNN (Conv, Relu, GlobalAveragePool, Flatten, Gemm) whose
                             input "image" is declared (N, 3, 32, 32); no metadata
  OUT_DIR/fixed32_meta.onnx  the same with metadata graft.image.resize 40, crop 32, mean
                             0.5,0.5,0.5, std 0.25,0.25,0.25 (no grayscale entry)
  OUT_DIR/dynamic.onnx       the same with input (N, 3, H, W): nothing fixed
  OUT_DIR/images/<red|blue>/ 32x32 PNG and JPEG images, 8 per class, 3 of them in nested
                             folders (more/, more/deeper/); plus files the listing must leave
                             out silently (notes.txt, .hidden.png, .cache/x.png), one it must
                             skip and report (red/old.bmp), and links it must not follow twice
                             (red/loop -> .., blue/self -> .)
  OUT_DIR/expected.txt       "images 16" and "skipped 1"
Deterministic (seeded); needs numpy, onnx and Pillow."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image


def model(dims, metadata):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "conv.w")
    b = numpy_helper.from_array(np.zeros(8, np.float32), "conv.b")
    fw = numpy_helper.from_array(rng.normal(0, 0.3, (4, 8)).astype(np.float32), "fc.w")
    fb = numpy_helper.from_array(np.zeros(4, np.float32), "fc.b")
    nodes = [
        helper.make_node("Conv", ["image", "conv.w", "conv.b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["features"], axis=1),
        helper.make_node("Gemm", ["features", "fc.w", "fc.b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "prep_cnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
        [w, b, fw, fb])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    for k, v in metadata.items():
        m.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(m)
    return m


def images(out):
    rng = np.random.default_rng(5)
    colors = {"red": (200, 40, 40), "blue": (40, 40, 200)}
    places = ["", "", "", "", "", "more", "more", "more/deeper"]
    for name, color in colors.items():
        for i, sub in enumerate(places):
            d = os.path.join(out, name, sub)
            os.makedirs(d, exist_ok=True)
            px = np.clip(np.array(color) + rng.normal(0, 25, (32, 32, 3)), 0, 255).astype(np.uint8)
            ext = "png" if i % 2 == 0 else "jpg"
            Image.fromarray(px).save(os.path.join(d, f"{name}{i}.{ext}"))
    small = Image.fromarray(np.full((32, 32, 3), 128, np.uint8))
    small.save(os.path.join(out, "red", "old.bmp"))
    small.save(os.path.join(out, "red", ".hidden.png"))
    os.makedirs(os.path.join(out, "blue", ".cache"), exist_ok=True)
    small.save(os.path.join(out, "blue", ".cache", "x.png"))
    with open(os.path.join(out, "blue", "notes.txt"), "w") as f:
        f.write("not an image\n")
    os.symlink("..", os.path.join(out, "red", "loop"))
    os.symlink(".", os.path.join(out, "blue", "self"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    onnx.save(model(["N", 3, 32, 32], {}), os.path.join(out, "fixed32.onnx"))
    meta = {"graft.image.resize": "40", "graft.image.crop": "32",
            "graft.image.mean": "0.5,0.5,0.5", "graft.image.std": "0.25,0.25,0.25"}
    onnx.save(model(["N", 3, 32, 32], meta), os.path.join(out, "fixed32_meta.onnx"))
    onnx.save(model(["N", 3, "H", "W"], {}), os.path.join(out, "dynamic.onnx"))
    images(os.path.join(out, "images"))
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("images 16\nskipped 1\n")
    print(f"make_image_prep_fixtures: models and 16 images in {out}")


if __name__ == "__main__":
    main()
