#!/usr/bin/env python3
"""tools/bench_padding.py: what padding each batch to its longest text saves on a real length mix.

Runs `graft finetune` twice on the same texts, with --pad longest (the default: texts in order of
length, each batch padded to its longest rounded up to 8) and --pad max,
alternating REPEATS times, and prints the backbone phase's time of each, the tokens the backbone
ran (counted from `graft tokenize`) and both ratios. Defaults: the real all-MiniLM-L6-v2 and
Debian's fortunes that tools/test.sh puts in tests/data/gen/minilm (tools/make_fortunes_text.py,
tools/minilm_fill.py).

    python3 tools/bench_padding.py --graft build/release/graft [--device cuda:0 --precision bf16]
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def texts_of(csv_paths):
    out = []
    for p in csv_paths:
        with open(p, newline="") as f:
            out += [r["text"].replace("\n", " ") for r in csv.DictReader(f)]
    return out


def replicated(path, k, work):
    """path's rows k times over, as a CSV in work."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows, fields = list(reader), reader.fieldnames
    out = work / f"x{k}_{Path(path).name}"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for _ in range(k):
            w.writerows(rows)
    return str(out)


def token_counts(graft, vocab, max_len, texts, work):
    lines = work / "lines.txt"
    lines.write_text("\n".join(texts) + "\n")
    out = subprocess.run([graft, "tokenize", "--vocab", vocab, "--max-len", str(max_len),
                          str(lines)], capture_output=True, text=True, check=True).stdout
    return [len(json.loads(line)["input_ids"]) for line in out.splitlines() if line.strip()]


def backbone_seconds(graft, args, pad, work, plan_cache=True):
    cmd = [graft, "finetune", "--model", args.model, "--vocab", args.vocab, "--data", args.train,
           "--val", args.test, "--max-len", str(args.max_len), "--pad", pad, "--epochs", "1",
           "--batch", str(args.batch), "--out", str(work / f"ft_{pad}.onnx")]
    cmd += ["--device", args.device] + (["--precision", args.precision] if args.precision else [])
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    env = dict(os.environ)
    if not plan_cache:
        env["GRAFT_PLAN_CACHE"] = "0"  # one plan (and CUDA graph) kept, for the last shape
    log = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if log.returncode != 0:
        sys.exit(f"graft finetune --pad {pad} failed:\n{log.stdout[-2000:]}{log.stderr[-2000:]}")
    m = re.search(r"time\s+backbone ([0-9.]+)s", log.stdout + log.stderr)
    if not m:
        sys.exit(f"no backbone time in graft finetune's output:\n{log.stdout[-2000:]}")
    return float(m.group(1))


def main():
    gen = Path(__file__).resolve().parent.parent / "tests/data/gen/minilm"
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graft", default="build/release/graft")
    ap.add_argument("--model", default=str(gen / "models/ts17/model.onnx"))
    ap.add_argument("--vocab", default=str(gen / "models/ts17/vocab.txt"))
    ap.add_argument("--train", default=str(gen / "data/train.csv"))
    ap.add_argument("--test", default=str(gen / "data/test.csv"))
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--replicate", type=int, default=1,
                    help="each file's rows K times over (a larger set, the same length mix)")
    ap.add_argument("--no-plan-cache-too", action="store_true",
                    help="also run --pad longest with GRAFT_PLAN_CACHE=0 (a plan per shape not kept)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.replicate > 1:
            args.train, args.test = (replicated(p, args.replicate, work)
                                     for p in (args.train, args.test))
        parts = [token_counts(args.graft, args.vocab, args.max_len, texts_of([p]), work)
                 for p in (args.train, args.test)]
        lens = parts[0] + parts[1]
        b = args.batch

        # the backbone runs the training texts then the validation texts, each set in order of
        # length (src/data/dataset_order.c), each batch as wide as its longest text rounded up to
        # a multiple of 8 (src/data/text_pad.h)
        def width(longest):
            return min(args.max_len, max(8, (longest + 7) // 8 * 8))

        def tokens(ls):
            return sum(width(max(ls[i:i + b])) * len(ls[i:i + b]) for i in range(0, len(ls), b))
        run = sum(tokens(sorted(p)) for p in parts)
        full = args.max_len * len(lens)
        times = {"longest": [], "max": [], "longest, GRAFT_PLAN_CACHE=0": []}
        for _ in range(args.repeats):
            for pad in ("longest", "max"):
                times[pad].append(backbone_seconds(args.graft, args, pad, work))
            if args.no_plan_cache_too:
                times["longest, GRAFT_PLAN_CACHE=0"].append(
                    backbone_seconds(args.graft, args, "longest", work, plan_cache=False))
    lens.sort()
    print(f"# {len(lens)} texts, tokens per text: mean {sum(lens) / len(lens):.1f}, median "
          f"{lens[len(lens) // 2]}, 90th percentile {lens[int(0.9 * len(lens))]}, max {lens[-1]}")
    print("| --pad | tokens the backbone ran | backbone s (each run) |")
    print("|---|---|---|")
    for pad, tokens in (("longest", run), ("max", full), ("longest, GRAFT_PLAN_CACHE=0", run)):
        if times[pad]:
            print(f"| {pad} | {tokens} | {', '.join(f'{t:.2f}' for t in times[pad])} |")
    print(f"tokens max / longest {full / run:.2f}; time max / longest "
          f"{min(times['max']) / min(times['longest']):.2f} (fastest runs)")


if __name__ == "__main__":
    main()
