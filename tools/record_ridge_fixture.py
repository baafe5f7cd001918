#!/usr/bin/env python3
"""tools/record_ridge_fixture.py: records NumPy ridge regression solutions into
tests/data/ridge_fixture.txt for tests/test_ridge.c (numpy only).

Format: one line per array, "name count v1 v2 ...". X is float32 (N, D), Y float32 (N, C),
labels int (N); W_y/b_y solve the f32 targets with lambda_y, W_l/b_l the one-hot labels with
lambda_l. The bias is not penalised (centred normal equations, solved in float64)."""
import os

import numpy as np

N, D, C = 50, 7, 3


def ridge(x, y, lam):
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    w = np.linalg.solve(xc.T @ xc + lam * np.eye(x.shape[1]), xc.T @ yc).T  # (C, D)
    return w, my - w @ mx


def main():
    rng = np.random.default_rng(1234)
    x = (rng.standard_normal((N, D)) * 2 + 3).astype(np.float32)
    y = (rng.standard_normal((N, C)) + x[:, :C] * 0.5).astype(np.float32)
    labels = rng.integers(0, C, N)
    lam_y, lam_l = 0.5, 2.0
    w_y, b_y = ridge(x, y, lam_y)
    w_l, b_l = ridge(x, np.eye(C)[labels], lam_l)
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "ridge_fixture.txt")
    with open(out, "w") as f:
        def put(name, a, fmt="%.9g"):
            a = np.asarray(a).ravel()
            f.write(f"{name} {a.size} " + " ".join(fmt % v for v in a) + "\n")
        put("dims", [N, D, C], "%d")
        put("lambda_y", [lam_y], "%.17g")
        put("lambda_l", [lam_l], "%.17g")
        put("X", x)
        put("Y", y)
        put("labels", labels, "%d")
        put("W_y", w_y, "%.17g")
        put("b_y", b_y, "%.17g")
        put("W_l", w_l, "%.17g")
        put("b_l", b_l, "%.17g")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
