#!/usr/bin/env bash
# Build, the nvJPEG / decode / trainer GPU checks, the fine-tune benchmark (graft with CPU and GPU
# decoding, PyTorch's loop and expert), then the device-resident forward against PyTorch.
# Usage, on the GPU machine from the project root (the device tool: carry .gpu, see
# ../shared/device/README.md): source .gpu/env.sh && bash tools/gpu_finetune_run.sh (logs in $OUT).
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B > "$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built in $(( $(date +%s) - T0 ))s"
(python3 tools/make_models.py --out /tmp/gen --only resnet50,bert_base > "$OUT/make_models.log" 2>&1; echo "make_models rc=$?" >> "$OUT/make_models.log") &
$B/tests/test_gpu_jpeg models/digits_cnn.onnx tests/data/images > "$OUT/gpu_jpeg.log" 2>&1; echo "gpu_jpeg rc=$? pass $(grep -c '^PASS' "$OUT/gpu_jpeg.log") fail $(grep -c '^FAIL' "$OUT/gpu_jpeg.log")"
grep -E '^FAIL|^# .*(images/s)' "$OUT/gpu_jpeg.log" | head -8
[ -d /tmp/decode_folder ] || python3 tools/make_image_folder.py /tmp/decode_folder --per-class 24 --size 96 > /dev/null
$B/tests/test_gpu_decode models/digits_cnn.onnx /tmp/decode_folder > "$OUT/gpu_decode.log" 2>&1; echo "gpu_decode rc=$? pass $(grep -c '^PASS' "$OUT/gpu_decode.log") fail $(grep -c '^FAIL' "$OUT/gpu_decode.log")"
grep -E '^FAIL|^# backend' "$OUT/gpu_decode.log" | head -8
timeout 200 $B/tests/test_gpu_train models/digits_cnn.onnx > "$OUT/gpu_train.log" 2>&1; echo "gpu_train rc=$? pass $(grep -c '^PASS' "$OUT/gpu_train.log") fail $(grep -c '^FAIL' "$OUT/gpu_train.log")"
echo "tests done at $(( $(date +%s) - T0 ))s"
GRAFT_LOG=debug python3 tools/bench_finetune.py --graft $B/graft --nvjpeg --work /tmp/bf > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
cp /tmp/bf/*.log "$OUT/" 2>/dev/null
for f in /tmp/bf/graft_*.log; do echo "== $(basename $f)"; grep -E '^backbone:|wall time|^  time|nvJPEG decoder' $f | cut -c1-420; done
python3 tools/batch_times.py /tmp/bf/graft_cold*.log
grep -A12 '^| run' "$OUT/bench.log"
echo "finetune done at $(( $(date +%s) - T0 ))s"
wait; tail -1 "$OUT/make_models.log"
python3 tools/bench_gpu.py --graft $B/graft --gen /tmp/gen --resident --precisions bf16,fp16 --batches resnet50=1,256:bert_base=1,128 --iters 30 > "$OUT/forward.log" 2>&1; echo "forward rc=$?"; cat "$OUT/forward.log" | tail -12
$B/graft bench /tmp/gen/resnet50.onnx --device cuda:0 --precision bf16 --batch 256 --resident --profile --iters 10 > "$OUT/profile_resnet50.log" 2>&1
$B/graft bench /tmp/gen/bert_base.onnx --device cuda:0 --precision bf16 --batch 128 --resident --profile --iters 10 > "$OUT/profile_bert.log" 2>&1
head -14 "$OUT/profile_resnet50.log"; head -16 "$OUT/profile_bert.log"
echo "all done at $(( $(date +%s) - T0 ))s"
