#!/usr/bin/env bash
# tools/gpu_scale_run.sh: issue 14's fine-tune at scale: tools/bench_scale.py (20,000, 200,000 and
# the most distinct training JPEGs the disk holds (1,281,167 at most), cold, --decode gpu, bf16, 10 epochs) on the GPU machine.
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_scale_run.sh [SIZES]
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built at $(since)"
python3 tools/bench_scale.py --graft $B/graft --sizes "${1:-20000,200000,max}" 2>&1 | tee "$OUT/scale.log"
for f in /tmp/bench_scale/graft_*.log; do
    echo "== $(basename $f)"; grep -E '^backbone:|wall time|^  time|debug: head: ' "$f" | cut -c1-300 | tail -7
done
echo "done at $(since)"
