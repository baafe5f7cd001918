#!/usr/bin/env python3
"""bench_prune.py: what structured pruning buys, measured in one run, in graft and in ONNX Runtime.

Prunes a CNN with `graft prune --method channels` (by default ResNet-50, 50% of the inner
bottleneck channels: `--scope inner` leaves the channels tied by residual Adds alone), then
measures the dense and the pruned ONNX model side by side: parameters and FLOPs (graft info),
ONNX file size, and CPU latency (median of --iters runs after --warmup, per batch size) in graft
(`graft bench`) and in ONNX Runtime with the same number of threads. It also checks that ONNX
Runtime's output of the pruned model equals graft's within --tolerance (relative to the largest
|value|), and exits 1 if not. A benchmark, not a test: nothing is asserted about the timings.

Usage: python3 tools/bench_prune.py [--graft build/release/graft] [--model M.onnx] [options]
The default model is tests/data/gen/resnet50.onnx (made by tools/make_models.py if missing).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def run(cmd, what):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_prune: {what} failed ({p.returncode}): {' '.join(map(str, cmd))}\n"
                 f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.stdout


def model_files_bytes(path):
    """The model file plus any external-data files next to it that it names."""
    import onnx
    total = os.path.getsize(path)
    m = onnx.load(str(path), load_external_data=False)
    seen = set()
    for t in m.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location" and kv.value not in seen:
                seen.add(kv.value)
                total += os.path.getsize(Path(path).parent / kv.value)
    return total


def graft_info(graft, model):
    return json.loads(run([graft, "info", model, "--json"], "graft info"))


def graft_latency(graft, model, batch, a):
    """Median ms per batch from `graft bench --json`."""
    out = run([graft, "bench", model, "--batch", batch, "--iters", a.iters, "--warmup", a.warmup,
               "--threads", a.threads, "--json"], "graft bench")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return rows[0]["median_ms"]


def ort_session(path, threads):
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])


def input_batch(sess, batch, seed):
    i = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else batch for d in i.shape]
    return {i.name: np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def ort_latency(sess, batch, a):
    feeds = input_batch(sess, batch, 0)
    for _ in range(a.warmup):
        sess.run(None, feeds)
    ms = []
    for _ in range(a.iters):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def max_rel(got, want):
    ref = max(float(np.max(np.abs(want))), 1e-12)
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / ref


def check_outputs(graft, path, out_dir, threads, tolerance):
    """graft's and ONNX Runtime's outputs of one model on the same seeded batch of 2."""
    sess = ort_session(path, threads)
    feeds = input_batch(sess, 2, 1)
    (name, x), = feeds.items()
    stem = out_dir / (Path(path).stem + ".check")
    np.save(f"{stem}.in.npy", x)
    out = Path(f"{stem}.graft")
    run([graft, "run", path, "--input", f"{name}=" + f"{stem}.in.npy", "--output-dir", out],
        "graft run")
    worst = 0.0
    for o, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        worst = max(worst, max_rel(np.load(out / f"{o.name}.npy"), want))
    return worst, worst <= tolerance


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graft", default=str(REPO / "build" / "release" / "graft"))
    ap.add_argument("--model", default=str(REPO / "tests" / "data" / "gen" / "resnet50.onnx"))
    ap.add_argument("--sparsity", type=float, default=0.5)
    ap.add_argument("--scope", default="inner", choices=["inner", "all"])
    ap.add_argument("--importance", default="l1", choices=["l1", "l2", "bn"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1,
                    help="measure every (engine, model, batch) this many times, interleaved; "
                         "the table shows the median")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--out-dir", default=str(REPO / "build" / "bench-prune"))
    return ap.parse_args()


def make_default_model(a):
    default = REPO / "tests" / "data" / "gen" / "resnet50.onnx"
    if Path(a.model).exists() or Path(a.model) != default:
        return
    print(f"making {default} with tools/make_models.py", flush=True)
    run([sys.executable, REPO / "tools" / "make_models.py", "--out", default.parent,
         "--only", "resnet50"], "tools/make_models.py")


def measure(a, dense, pruned, batches):
    """lat[(engine, which, batch)] = median over repeats of each run's median ms."""
    sessions = {"dense": ort_session(dense, a.threads), "pruned": ort_session(pruned, a.threads)}
    paths = {"dense": dense, "pruned": pruned}
    samples = {}
    for _ in range(a.repeats):
        for b in batches:
            for which in ("dense", "pruned"):
                samples.setdefault(("graft", which, b), []).append(
                    graft_latency(a.graft, paths[which], b, a))
            for which in ("dense", "pruned"):
                samples.setdefault(("ort", which, b), []).append(
                    ort_latency(sessions[which], b, a))
    return {k: statistics.median(v) for k, v in samples.items()}


def human(x, unit=""):
    """3 significant digits with a k/M/G prefix: 25.5 M, 4.76 k."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def table(a, info, sizes, lat, batches, units):
    rows = [("parameters", info["dense"]["parameters"], info["pruned"]["parameters"], ""),
            ("FLOPs per sample", info["dense"]["flops_per_sample"],
             info["pruned"]["flops_per_sample"], ""),
            ("ONNX file", sizes["dense"], sizes["pruned"], "B")]
    print(f"\n| {Path(a.model).name}: {units} channels removed | dense | pruned | pruned/dense |")
    print("|---|---|---|---|")
    for what, d, p, unit in rows:
        print(f"| {what} | {human(d, unit)} | {human(p, unit)} | {p / d:.3f} |")
    for engine, label in (("graft", "graft"), ("ort", "ONNX Runtime")):
        for b in batches:
            d, p = lat[(engine, "dense", b)], lat[(engine, "pruned", b)]
            print(f"| {label} latency, batch {b} | {d:.1f} ms | {p:.1f} ms | {p / d:.3f} "
                  f"(speed-up {d / p:.2f}x) |")
    print("\n| graft / ONNX Runtime latency | dense | pruned |")
    print("|---|---|---|")
    for b in batches:
        print(f"| batch {b} | {lat[('graft', 'dense', b)] / lat[('ort', 'dense', b)]:.2f} | "
              f"{lat[('graft', 'pruned', b)] / lat[('ort', 'pruned', b)]:.2f} |")


def main():
    a = parse_args()
    import onnxruntime
    make_default_model(a)
    out_dir = Path(a.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    batches = [int(b) for b in a.batches.split(",")]
    dense, pruned = Path(a.model), out_dir / (Path(a.model).stem + ".pruned.onnx")
    load0 = os.getloadavg()[0]
    print(f"bench_prune {date.today()}: {cpu_name()}, {os.cpu_count()} logical CPUs, load "
          f"average {load0:.2f}; graft {a.graft}, onnxruntime {onnxruntime.__version__}; "
          f"{a.threads} threads, median of {a.iters} runs after {a.warmup} warm-up"
          f"{f', median of {a.repeats} repeats' if a.repeats > 1 else ''}", flush=True)
    cmd = [a.graft, "prune", "--model", dense, "--method", "channels", "--sparsity", a.sparsity,
           "--scope", a.scope, "--importance", a.importance, "--iters", "1", "--threads",
           a.threads, "--out", pruned]
    print("$ " + " ".join(map(str, cmd)), flush=True)
    report = run(cmd, "graft prune")
    units = next((line.split()[-1] for line in report.splitlines()
                  if line.strip().startswith("units removed")), "?")
    info = {"dense": graft_info(a.graft, dense), "pruned": graft_info(a.graft, pruned)}
    sizes = {"dense": model_files_bytes(dense), "pruned": model_files_bytes(pruned)}
    errors = {w: check_outputs(a.graft, p, out_dir, a.threads, a.tolerance)
              for w, p in (("dense", dense), ("pruned", pruned))}
    lat = measure(a, dense, pruned, batches)
    table(a, info, sizes, lat, batches, units)
    print(f"\noutputs, ONNX Runtime vs graft (max |difference| / max |value|, batch 2): dense "
          f"{errors['dense'][0]:.2g}, pruned {errors['pruned'][0]:.2g} (tolerance "
          f"{a.tolerance:g}); load average at the end {os.getloadavg()[0]:.2f}")
    if not errors["pruned"][1]:
        print("bench_prune: the pruned model's outputs differ between graft and ONNX Runtime")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
