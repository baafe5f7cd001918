#!/usr/bin/env python3
"""bench_scale.py: does graft's cold fine-tune rate hold at ImageNet's size? (issue 14: 1.28 million
JPEGs x 10 epochs within 2 minutes on one GPU).

Makes bench_finetune.py's JPEG set once (--unique images, 500x375, 10 classes, fixed seed), then
folders of N training images for each N in --sizes: copies of those files in turn, each made a
file of its own by a JPEG comment segment holding its index (graft lists a file reached twice,
e.g. through hard links, once: hard links would measure the unique files only). A copy decodes
at the same cost as its original; every file is read and decoded. "max" is the most copies the
work folder's free space holds beside the feature cache (1.28 million of these ~45 KB files
need ~58 GB). Runs `graft finetune --decode gpu --cache DIR` cold on each (a fresh cache;
validation on the same 2,000 images) and prints a table: N, wall seconds, graft's backbone and
head seconds, the backbone phase's images/s, and the wall time over N (the rate holds when it
stays flat), with the 1.28-million figure the largest set's rate gives.
Usage: tools/bench_scale.py --graft B/graft [--sizes 20000,200000,max] [--unique 20000]
"""
import argparse
import os
import re
import shutil
import struct
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_finetune import export_resnet50, graft_run, make_set  # noqa: E402


def _write_copies(job):
    """Copies job's (index, source, destination) triples: a COM segment with the index after
    SOI, then the source's bytes after its SOI."""
    for i, src, dst in job:
        with open(src, "rb") as f:
            data = f.read()
        with open(dst, "wb") as f:
            f.write(data[:2] + b"\xff\xfe" + struct.pack(">HQ", 10, i) + data[2:])


def copy_folder(src, dst, n, classes, workers):
    """dst/class_XX/ with n distinct files: copies of src's files, cycled (a larger n adds to a
    smaller one's folder)."""
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs)
    have = sum(len(fs) for _, _, fs in os.walk(dst)) if os.path.isdir(dst) else 0
    if have > n:
        shutil.rmtree(dst)
        have = 0
    for c in range(classes):
        os.makedirs(os.path.join(dst, f"class_{c:02d}"), exist_ok=True)
    by_class = [[f for f in files if f"/class_{c:02d}/" in f] for c in range(classes)]
    triples = []
    for i in range(have, n):
        c = i % classes
        pool = by_class[c]
        triples.append((i, pool[(i // classes) % len(pool)],
                        os.path.join(dst, f"class_{c:02d}", f"{i:08d}.jpg")))
    step = 2000
    with ProcessPoolExecutor(workers) as ex:
        list(ex.map(_write_copies, [triples[k:k + step] for k in range(0, len(triples), step)]))


def largest_fit(work, unique_dir, have):
    """The most training files the work folder's free space holds (have of them already there):
    the mean file size, plus the feature cache (2048 bf16 values a sample), 4 GB spare."""
    sizes = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(unique_dir) for f in fs]
    per_file = sum(sizes) / len(sizes) + 4096 + 2048 * 2  # + a block's slack + its features
    free = shutil.disk_usage(work).free - 4e9
    return int(have + free / per_file)


def outside(log):
    """graft's own wall time, the process's start to main, and the teardown, from a debug log."""
    text = open(log).read()
    own = re.search(r"wall time\s+([0-9.]+)s", text)
    m = re.search(r"([0-9.]+)s from the process's start to main.*?([0-9.]+)s freeing", text)
    return (float(own.group(1)) if own else float("nan"),
            float(m.group(1)) if m else float("nan"), float(m.group(2)) if m else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--graft", default="build/release/graft")
    ap.add_argument("--sizes", default="20000,200000,max",
                    help="training set sizes; max: the most the free space holds, at most 1281167")
    ap.add_argument("--unique", type=int, default=20000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--work", default="/tmp/bench_scale")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    t0 = time.perf_counter()
    make_set(os.path.join(a.work, "unique"), a.unique, 10, 1, a.workers)
    make_set(os.path.join(a.work, "val"), 2000, 10, 2, a.workers)
    model = os.path.join(a.work, "resnet50.onnx")
    export_resnet50(model)
    print(f"set made in {time.perf_counter() - t0:.0f} s", flush=True)
    rows, warm = [], None
    os.environ["GRAFT_LOG"] = "debug"  # the start-to-main and teardown times
    train = os.path.join(a.work, "train")
    for size in a.sizes.split(","):
        if size == "max":
            have = sum(len(fs) for _, _, fs in os.walk(train)) if os.path.isdir(train) else 0
            n = min(1281167, largest_fit(a.work, os.path.join(a.work, "unique"), have))
        else:
            n = int(size)
        t1 = time.perf_counter()
        copy_folder(os.path.join(a.work, "unique"), train, n, 10, a.workers)
        print(f"{n} distinct files in place in {time.perf_counter() - t1:.0f} s", flush=True)
        cache = os.path.join(a.work, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        log = os.path.join(a.work, f"graft_{n}.log")
        wall, (backbone, head) = graft_run(a, model, cache, log, ["--decode", "gpu"])
        rate = (n + 2000) / backbone if backbone else float("nan")
        rows.append((n, wall, backbone, head, rate))
        print(f"{n}: wall {wall:.2f} s, backbone {backbone} s, head {head} s", flush=True)
        if not warm:  # the smallest set again with every feature cached: where the time goes
            wlog = os.path.join(a.work, f"graft_{n}_warm.log")
            wwall, _ = graft_run(a, model, cache, wlog, ["--decode", "gpu"])
            warm = (n, wwall) + outside(wlog)
        shutil.rmtree(cache, ignore_errors=True)
    print("\n| training JPEGs | wall s | backbone s | head s | backbone images/s | wall ms per 1,000 |")
    print("|---|---|---|---|---|---|")
    for n, wall, backbone, head, rate in rows:
        print(f"| {n:,} | {wall:.2f} | {backbone:.2f} | {head:.2f} | {rate:,.0f} | "
              f"{1e6 * wall / n:.1f} |")
    n, wall, _, _, _ = rows[-1]
    print(f"\nat the largest set's rate, 1,281,167 JPEGs x {a.epochs} epochs: "
          f"{wall * 1281167 / n:.0f} s (the target: 120 s)")
    if warm:
        n, wall, own, start, free = warm
        print(f"\nwarm rerun of {n:,} (every feature cached): process {wall:.2f} s, graft's own "
              f"wall time {own:.2f} s, start to main {start:.3f} s, freeing at the end {free:.3f} s, "
              f"the rest (CUDA's teardown at exit, the interpreter's spawn) "
              f"{wall - own - start - free:.3f} s")


if __name__ == "__main__":
    main()
