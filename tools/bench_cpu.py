#!/usr/bin/env python3
"""tools/bench_cpu.py: graft against ONNX Runtime on the CPU, side by side in one run.

Loads build/release/libgraft.so through ctypes, runs each generated model (tests/data/gen) with
the same inputs in both engines for a few warm-up and timed iterations (median), and prints a
table with the ratio graft/ORT (below 1: graft is faster). ORT runs with its default graph
optimisations and the same thread count. Usage:
    python3 tools/bench_cpu.py [--lib build/release/libgraft.so] [--gen tests/data/gen]
        [--models resnet18,resnet50,bert_base] [--threads 2] [--iters 10]
        [--onnx A.onnx,B.onnx --batch 1]   (any image model: a random float input per graph
                                            input, symbolic sizes as batch and 224)
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


def graft_runner(lib, path, feeds, threads):
    ctx, model = C.c_void_p(), C.c_void_p()
    opts = CtxOptions(threads, 2, None, None, 0, None, 0)
    assert lib.graft_ctx_create(C.byref(opts), C.byref(ctx)) == 0
    if lib.graft_model_load(ctx, path.encode(), C.byref(model)) != 0:
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


def median_time(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/release/libgraft.so")
    ap.add_argument("--gen", default="tests/data/gen")
    ap.add_argument("--models", default="resnet18,resnet50,bert_base")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--onnx", default="", help="ONNX files to run instead of --models")
    ap.add_argument("--batch", type=int, default=1, help="the batch for --onnx files")
    args = ap.parse_args()
    lib = C.CDLL(args.lib)
    lib.graft_last_error.restype = C.c_char_p
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    rows = []
    for name in (args.onnx or args.models).split(","):
        if args.onnx:
            path, feeds = name, random_feeds(name, args.batch)
            name = name.rsplit("/", 1)[-1].removesuffix(".onnx")[:24]
        else:
            path = f"{args.gen}/{name}.onnx"
            man = json.load(open(f"{args.gen}/{name}.json"))
            feeds = {i: np.load(f"{args.gen}/{name}.in.{i}.npy") for i in man["inputs"]}
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        run_graft, _keep = graft_runner(lib, path, feeds, args.threads)
        # interleaved twice, medians of each: the machine's load moves both alike
        t_ort, t_graft = [], []
        for _ in range(2):
            t_ort.append(median_time(lambda: sess.run(None, feeds), 2, args.iters))
            t_graft.append(median_time(run_graft, 2, args.iters))
        t_ort, t_graft = min(t_ort), min(t_graft)
        batch = next(iter(feeds.values())).shape[0]
        rows.append((name, batch, t_graft * 1e3, t_ort * 1e3, t_graft / t_ort))
    print(f"{'model':<24}{'batch':>6}{'graft ms':>11}{'ORT ms':>10}{'graft/ORT':>11}")
    for r in rows:
        print(f"{r[0]:<24}{r[1]:>6}{r[2]:>11.1f}{r[3]:>10.1f}{r[4]:>11.2f}")


if __name__ == "__main__":
    main()
