#!/usr/bin/env python3
"""export_digits.py: writes scikit-learn's 8x8 digits as .npy files for graft's digits transfer
test (no torch needed; scikit-learn and numpy only, as in CI).

Usage: python3 tools/export_digits.py OUT_DIR
Writes OUT_DIR/digits_images.npy, float32 (1797, 1, 8, 8), normalised as
(pixel / 16 - mean) / std with the mean and std of models/digits_transfer_reference.json, and
OUT_DIR/digits_labels.npy, int64 (1797,), both in load_digits()'s own order (the order the
reference's split indices refer to); and the transfer split itself: transfer_train_x.npy /
transfer_val_x.npy (images of classes 5-9) with transfer_train_y.npy / transfer_val_y.npy
(labels - 5), and transfer_reference.txt (`val_accuracy_mean M`, `val_accuracy_min M`,
`val_accuracy_max M`: PyTorch's accuracy over its 10 seeds)."""
import argparse
import json
import os

import numpy as np
from sklearn.datasets import load_digits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("out_dir")
    ap.add_argument("--reference", default=os.path.join(root, "models",
                                                        "digits_transfer_reference.json"))
    args = ap.parse_args()
    with open(args.reference) as f:
        ref = json.load(f)
    norm = ref["normalisation"]
    d = load_digits()
    x = (d.data.astype(np.float32) / np.float32(16.0) - np.float32(norm["mean"])) / np.float32(
        norm["std"])
    x = np.ascontiguousarray(x.reshape(-1, 1, 8, 8), dtype=np.float32)
    y = np.ascontiguousarray(d.target, dtype=np.int64)
    os.makedirs(args.out_dir, exist_ok=True)
    np.save(os.path.join(args.out_dir, "digits_images.npy"), x)
    np.save(os.path.join(args.out_dir, "digits_labels.npy"), y)
    for part in ("train", "val"):
        idx = np.asarray(ref["split"][part], dtype=np.int64)
        np.save(os.path.join(args.out_dir, f"transfer_{part}_x.npy"), np.ascontiguousarray(x[idx]))
        np.save(os.path.join(args.out_dir, f"transfer_{part}_y.npy"),
                np.ascontiguousarray(y[idx] - 5))
    seeds = ref["val_accuracy_over_seeds"]
    with open(os.path.join(args.out_dir, "transfer_reference.txt"), "w") as f:
        for k in ("mean", "min", "max"):
            f.write(f"val_accuracy_{k} {seeds[k]:.9g}\n")
    print(f"export_digits: {x.shape[0]} images to {args.out_dir}")


if __name__ == "__main__":
    main()
