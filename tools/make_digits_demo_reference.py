#!/usr/bin/env python3
"""make_digits_demo_reference.py: PyTorch's numbers for the embedded demo (issue 5, "The embedded
default"): transfer from models/digits_cnn.onnx (pretrained on digits 0-4) to digits 5-9 with a
FEW training images, against training the same CNN from scratch on those images. Writes
models/digits_demo_reference.json.

Usage: python3 tools/make_digits_demo_reference.py [--data examples/digits] [--out FILE]
Needs torch, onnx, onnxruntime, numpy, scikit-learn and Pillow; run
tools/make_digits_folders.py first (this script checks the PNGs against what it expects).
CPU, deterministic, a few seconds.

Data: the PNGs that tools/make_digits_folders.py wrote (50 train = 10 per class, 269 val),
read with Pillow and normalised as graft normalises them with grayscale=1, resize=0, crop=8,
mean[0]=0.3053, std[0]=0.376: x = pixel * (1 / (255 * std)) - mean / std in float32 (graft's
gray_to_tensor), layout (N, 1, 8, 8). Pixels are round(v * 255 / 16) of the digit values v
(0..16), so x differs from the pretraining's normalisation (v / 16 - mean) / std by at most
0.5 / 255 / std = 0.0052; both inputs are run and recorded ("inputs_png" is what graft sees,
"inputs_exact" the pretraining's). Labels: digit - 5 here; graft's folder labels are the
alphabetical order of the class names (eight, five, nine, seven, six), which does not change an
accuracy.

(a) Transfer: the backbone of models/digits_cnn.onnx (weights read from the ONNX initializers
    into tools/make_digits_transfer.py's DigitsCNN, eval mode, frozen; checked against ONNX
    Runtime), its 64-d pooled features computed once; head nn.Linear(64, 5), default init after
    torch.manual_seed(s); AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-4 on the
    weight only; cross-entropy (mean); batch 32, last partial batch kept (50 images: 2 steps per
    epoch); 200 epochs; constant lr; epoch e's order torch.randperm(50,
    generator=torch.Generator().manual_seed(1000 + 100 s + e)).
(b) Scratch: the same architecture (DigitsCNN(5)), default init after torch.manual_seed(s),
    all parameters trained, BatchNorm in train mode while training and eval mode for the
    validation; Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay; cross-entropy;
    batch 32, last partial batch kept; 200 epochs; constant lr; order as in (a).
Both: seeds s = 0..4; the accuracy after the last epoch on the 269 val images; mean/min/max.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_digits_folders as folders  # noqa: E402
import make_digits_transfer as transfer  # noqa: E402

ROOT = folders.ROOT
SEEDS = range(5)
ORDER_SEED = 1000
TRANSFER = dict(head="nn.Linear(64, 5) on the frozen backbone's 64-d pooled features, default "
                     "init after torch.manual_seed(seed)",
                optimizer="AdamW", lr=1e-2, betas=[0.9, 0.999], eps=1e-8, weight_decay=1e-4,
                weight_decay_on="weight only (bias 0)", batch_size=32, drop_last=False,
                epochs=200, loss="cross_entropy (mean)", scheduler="constant")
SCRATCH = dict(model="DigitsCNN(5) (the same architecture as models/digits_cnn.onnx), default "
                     "init after torch.manual_seed(seed), all parameters trained, BatchNorm in "
                     "train mode while training, eval mode for validation",
               optimizer="Adam", lr=1e-3, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.0,
               batch_size=32, drop_last=False, epochs=200, loss="cross_entropy (mean)",
               scheduler="constant")
ORDER = ("epoch e (0-based) of seed s: torch.randperm(n_train, generator=torch.Generator()"
         f".manual_seed({ORDER_SEED} + 100 * s + e)), positions into files.train")
GRAFT_OPTIONS = dict(resize=0, crop=8, grayscale=1, augment=0, mean=[0.3053, 0.3053, 0.3053],
                     std=[0.376, 0.376, 0.376], nhwc=0, dtype="F32", input_name="input")


def load_backbone(onnx_path):
    import onnx
    from onnx import numpy_helper
    net = transfer.DigitsCNN()
    state = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
             for i in onnx.load(onnx_path).graph.initializer}
    own = net.state_dict()
    missing = [k for k in own if k not in state and not k.endswith("num_batches_tracked")]
    if missing:
        raise SystemExit(f"{onnx_path}: no initializer for {missing}")
    net.load_state_dict({k: state.get(k, v) for k, v in own.items()})
    return net.eval()


def graft_normalise(pixels, mean, std):
    """uint8 (N, 8, 8) -> float32 (N, 1, 8, 8), as graft's gray_to_tensor computes it."""
    scale = np.float32(1.0) / (np.float32(255.0) * np.float32(std))
    shift = np.float32(mean) / np.float32(std)
    return (pixels.astype(np.float32) * scale - shift).reshape(-1, 1, 8, 8).astype(np.float32)


def read_pngs(data_dir, part, idx, y):
    out = []
    for i in idx:
        im = Image.open(folders.file_path(data_dir, part, i, y[i]))
        if im.mode != "L" or im.size != (8, 8):
            raise SystemExit(f"{im.filename}: mode {im.mode} size {im.size}, want L 8x8")
        out.append(np.asarray(im, dtype=np.uint8))
    return np.stack(out)


def check_folders(data_dir, train, val, y):
    """The folders must hold exactly the selected files."""
    for part, idx in (("train", train), ("val", val)):
        want = sorted(os.path.relpath(folders.file_path(data_dir, part, i, y[i]), data_dir)
                      for i in idx)
        got = sorted(os.path.relpath(os.path.join(dp, f), data_dir)
                     for dp, _, fs in os.walk(os.path.join(data_dir, part)) for f in fs)
        if got != want:
            raise SystemExit(f"{data_dir}/{part} differs from tools/make_digits_folders.py's "
                             "selection; re-run it")


def fit(params_groups, make_opt, forward, xtr, ytr, xva, yva, seed, epochs, train_mode=None):
    opt = make_opt(params_groups)
    n = len(ytr)
    for e in range(epochs):
        if train_mode:
            train_mode(True)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(ORDER_SEED + 100 * seed + e))
        for i in range(0, n, 32):
            b = perm[i:i + 32]
            loss = F.cross_entropy(forward(xtr[b]), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    if train_mode:
        train_mode(False)
    with torch.no_grad():
        va = float((forward(xva).argmax(1) == yva).float().mean())
        tr = float((forward(xtr).argmax(1) == ytr).float().mean())
    return va, tr


def run_transfer(backbone, xtr, ytr, xva, yva, seed):
    with torch.no_grad():
        ftr, fva = backbone.backbone(xtr), backbone.backbone(xva)
    torch.manual_seed(seed)
    head = nn.Linear(64, 5)
    groups = [{"params": [head.weight], "weight_decay": TRANSFER["weight_decay"]},
              {"params": [head.bias], "weight_decay": 0.0}]
    return fit(groups, lambda g: torch.optim.AdamW(g, lr=TRANSFER["lr"],
                                                   betas=tuple(TRANSFER["betas"]),
                                                   eps=TRANSFER["eps"]),
               head, ftr, ytr, fva, yva, seed, TRANSFER["epochs"])


def run_scratch(xtr, ytr, xva, yva, seed):
    torch.manual_seed(seed)
    net = transfer.DigitsCNN(5)
    return fit(net.parameters(), lambda g: torch.optim.Adam(g, lr=SCRATCH["lr"],
                                                            betas=tuple(SCRATCH["betas"]),
                                                            eps=SCRATCH["eps"]),
               net, xtr, ytr, xva, yva, seed, SCRATCH["epochs"],
               train_mode=lambda t: net.train(t))


def summary(v):
    return {"per_seed": v, "mean": float(np.mean(v)), "min": min(v), "max": max(v)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "digits"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "digits_cnn.onnx"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "digits_demo_reference.json"))
    args = ap.parse_args()
    t0 = time.time()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    with open(folders.REFERENCE) as f:
        norm = json.load(f)["normalisation"]
    mean, std = norm["mean"], norm["std"]
    d = load_digits()
    train, val, y = folders.select()
    check_folders(args.data, train, val, y)

    # inputs: as graft sees the PNGs, and as the pretraining normalised the digits
    png = {p: read_pngs(args.data, p, idx, y) for p, idx in (("train", train), ("val", val))}
    expect = folders.to_pixels(d.data)
    png_vs_generated = max(int(np.max(png["train"] != expect[train])),
                           int(np.max(png["val"] != expect[val])))
    exact_all = transfer.normalise(d.data, mean, std)
    inputs = {
        "inputs_png": (torch.from_numpy(graft_normalise(png["train"], mean, std)),
                       torch.from_numpy(graft_normalise(png["val"], mean, std))),
        "inputs_exact": (torch.from_numpy(exact_all[train]), torch.from_numpy(exact_all[val])),
    }
    quant = max(float(np.max(np.abs(inputs["inputs_png"][k].numpy() -
                                    inputs["inputs_exact"][k].numpy()))) for k in (0, 1))
    ytr, yva = torch.from_numpy(y[train] - 5).long(), torch.from_numpy(y[val] - 5).long()

    backbone = load_backbone(args.model)
    import onnxruntime as ort
    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    xv = inputs["inputs_png"][1]
    with torch.no_grad():
        ort_err = float(np.max(np.abs(sess.run(None, {"input": xv.numpy()})[0] -
                                      backbone(xv).numpy())))
    if ort_err > 1e-4:
        raise SystemExit(f"backbone loaded from {args.model} disagrees with ONNX Runtime "
                         f"({ort_err})")

    results = {}
    for name, (xtr, xva) in inputs.items():
        tr = [run_transfer(backbone, xtr, ytr, xva, yva, s) for s in SEEDS]
        sc = [run_scratch(xtr, ytr, xva, yva, s) for s in SEEDS]
        results[name] = {
            "transfer_val_accuracy": summary([a for a, _ in tr]),
            "scratch_val_accuracy": summary([a for a, _ in sc]),
            "transfer_train_accuracy": [a for _, a in tr],
            "scratch_train_accuracy": [a for _, a in sc],
        }
    t1 = time.time()

    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731
    ref = {
        "about": "PyTorch reference for graft's embedded demo (issue 5): transfer from "
                 "models/digits_cnn.onnx to digits 5-9 with 10 training images per class, "
                 "against the same CNN trained from scratch on them; written by "
                 "tools/make_digits_demo_reference.py (its docstring gives the full recipe).",
        "torch_version": torch.__version__,
        "data": {"train_dir": rel(os.path.join(args.data, "train")),
                 "val_dir": rel(os.path.join(args.data, "val")),
                 "made_by": "tools/make_digits_folders.py",
                 "pixels": "PNG mode L, 8x8, pixel = round(v * 255 / 16) of load_digits()'s "
                           "values v (0..16)",
                 "class_folders": {str(c): n for c, n in folders.CLASS_NAMES.items()},
                 "graft_label_order": sorted(folders.CLASS_NAMES.values()),
                 "label_map_here": "digit - 5 (accuracy does not depend on the label order)",
                 "shots_per_class": folders.SHOTS_PER_CLASS,
                 "shot_selection": "numpy.random.default_rng(%d).choice(class c's part of "
                                   "models/digits_transfer_reference.json's split.train, %d, "
                                   "replace=False) for c = 5..9, then sorted"
                                   % (folders.SHOT_SEED, folders.SHOTS_PER_CLASS),
                 "val_selection": "models/digits_transfer_reference.json's split.val (all 269)"},
        "graft_image_options": GRAFT_OPTIONS,
        "normalisation": {"graft": "pixel * (1 / (255 * std)) - mean / std, float32",
                          "pretraining": "(v / 16 - mean) / std, float32", "mean": mean,
                          "std": std,
                          "max_abs_difference_png_vs_pretraining": quant,
                          "png_pixels_differing_from_generated": png_vs_generated},
        "model": {"path": rel(args.model), "onnxruntime_max_abs_error": ort_err},
        "seeds": list(SEEDS),
        "transfer_recipe": dict(TRANSFER, order=ORDER),
        "scratch_recipe": dict(SCRATCH, order=ORDER),
        "transfer_val_accuracy": results["inputs_png"]["transfer_val_accuracy"],
        "scratch_val_accuracy": results["inputs_png"]["scratch_val_accuracy"],
        "inputs_png": results["inputs_png"],
        "inputs_exact": results["inputs_exact"],
        "files": {"train": [rel(folders.file_path(args.data, "train", i, y[i])) for i in train],
                  "val": [rel(folders.file_path(args.data, "val", i, y[i])) for i in val]},
        "indices": {"train": train.tolist(), "val": val.tolist()},
    }
    with open(args.out, "w") as f:
        f.write("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}"
                                   for k, v in ref.items()) + "\n}\n")
    for name, r in results.items():
        t, s = r["transfer_val_accuracy"], r["scratch_val_accuracy"]
        print(f"{name}: transfer val accuracy mean {t['mean']:.4f} (min {t['min']:.4f}, max "
              f"{t['max']:.4f}); scratch mean {s['mean']:.4f} (min {s['min']:.4f}, max "
              f"{s['max']:.4f})")
    print(f"PNG vs pretraining inputs: max abs difference {quant:.5f}; ORT max abs err "
          f"{ort_err:.2e}; wrote {args.out} ({os.path.getsize(args.out)} bytes) in "
          f"{t1 - t0:.1f} s")


if __name__ == "__main__":
    main()
