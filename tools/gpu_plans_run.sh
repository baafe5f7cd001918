#!/usr/bin/env bash
# tools/gpu_plans_run.sh: the GPU checks and benchmark of plans kept per input shape: build, the
# plan cache against a model keeping one plan (alternating shapes; recordings replayed), views,
# parity and device I/O, then padding to the batch's longest text with and without the cache, then
# compute-sanitizer over the alternating shapes. On the GPU machine from the project root (carry
# .gpu and tests/data/gen/minilm/data + its vocab.txt): source .gpu/env.sh && bash
# tools/gpu_plans_run.sh (logs in $OUT).
. tools/gpu_run_common.sh

gpu_setup
python3 tools/make_models.py --out $G --only resnet18,bert_base,bert_tiny_decomposed,reshape_views \
    >"$OUT/make_models.log" 2>&1 &
python3 tools/minilm_fill.py --out /tmp/minilm --random-weights 1 \
    --vocab tests/data/gen/minilm/models/ts17/vocab.txt >"$OUT/minilm_fill.log" 2>&1 &
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
wait
# MiniLM's TorchScript export as a test model (Hugging Face's graph reads the sequence length as
# data through Shape -> Gather): recorded inputs of 2 texts x 32 tokens.
ln -sf /tmp/minilm/model.onnx $G/minilm_ts17.onnx
python3 - "$G" <<'PY'
import sys, numpy as np, onnx
g = sys.argv[1]
m = onnx.load(f"{g}/minilm_ts17.onnx", load_external_data=False)
rng = np.random.default_rng(0)
for i in m.graph.input:
    v = rng.integers(1000, 5000, (2, 32)) if "ids" in i.name and "type" not in i.name else \
        np.ones((2, 32), np.int64) if "mask" in i.name else np.zeros((2, 32), np.int64)
    np.save(f"{g}/minilm_ts17.in.{i.name}.npy", v.astype(np.int64))
PY
echo "built, models made at $(since)"

$B/tests/test_exec_plans $G --device cuda:0 --recorded bert_tiny_decomposed resnet18 bert_base \
    minilm_ts17 >"$OUT/exec_plans.log" 2>&1
summary exec_plans $? "$OUT/exec_plans.log"
grep 'cached plan' "$OUT/exec_plans.log"
$B/tests/test_exec_views $G --device cuda:0 reshape_views bert_tiny_decomposed resnet18 \
    >"$OUT/exec_views.log" 2>&1
summary exec_views $? "$OUT/exec_views.log"
for p in fp32 bf16; do
    $B/tests/test_parity $G --device cuda:0 --precision $p resnet18 bert_base bert_tiny_decomposed \
        reshape_views >"$OUT/parity_$p.log" 2>&1
    summary "parity_$p" $? "$OUT/parity_$p.log"
done
$B/tests/test_device_io models/digits_cnn.onnx >"$OUT/device_io.log" 2>&1
summary device_io $? "$OUT/device_io.log"
echo "checks done at $(since)"

# Padding to the batch's longest text on the GPU: MiniLM-L6's graph with seeded random weights
# (the real ones are not on this machine; the tokens are the real texts', 20 times over).
for b in 32 256; do
    timeout 150 python3 tools/bench_padding.py --graft $B/graft --model /tmp/minilm/model.onnx \
        --vocab /tmp/minilm/vocab.txt --device cuda:0 --precision bf16 --batch $b \
        --replicate 20 --repeats 2 --no-plan-cache-too >"$OUT/padding_$b.log" 2>&1
    echo "== padding, batch $b (rc=$?)"; tail -7 "$OUT/padding_$b.log"
done
echo "benches done at $(since)"

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
    timeout 120 "$SAN" --tool memcheck --error-exitcode 9 $B/tests/test_exec_plans $G \
        --device cuda:0 bert_tiny_decomposed >"$OUT/san_exec_plans.log" 2>&1
    echo "sanitizer memcheck exec_plans rc=$? pass $(grep -c '^PASS' "$OUT/san_exec_plans.log") fail $(grep -c '^FAIL' "$OUT/san_exec_plans.log") $(grep -m1 'ERROR SUMMARY' "$OUT/san_exec_plans.log")"
fi
echo "all done at $(since)"
