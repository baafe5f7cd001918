#!/usr/bin/env bash
# tools/gpu_step_run.sh: the step graph (head_step.h) on the GPU: a head alone (test_gpu_train
# against the CPU, the head's epochs beside PyTorch's) and blocks with the head as one graph
# (block parity on cuda:0, the digits demo's --train-from on the CPU and cuda:0, --resume and
# --accumulate on cuda:0, ResNet-50's last stage against the pause's path and PyTorch).
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_step_run.sh [--no-bench]
. tools/gpu_run_common.sh
# blocks on the GPU take the step graph by default (checked 2026-12-05); GRAFT_STEP_GRAPH=0 the pause
gpu_setup
python3 tools/make_models.py --out $G --only block_parity_resnet18,block_parity_bert4 >"$OUT/make_models.log" 2>&1 &
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
wait
$B/tests/test_gpu_train models/digits_cnn.onnx >"$OUT/gt.log" 2>&1; summary gpu_train $? "$OUT/gt.log"
grep "^  " "$OUT/gt.log"; echo "nodes on the CPU: $(grep -c 'runs on the CPU' "$OUT/gt.log")"
for f in block_parity_fixture block_parity_bert_fixture; do
    BLOCK_PARITY_DEVICE=cuda:0 $B/tests/test_block_parity $G tests/data/$f.txt >"$OUT/$f.log" 2>&1
    summary "$f cuda" $? "$OUT/$f.log"
    grep -E '^  ' "$OUT/$f.log" | cut -c1-220
    echo "nodes on the CPU: $(grep -c 'runs on the CPU' "$OUT/$f.log")"
done
echo "parity done at $(since)"
digits_train_from_on_both
resume_on_gpu
accumulate_on_gpu
grep -h "on the CPU" "$OUT"/finetune_*.log "$OUT"/resume_*.log | sort | uniq -c | head
echo "finetune done at $(since)"
[ "${1:-}" = --no-bench ] && exit 0
python3 tools/bench_head_gpu.py $B models/digits_cnn.onnx 2>&1 | tail -5
GRAFT_LOG=info python3 tools/bench_blocks_gpu.py --graft $B/graft >"$OUT/bench_blocks.log" 2>&1
echo "bench_blocks_gpu rc=$?"; tail -9 "$OUT/bench_blocks.log"
echo "done in $(since)"
