#!/usr/bin/env bash
# tests/test_cli_uint8.sh GRAFT [GEN]: `graft finetune --input-uint8 on` (images decoded to uint8
# NHWC, normalised inside the model) trains the same head as `off` on the CPU (every weight
# within 1e-5), exports a model that takes uint8 NHWC, and ONNX Runtime on that model's uint8
# pixels gives the float model's probabilities; predict and `graft run --uint8` take it.
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
check() { if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi; }
M=$GEN/mobilenet_tiny.onnx
if [ ! -f "$M" ]; then echo "FAIL cli_uint8: fixture missing: $M"; exit 1; fi
python3 "$ROOT/tools/make_image_folder.py" "$TMP/img" >"$TMP/mk.log" 2>&1
check cli_uint8_images $? "$(tail -3 "$TMP/mk.log")"
FT=(finetune --model "$M" --data "$TMP/img" --val-split 0.25 --epochs 2 --seed 1 --device cpu
    --batch 16)
"$GRAFT" "${FT[@]}" --input-uint8 off --out "$TMP/f.onnx" >"$TMP/f.txt" 2>"$TMP/f.err"
check cli_uint8_finetune_off $? "$(tail -3 "$TMP/f.err")"
"$GRAFT" "${FT[@]}" --input-uint8 on --out "$TMP/u.onnx" >"$TMP/u.txt" 2>"$TMP/u.err" &&
    grep -q "input  *uint8 NHWC" "$TMP/u.txt"
check cli_uint8_finetune_on $? "$(tail -3 "$TMP/u.err") $(tail -3 "$TMP/u.txt")"
"$GRAFT" "${FT[@]}" --input-uint8 maybe --out "$TMP/x.onnx" >/dev/null 2>"$TMP/x.err"
[ $? = 2 ] && grep -q "input-uint8" "$TMP/x.err"
check cli_uint8_bad_choice $? "$(cat "$TMP/x.err")"
python3 - "$TMP/f.onnx" "$TMP/u.onnx" "$TMP/img" >"$TMP/py.txt" 2>&1 <<'PY'
import glob, sys
import numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
from PIL import Image
f, u, img = sys.argv[1:4]
fw = {t.name: numpy_helper.to_array(t) for t in onnx.load(f).graph.initializer}
uw = {t.name: numpy_helper.to_array(t) for t in onnx.load(u).graph.initializer}
common = [n for n in fw if n in uw and fw[n].dtype == np.float32]
worst = max(float(np.abs(fw[n] - uw[n]).max() / max(np.abs(fw[n]).max(), 1e-12)) for n in common)
print(f"{len(common)} weights, worst relative difference {worst:.3g}")
assert common and worst <= 1e-5, "heads differ"
su = ort.InferenceSession(u, providers=["CPUExecutionProvider"])
sf = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
i = su.get_inputs()[0]
assert i.type == "tensor(uint8)" and i.shape[3] == 3, (i.type, i.shape)
path = sorted(glob.glob(img + "/*/*.png"))[0]
x = np.asarray(Image.open(path).convert("RGB").resize((64, 64)), dtype=np.uint8)[None]
mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
xf = ((x.astype(np.float32) / np.float32(255) - mean) / std).transpose(0, 3, 1, 2).copy()
np.save(img + "/../x.npy", x)
np.save(img + "/../xf.npy", xf)
pu = su.run(None, {i.name: x})[0]
pf = sf.run(None, {sf.get_inputs()[0].name: xf})[0]
d = float(np.abs(pu - pf).max())
print(f"ORT uint8 vs float: {d:.3g}")
assert d <= 1e-5
PY
check cli_uint8_same_head_and_ort $? "$(tail -4 "$TMP/py.txt")"
# (the folder's bad files are skipped with a warning and a non-zero exit in both)
"$GRAFT" predict --model "$TMP/u.onnx" --top-k 1 "$TMP/img" >"$TMP/pu.txt" 2>"$TMP/pu.err"
"$GRAFT" predict --model "$TMP/f.onnx" --top-k 1 "$TMP/img" >"$TMP/pf.txt" 2>/dev/null
[ "$(wc -l <"$TMP/pu.txt")" -ge 290 ] && cmp -s "$TMP/pu.txt" "$TMP/pf.txt"
check cli_uint8_predict $? "$(tail -2 "$TMP/pu.err") $(diff "$TMP/pu.txt" "$TMP/pf.txt" | head -4)"
# graft run --uint8 on the float model: the uint8 pixels give the float input's logits
"$GRAFT" run "$M" --input input="$TMP/xf.npy" --output-dir "$TMP/rf" >/dev/null 2>"$TMP/r.err" &&
    "$GRAFT" run "$M" --uint8 --input input="$TMP/x.npy" --output-dir "$TMP/ru" >/dev/null \
        2>>"$TMP/r.err" &&
    python3 -c "
import numpy as np, sys
a, b = np.load('$TMP/ru/logits.npy'), np.load('$TMP/rf/logits.npy')
d = float(np.abs(a - b).max() / np.abs(b).max()); print(d); sys.exit(d > 1e-5)" >"$TMP/r.txt" 2>&1
check cli_uint8_run $? "$(tail -3 "$TMP/r.err") $(cat "$TMP/r.txt")"
"$GRAFT" run "$M" --uint8 --input input="$TMP/xf.npy" --output-dir "$TMP/rx" >/dev/null \
    2>"$TMP/rx.err"
[ $? != 0 ] && grep -q "uint8" "$TMP/rx.err"
check cli_uint8_run_float_given $? "$(cat "$TMP/rx.err")"
"$GRAFT" bench "$M" --uint8 --batch 1 --iters 1 --warmup 0 >"$TMP/b.txt" 2>&1
check cli_uint8_bench $? "$(tail -3 "$TMP/b.txt")"
"$GRAFT" bench "$GEN/conv_acts.onnx" --uint8 --batch 1 --iters 1 --warmup 0 >"$TMP/b.txt" 2>&1
[ $? != 0 ] && grep -q "8 channels" "$TMP/b.txt"
check cli_uint8_bench_not_rgb $? "$(tail -3 "$TMP/b.txt")"
