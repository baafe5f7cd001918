. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
echo "built at $(since)"
[ -d /tmp/decode_folder ] || python3 tools/make_image_folder.py /tmp/decode_folder --per-class 24 --size 96 >/dev/null
$B/tests/test_gpu_decode models/digits_cnn.onnx /tmp/decode_folder >"$OUT/gpu_decode.log" 2>&1
summary gpu_decode $? "$OUT/gpu_decode.log"
grep -E '^# .*decoders' "$OUT/gpu_decode.log" | cut -c1-300
W=/tmp/bench_scale
python3 - <<'PY'
import os, sys
sys.path.insert(0, "tools")
from bench_finetune import export_resnet50, make_set
w = "/tmp/bench_scale"
os.makedirs(w, exist_ok=True)
make_set(f"{w}/unique", 20000, 10, 1, os.cpu_count())
make_set(f"{w}/val", 2000, 10, 2, os.cpu_count())
export_resnet50(f"{w}/resnet50.onnx")
PY
echo "set at $(since)"
for rep in 1 2 3; do for d in 1 2; do rm -rf $W/cache; s=$(date +%s%N); GRAFT_NVJPEG_DECODERS=$d $B/graft finetune --model $W/resnet50.onnx --data $W/unique --val $W/val --out $W/head.onnx --device cuda:0 --precision bf16 --cache $W/cache --epochs 10 --batch 256 --decode gpu > $W/y.log 2>&1; e=$(date +%s%N); echo "| $d | $(( (e - s)/1000000 )) ms | $(grep -oE 'wall time +[0-9.]+s: load [0-9.]+s' $W/y.log) | $(grep -oE '^backbone: [0-9]+ samples in [0-9.]+s' $W/y.log) | $(grep -oE 'decoder start [0-9.]+s' $W/y.log) | $(grep -oE 'waited [0-9.]+s' $W/y.log) |"; done; done
echo "done at $(since)"
