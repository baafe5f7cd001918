#!/usr/bin/env python3
"""make_digits_blocks_reference.py: PyTorch's numbers for fine-tuning the LAST BLOCKS of
models/digits_cnn.onnx together with a new head on the embedded digits demo data (digits 5-9, 10
training images per class), next to the head-only transfer, so the README can show graft's
`graft finetune ... --lr 0.01 --weight-decay 1e-4 --epochs 200` numbers beside PyTorch's.
Writes models/digits_blocks_reference.json.

Usage: python3 tools/make_digits_blocks_reference.py [--data examples/digits]
       [--model models/digits_cnn.onnx] [--out models/digits_blocks_reference.json]
Needs torch, onnx, onnxruntime, numpy, scikit-learn and Pillow; run tools/make_digits_folders.py
first. CPU, one thread, deterministic, about half a minute.

Data and model: exactly as tools/make_digits_demo_reference.py (whose functions this script
imports): the PNGs of examples/digits/{train,val} (50 train, 269 val) read with Pillow and
normalised as graft's gray_to_tensor does (x = pixel * (1 / (255 * std)) - mean / std, float32,
(N, 1, 8, 8)); labels digit - 5; the weights of models/digits_cnn.onnx loaded into
tools/make_digits_transfer.py's DigitsCNN (checked against ONNX Runtime).

The backbone is backbone.0 Conv(1->16, no bias), .1 BN, .2 ReLU, .3 Conv(16->32, no bias), .4 BN,
.5 ReLU, .6 MaxPool, .7 Conv(32->64, no bias), .8 BN, .9 ReLU, .10 GlobalAveragePool, .11 Flatten
-> 64-d features; the pretrained fc is replaced by a new head nn.Linear(64, 5). Settings:
  head_only:  everything up to backbone.11 frozen; the head trained (the recipe of
              models/digits_demo_reference.json's transfer_val_accuracy, recomputed here).
  last_block: frozen up to and including backbone.6 (MaxPool, graft's --train-from
              /backbone/backbone.6/MaxPool_output_0); trained: backbone.7.weight,
              backbone.8.weight / .bias (BN gamma, beta) and the head.
  two_blocks: frozen up to and including backbone.2 (first ReLU, --train-from
              /backbone/backbone.2/Relu_output_0); trained: backbone.3.weight,
              backbone.4.weight / .bias, backbone.7.weight, backbone.8.weight / .bias, head.
Recipe, the same for all three: the frozen part in eval mode under no_grad, its output computed
once for train and val; the trainable part a copy of the pretrained modules, in eval mode
throughout (BatchNorm uses and keeps its running statistics, only gamma and beta train); head
nn.Linear(64, 5), default init after torch.manual_seed(s); AdamW lr 1e-2, betas (0.9, 0.999),
eps 1e-8, weight_decay 1e-4 on parameters with ndim > 1 only (conv and linear weights; not
biases, not BN gamma/beta); cross-entropy (mean); batch 32, last partial batch kept (2 steps an
epoch); 200 epochs; constant lr; epoch e's order torch.randperm(50,
generator=torch.Generator().manual_seed(1000 + 100 s + e)); seeds s = 0..4. Recorded per setting:
the val accuracy after the last epoch (per seed, mean, min, max), the final training loss per
seed (the mean over the last epoch's batch losses weighted by batch size, as graft reports its
epoch loss) and the final training accuracy (one pass after training).

Difference of recipe from graft, stated not hidden: graft folds each BatchNorm into the conv
before it when it loads the model, so it trains the folded conv weight W * gamma / sqrt(var +
eps) and a conv bias beta - mean * gamma / sqrt(var + eps) (weight decayed, bias not), where
PyTorch here trains W (decayed), gamma and beta (not decayed). The function class is the same
(per-channel scale absorbed into the weight, shift into the bias), the parametrisation and so
the AdamW trajectory are not; the conv layers of this model have no bias of their own, BN's beta
is the shift. Numbers within a couple of points of graft's are the expectation, not equality.
"""
import argparse
import copy
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_digits_demo_reference as demo  # noqa: E402

ROOT = demo.ROOT
SEEDS = demo.SEEDS
ORDER_SEED = demo.ORDER_SEED
T = demo.TRANSFER
RECIPE = dict(
    head="nn.Linear(64, 5), default init after torch.manual_seed(seed)",
    frozen_part="eval mode, no_grad, output computed once for train and val",
    trainable_part="copy of the pretrained modules after train_from, eval mode throughout "
                   "(BatchNorm running statistics frozen and used; gamma, beta trained)",
    optimizer="AdamW", lr=T["lr"], betas=T["betas"], eps=T["eps"],
    weight_decay=T["weight_decay"],
    weight_decay_on="parameters with ndim > 1 (conv and linear weights); 0 on biases and "
                    "BatchNorm gamma/beta",
    batch_size=T["batch_size"], drop_last=T["drop_last"], epochs=T["epochs"], loss=T["loss"],
    scheduler=T["scheduler"], seeds=list(SEEDS),
    order=f"epoch e (0-based) of seed s: torch.randperm(50, generator=torch.Generator()"
          f".manual_seed({ORDER_SEED} + 100 * s + e)), positions into the sorted train files",
    train_loss="mean of the last epoch's batch losses weighted by batch size (graft's epoch "
               "loss)",
    inputs="the PNGs of examples/digits normalised as graft's gray_to_tensor "
           "(make_digits_demo_reference.py's inputs_png)",
    graft_equivalent="graft finetune ... --lr 0.01 --weight-decay 1e-4 --epochs 200 "
                     "[--train-from NAME]")
SETTINGS = {  # name: (index of the first trainable backbone module, graft's --train-from)
    "head_only": (11, "/backbone/backbone.11/Flatten_output_0"),
    "last_block": (7, "/backbone/backbone.6/MaxPool_output_0"),
    "two_blocks": (3, "/backbone/backbone.2/Relu_output_0"),
}
BN_NOTE = ("graft folds each BatchNorm into the preceding conv at load and trains the folded conv "
           "weight (W * gamma / sqrt(var + eps), decayed) and a conv bias (beta - mean * gamma / "
           "sqrt(var + eps), not decayed); PyTorch here trains W (decayed) and BN gamma, beta "
           "(not decayed) with the running statistics frozen. Same function class, different "
           "parametrisation, so AdamW's trajectory and the numbers differ somewhat; the convs "
           "of digits_cnn have no bias of their own (BN beta is the shift).")


def run(backbone, start, xtr, ytr, xva, yva, seed):
    """Fine-tunes backbone[start:] (a copy, eval mode) plus a new head; returns
    (val accuracy, last epoch's training loss, train accuracy, trainable parameter names)."""
    frozen = backbone.backbone[:start]
    with torch.no_grad():
        ftr, fva = frozen(xtr), frozen(xva)
    part = copy.deepcopy(backbone.backbone[start:]).eval()
    torch.manual_seed(seed)
    head = nn.Linear(64, 5)
    # slicing a Sequential keeps the module keys, so the names are backbone.7.weight etc.
    named = [(f"backbone.{k}", p) for k, p in part.named_parameters()] + \
            [(f"head.{k}", p) for k, p in head.named_parameters()]
    groups = [{"params": [p for _, p in named if p.ndim > 1], "weight_decay": T["weight_decay"]},
              {"params": [p for _, p in named if p.ndim <= 1], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=T["lr"], betas=tuple(T["betas"]), eps=T["eps"])

    def forward(f):
        return head(part(f))

    n, bs = len(ytr), T["batch_size"]
    for e in range(T["epochs"]):
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(
            ORDER_SEED + 100 * seed + e))
        loss_sum = 0.0
        for i in range(0, n, bs):
            b = perm[i:i + bs]
            loss = F.cross_entropy(forward(ftr[b]), ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(b)
    with torch.no_grad():
        va = float((forward(fva).argmax(1) == yva).float().mean())
        tr = float((forward(ftr).argmax(1) == ytr).float().mean())
    return va, loss_sum / n, tr, [k for k, _ in named]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "digits"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "digits_cnn.onnx"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "digits_blocks_reference.json"))
    args = ap.parse_args()
    t0 = time.time()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    with open(demo.folders.REFERENCE) as f:
        norm = json.load(f)["normalisation"]
    mean, std = norm["mean"], norm["std"]
    train, val, y = demo.folders.select()
    demo.check_folders(args.data, train, val, y)
    xtr, xva = (torch.from_numpy(demo.graft_normalise(demo.read_pngs(args.data, p, idx, y),
                                                      mean, std))
                for p, idx in (("train", train), ("val", val)))
    ytr, yva = torch.from_numpy(y[train] - 5).long(), torch.from_numpy(y[val] - 5).long()

    backbone = demo.load_backbone(args.model)
    import onnxruntime as ort
    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        ort_err = float(np.max(np.abs(sess.run(None, {"input": xva.numpy()})[0] -
                                      backbone(xva).numpy())))
    if ort_err > 1e-4:
        raise SystemExit(f"backbone loaded from {args.model} disagrees with ONNX Runtime "
                         f"({ort_err})")

    settings = {}
    for name, (start, train_from) in SETTINGS.items():
        runs = [run(backbone, start, xtr, ytr, xva, yva, s) for s in SEEDS]
        settings[name] = {"train_from": train_from, "trainable": runs[0][3],
                          "val_accuracy": demo.summary([r[0] for r in runs]),
                          "train_loss": [r[1] for r in runs],
                          "train_accuracy": [r[2] for r in runs]}
    settings["head_only"]["train_from"] += " (graft's default cut, the Gemm's input)"

    # head_only must reproduce tools/make_digits_demo_reference.py's transfer run exactly
    old = [demo.run_transfer(backbone, xtr, ytr, xva, yva, s)[0] for s in SEEDS]
    if old != settings["head_only"]["val_accuracy"]["per_seed"]:
        raise SystemExit(f"head_only {settings['head_only']['val_accuracy']['per_seed']} "
                         f"differs from make_digits_demo_reference.run_transfer {old}")
    t1 = time.time()

    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731
    ref = {
        "about": "PyTorch reference for fine-tuning the last blocks of models/digits_cnn.onnx "
                 "with a new head on the embedded demo data (digits 5-9, 10 training images "
                 "per class, 269 val), beside the head-only transfer; written by "
                 "tools/make_digits_blocks_reference.py (its docstring gives the full recipe).",
        "torch_version": torch.__version__,
        "data": {"train_dir": rel(os.path.join(args.data, "train")),
                 "val_dir": rel(os.path.join(args.data, "val")), "n_train": len(train),
                 "n_val": len(val), "same_as": "models/digits_demo_reference.json (inputs_png)"},
        "model": {"path": rel(args.model), "onnxruntime_max_abs_error": ort_err},
        "recipe": RECIPE,
        "batchnorm_note": BN_NOTE,
        "settings": settings,
    }
    with open(args.out, "w") as f:
        f.write("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}"
                                   for k, v in ref.items()) + "\n}\n")
    for name, r in settings.items():
        a = r["val_accuracy"]
        print(f"{name:10s}: val accuracy mean {a['mean']:.4f} (min {a['min']:.4f}, max "
              f"{a['max']:.4f}); per seed {[round(v, 4) for v in a['per_seed']]}; final train "
              f"loss {[round(v, 4) for v in r['train_loss']]}")
    print(f"head_only matches make_digits_demo_reference.run_transfer; ORT max abs err "
          f"{ort_err:.2e}; wrote {args.out} ({os.path.getsize(args.out)} bytes) in "
          f"{t1 - t0:.1f} s")


if __name__ == "__main__":
    main()
