#!/usr/bin/env bash
# tools/setup.sh: the README's first command: installs what graft needs, builds it, and runs the
# bundled demo: `graft finetune` grafts a new head onto a small CNN pretrained on digits 0-4
# (models/digits_cnn.onnx) using 10 images per class of digits 5-9 (examples/digits), compares
# its accuracy with PyTorch's for the same recipe and for training the same network from
# scratch (models/digits_demo_reference.json), then `graft predict` runs the exported model.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
export PATH="$PWD/.venv/bin:$PATH"
[ -d build/release ] || meson setup build/release --buildtype=release >/dev/null
ninja -C build/release >/dev/null
G=build/release/graft
mkdir -p build/demo
$G finetune --model models/digits_cnn.onnx --data examples/digits/train --val examples/digits/val \
    --out build/demo/digits_grafted.onnx --resize 0 --crop 8 --grayscale \
    --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376 --lr 0.01 --weight-decay 1e-4 \
    --epochs 200 --report build/demo/report | tee build/demo/finetune.txt | grep -v '^epoch'
python3 - <<'PY'
import json, re
ref = json.load(open("models/digits_demo_reference.json"))
got = float(re.search(r"val accuracy\s+([0-9.]+)", open("build/demo/finetune.txt").read()).group(1))
t, s = ref["transfer_val_accuracy"], ref["scratch_val_accuracy"]
print(f"\ndigits 5-9 from 10 images per class, 269 validation images:")
print(f"  graft, frozen backbone + new head   {got:.3f}")
print(f"  PyTorch, the same recipe            {t['mean']:.3f} (5 seeds: {t['min']:.3f}..{t['max']:.3f})")
print(f"  PyTorch, whole network from scratch {s['mean']:.3f} (5 seeds: {s['min']:.3f}..{s['max']:.3f})")
PY
echo
echo "graft predict on the exported model (first images of examples/digits/val/seven):"
# Into a file first: `| head` would end predict with SIGPIPE, which pipefail reports as a failure.
$G predict --model build/demo/digits_grafted.onnx --top-k 3 examples/digits/val/seven \
    >build/demo/predict.txt
head -5 build/demo/predict.txt
echo "report: build/demo/report/report.html"
echo "graft is build/release/graft; the README's \"Installing\" section puts it on the PATH"
