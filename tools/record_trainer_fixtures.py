#!/usr/bin/env python3
"""record_trainer_fixtures.py: records PyTorch's per-step training losses of a linear head on a
small fixed problem (and of a NumPy LAMB from the paper) into tests/data/trainer_fixtures.txt.

Usage: python3 tools/record_trainer_fixtures.py [--out tests/data/trainer_fixtures.txt]
Needs torch (not in CI); the output file is committed.

File format (plain text, trivial to parse in C): lines starting with '#' are comments; every
other line is `key n v1 v2 ... vn` (key without spaces, n the count, values in %.9g).

The problem (all values are in the file, nothing needs to be regenerated):
  features (N*D) row-major, N = 64, D = 10, float32, seeded normal.
  labels   (N) class indices in 0..C-1, C = 3, argmax of a seeded random linear map, then 6
           labels flipped to the next class so the loss does not go to 0 (counts 25, 28, 11).
  w0 (C*D) row-major, b0 (C): the head's initial weights (nn.Linear(D, C) default init, seed 1).
  order (EPOCHS*N): sample indices in the order they are used; step s uses
      order[16*s .. 16*s+15] (batch size 16, 4 steps per epoch, 25 epochs = 100 steps);
      each epoch's 64 entries are a seeded permutation of 0..63.
  Loss: cross-entropy, mean over the batch, logits = x @ w^T + b.
Per case NAME:
  case.NAME.losses (100): the loss of each step's batch, computed before that step's update.
  case.NAME.lrs    (100): the learning rate used by each step's update.
  case.NAME.w (C*D), case.NAME.b (C): the weights after the 100th update.
Cases (weight decay, where non-zero, applies to w and NOT to b: two param groups):
  sgd           SGD lr 0.1, momentum 0.9, dampening 0, nesterov off, weight_decay 1e-4 (L2,
                added to the gradient before momentum, as torch.optim.SGD does).
  adam          Adam lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight_decay 0.
  adamw_cosine  AdamW lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01 (decoupled);
                LambdaLR: step s (0-based) uses lr * f(s), f(s) = (s+1)/10 for s < 10, else
                0.5*(1+cos(pi*(s-10)/90)).
  sgd_plateau   SGD lr PLATEAU_LR (see below), no momentum, no decay; ReduceLROnPlateau(mode
                min, factor 0.5, patience 2, threshold 1e-4 rel, cooldown 0, min_lr 0, eps 1e-8)
                stepped after every 4th step (epoch end) with the mean of that epoch's 4 losses.
  lamb          LAMB (You et al. 2019, Algorithm 2, phi = identity): m, v Adam moments,
                update u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*w, ratio = ||w||/||u||
                per tensor (1 if either norm is 0), w -= lr*ratio*u; lr 1e-2, betas (0.9,
                0.999), eps 1e-6, wd 0.01 on w only. Forward/backward in torch float32; the
                update elementwise in NumPy float32, the two norms in float64.
  label_smoothing  SGD lr 0.1 (no momentum, no decay), CE with label_smoothing 0.1.
  clip          SGD lr 0.5 (no momentum, no decay), clip_grad_norm_(max_norm 0.5) over w and b
                together after backward: total = ||(grad w, grad b)||_2, grads *= min(1,
                0.5 / (total + 1e-6)); also case.clip.grad_norms (100): total before clipping
                (what clip_grad_norm_ returns); 17 of the 100 steps are clipped.
All torch computations are float32 on the CPU, deterministic.
"""
import argparse
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

N, D, C = 64, 10, 3
BATCH, EPOCHS = 16, 25
STEPS_PER_EPOCH = N // BATCH
STEPS = EPOCHS * STEPS_PER_EPOCH
PLATEAU_LR = 5.0  # at 0.1 the epoch loss falls every epoch and the scheduler never acts; at 5.0
# it halves the lr 3 times, and every epoch's better-or-not decision clears the threshold by > 2%


def make_problem():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g)
    w_true = torch.randn(C, D, generator=g)
    b_true = torch.randn(C, generator=g) * 0.5
    y = torch.argmax(x @ w_true.T + b_true, dim=1)
    # a few flipped labels so the problem is not separable and the loss does not go to zero
    flip = torch.randperm(N, generator=g)[:6]
    y[flip] = (y[flip] + 1) % C
    torch.manual_seed(1)
    lin = torch.nn.Linear(D, C)
    w0, b0 = lin.weight.detach().clone(), lin.bias.detach().clone()
    go = torch.Generator().manual_seed(2)
    order = torch.cat([torch.randperm(N, generator=go) for _ in range(EPOCHS)])
    return x, y, w0, b0, order


def batch(prob, s):
    x, y, _, _, order = prob
    idx = order[s * BATCH:(s + 1) * BATCH]
    return x[idx], y[idx]


def run_torch(prob, make_opt, label_smoothing=0.0, clip=0.0, plateau=False, lam=None):
    _, _, w0, b0, _ = prob
    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    opt = make_opt(w, b)
    sched = None
    if lam is not None:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    if plateau:
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, mode="min", factor=0.5, patience=2, threshold=1e-4, threshold_mode="rel",
            cooldown=0, min_lr=0.0, eps=1e-8)
    losses, lrs, norms, epoch = [], [], [], []
    for s in range(STEPS):
        xb, yb = batch(prob, s)
        loss = F.cross_entropy(xb @ w.T + b, yb, label_smoothing=label_smoothing)
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            norms.append(float(torch.nn.utils.clip_grad_norm_([w, b], clip)))
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        losses.append(float(loss.detach()))
        epoch.append(float(loss.detach()))
        if lam is not None:
            sched.step()
        if plateau and (s + 1) % STEPS_PER_EPOCH == 0:
            sched.step(sum(epoch) / len(epoch))
            epoch = []
    return {"losses": losses, "lrs": lrs, "w": w.detach().reshape(-1).tolist(),
            "b": b.detach().tolist(), **({"grad_norms": norms} if clip > 0 else {})}


def groups(w, b, wd):
    return [{"params": [w], "weight_decay": wd}, {"params": [b], "weight_decay": 0.0}]


def cosine_warmup(s):
    return (s + 1) / 10 if s < 10 else 0.5 * (1 + math.cos(math.pi * (s - 10) / 90))


def run_lamb(prob, lr=1e-2, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
    _, _, w0, b0, _ = prob
    f32 = np.float32
    params = [w0.numpy().astype(f32).copy(), b0.numpy().astype(f32).copy()]
    decay = [True, False]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    losses = []
    for s in range(STEPS):
        xb, yb = batch(prob, s)
        w = torch.from_numpy(params[0]).clone().requires_grad_(True)
        b = torch.from_numpy(params[1]).clone().requires_grad_(True)
        loss = F.cross_entropy(xb @ w.T + b, yb)
        loss.backward()
        losses.append(float(loss.detach()))
        grads = [w.grad.numpy().astype(f32), b.grad.numpy().astype(f32)]
        t = s + 1
        bc1, bc2 = f32(1.0 - b1**t), f32(1.0 - b2**t)
        for i in range(2):
            g = grads[i]
            m[i] = f32(b1) * m[i] + f32(1.0 - b1) * g
            v[i] = f32(b2) * v[i] + f32(1.0 - b2) * (g * g)
            u = (m[i] / bc1) / (np.sqrt(v[i] / bc2) + f32(eps))
            if decay[i]:
                u = u + f32(wd) * params[i]
            wn = math.sqrt(float(np.sum(params[i].astype(np.float64) ** 2)))
            un = math.sqrt(float(np.sum(u.astype(np.float64) ** 2)))
            ratio = wn / un if wn > 0 and un > 0 else 1.0
            params[i] = (params[i] - f32(f32(lr) * f32(ratio)) * u).astype(f32)
    return {"losses": losses, "lrs": [lr] * STEPS, "w": params[0].reshape(-1).tolist(),
            "b": params[1].tolist()}


def record():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    prob = make_problem()
    x, y, w0, b0, order = prob
    SGD, Adam, AdamW = torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW
    cases = {
        "sgd": run_torch(prob, lambda w, b: SGD(groups(w, b, 1e-4), lr=0.1, momentum=0.9,
                                                 dampening=0.0, nesterov=False)),
        "adam": run_torch(prob, lambda w, b: Adam([w, b], lr=1e-2, betas=(0.9, 0.999),
                                                  eps=1e-8, weight_decay=0.0)),
        "adamw_cosine": run_torch(prob, lambda w, b: AdamW(groups(w, b, 0.01), lr=1e-2,
                                                           betas=(0.9, 0.999), eps=1e-8),
                                  lam=cosine_warmup),
        "sgd_plateau": run_torch(prob, lambda w, b: SGD([w, b], lr=PLATEAU_LR), plateau=True),
        "lamb": run_lamb(prob),
        "label_smoothing": run_torch(prob, lambda w, b: SGD([w, b], lr=0.1),
                                     label_smoothing=0.1),
        "clip": run_torch(prob, lambda w, b: SGD([w, b], lr=0.5), clip=0.5),
    }
    lines = [
        ("features", x.reshape(-1).tolist()),
        ("labels", y.tolist()),
        ("w0", w0.reshape(-1).tolist()),
        ("b0", b0.tolist()),
        ("order", order.tolist()),
    ]
    for name, res in cases.items():
        for k in ("losses", "lrs", "w", "b", "grad_norms"):
            if k in res:
                lines.append((f"case.{name}.{k}", res[k]))
    return lines, cases


HEADER = f"""# trainer_fixtures.txt: written by tools/record_trainer_fixtures.py (torch {torch.__version__}); do not edit.
# Lines: `key n v1 ... vn`, values %.9g. N={N} D={D} C={C} batch={BATCH} epochs={EPOCHS} steps={STEPS}.
# features (N*D row-major), labels (N), w0 (C*D row-major), b0 (C), order (epochs*N: step s uses order[16s..16s+15]).
# Per case: case.NAME.losses (loss of each step's batch before its update), .lrs (lr of each step), .w, .b (final).
# Cases: sgd, adam, adamw_cosine, sgd_plateau (lr {PLATEAU_LR}), lamb, label_smoothing, clip (+ .grad_norms before clipping).
# Full recipes in the script's docstring. Cross-entropy mean loss; weight decay on w only.
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "tests", "data", "trainer_fixtures.txt"))
    args = ap.parse_args()
    lines, cases = record()
    with open(args.out, "w") as f:
        f.write(HEADER)
        for key, vals in lines:
            f.write(f"{key} {len(vals)} " + " ".join("%.9g" % v for v in vals) + "\n")
    for name, res in cases.items():
        lr = res["lrs"]
        print(f"{name:16s} loss {res['losses'][0]:.4f} -> {res['losses'][-1]:.4f}  "
              f"lr {lr[0]:.4g} -> {lr[-1]:.4g}  lr changes {sum(a != b for a, b in zip(lr, lr[1:]))}")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
