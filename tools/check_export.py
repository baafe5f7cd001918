#!/usr/bin/env python3
"""check_export.py DIR: run every .onnx in DIR (written by tests/test_export) with ONNX Runtime,
without graph optimizations and with the default ones, on the inputs saved next to it
(NAME.in.INPUT.npy), and compare with graft's outputs (NAME.graft.OUTPUT.npy): the largest
difference relative to the largest |value| must be within 1e-5 (1e-2 for fp16-weight exports).
Prints PASS/FAIL/SKIP lines; exits non-zero on a failure."""
import glob
import os
import sys

import numpy as np


def check(path, ort, failures):
    name = os.path.basename(path)[:-len(".onnx")]
    stem = path[:-len(".onnx")]
    tol = 1e-2 if "fp16" in name else 1e-5
    wanted = {p[len(stem + ".graft."):-len(".npy")]: np.load(p)
              for p in glob.glob(glob.escape(stem) + ".graft.*.npy")}
    if not wanted:
        print(f"SKIP ort_{name}: no graft outputs saved next to it")
        return
    levels = [("no_opt", ort.GraphOptimizationLevel.ORT_DISABLE_ALL), ("default", None)]
    for label, level in levels:
        test = f"ort_{name}_{label}"
        try:
            opts = ort.SessionOptions()
            if level is not None:
                opts.graph_optimization_level = level
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            feeds = {i.name: np.load(f"{stem}.in.{i.name}.npy") for i in sess.get_inputs()}
            names = [o.name for o in sess.get_outputs()]
            got = dict(zip(names, sess.run(names, feeds)))
        except Exception as ex:  # noqa: BLE001 - any ORT failure is a test failure
            print(f"FAIL {test}: {type(ex).__name__}: {str(ex).splitlines()[0][:300]}")
            failures.append(test)
            continue
        worst = 0.0
        problem = None
        for out, want in wanted.items():
            if out not in got:
                problem = f"ONNX Runtime has no output '{out}'"
                break
            g = np.asarray(got[out], dtype=np.float64)
            w = np.asarray(want, dtype=np.float64)
            if g.shape != w.shape:
                problem = f"output '{out}' has shape {g.shape}, graft gave {w.shape}"
                break
            ref = max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-12)
            diff = float(np.max(np.abs(g - w))) if w.size else 0.0
            worst = max(worst, diff / ref)
        if problem is None and worst > tol:
            problem = f"max relative difference {worst:.3g} > {tol:g}"
        if problem:
            print(f"FAIL {test}: {problem}")
            failures.append(test)
        else:
            print(f"PASS {test} (max relative difference {worst:.2g})")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import onnxruntime as ort
    except ImportError:
        print("SKIP check_export: onnxruntime is not installed")
        return 0
    ort.set_default_logger_severity(3)
    paths = sorted(glob.glob(os.path.join(sys.argv[1], "*.onnx")))
    if not paths:
        print(f"FAIL check_export: no .onnx files in {sys.argv[1]}")
        return 1
    failures = []
    for p in paths:
        check(p, ort, failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
