#!/usr/bin/env python3
"""tools/zoo_check.py --graft BIN [--zoo models/zoo.tgz] [--out DIR] [--only SUBSTR] [--known FILE]
[--table docs/models.md]: the model zoo through graft as a user would take it. Each skeleton that
tools/zoo_export.py wrote (torchvision, timm and Hugging Face models as the TorchScript and dynamo
exporters write them) gets seeded random weights, then: `load` (graft info), `parity` (graft run
against ONNX Runtime on the same random input, max |diff| / max |reference| <= 1e-4), `finetune`
(graft finetune on a small folder of images or a CSV of texts, --epochs 2) and `export` (the
grafted model in graft and in ONNX Runtime on the same input). One line per model and stage:
PASS, FAIL, or KNOWN / FIXED for the stages tests/zoo_known.txt lists as expected to fail (with
the reason); --table writes the compatibility table."""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime as ort

ort.set_default_logger_severity(3)  # exporters declare batch-1 outputs that a batch of 2 "mismatches"

ROOT = Path(__file__).resolve().parent.parent
STAGES = ["load", "parity", "finetune", "export"]
TOL = 1e-4


def positive_inputs(model):
    """Tensors that must be positive: BatchNormalization's scale and variance."""
    names = set()
    for n in model.graph.node:
        if n.op_type == "BatchNormalization" and len(n.input) >= 5:
            names.update([n.input[1], n.input[4]])
    return names


def fill(model):
    """Seeded random values for every tensor the skeleton stripped (doc_string marks them)."""
    positive = positive_inputs(model)
    tensors = list(model.graph.initializer)
    for node in model.graph.node:
        tensors += [a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR]
    for t in tensors:
        if t.doc_string != "graft-zoo: random":
            continue
        dims = list(t.dims)
        seed = int.from_bytes(hashlib.sha256(t.name.encode()).digest()[:4], "little")
        rng = np.random.default_rng(seed)
        if t.name in positive:
            v = rng.uniform(0.5, 1.5, dims)
        else:
            fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else max(int(np.prod(dims)), 1)
            v = rng.normal(0.0, 1.0 / np.sqrt(max(fan_in, 1)), dims)
        dtype = np.float16 if t.data_type == onnx.TensorProto.FLOAT16 else np.float32
        t.CopyFrom(numpy_helper.from_array(v.astype(dtype), t.name))
    return model


def model_inputs(model, kind, batch):
    """A random input for each graph input, at the declared fixed sizes (else batch / 16)."""
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else (batch if k == 0 else 16)
                for k, d in enumerate(tt.shape.dim)]
        if tt.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            dt = np.int64 if tt.elem_type == onnx.TensorProto.INT64 else np.int32
            low, high = (5, 1000) if ("mask" not in i.name and "type" not in i.name) else (0, 1)
            v = rng.integers(low, high + ("mask" in i.name), dims).astype(dt)
            if "mask" in i.name:
                v[:] = 1
                v[..., -3:] = 0
            feeds[i.name] = v
        else:
            feeds[i.name] = rng.normal(0, 1, dims).astype(np.float32)
    return feeds


def rel_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b))) / max(float(np.max(np.abs(b))), 1e-12)


def graft(args, cmd, timeout=300):
    p = subprocess.run([args.graft] + cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:300]


def run_and_compare(args, path, feeds, work):
    """graft run against ONNX Runtime: (ok, note)."""
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 (the reference cannot run it: say so)
        return False, f"ONNX Runtime fails too: {str(e).splitlines()[0][:160]}"
    names = [o.name for o in sess.get_outputs()]
    cmd = ["run", str(path), "--output-dir", str(work / "out")]
    for k, v in feeds.items():
        np.save(work / f"in_{len(cmd)}.npy", v)
        cmd += ["--input", f"{k}={work / f'in_{len(cmd)}.npy'}"]
    rc, err = graft(args, cmd)
    if rc != 0:
        return False, err
    worst = 0.0
    for name, w in zip(names, want):
        # graft run's file names: / : \\ become _ (long names are shortened with a hash).
        f = work / "out" / (name.replace("/", "_").replace(":", "_").replace("\\", "_") + ".npy")
        if not f.exists():
            return False, f"no output file for '{name}'"
        got = np.load(f)
        if got.shape != w.shape:
            return False, f"output '{name}': shape {got.shape}, ONNX Runtime {w.shape}"
        if w.dtype.kind == "f":
            worst = max(worst, rel_err(got, w))
    return worst <= TOL, f"max relative error {worst:.2g}"


def finetune(args, path, kind, work):
    out = work / "grafted.onnx"
    common = ["finetune", "--model", str(path), "--out", str(out), "--epochs", "2", "--seed", "0"]
    if kind == "image":
        cmd = common + ["--data", str(ROOT / "examples/digits/train"), "--val-split", "0.2",
                        "--batch", "8"]
    else:
        vocab = work / "vocab1000.txt"
        lines = (ROOT / "tests/data/tokenizer/vocab.txt").read_text(encoding="utf-8").splitlines()
        vocab.write_text("\n".join(lines[:1000]) + "\n", encoding="utf-8")
        cmd = common + ["--data", str(ROOT / "examples/reviews/train.csv"), "--vocab", str(vocab),
                        "--max-len", "16", "--val-split", "0.2", "--batch", "8"]
    rc, err = graft(args, cmd, timeout=600)
    return (rc == 0 and out.exists()), (err if rc else "trained 2 epochs"), out


def check_model(args, rec, tmp):
    """The stages' results for one zoo model: {stage: (ok, note)}."""
    res = {}
    work = tmp / rec["name"]
    work.mkdir(parents=True, exist_ok=True)
    model = fill(onnx.load(str(Path(args.zoo_dir) / f"{rec['name']}.onnx")))
    path = work / "model.onnx"
    onnx.save(model, str(path))
    rc, err = graft(args, ["info", str(path)])
    res["load"] = (rc == 0, err if rc else "")
    if rc != 0:
        return res
    # Images at batch 1 (TorchScript exports often bake the traced batch into Reshapes), texts
    # at 2 (two rows of one length).
    batch = 1 if rec["kind"] == "image" else 2
    res["parity"] = run_and_compare(args, path, model_inputs(model, rec["kind"], batch), work)
    ok, note, out = finetune(args, path, rec["kind"], work)
    res["finetune"] = (ok, note)
    if ok:
        grafted = onnx.load(str(out))
        res["export"] = run_and_compare(args, out, model_inputs(grafted, rec["kind"], batch), work)
    return res


def read_known(path):
    known = {}
    if path and Path(path).exists():
        for line in Path(path).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                parts = line.split(None, 2)
                known[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else ""
    return known


def report(rec, res, known):
    """PASS/FAIL/KNOWN/FIXED lines; returns the table row's cells."""
    cells = []
    for stage in STAGES:
        if stage not in res:
            cells.append("-")
            continue
        ok, note = res[stage]
        key = (rec["name"], stage)
        tag = f"zoo_{rec['name']}_{stage}"
        if key in known:
            print(f"{'FIXED' if ok else 'KNOWN'} {tag}: {note if not ok else 'passes now'} ({known[key]})")
        else:
            print(f"{'PASS' if ok else 'FAIL'} {tag}" + ("" if ok else f": {note}"))
        cells.append("yes" if ok else f"no: {note}".replace("|", "/")[:120])
    return cells


def summary(rows):
    exported = [cells for rec, cells in rows if rec["ok"]]
    counts = {st: sum(1 for c in exported if len(c) > k and c[k] == "yes")
              for k, st in enumerate(STAGES)}
    return (f"{len(rows)} exports tried, {len(exported)} written by the exporter; of those: "
            + ", ".join(f"{st} {counts[st]}" for st in STAGES) + ".")


def write_table(path, manifest, rows):
    lines = ["# Model zoo: what graft loads, matches and fine-tunes", "",
             "Written by `tools/zoo_check.py --table docs/models.md` (the CPU build) from the",
             "skeletons in `models/zoo.tgz` that `tools/zoo_export.py` exported with torch "
             f"{manifest.get('torch')}, torchvision {manifest.get('torchvision')}, timm "
             f"{manifest.get('timm')}, transformers {manifest.get('transformers')} (random weights, "
             "reduced depth for the transformers; default names untouched). `load`: graft info; "
             "`parity`: graft run vs ONNX Runtime (max relative error <= 1e-4); `finetune`: graft "
             "finetune --epochs 2 on examples/digits/train or examples/reviews/train.csv; `export`: "
             "the grafted model in graft vs ONNX Runtime. `-`: not reached. Not measured yet: "
             "prune, and the GPU (fp32/bf16 against the CPU).", "", summary(rows), "",
             "| model | exporter | opset | inputs | load | parity | finetune | export |",
             "|---|---|---|---|---|---|---|---|"]
    for rec, cells in rows:
        if not rec["ok"]:
            lines.append(f"| {rec['model']} | {rec['exporter']} | | | export failed: "
                         f"{rec['error'][:100]} | - | - | - |")
            continue
        lines.append(f"| {rec['model']} | {rec['exporter']} | {rec.get('opset', '')} | "
                     f"{', '.join(rec.get('inputs', []))} | " + " | ".join(cells) + " |")
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", required=True)
    ap.add_argument("--zoo", default=str(ROOT / "models/zoo.tgz"))
    ap.add_argument("--only", default="")
    ap.add_argument("--known", default=str(ROOT / "tests/zoo_known.txt"))
    ap.add_argument("--table")
    args = ap.parse_args()
    args.graft = os.path.abspath(args.graft)
    known = read_known(args.known)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        with tarfile.open(args.zoo) as tar:
            tar.extractall(tmp / "skel")
        args.zoo_dir = tmp / "skel" / "zoo"
        manifest = json.loads((args.zoo_dir / "manifest.json").read_text())
        rows = []
        for rec in manifest["models"]:
            if args.only and not any(s in rec["name"] for s in args.only.split(",")):
                continue
            if not rec["ok"]:
                print(f"SKIP zoo_{rec['name']}: the exporter failed: {rec['error'][:200]}")
                rows.append((rec, []))
                continue
            try:
                res = check_model(args, rec, tmp / "work")
            except Exception as e:  # noqa: BLE001 (a broken check is one failure, not a stop)
                res = {"load": (False, f"check error: {type(e).__name__}: {e}"[:200])}
            rows.append((rec, report(rec, res, known)))
            sys.stdout.flush()
        if args.table:
            write_table(args.table, manifest, rows)


if __name__ == "__main__":
    main()
