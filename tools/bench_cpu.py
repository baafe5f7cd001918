#!/usr/bin/env python3
"""tools/bench_cpu.py: graft against ONNX Runtime and OpenVINO on the CPU, side by side in one run
(issue 17's benchmark).

Loads build/release/libgraft.so through ctypes, runs each generated model (tests/data/gen) with
the same inputs in every engine, interleaved (graft, ORT, OpenVINO, twice), a few warm-up and
timed iterations each (medians; the better of the two rounds), and prints a table with graft's
time over each peer's and over the faster peer's (below 1: graft is faster), and each engine's
load time (file to first result); with --memory each engine's peak resident memory (VmHWM over
the RSS once its library is loaded, before the model, in a process of its own). ORT runs with its default graph optimisations, OpenVINO
(PyPI `openvino`; skipped with a note when absent) with its latency hint, both with the same
thread count as graft. On a bigger machine pin the cores: `taskset -c 0,1 python3 ...`. Usage:
    python3 tools/bench_cpu.py [--lib build/release/libgraft.so] [--gen tests/data/gen]
        [--models resnet50,bert_base] [--batches 1,8] [--seq 128] [--threads 2] [--iters 10]
        [--precision fp32|bf16] [--ov-precision f32|bf16] [--memory]
        [--onnx A.onnx,B.onnx]   (any image model: a random float input per graph input,
                                  symbolic sizes as the batch and 224)
Generated models take the batch from --batches (their saved inputs give the rest of the shape:
the first row repeated); `--batches 0` keeps the saved inputs as they are.
"""
import argparse
import ctypes as C
import json
import time

import numpy as np
import onnxruntime as ort

DTYPES = {np.dtype("float32"): 1, np.dtype("int64"): 7, np.dtype("int32"): 6}


class Tensor(C.Structure):
    _fields_ = [("dtype", C.c_int), ("ndim", C.c_int32), ("dims", C.c_int64 * 8),
                ("data", C.c_void_p)]


class Named(C.Structure):
    _fields_ = [("name", C.c_char_p), ("tensor", Tensor)]


class CtxOptions(C.Structure):
    _fields_ = [("num_threads", C.c_int), ("log_level", C.c_int), ("log_fn", C.c_void_p),
                ("log_user", C.c_void_p), ("use_reference_kernels", C.c_int),
                ("device", C.c_char_p), ("allow_tf32", C.c_int)]


def graft_runner(lib, path, feeds, threads, precision="fp32"):
    ctx, model = C.c_void_p(), C.c_void_p()
    opts = CtxOptions(threads, 2, None, None, 0, None, 0)
    assert lib.graft_ctx_create(C.byref(opts), C.byref(ctx)) == 0
    if lib.graft_model_load(ctx, path.encode(), C.byref(model)) != 0:
        raise RuntimeError(lib.graft_last_error(ctx).decode())
    if precision == "bf16" and lib.graft_model_set_precision(model, 16) != 0:  # GRAFT_DTYPE_BF16
        raise RuntimeError(lib.graft_last_error(ctx).decode())
    arr = (Named * len(feeds))()
    keep = []
    for i, (name, a) in enumerate(feeds.items()):
        a = np.ascontiguousarray(a)
        keep.append(a)
        dims = (C.c_int64 * 8)(*a.shape)
        arr[i] = Named(name.encode(), Tensor(DTYPES[a.dtype], a.ndim, dims, a.ctypes.data))

    def run():
        if lib.graft_model_run(model, arr, len(feeds)) != 0:
            raise RuntimeError(lib.graft_last_error(ctx).decode())
    return run, keep


def random_feeds(path, batch):
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.dim_value > 0 else (batch if k == 0 else 224)
                for k, d in enumerate(i.type.tensor_type.shape.dim)]
        feeds[i.name] = rng.normal(0, 1, dims).astype(np.float32)
    return feeds


def openvino_runner(path, feeds, threads, precision):
    """A compiled OpenVINO model and a function running it on feeds; None without openvino.
    precision: "f32", or "bf16" (OpenVINO's default on CPUs with AVX512_BF16 or AMX)."""
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                              "INFERENCE_PRECISION_HINT": precision})
    model = core.read_model(path)
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    compiled = core.compile_model(model, "CPU")
    req = compiled.create_infer_request()
    return lambda: req.infer(feeds)


def load_time(make):
    """Seconds from the file to the first result: make() builds a runner, which runs once."""
    t0 = time.perf_counter()
    run = make()
    if run is None:
        return None, None
    (run[0] if isinstance(run, tuple) else run)()
    return time.perf_counter() - t0, run


def with_batch(feeds, batch, seq):
    """The saved inputs at another batch (their first row repeated) and, for text (2-D inputs),
    another sequence length (the row's tokens repeated)."""
    out = {}
    for k, v in feeds.items():
        if batch > 0:
            v = np.repeat(v[:1], batch, axis=0)
        if seq > 0 and v.ndim == 2:
            v = np.resize(v, (v.shape[0], seq)) if seq != v.shape[1] else v
        out[k] = np.ascontiguousarray(v)
    return out


def median_time(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def bench_one(lib, name, path, feeds, args, so):
    """(name, batch, graft ms, ORT ms, OpenVINO ms or None, load times) of one model."""
    lg, (run_graft, _keep) = load_time(
        lambda: graft_runner(lib, path, feeds, args.threads, args.precision))
    def ort_runner():
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, feeds)
    lo, run_ort = load_time(ort_runner)
    lv, run_ov = load_time(lambda: openvino_runner(path, feeds, args.threads, args.ov_precision))
    runs = [run_graft, run_ort] + ([run_ov] if run_ov else [])
    best = [float("inf")] * len(runs)
    for _ in range(2):  # interleaved twice: the machine's load moves every engine alike
        for k, fn in enumerate(runs):
            best[k] = min(best[k], median_time(fn, 2, args.iters))
    batch = next(iter(feeds.values())).shape[0]
    t_ov = best[2] * 1e3 if run_ov else None
    return (name, batch, best[0] * 1e3, best[1] * 1e3, t_ov, (lg, lo, lv))


def feeds_for(args, name, batch):
    """(label, path, feeds) of a model name (or --onnx file) at a batch."""
    if args.onnx:
        return name.rsplit("/", 1)[-1].removesuffix(".onnx")[:24], name, \
            random_feeds(name, max(batch, 1))
    man = json.load(open(f"{args.gen}/{name}.json"))
    saved = {i: np.load(f"{args.gen}/{name}.in.{i}.npy") for i in man["inputs"]}
    return name, f"{args.gen}/{name}.onnx", with_batch(saved, batch, args.seq)


def rss_kb(field):
    """This process's VmRSS (now) or VmHWM (its peak) in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def child_peak(args, so):
    """--child ENGINE: one engine loads the model and runs it 3 times in this process; prints
    the resident memory it added at its peak (VmHWM over the RSS once its library is loaded), in
    KiB."""
    engine, name, batch = args.child.split(":")
    _, path, feeds = feeds_for(args, name, int(batch))
    # each engine's library is loaded before the baseline (ONNX Runtime's by the import above,
    # OpenVINO's by its import), so that only what the model adds counts, alike for all three
    if engine == "graft":
        lib = C.CDLL(args.lib)
        lib.graft_last_error.restype = C.c_char_p
    elif engine == "openvino":
        import openvino  # noqa: F401
    base = rss_kb("VmRSS")
    if engine == "graft":
        run, _keep = graft_runner(lib, path, feeds, args.threads, args.precision)
    elif engine == "ort":
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        run = lambda: sess.run(None, feeds)  # noqa: E731
    else:
        run = openvino_runner(path, feeds, args.threads, args.ov_precision)
    for _ in range(3):
        run()
    print(rss_kb("VmHWM") - base)


def peaks(args, name, batch):
    """Each engine's peak added memory in MiB (a process of its own each; None: not run)."""
    import subprocess
    import sys
    out = []
    for engine in ("graft", "ort", "openvino"):
        cmd = [sys.executable, __file__, "--child", f"{engine}:{name}:{batch}", "--lib", args.lib,
               "--gen", args.gen, "--threads", str(args.threads), "--seq", str(args.seq),
               "--precision", args.precision, "--ov-precision", args.ov_precision]
        if args.onnx:
            cmd += ["--onnx", args.onnx]
        r = subprocess.run(cmd, capture_output=True, text=True)
        out.append(int(r.stdout.split()[-1]) / 1024 if r.returncode == 0 and r.stdout else None)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/release/libgraft.so")
    ap.add_argument("--gen", default="tests/data/gen")
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--seq", type=int, default=128, help="text models' sequence (0: saved)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="graft's (bf16 on the CPU: AVX512_BF16 or AMX products); ORT stays fp32")
    ap.add_argument("--ov-precision", default=None, choices=["f32", "bf16"],
                    help="OpenVINO's inference precision (default: graft's)")
    ap.add_argument("--onnx", default="", help="ONNX files to run instead of --models")
    ap.add_argument("--memory", action="store_true",
                    help="also each engine's peak resident memory (a process of its own each)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.ov_precision = args.ov_precision or ("bf16" if args.precision == "bf16" else "f32")
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    if args.child:
        return child_peak(args, so)
    lib = C.CDLL(args.lib)
    lib.graft_last_error.restype = C.c_char_p
    rows, mems = [], []
    for name in (args.onnx or args.models).split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            label, path, feeds = feeds_for(args, name, batch)
            rows.append(bench_one(lib, label, path, feeds, args, so))
            if args.memory:
                mems.append((label, batch, peaks(args, name, batch)))
    try:
        import openvino as ov
        ov_name = f"OpenVINO {ov.__version__.split('-')[0]}"
    except ImportError:
        ov_name = "OpenVINO (not installed: pip install openvino)"
    print(f"{args.threads} threads each; graft {args.precision}, ONNX Runtime {ort.__version__} "
          f"(fp32), {ov_name} "
          f"({args.ov_precision}); text models at sequence {args.seq or 'as saved'}")
    print("| model | batch | graft ms | ORT ms | OpenVINO ms | graft/ORT | graft/OpenVINO "
          "| graft/faster peer | load s: graft, ORT, OpenVINO |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, batch, g, o, v, loads in rows:
        faster = min(o, v) if v else o
        vs = f"{v:.1f}" if v else "-"
        gv = f"{g / v:.2f}" if v else "-"
        ld = ", ".join(f"{x:.2f}" if x is not None else "-" for x in loads)
        print(f"| {name} | {batch} | {g:.1f} | {o:.1f} | {vs} | {g / o:.2f} | {gv} "
              f"| {g / faster:.2f} | {ld} |")
    if mems:
        print("\n| model | batch | peak added memory MiB: graft | ORT | OpenVINO |")
        print("|---|---|---|---|---|")
        for name, batch, (g, o, v) in mems:
            f = [f"{x:.0f}" if x is not None else "-" for x in (g, o, v)]
            print(f"| {name} | {batch} | {f[0]} | {f[1]} | {f[2]} |")


if __name__ == "__main__":
    main()
