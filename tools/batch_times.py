#!/usr/bin/env python3
"""batch_times.py LOG...: the backbone batches' times in `graft finetune` logs made with GRAFT_LOG=debug:
count, sum, median, the first three and the runs over twice the median (new shapes, warm-up)."""
import re, sys, statistics
for path in sys.argv[1:]:
    t = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"backbone: (\d+) samples(?: \(padded\))? in ([0-9.]+) ms", open(path).read())]
    if not t: continue
    ms = [x for _, x in t]
    med = statistics.median(ms)
    slow = [(i, n, x) for i, (n, x) in enumerate(t) if x > 2 * med]
    print(f"{path.split('/')[-1]}: {len(t)} runs, sum {sum(ms)/1e3:.2f}s, median {med:.1f} ms, first {ms[:3]}, slow (>2x median) {len(slow)}: sum {sum(x for *_, x in slow)/1e3:.2f}s {slow[:8]}")
