#!/usr/bin/env python3
"""Write the single-op test cases that tests/test_gpu_ops.c runs on the GPU against the CPU.

Each case is one small ONNX model (a node or two, shapes taken from ResNet-50, BERT-base and
MobileNet) with seeded random inputs. Every op of src/ops/ops.def that has a float path comes in
fp32, fp16 and bf16; integer cases cover what models feed through int64/int32/bool tensors.

Half cases (fp16, bf16): the inputs and weights are drawn in float32 and rounded to the half
type, so they are exact in both. The same graph in float32 with the same (rounded) values is
written next to the case as NAME.ref.onnx: the test runs the half model on the GPU and that fp32
twin on the CPU, and compares the GPU's half output (upcast) with the CPU's fp32 output. The half
result then differs from the fp32 one by one rounding of the output (plus fp32 arithmetic noise):
well inside the `half` tolerance below.

Input files (.npy): fp32 inputs as float32, fp16 inputs as float16, bf16 inputs as uint16
holding the raw bf16 bits (numpy has no bf16; graft reads '<u2' as U16). The C test converts
each file to the dtype the model declares for that input: the half model takes the half values
as they are, its fp32 twin the same values upcast (exact). Integer and bool inputs are stored
in their own dtype.

Tolerance classes (column `tol` of cases.txt), with a = GPU output, b = CPU reference, both as
doubles, rms(b) = sqrt(mean(b^2)) over the output, mean|b| = mean(|b|):
  exact      a == b element for element (NaN matches NaN); copies, selections (Relu, Max,
             MaxPool, Where), comparisons, casts, integer ops. Half cases compare the upcast
             half output with the fp32 twin: their values are exact in the half type.
  f32        |a - b| <= 1e-5 * max(|b|, rms(b)): relative where |b| is typical, and scaled by
             the output's rms where |b| is small (cancellation in sums of K terms, whose order
             differs between the CPU and GPU).
  half       |a - b| <= 1e-2 * (|b| + mean|b|): one rounding of an fp32 result to fp16 (at
             most 2^-11 relative) or bf16 (2^-9), with slack for fp32 accumulation order.
  half:X     the same with bound X (3e-2 for "chain" cases, where a half intermediate — e.g. a
             ResNet shortcut conv's output — is rounded before it feeds another op, and a sum
             of the two can cancel).
  argmax:A   exact, except that an index may differ where the input holds equal values at
             both indices along axis A (ties; the first input of the case is the data).

cases.txt: '#' comments, then one line per case with whitespace-separated fields:
  name dtype tol model ref_model inputs flags
  name       e.g. conv3x3_bias.f16
  dtype      the case's element type (f32, f16, bf16, i64, ...; f32->f16 for a Cast)
  model      the model the GPU runs
  ref_model  the model the CPU runs for the reference ('-': the same model)
  inputs     comma-separated input=file.npy ('-': none)
  flags      comma-separated ('-': none): small (few elements: used by --small, e.g. under
             compute-sanitizer), fallback-ok (the op may run on the CPU without failing the case),
             half-fused-NAME-N (in fp16 / bf16 the GPU must run the fused group NAME of N nodes)

Usage: python3 tools/make_gpu_op_cases.py --out DIR [--small] [--list]
  --small writes only the cases flagged small (fast: for CI, where the test only skips).
The cases themselves are in tools/gpu_op_cases.py (single ops), tools/gpu_op_cases_fused.py
(fused groups), tools/gpu_op_cases_layout.py (channels-last), tools/gpu_op_cases_tensor.py
(reductions, TopK, indexing and tiling ops), tools/gpu_op_cases_elementwise.py (the exporters'
element-wise ops) and tools/gpu_op_cases_norm.py (Instance/GroupNormalization, Resize, Einsum).
A DIR whose cases.txt was written by the same version of this script and those files (and the
same --small choice) is left as it is unless --force.
"""

import argparse
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_op_cases import CASES, FLOAT_DTYPES, SMALL_ELEMENTS, Graph  # noqa: E402
import gpu_op_cases_fused  # noqa: E402,F401  (registers the fused-group cases)
import gpu_op_cases_layout  # noqa: E402,F401  (registers the channels-last cases)
import gpu_op_cases_tensor  # noqa: E402,F401  (registers the reduction, TopK and indexing cases)
import gpu_op_cases_elementwise  # noqa: E402,F401  (registers the exporters' element-wise ops)
import gpu_op_cases_norm  # noqa: E402,F401  (registers the normalisation, Resize and Einsum cases)


def generator_stamp(small):
    """Changes whenever this script or the catalogue does: a stale folder is then rewritten."""
    crc = 0
    for f in ("make_gpu_op_cases.py", "gpu_op_cases.py", "gpu_op_cases_fused.py",
              "gpu_op_cases_layout.py", "gpu_op_cases_tensor.py", "gpu_op_cases_elementwise.py",
              "gpu_op_cases_norm.py"):
        crc = zlib.crc32((Path(__file__).resolve().parent / f).read_bytes(), crc)
    return f"# generator {crc:08x} small={int(small)}"


def case_name(base, dt):
    """Float cases come in three variants, NAME.f32/.f16/.bf16; the others have one."""
    return f"{base}.{dt}" if dt in FLOAT_DTYPES else base


def case_seed(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def save_npy(path, arr):
    np.save(path, np.array(arr, order="C"), allow_pickle=False)  # ascontiguousarray makes 0-d 1-d


def tol_for(tol, dt):
    if tol == "float":
        return "half" if dt in ("f16", "bf16") else "f32"
    if tol == "chain":  # a half-precision intermediate feeds another op: two roundings to add up
        return "half:0.03" if dt in ("f16", "bf16") else "f32"
    return tol


def write_case(out, base, fn, dt, tol, flags, small_only):
    name = case_name(base, dt)
    float_case = dt in FLOAT_DTYPES
    data_dt = dt if float_case else "f32"
    g = Graph(name, data_dt, data_dt, case_seed(name))
    fn(g)
    small = g.elements <= SMALL_ELEMENTS
    if small_only and not small:
        return None
    model = f"{name}.onnx"
    onnx.save(g.model(), str(out / model))
    ref = "-"
    if dt in ("f16", "bf16"):
        twin = Graph(name, data_dt, "f32", case_seed(name))
        fn(twin)
        ref = f"{name}.ref.onnx"
        onnx.save(twin.model(), str(out / ref))
    inputs = []
    for in_name, arr in g.feeds:
        f = f"{name}.{in_name}.npy"
        save_npy(out / f, arr)
        inputs.append(f"{in_name}={f}")
    fl = list(flags) + (["small"] if small else [])
    return " ".join([name, dt, tol_for(tol, dt), model, ref, ",".join(inputs) or "-",
                     ",".join(fl) or "-"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="output folder (required unless --list)")
    ap.add_argument("--small", action="store_true", help="only the cases flagged small")
    ap.add_argument("--force", action="store_true", help="rewrite even when up to date")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    args = ap.parse_args(argv)
    stamp = generator_stamp(args.small)
    if args.list:
        for base, _, dtypes, _, _ in CASES:
            for dt in dtypes:
                print(case_name(base, dt))
        return 0
    if not args.out:
        ap.error("--out is required")
    out = Path(args.out)
    index = out / "cases.txt"
    if not args.force and index.exists():
        with open(index) as f:
            if f.readline().rstrip("\n") == stamp:
                print(f"{index}: up to date")
                return 0
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for base, fn, dtypes, tol, flags in CASES:
        for dt in dtypes:
            line = write_case(out, base, fn, dt, tol, flags, args.small)
            if line:
                lines.append(line)
    tmp = index.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(stamp + "\n")
        f.write("# name dtype tol model ref_model inputs flags (see tools/make_gpu_op_cases.py)\n")
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, index)
    print(f"{index}: {len(lines)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
