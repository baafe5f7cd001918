#!/usr/bin/env bash
# tools/gpu_backward_run.sh: the GPU checks of training graphs on the GPU (issue 15): build with
# CUDA, the OptimizerStep op's CUDA kernel and the GPU head trainer against the CPU, every
# Backward rule against the CPU (tests/test_gpu_backward, also under
# compute-sanitizer), `graft finetune --train-from` on the GPU against the CPU, and the ResNet-50
# last-stage benchmark against PyTorch (tools/bench_blocks_gpu.py). On the GPU machine from the
# project root (carry .gpu): source .gpu/env.sh && bash tools/gpu_backward_run.sh [--no-bench]
# (--bench-only: graft's side of the benchmark alone, with its time split)
. tools/gpu_run_common.sh

gpu_setup
if [ "${1:-}" = --bench-only ]; then
    ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
    GRAFT_LOG=info python3 tools/bench_blocks_gpu.py --graft $B/graft --no-torch \
        >"$OUT/bench_blocks.log" 2>&1
    cp /tmp/bench_blocks/graft_*.log "$OUT/" 2>/dev/null
    tail -6 "$OUT/bench_blocks.log"
    grep -h 'blocks:' /tmp/bench_blocks/graft_warm.log
    exit 0
fi
python3 tools/make_backward_cases.py --out $G/backward >"$OUT/make_cases.log" 2>&1 &
python3 tools/make_models.py --out $G --only block_parity_resnet18,block_parity_bert4 >"$OUT/make_models.log" 2>&1 &
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
wait
echo "built, cases made at $(since)"

$B/tests/test_optimizer_step --device cuda:0 >"$OUT/optimizer_step.log" 2>&1
summary optimizer_step_cuda $? "$OUT/optimizer_step.log"
grep -E '^  ' "$OUT/optimizer_step.log" | cut -c1-160
compute-sanitizer --error-exitcode 86 $B/tests/test_optimizer_step --device cuda:0 \
    >"$OUT/optimizer_step_sanitizer.log" 2>&1
echo "compute-sanitizer optimizer_step: rc=$? $(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' "$OUT/optimizer_step_sanitizer.log") reports"
$B/tests/test_train_loss --device cuda:0 >"$OUT/train_loss.log" 2>&1
summary train_loss_cuda $? "$OUT/train_loss.log"
$B/tests/test_gpu_train models/digits_cnn.onnx >"$OUT/gpu_train.log" 2>&1
summary gpu_train $? "$OUT/gpu_train.log"
$B/tests/test_gpu_backward $G/backward >"$OUT/gpu_backward.log" 2>&1
summary gpu_backward $? "$OUT/gpu_backward.log"
grep -E '^PASS' "$OUT/gpu_backward.log" | cut -c1-160
compute-sanitizer --error-exitcode 86 $B/tests/test_gpu_backward $G/backward \
    >"$OUT/gpu_backward_sanitizer.log" 2>&1
echo "compute-sanitizer: rc=$? $(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' "$OUT/gpu_backward_sanitizer.log") reports"
BLOCK_PARITY_DEVICE=cuda:0 $B/tests/test_block_parity $G tests/data/block_parity_fixture.txt \
    >"$OUT/block_parity_cuda.log" 2>&1
summary block_parity_cuda $? "$OUT/block_parity_cuda.log"
grep -E '^  (sgd|adamw|lamb) ' "$OUT/block_parity_cuda.log" | cut -c1-250
BLOCK_PARITY_DEVICE=cuda:0 $B/tests/test_block_parity $G tests/data/block_parity_bert_fixture.txt \
    >"$OUT/block_parity_bert_cuda.log" 2>&1
summary block_parity_bert_cuda $? "$OUT/block_parity_bert_cuda.log"
grep -E '^  (sgd|adamw|lamb) ' "$OUT/block_parity_bert_cuda.log" | cut -c1-250
echo "backward checks done at $(since)"

digits_train_from_on_both
resume_on_gpu
echo "finetune done at $(since)"
[ "${1:-}" = --no-bench ] && exit 0
GRAFT_LOG=info python3 tools/bench_blocks_gpu.py --graft $B/graft >"$OUT/bench_blocks.log" 2>&1
echo "bench_blocks_gpu rc=$?"
cp /tmp/bench_blocks/graft_*.log "$OUT/" 2>/dev/null
grep -h 'blocks:' /tmp/bench_blocks/graft_warm.log
tail -12 "$OUT/bench_blocks.log"
echo "all done at $(since)"
