#!/usr/bin/env bash
# tools/bench_data.sh [BUILD]: the data pipeline's images/s next to plain decode and decode +
# resize, on a generated folder of ~300 mixed JPEG/PNG images around 400 px (Resize 256,
# CenterCrop 224), in one run (FAST=fast: reduced-size JPEG decoding). Prints a table; see
# docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
DIR=build/bench-images
[ -d "$DIR" ] || python3 tools/make_image_folder.py "$DIR" --per-class 100 --size 400 >/dev/null
ninja -C "$BUILD" tests/bench_data >/dev/null
"$BUILD/tests/bench_data" "$DIR" 256 224 ${FAST:-} 2>/dev/null
