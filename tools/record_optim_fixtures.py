#!/usr/bin/env python3
"""record_optim_fixtures.py: records PyTorch's optimizer, scheduler, GradScaler and clipping
numbers (and a NumPy LAMB from the paper) into tests/data/optim_fixtures.json for test_optim.

Format: one JSON object, one key per line, every value a flat list of numbers. Optimizer case
NAME has NAME.config = [kind, momentum, dampening, nesterov, weight_decay, beta1, beta2, eps,
amsgrad, decay0, decay1, decay2] (kind 0 SGD, 1 Adam, 2 AdamW, 3 LAMB), NAME.lrs (the lr of
each step) and NAME.weights (all parameters flattened after each step)."""
import argparse
import json
import math
import os

import numpy as np
import torch

SIZES = [(7,), (5, 3), (4,)]
STEPS = 20


def initial_params_and_grads():
    g = torch.Generator().manual_seed(1234)
    params = [torch.randn(s, generator=g) * 0.5 for s in SIZES]
    params[2].zero_()  # a bias that starts at zero: LAMB's trust ratio falls back to 1
    grads = [[torch.randn(s, generator=g) * (1.0 + 0.1 * t) for s in SIZES] for t in range(STEPS)]
    return params, grads


OPTIM_CASES = {
    # name: (kind, momentum, dampening, nesterov, wd, beta1, beta2, eps, amsgrad, decay flags, lr)
    "sgd_plain": (0, 0.0, 0.0, 0, 0.0, 0, 0, 0, 0, (1, 1, 1), 0.1),
    "sgd_momentum_wd": (0, 0.9, 0.1, 0, 0.01, 0, 0, 0, 0, (1, 1, 0), 0.05),
    "sgd_nesterov": (0, 0.9, 0.0, 1, 1e-3, 0, 0, 0, 0, (1, 1, 1), 0.05),
    "adam": (1, 0, 0, 0, 0.0, 0.9, 0.999, 1e-8, 0, (1, 1, 1), 1e-2),
    "adam_amsgrad_wd": (1, 0, 0, 0, 0.05, 0.8, 0.99, 1e-6, 1, (1, 0, 1), 2e-2),
    "adamw": (2, 0, 0, 0, 0.1, 0.9, 0.999, 1e-8, 0, (1, 1, 0), 1e-2),
    "adamw_amsgrad": (2, 0, 0, 0, 0.01, 0.85, 0.995, 1e-8, 1, (0, 1, 1), 3e-2),
    "lamb": (3, 0, 0, 0, 0.01, 0.9, 0.999, 1e-6, 0, (1, 1, 0), 1e-2),
    "lamb_wd_all": (3, 0, 0, 0, 0.1, 0.8, 0.99, 1e-8, 0, (1, 1, 1), 5e-2),
}


def step_lrs(lr):
    return [lr * (1.0 - 0.03 * t) for t in range(STEPS)]  # varies, so the per-step lr is used


def torch_trajectory(c, params0, grads):
    kind, mom, damp, nest, wd, b1, b2, eps, ams, flags, lr = c
    params = [p.clone().requires_grad_(True) for p in params0]
    groups = [{"params": [p], "weight_decay": wd if f else 0.0} for p, f in zip(params, flags)]
    if kind == 0:
        opt = torch.optim.SGD(groups, lr=lr, momentum=mom, dampening=damp, nesterov=bool(nest))
    elif kind == 1:
        opt = torch.optim.Adam(groups, lr=lr, betas=(b1, b2), eps=eps, amsgrad=bool(ams))
    else:
        opt = torch.optim.AdamW(groups, lr=lr, betas=(b1, b2), eps=eps, amsgrad=bool(ams))
    out = []
    for t, lr_t in enumerate(step_lrs(lr)):
        for grp in opt.param_groups:
            grp["lr"] = lr_t
        for p, gr in zip(params, grads[t]):
            p.grad = gr.clone()
        opt.step()
        out += [v for p in params for v in p.detach().reshape(-1).tolist()]
    return out


def numpy_lamb(c, params0, grads):
    """LAMB (You et al. 2019, Algorithm 2, phi = identity), elementwise in fp32, norms in fp64."""
    kind, _, _, _, wd, b1, b2, eps, _, flags, lr = c
    f32 = np.float32
    w = [p.numpy().astype(f32).copy() for p in params0]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    out = []
    for t, lr_t in enumerate(step_lrs(lr)):
        step = t + 1
        bc1, bc2 = f32(1.0 - b1**step), f32(1.0 - b2**step)
        for i in range(len(w)):
            g = grads[t][i].numpy().astype(f32)
            m[i] = f32(b1) * m[i] + f32(1.0 - b1) * g
            v[i] = f32(b2) * v[i] + f32(1.0 - b2) * (g * g)
            u = (m[i] / bc1) / (np.sqrt(v[i] / bc2) + f32(eps))
            if flags[i]:
                u = u + f32(wd) * w[i]
            wn = math.sqrt(float(np.sum(w[i].astype(np.float64) ** 2)))
            un = math.sqrt(float(np.sum(u.astype(np.float64) ** 2)))
            ratio = wn / un if wn > 0 and un > 0 else 1.0
            w[i] = w[i] - f32(f32(lr_t) * f32(ratio)) * u
        out += [float(x) for x in np.concatenate([x.reshape(-1) for x in w])]
    return out


def record_optimizers(fx):
    params0, grads = initial_params_and_grads()
    fx["optim.initial"] = [v for p in params0 for v in p.reshape(-1).tolist()]
    fx["optim.grads"] = [v for step in grads for gr in step for v in gr.reshape(-1).tolist()]
    for name, c in OPTIM_CASES.items():
        kind, mom, damp, nest, wd, b1, b2, eps, ams, flags, lr = c
        fx[name + ".config"] = [kind, mom, damp, nest, wd, b1, b2, eps, ams, *flags]
        fx[name + ".lrs"] = step_lrs(lr)
        fx[name + ".weights"] = (numpy_lamb if kind == 3 else torch_trajectory)(c, params0, grads)


def lrs_of(opt, sched, n, metrics=None):
    out = []
    for t in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()  # no grads: a no-op that keeps the scheduler's order check quiet
        sched.step(*([metrics[t]] if metrics is not None else []))
    return out


def dummy_opt(lr, momentum=0.0):
    return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr, momentum=momentum)


def record_schedulers(fx):
    sch = torch.optim.lr_scheduler
    opt = dummy_opt(0.1)
    fx["sched.step"] = [0.1, 7, 0.5] + lrs_of(opt, sch.StepLR(opt, 7, gamma=0.5), 100)
    # cosine with warm-up: [base, warmup, total, start_factor, eta_min] then lrs for t = 0..total
    base, warm, total, sf, eta = 0.1, 10, 100, 0.1, 1e-4
    opt = dummy_opt(base)
    seq = sch.SequentialLR(opt, [sch.LinearLR(opt, start_factor=sf, end_factor=1.0, total_iters=warm),
                                 sch.CosineAnnealingLR(opt, T_max=total - warm, eta_min=eta)],
                           milestones=[warm])
    fx["sched.cosine_warmup"] = [base, warm, total, sf, eta] + lrs_of(opt, seq, total + 1)
    # one-cycle: [max_lr, total] then lrs for t = 0..total-1, then momenta
    for name, total in (("sched.one_cycle", 100), ("sched.one_cycle_odd", 37)):
        opt = dummy_opt(0.1, momentum=0.9)
        oc = sch.OneCycleLR(opt, max_lr=0.1, total_steps=total)
        lrs, moms = [], []
        for _ in range(total):
            lrs.append(opt.param_groups[0]["lr"])
            moms.append(opt.param_groups[0]["momentum"])
            opt.step()
            oc.step() if len(lrs) < total else None
        fx[name] = [0.1, total] + lrs + moms
    # plateau: [mode_max, factor, patience, threshold, cooldown, min_lr, lr] + metrics + lrs
    g = np.random.default_rng(7)
    n = 100
    trend = np.concatenate([np.linspace(2.0, 1.0, 30), np.full(n - 30, 1.0)])
    metrics = (trend + 0.02 * g.standard_normal(n)).tolist()
    for name, mode, factor, pat, thr, cool, min_lr in (
            ("sched.plateau_min", "min", 0.5, 3, 1e-2, 2, 2e-3),
            ("sched.plateau_max", "max", 0.3, 2, 1e-3, 0, 1e-3)):
        m = metrics if mode == "min" else [-x for x in metrics]
        opt = dummy_opt(0.1)
        pl = sch.ReduceLROnPlateau(opt, mode=mode, factor=factor, patience=pat, threshold=thr,
                                   cooldown=cool, min_lr=min_lr)
        # lr after feeding metric t
        lrs = []
        for x in m:
            opt.step()
            pl.step(x)
            lrs.append(opt.param_groups[0]["lr"])
        fx[name] = [1 if mode == "max" else 0, factor, pat, thr, cool, min_lr, 0.1] + m + lrs


def record_scaler(fx):
    # scale after each update for a found_inf pattern, with growth_interval 3 and the default
    pattern = [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    for name, interval in (("scaler.interval3", 3), ("scaler.default", 2000)):
        p = torch.zeros(3, requires_grad=True)
        opt = torch.optim.SGD([p], lr=0.1)
        sc = torch.amp.GradScaler("cpu", growth_interval=interval)
        scales = []
        for bad in pattern:
            sc.scale(torch.ones(()))  # initializes the scale lazily
            p.grad = torch.full((3,), float("inf") if bad else 1.0)
            sc.step(opt)
            sc.update()
            scales.append(sc.get_scale())
        fx[name] = [interval] + pattern + scales
    # unscale: grads (as given), scale, then unscaled grads
    g = torch.Generator().manual_seed(99)
    grads = torch.randn(10, generator=g) * 3000.0
    p = torch.zeros(10, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    sc = torch.amp.GradScaler("cpu", init_scale=3000.0)
    sc.scale(torch.ones(()))
    p.grad = grads.clone()
    sc.unscale_(opt)
    fx["scaler.unscale"] = [3000.0] + grads.tolist() + p.grad.tolist()


def record_clip(fx):
    g = torch.Generator().manual_seed(5)
    grads = [torch.randn(s, generator=g) for s in SIZES]
    fx["clip.grads"] = [v for gr in grads for v in gr.reshape(-1).tolist()]
    for name, max_norm in (("clip.small", 0.5), ("clip.large", 100.0)):
        ps = [torch.zeros(s, requires_grad=True) for s in SIZES]
        for p, gr in zip(ps, grads):
            p.grad = gr.clone()
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        fx[name] = [max_norm, float(total)] + [v for p in ps for v in p.grad.reshape(-1).tolist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "optim_fixtures.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    fx = {}
    record_optimizers(fx)
    record_schedulers(fx)
    record_scaler(fx)
    record_clip(fx)
    with open(args.out, "w") as f:
        f.write("{\n")
        items = list(fx.items())
        for i, (k, vals) in enumerate(items):
            body = ", ".join(repr(int(v)) if float(v).is_integer() and abs(v) < 1e15
                             else "%.9g" % v if isinstance(v, float) and k.endswith(".weights")
                             else repr(float(v)) for v in vals)
            f.write('"%s": [%s]%s\n' % (k, body, "," if i + 1 < len(items) else ""))
        f.write("}\n")
    print("wrote %s (%d keys)" % (args.out, len(fx)))


if __name__ == "__main__":
    main()
