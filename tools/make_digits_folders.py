#!/usr/bin/env python3
"""make_digits_folders.py: writes the embedded demo's labelled image folders (issue 5, "The
embedded default"): digits 5-9 of scikit-learn's 8x8 digits as 8x8 grayscale PNGs, for
transfer from models/digits_cnn.onnx (pretrained on digits 0-4).

Usage: python3 tools/make_digits_folders.py [--out examples/digits]
Needs numpy, scikit-learn and Pillow (no torch). Deterministic: a re-run writes identical files.

Layout: OUT/train/<class>/<index>.png and OUT/val/<class>/<index>.png, <class> one of
CLASS_NAMES ("five" .. "nine"; graft sorts class folders by name, so its labels are
eight=0, five=1, nine=2, seven=3, six=4), <index> the sample's position in load_digits()'s order,
zero-padded to 4 digits.
- train: a FEW images per class (SHOTS_PER_CLASS), chosen with
  numpy.random.default_rng(SHOT_SEED).choice(..., replace=False) from each class's part of the
  train split of models/digits_transfer_reference.json (class by class, 5 to 9), then sorted.
- val: the whole val split of models/digits_transfer_reference.json (269 images).

Pixels: PNG mode "L" (8-bit gray), pixel = round(v * 255 / 16) for the digit value v in 0..16
(numpy's round-half-to-even; v * 255 / 16 = v * 15.9375 never ends in exactly .5, so the rule is
unambiguous). graft reads them with grayscale=1, resize=0, crop=8, mean[0]=0.3053, std[0]=0.376
(its normalisation is (pixel / 255 - mean) / std); pixel / 255 differs from v / 16 by at most
0.5 / 255 (0.0052 after dividing by std), see tools/make_digits_demo_reference.py.
"""
import argparse
import json
import os
import shutil

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

CLASS_NAMES = {5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
SHOTS_PER_CLASS, SHOT_SEED = 10, 0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "models", "digits_transfer_reference.json")


def to_pixels(data):
    """(N, 64) digit values 0..16 -> (N, 8, 8) uint8, round(v * 255 / 16)."""
    return np.round(data.astype(np.float64) * 255.0 / 16.0).astype(np.uint8).reshape(-1, 8, 8)


def select(reference=REFERENCE):
    """Returns (train, val, labels): sorted index arrays into load_digits()'s order, and the
    digit labels of all 1797 samples."""
    with open(reference) as f:
        split = json.load(f)["split"]
    y = load_digits().target
    rng = np.random.default_rng(SHOT_SEED)
    full_train = np.asarray(split["train"], dtype=np.int64)
    shots = [rng.choice(full_train[y[full_train] == c], SHOTS_PER_CLASS, replace=False)
             for c in sorted(CLASS_NAMES)]
    train = np.sort(np.concatenate(shots))
    val = np.sort(np.asarray(split["val"], dtype=np.int64))
    return train, val, y


def file_path(out, part, index, label):
    return os.path.join(out, part, CLASS_NAMES[int(label)], "%04d.png" % index)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "examples", "digits"))
    args = ap.parse_args()
    d = load_digits()
    pixels = to_pixels(d.data)
    train, val, y = select()
    for part in ("train", "val"):
        shutil.rmtree(os.path.join(args.out, part), ignore_errors=True)
    total = 0
    for part, idx in (("train", train), ("val", val)):
        for i in idx:
            path = file_path(args.out, part, i, y[i])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Image.fromarray(pixels[i]).save(path, optimize=True)
            total += os.path.getsize(path)
    print(f"wrote {len(train)} train ({SHOTS_PER_CLASS} per class) and {len(val)} val PNGs under "
          f"{args.out} ({total} bytes of PNG)")


if __name__ == "__main__":
    main()
