#!/usr/bin/env bash
# tools/setup.sh: the README's first command: installs dependencies, builds graft, makes the
# ResNet-18 test model and runs inference on it with `graft info` and `graft run`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
[ -d build/release ] || meson setup build/release --buildtype=release >/dev/null
ninja -C build/release >/dev/null
python3 tools/make_models.py --out tests/data/gen --only resnet18
build/release/graft info tests/data/gen/resnet18.onnx
build/release/graft run tests/data/gen/resnet18.onnx \
    --input input=tests/data/gen/resnet18.in.input.npy --output-dir build/demo-out
python3 - <<'PY'
import numpy as np
got = np.load("build/demo-out/logits.npy")
want = np.load("tests/data/gen/resnet18.out.logits.npy")
err = np.abs(got - want).max() / np.abs(want).max()
print(f"graft run: logits {got.shape}, top class per image {got.argmax(1).tolist()}, "
      f"max relative difference to ONNX Runtime {err:.2e}")
PY
