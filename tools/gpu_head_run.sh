#!/usr/bin/env bash
# tools/gpu_head_run.sh: a head alone through its step graph on the GPU: test_gpu_train (every
# optimizer, loss and precision against the CPU; the step's recording replayed), the digits demo
# head-only on cuda:0 against the CPU, tests/bench_head_device with the step recorded and node by
# node (GRAFT_STEP_RECORD=0) alternated, where the debug line splits each step's time, and the
# head's epochs beside PyTorch's (tools/bench_head_gpu.py).
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_head_run.sh [ROWS]
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built at $(since)"
$B/tests/test_gpu_train models/digits_cnn.onnx >"$OUT/gt.log" 2>&1; summary gpu_train $? "$OUT/gt.log"
grep "^  " "$OUT/gt.log" | cut -c1-160; grep -c "runs on the CPU" "$OUT/gt.log"
img=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
for d in cpu cuda:0; do
    $B/graft finetune --model models/digits_cnn.onnx --data examples/digits/train --val examples/digits/val \
        --out "$OUT/head_$d.onnx" "${img[@]}" --lr 0.01 --epochs 100 --head mlp:64 --dropout 0.2 \
        --device $d >"$OUT/head_$d.log" 2>&1
    echo "head-only finetune on $d: rc=$? $(grep -E '^epoch 100/' "$OUT/head_$d.log")"
done
rows=${1:-200000}
for rec in 0 1 0 1; do
    for p in bf16 fp32; do
        GRAFT_STEP_RECORD=$rec GRAFT_LOG=debug $B/tests/bench_head_device models/digits_cnn.onnx \
            cuda:0 $rows 2048 256 4 0 $p >"$OUT/head_${rec}_$p.log" 2>&1
        echo "record=$rec $p: $(grep '^graft' "$OUT/head_${rec}_$p.log" | sed 's/.*: //')"
        grep -o 'debug: head: .*' "$OUT/head_${rec}_$p.log" | cut -c1-260
    done
done
python3 tools/bench_head_gpu.py $B models/digits_cnn.onnx --rows $rows --epochs 4 2>&1 | tee "$OUT/bench.log" | tail -4
python3 tools/bench_head_gpu.py $B models/digits_cnn.onnx --hidden 512 2>&1 | tail -4
echo "done at $(since)"
