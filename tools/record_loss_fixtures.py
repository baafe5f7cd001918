#!/usr/bin/env python3
"""record_loss_fixtures.py: records PyTorch's loss values and logit gradients for seeded cases of
softmax cross-entropy (label smoothing, class weights), BCE with logits (pos_weight) and MSE into
tests/data/loss_fixtures.json (one case per line), which tests/test_grad.c compares against."""
import argparse
import json

import torch
import torch.nn.functional as F


def rnd(gen, *shape, scale=2.0):
    # values exactly representable in f32, computed in f64
    return (torch.randn(*shape, generator=gen) * scale).float().double()


def ce_case(name, seed, n, c, smoothing=0.0, weighted=False, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    x = rnd(g, n, c, scale=scale).requires_grad_(True)
    y = torch.randint(0, c, (n,), generator=g)
    w = (torch.rand(c, generator=g) * 2 + 0.1).float().double() if weighted else None
    loss = F.cross_entropy(x, y, weight=w, label_smoothing=smoothing)
    loss.backward()
    return dict(name=name, kind="ce", n=n, c=c, smoothing=smoothing,
                weight=w.tolist() if w is not None else [], logits=x.detach().flatten().tolist(),
                targets=y.tolist(), loss=loss.item(), grad=x.grad.flatten().tolist())


def bce_case(name, seed, n, c, pos_weight=False, soft=False):
    g = torch.Generator().manual_seed(seed)
    x = rnd(g, n, c, scale=4.0).requires_grad_(True)
    t = torch.rand(n, c, generator=g) if soft else (torch.rand(n, c, generator=g) > 0.5).float()
    t = t.float().double()
    pw = (torch.rand(c, generator=g) * 3 + 0.2).float().double() if pos_weight else None
    loss = F.binary_cross_entropy_with_logits(x, t, pos_weight=pw)
    loss.backward()
    return dict(name=name, kind="bce", n=n, c=c, smoothing=0.0,
                weight=pw.tolist() if pw is not None else [], logits=x.detach().flatten().tolist(),
                targets=t.flatten().tolist(), loss=loss.item(), grad=x.grad.flatten().tolist())


def mse_case(name, seed, n, c):
    g = torch.Generator().manual_seed(seed)
    x = rnd(g, n, c).requires_grad_(True)
    t = rnd(g, n, c)
    loss = F.mse_loss(x, t)
    loss.backward()
    return dict(name=name, kind="mse", n=n, c=c, smoothing=0.0, weight=[],
                logits=x.detach().flatten().tolist(), targets=t.flatten().tolist(),
                loss=loss.item(), grad=x.grad.flatten().tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/loss_fixtures.json")
    args = ap.parse_args()
    cases = [
        ce_case("ce_plain", 1, 6, 5),
        ce_case("ce_smooth", 2, 7, 4, smoothing=0.1),
        ce_case("ce_weight", 3, 8, 5, weighted=True),
        ce_case("ce_smooth_weight", 4, 9, 6, smoothing=0.2, weighted=True),
        ce_case("ce_large_logits", 5, 4, 10, smoothing=0.05, scale=40.0),
        bce_case("bce_plain", 6, 5, 4),
        bce_case("bce_soft_pos_weight", 7, 6, 3, pos_weight=True, soft=True),
        mse_case("mse", 8, 5, 3),
    ]
    with open(args.out, "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]\n")


if __name__ == "__main__":
    main()
