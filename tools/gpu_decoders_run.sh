#!/usr/bin/env bash
# tools/gpu_decoders_run.sh: nvJPEG's throughput inside the fine-tune by decoding threads
# (GRAFT_NVJPEG_DECODERS): test_gpu_decode, then `graft finetune --decode gpu` cold on N distinct
# JPEGs (tools/bench_scale.py's set; default 100,000) with 1, 2 and 3 decoders, each twice,
# alternated. (Stop 36 also tried the decoder stream at the highest priority: no effect, dropped.)
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_decoders_run.sh [N]
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built at $(since)"
[ -d /tmp/decode_folder ] || python3 tools/make_image_folder.py /tmp/decode_folder --per-class 24 --size 96 >/dev/null
$B/tests/test_gpu_decode models/digits_cnn.onnx /tmp/decode_folder >"$OUT/gpu_decode.log" 2>&1
summary gpu_decode $? "$OUT/gpu_decode.log"
grep -E '^# .*decoders' "$OUT/gpu_decode.log" | cut -c1-300
N=${1:-100000}
W=/tmp/bench_scale
python3 - "$N" <<'PY'
import os, sys
sys.path.insert(0, "tools")
from bench_finetune import export_resnet50, make_set
from bench_scale import copy_folder
w = "/tmp/bench_scale"
os.makedirs(w, exist_ok=True)
make_set(f"{w}/unique", 20000, 10, 1, os.cpu_count())
make_set(f"{w}/val", 2000, 10, 2, os.cpu_count())
if not os.path.exists(f"{w}/resnet50.onnx"):
    export_resnet50(f"{w}/resnet50.onnx")
copy_folder(f"{w}/unique", f"{w}/train", int(sys.argv[1]), 10, os.cpu_count())
PY
echo "set of $N made at $(since)"
run() { # DECODERS
    rm -rf $W/cache
    GRAFT_LOG=debug GRAFT_NVJPEG_DECODERS=$1 $B/graft finetune \
        --model $W/resnet50.onnx --data $W/train --val $W/val --out $W/head.onnx --device cuda:0 \
        --precision bf16 --cache $W/cache --epochs 10 --batch 256 --decode gpu >$W/run_$1.log 2>&1
    local bb=$(grep -oE '^backbone: [0-9]+ samples in [0-9.]+s \([0-9]+ images/s' $W/run_$1.log | grep -oE '[0-9.]+s \([0-9]+')
    local dec=$(grep -oE 'decoding [0-9.]+s \([0-9]+ images/s\), the backbone waited [0-9.]+s' $W/run_$1.log)
    local wall=$(grep -oE 'wall time +[0-9.]+s' $W/run_$1.log | grep -oE '[0-9.]+')
    local calls=$(grep -oE 'headers [0-9.]+s, decode calls [0-9.]+s' $W/run_$1.log | tr '\n' ' ')
    echo "| $1 | $wall | $bb | $dec | $calls |"
}
echo "| decoders | wall s | backbone phase s (images/s | decoding | nvJPEG calls (each thread's) |"
for rep in 1 2; do
    for d in 1 2 3; do run $d; done
done
grep -E 'error|FAIL' $W/run_*.log | head -5
echo "done at $(since)"
