#!/usr/bin/env python3
"""tools/compare_checkpoints.py A B [--rtol R]: two checkpoints' (safetensors) trained tensors and
optimizer state equal within R relative to each tensor's largest magnitude (default 1e-5);
integer tensors exactly. Prints the largest relative difference; exit 1 when over."""
import argparse
import sys

import numpy as np
from safetensors.numpy import load_file


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-5)
    o = p.parse_args()
    a, b = load_file(o.a), load_file(o.b)
    if a.keys() != b.keys():
        print("different tensors: %s" % sorted(set(a) ^ set(b)))
        return 1
    worst = 0.0
    for k in a:
        if a[k].dtype.kind == "f":
            x, y = a[k].astype(np.float64), b[k].astype(np.float64)
            worst = max(worst, float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-30)))
        elif not np.array_equal(a[k], b[k]):
            print("%s differs" % k)
            return 1
    print("largest relative difference %.3g" % worst)
    return 0 if worst <= o.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
