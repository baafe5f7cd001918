#!/usr/bin/env python3
"""tools/zoo_fill.py --out DIR [--zoo models/zoo.tgz] [--each COMMAND]: the zoo's skeletons
(models/zoo.tgz) with the seeded random weights tools/zoo_check.py gives them, written as
DIR/NAME.onnx, for tests that load every zoo model (tests/test_freeze_points.c). Skips models whose
exporter failed. With --each, one model at a time (the whole zoo takes 2.3 GB): COMMAND (split on
spaces) runs with the model's path appended, its output passes through, and the file is removed;
the exit status is 1 when a command failed or fewer than 80 models were written."""
import subprocess
import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo_check import ROOT, fill  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--zoo", default=str(ROOT / "models/zoo.tgz"))
    ap.add_argument("--each")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        with tarfile.open(args.zoo) as tar:
            tar.extractall(t)
        zoo = Path(t) / "zoo"
        manifest = json.loads((zoo / "manifest.json").read_text())
        written, failed = 0, 0
        for rec in manifest["models"]:
            src = zoo / f"{rec['name']}.onnx"
            if not rec["ok"] or not src.exists():
                continue
            model = fill(onnx.load(str(src)))
            onnx.save(model, str(out / src.name))
            written += 1
            if args.each:
                sys.stdout.flush()
                failed += subprocess.run(args.each.split() + [str(out / src.name)]).returncode != 0
                (out / src.name).unlink()
    print(f"{written} zoo models {'checked' if args.each else 'written'} in {out}")
    if written < 80 or failed:
        print(f"FAIL zoo_fill: {written} models, {failed} commands failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
