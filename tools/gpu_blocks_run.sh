#!/usr/bin/env bash
# tools/gpu_blocks_run.sh: the GPU checks of fine-tuning blocks (issue 15): build with CUDA, the
# block tests, `graft finetune --train-from` on the GPU against the same run on the CPU, and the
# executor's recorded and parity checks (the executor's pause must not disturb them). On the GPU
# machine from the project root (carry .gpu): source .gpu/env.sh && bash tools/gpu_blocks_run.sh
# (logs in $OUT).
. tools/gpu_run_common.sh

gpu_setup
python3 tools/make_models.py --out $G --only resnet18,bert_tiny_decomposed \
    >"$OUT/make_models.log" 2>&1 &
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
wait
echo "built, models made at $(since)"

$B/tests/test_blocks models/digits_cnn.onnx /tmp $G >"$OUT/blocks.log" 2>&1
summary blocks $? "$OUT/blocks.log"
$B/tests/test_keep_bn $G >"$OUT/keep_bn.log" 2>&1
summary keep_bn $? "$OUT/keep_bn.log"
grep -E 'keep_bn_cuda' "$OUT/keep_bn.log"
$B/tests/test_backward_fast >"$OUT/backward_fast.log" 2>&1
summary backward_fast $? "$OUT/backward_fast.log"
grep -E '^speed' "$OUT/backward_fast.log"
digits_train_from_on_both
echo "finetune done at $(since)"

$B/tests/test_exec_plans $G --device cuda:0 --recorded bert_tiny_decomposed resnet18 \
    >"$OUT/exec_plans.log" 2>&1
summary exec_plans $? "$OUT/exec_plans.log"
$B/tests/test_parity $G --device cuda:0 --precision bf16 resnet18 bert_tiny_decomposed \
    >"$OUT/parity_bf16.log" 2>&1
summary parity_bf16 $? "$OUT/parity_bf16.log"
echo "all done at $(since)"
