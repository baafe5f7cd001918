#!/usr/bin/env bash
# tools/install-deps.sh: installs what graft needs to build and test on Debian 12 (apt and pip).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential meson ninja-build pkg-config \
    libprotobuf-c-dev protobuf-c-compiler libdnnl-dev libonnx-testdata \
    libjpeg62-turbo-dev libpng-dev chromium \
    python3 python3-pip >/dev/null
# Reference models and outputs are made with onnx and ONNX Runtime (no torch needed);
# scikit-learn supplies the 8x8 digits for the transfer test (tools/export_digits.py).
python3 -m pip install -q --disable-pip-version-check \
    'numpy>=1.24' 'onnx>=1.15' 'onnxruntime>=1.17' safetensors 'scikit-learn>=1.2' 'Pillow>=9' tensorboard 2>&1 | grep -v 'Running pip as' || true
python3 -c 'import numpy, onnx, onnxruntime, safetensors, sklearn, PIL, tensorboard'
echo "install-deps: done"
