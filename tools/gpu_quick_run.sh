#!/usr/bin/env bash
# tools/gpu_quick_run.sh: the short GPU checks of the training state on the device: the
# OptimizerStep and TrainLoss ops against the CPU, the GPU head trainer, a --resume on cuda:0 against a straight
# run. On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_quick_run.sh
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
$B/tests/test_optimizer_step --device cuda:0 >"$OUT/os.log" 2>&1; summary optimizer_step_cuda $? "$OUT/os.log"
$B/tests/test_train_loss --device cuda:0 >"$OUT/tl.log" 2>&1; summary train_loss_cuda $? "$OUT/tl.log"
grep "^  " "$OUT/tl.log"
$B/tests/test_gpu_train models/digits_cnn.onnx >"$OUT/gt.log" 2>&1; summary gpu_train $? "$OUT/gt.log"
resume_on_gpu
accumulate_on_gpu
grep -h "^epoch 15/\|^epoch 30/" "$OUT"/resume_*.log
