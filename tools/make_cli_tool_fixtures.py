#!/usr/bin/env python3
"""make_cli_tool_fixtures.py: fixtures for tests/test_cli_tools.sh (graft predict/eval).

Usage: python3 tools/make_cli_tool_fixtures.py OUT_DIR
Writes, from models/digits_cnn.onnx and scikit-learn's 8x8 digits (classes 0-4 named a-e):
  OUT_DIR/model.onnx   the CNN with metadata graft.classes and graft.image.* (grayscale, crop 8,
                       no resize, the digits' mean/std); output "logits"
  OUT_DIR/probs.onnx   the same with a Softmax appended; output "probabilities"
  OUT_DIR/data/<a-e>/NNN.png      12 images per class, 8-bit grayscale, two of them filed under
                                  the wrong class (so accuracy is below 1)
  OUT_DIR/broken/<a-e>/...        the same plus c/broken.png, which is not an image
  OUT_DIR/mismatch/<a,b,c,d,x>/   one image each (a class the model does not have)
  OUT_DIR/loose/                  a few images in nested folders plus notes.txt (not an image)
  OUT_DIR/expected.json           ONNX Runtime's probabilities for every image under data/ with
                                  graft's preprocessing ((pixel / 255 - mean) / std), its top-1
                                  class, and the accuracy over data/
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper
from PIL import Image
from sklearn.datasets import load_digits

CLASSES = ["a", "b", "c", "d", "e"]
MEAN, STD = 0.3053, 0.376
PER_CLASS = 12


def add_metadata(model):
    meta = {"graft.classes": json.dumps(CLASSES), "graft.image.grayscale": "1",
            "graft.image.crop": "8", "graft.image.resize": "0",
            "graft.image.mean": f"{MEAN},{MEAN},{MEAN}", "graft.image.std": f"{STD},{STD},{STD}"}
    del model.metadata_props[:]
    for k, v in meta.items():
        model.metadata_props.add(key=k, value=v)


def with_softmax(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    out = m.graph.output[0]
    node = helper.make_node("Softmax", [out.name], ["probabilities"], axis=1)
    m.graph.node.append(node)
    new_out = onnx.ValueInfoProto()
    new_out.CopyFrom(out)
    new_out.name = "probabilities"
    del m.graph.output[:]
    m.graph.output.append(new_out)
    return m


def save_png(path, image16):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    px = np.rint(image16.astype(np.float64) * 255.0 / 16.0).astype(np.uint8)
    Image.fromarray(px, mode="L").save(path)


def write_images(out, d):
    """data/: PER_CLASS images per class, with two mislabelled; returns [(path, label)]."""
    files = []
    for c in range(len(CLASSES)):
        idx = np.nonzero(d.target == c)[0][:PER_CLASS]
        for j, i in enumerate(idx):
            folder = CLASSES[c]
            if (c, j) == (1, 0):
                folder = "a"  # a '1' filed under 'a'
            if (c, j) == (3, 1):
                folder = "e"  # a '3' filed under 'e'
            path = os.path.join(out, "data", folder, f"{c}_{j:03d}.png")
            save_png(path, d.images[i])
            files.append((path, CLASSES.index(folder)))
    shutil.copytree(os.path.join(out, "data"), os.path.join(out, "broken"))
    with open(os.path.join(out, "broken", "c", "broken.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\nthis is not a png")
    for k, name in enumerate(["a", "b", "c", "d", "x"]):
        save_png(os.path.join(out, "mismatch", name, "0.png"), d.images[k])
    for k, sub in enumerate(["", "one", "one/two"]):
        save_png(os.path.join(out, "loose", sub, f"img{k}.png"), d.images[k])
    with open(os.path.join(out, "loose", "notes.txt"), "w") as f:
        f.write("not an image\n")
    return files


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    model = onnx.load(os.path.join(root, "models", "digits_cnn.onnx"))
    add_metadata(model)
    onnx.save(model, os.path.join(out, "model.onnx"))
    onnx.save(with_softmax(model), os.path.join(out, "probs.onnx"))
    files = write_images(out, load_digits())
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"),
                                providers=["CPUExecutionProvider"])
    expected, correct = {}, 0
    for path, label in sorted(files):
        px = np.asarray(Image.open(path).convert("L"), dtype=np.float32)
        x = ((px / np.float32(255.0) - np.float32(MEAN)) / np.float32(STD))[None, None]
        logits = sess.run(None, {"input": x})[0][0].astype(np.float64)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = int(np.argmax(p))
        correct += top == label
        expected[path] = {"label": label, "top1": CLASSES[top], "probabilities": p.tolist()}
    summary = {"files": expected, "accuracy": correct / len(files), "correct": correct,
               "samples": len(files)}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"make_cli_tool_fixtures: {len(files)} images, ONNX Runtime accuracy "
          f"{summary['accuracy']:.4f}, in {out}")


if __name__ == "__main__":
    main()
