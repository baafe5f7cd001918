#!/usr/bin/env bash
# tests/test_cli_device.sh GRAFT GEN: `--device auto` without a usable GPU: a CPU-only build says
# nothing; a CUDA build says "no usable GPU" once, and again only when the reason changes.
set -u
GRAFT=$1
GEN=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
M=$GEN/mobilenet_tiny
if [ ! -f "$M.onnx" ]; then fail cli_device "fixture missing: $M.onnx"; exit 0; fi
state=$("$GRAFT" devices --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
print("gpu" if d["gpu_usable"] else "nogpu" if d["cuda_built"] else "nocuda")')
export XDG_CACHE_HOME=$TMP/cache
run_auto() {
    "$GRAFT" run "$M.onnx" --device auto --input "input=$M.in.input.npy" --output-dir "$TMP/out" \
        >/dev/null 2>"$TMP/err_$1.txt"
}
case $state in
gpu) echo "SKIP cli_device_auto_note: a GPU is usable here" ;;
nocuda)
    if run_auto 1 && ! grep -qi gpu "$TMP/err_1.txt"; then pass cli_device_auto_cpu_build_quiet
    else fail cli_device_auto_cpu_build_quiet "$(cat "$TMP/err_1.txt")"; fi ;;
nogpu)
    run_auto 1 && run_auto 2
    if [ "$(grep -c 'no usable GPU' "$TMP/err_1.txt")" = 1 ] && [ ! -s "$TMP/err_2.txt" ]; then
        pass cli_device_auto_note_once
    else fail cli_device_auto_note_once "first: $(cat "$TMP/err_1.txt"); second: $(cat "$TMP/err_2.txt")"; fi
    echo "another reason" >"$XDG_CACHE_HOME/graft/gpu-state"
    run_auto 3
    if grep -q 'no usable GPU' "$TMP/err_3.txt"; then pass cli_device_auto_note_on_change
    else fail cli_device_auto_note_on_change "nothing said after the state changed"; fi
    # Asked for explicitly, a missing GPU is an error every time.
    "$GRAFT" run "$M.onnx" --device cuda:0 --input "input=$M.in.input.npy" --output-dir "$TMP/out" \
        >/dev/null 2>"$TMP/err_4.txt"
    rc=$?
    if [ $rc != 0 ] && grep -q 'no usable GPU' "$TMP/err_4.txt"; then pass cli_device_cuda_error
    else fail cli_device_cuda_error "rc $rc: $(cat "$TMP/err_4.txt")"; fi ;;
esac
