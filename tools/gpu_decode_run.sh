#!/usr/bin/env bash
# tools/gpu_decode_run.sh: issue 14's decoding with CPU threads beside nvJPEG: the nvJPEG and
# --decode gpu checks (test_gpu_jpeg, test_gpu_decode: the CPU threads' images exactly
# graft_image_load's, nvJPEG's within its rounding; images/s of each decoding path), then the
# 20,000-JPEG fine-tune (graft cold with CPU decoding, warm, cold and warm with --decode gpu, cold
# with --decode gpu+cpu; PyTorch's expert script; the loop is left out: 147 s, measured before).
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_decode_run.sh
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built at $(since)"
$B/tests/test_gpu_jpeg models/digits_cnn.onnx tests/data/images >"$OUT/gpu_jpeg.log" 2>&1
summary gpu_jpeg $? "$OUT/gpu_jpeg.log"
grep -E '^INFO|split|by nvJPEG' "$OUT/gpu_jpeg.log" | head -8 | cut -c1-400
[ -d /tmp/decode_folder ] || python3 tools/make_image_folder.py /tmp/decode_folder --per-class 24 --size 96 >/dev/null
$B/tests/test_gpu_decode models/digits_cnn.onnx /tmp/decode_folder >"$OUT/gpu_decode.log" 2>&1
summary gpu_decode $? "$OUT/gpu_decode.log"
grep -E '^# .*CPU threads beside' "$OUT/gpu_decode.log" | cut -c1-300
echo "tests done at $(since)"
GRAFT_LOG=debug timeout 400 python3 tools/bench_finetune.py --graft $B/graft --nvjpeg --nvjpeg-cpu \
    --loop-epochs 0 --work /tmp/bf >"$OUT/bench.log" 2>&1
echo "bench rc=$?"
for f in /tmp/bf/graft_*.log; do
    echo "== $(basename $f)"
    grep -E '^backbone:|wall time|^  time|nvJPEG decoder|CPU threads beside|process.s start|debug: loading|debug: context|debug: head: |^epoch (1|10)/' $f | cut -c1-420
done
grep -A12 '^| run' "$OUT/bench.log"
tail -3 "$OUT/bench.log"
echo "done at $(since)"
