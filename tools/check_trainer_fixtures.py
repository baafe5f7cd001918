#!/usr/bin/env python3
"""check_trainer_fixtures.py: replays every case of tests/data/trainer_fixtures.txt from the file
alone, in NumPy float64, following the recipes documented in tools/record_trainer_fixtures.py, and
fails when a loss or lr differs by more than 1e-5 relative, or a final weight w by more
than 1e-5 (|w| + 1). It checks the fixture
and is a readable reference for the C trainer (numpy only; runs in CI).

Usage: python3 tools/check_trainer_fixtures.py [FIXTURE]"""
import math
import os
import sys

import numpy as np

PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data",
    "trainer_fixtures.txt")
fx = {}
worst = 0.0
for line in open(PATH):
    if line.startswith('#'): continue
    p = line.split(); assert int(p[1]) == len(p) - 2; fx[p[0]] = np.array(p[2:], dtype=np.float64)
X = fx['features'].reshape(64, 10); Y = fx['labels'].astype(int); O = fx['order'].astype(int)
def grad(w, b, idx, ls=0.0):
    x, y = X[idx], Y[idx]; z = x @ w.T + b; z = z - z.max(1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True)); n = len(y)
    t = np.full((n, 3), ls / 3); t[np.arange(n), y] += 1 - ls
    loss = -(t * lp).sum() / n; d = (np.exp(lp) - t) / n
    return loss, d.T @ x, d.sum(0)
def run(name, kind, lr, mom=0, wd=0, ls=0, clip=0, sched=None, plateau=False, eps=1e-8):
    w = fx['w0'].reshape(3, 10).copy(); b = fx['b0'].copy(); P = [w, b]
    st = [dict(m=np.zeros_like(p), v=np.zeros_like(p), buf=None) for p in P]
    losses, lrs = [], []; best = math.inf; bad = 0; ep = []
    for s in range(100):
        cur = lr * (sched(s) if sched else 1.0); lrs.append(cur)
        loss, gw, gb = grad(P[0], P[1], O[16*s:16*s+16], ls); losses.append(loss); ep.append(loss)
        G = [gw, gb]
        if clip:
            tot = math.sqrt(sum((g**2).sum() for g in G)); c = min(1, clip / (tot + 1e-6)); G = [g*c for g in G]
        for i in range(2):
            g = G[i]; d = wd if i == 0 else 0; S = st[i]; t = s + 1
            if kind == 'sgd':
                g = g + d * P[i]
                if mom:
                    S['buf'] = g.copy() if S['buf'] is None else mom * S['buf'] + g; g = S['buf']
                P[i] -= cur * g
            elif kind in ('adam', 'adamw'):
                if kind == 'adamw': P[i] *= (1 - cur * d)
                S['m'] = .9*S['m'] + .1*g; S['v'] = .999*S['v'] + .001*g*g
                P[i] -= cur * (S['m']/(1-.9**t)) / (np.sqrt(S['v']/(1-.999**t)) + eps)
            elif kind == 'lamb':
                S['m'] = .9*S['m'] + .1*g; S['v'] = .999*S['v'] + .001*g*g
                u = (S['m']/(1-.9**t)) / (np.sqrt(S['v']/(1-.999**t)) + eps) + d*P[i]
                wn, un = np.linalg.norm(P[i]), np.linalg.norm(u)
                P[i] -= cur * (wn/un if wn > 0 and un > 0 else 1.0) * u
        if plateau and (s+1) % 4 == 0:
            m = sum(ep)/4; ep = []
            if m < best*(1-1e-4): best = m; bad = 0
            else:
                bad += 1
                if bad > 2: lr *= 0.5; bad = 0
    k = f'case.{name}.'
    el = np.max(np.abs(losses - fx[k+'losses']) / np.abs(fx[k+'losses']))
    er = np.max(np.abs(np.array(lrs) - fx[k+'lrs']) / fx[k+'lrs'])
    ew = np.max(np.abs(np.concatenate([P[0].ravel(), P[1]]) - np.concatenate([fx[k+'w'], fx[k+'b']])))
    ref = np.concatenate([fx[k+'w'], fx[k+'b']])  # weights near 0: |diff| <= 1e-5 (|ref| + 1)
    wr = np.max(np.abs(np.concatenate([P[0].ravel(), P[1]]) - ref) / (np.abs(ref) + 1.0))
    global worst
    worst = max(worst, el, er, wr)
    print(f'{name:16s} max rel err: loss {el:.2e}  lr {er:.1e}  weights {wr:.2e} (abs {ew:.2e})')
cw = lambda s: (s+1)/10 if s < 10 else 0.5*(1+math.cos(math.pi*(s-10)/90))
run('sgd', 'sgd', 0.1, mom=0.9, wd=1e-4); run('adam', 'adam', 1e-2)
run('adamw_cosine', 'adamw', 1e-2, wd=0.01, sched=cw); run('sgd_plateau', 'sgd', 5.0, plateau=True)
run('lamb', 'lamb', 1e-2, wd=0.01, eps=1e-6); run('label_smoothing', 'sgd', 0.1, ls=0.1)
run('clip', 'sgd', 0.5, clip=0.5)
if worst > 1e-5:
    sys.exit(f'FAIL: worst relative error {worst:.2e} > 1e-5')
print(f'PASS: worst relative error {worst:.2e}')
