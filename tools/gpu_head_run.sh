#!/usr/bin/env bash
# tools/gpu_head_run.sh: a head alone through its step graph on the GPU: test_gpu_train (every
# optimizer, loss and precision against the CPU), the digits demo head-only on cuda:0 against
# the CPU, and the head's epochs beside PyTorch's (tools/bench_head_gpu.py).
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_head_run.sh
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
$B/tests/test_gpu_train models/digits_cnn.onnx >"$OUT/gt.log" 2>&1; summary gpu_train $? "$OUT/gt.log"
grep "^  " "$OUT/gt.log"; grep -c "runs on the CPU" "$OUT/gt.log"
img=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
for d in cpu cuda:0; do
    $B/graft finetune --model models/digits_cnn.onnx --data examples/digits/train --val examples/digits/val \
        --out "$OUT/head_$d.onnx" "${img[@]}" --lr 0.01 --epochs 100 --head mlp:64 --dropout 0.2 \
        --device $d >"$OUT/head_$d.log" 2>&1
    echo "head-only finetune on $d: rc=$? $(grep -E '^epoch 100/' "$OUT/head_$d.log")"
done
python3 tools/bench_head_gpu.py $B models/digits_cnn.onnx 2>&1 | tee "$OUT/bench.log" | tail -12
python3 tools/bench_head_gpu.py $B models/digits_cnn.onnx --hidden 512 2>&1 | tail -4
echo "done in $(since)"
