#!/usr/bin/env bash
# tools/gpu_zoo_unfreeze_run.sh [ONLY]: `graft finetune --unfreeze 1` on the GPU for the model
# zoo's exports (tools/zoo_check.py --stages unfreeze --device cuda:0; ONLY: a --only filter,
# default the opset-17 TorchScript exports), naming the Backward nodes that ran on the
# CPU. On the GPU machine from the project root (carry .gpu):
# source .gpu/env.sh && bash tools/gpu_zoo_unfreeze_run.sh
. tools/gpu_run_common.sh

gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built at $(since)"
python3 tools/zoo_check.py --graft $B/graft --device cuda:0 --no-gpu-run --stages unfreeze \
    --only "${1:-__ts17}" >"$OUT/zoo_unfreeze.log" 2>&1
echo "zoo_check rc=$? at $(since): $(grep -c '^PASS .*_unfreeze' "$OUT/zoo_unfreeze.log") unfreeze passed," \
    "$(grep -c '^FAIL .*_unfreeze' "$OUT/zoo_unfreeze.log") failed"
grep -E '_unfreeze' "$OUT/zoo_unfreeze.log" | sed 's/^\(.\{230\}\).*/\1/'
