#!/usr/bin/env bash
# tools/gpu-check.sh: the GPU checks, for a machine with a GPU: every op's CUDA kernel against
# the CPU (tests/test_gpu_ops), whole models (tests/test_gpu_models), ONNX's node tests on the
# GPU (tests/conformance --device cuda:0), and compute-sanitizer memcheck and racecheck over the
# small fp32 and integer op cases. Logs go to OUT_DIR; a summary table comes last.
#
# usage: tools/gpu-check.sh BUILD_DIR OUT_DIR
# environment:
#   GPU_CASES       where the op cases are (default OUT_DIR/cases; made when missing or stale)
#   GEN             the generated models (default tests/data/gen; made when missing)
#   ONNX_NODE_DATA  ONNX's node tests (default: the first of /usr/share/libonnx-testdata/data/node,
#                   .gpu-node/node and the onnx Python package's backend/test/data/node)
#   GPU_DEVICE      the device under test (default cuda:0)
#   BUDGET_S        the whole run's time limit in seconds (default 470: under 8 minutes); each
#                   step gets at most what is left, and the sanitizer steps at most SANITIZER_S
#   SANITIZER_S     time limit of each compute-sanitizer step (default 180)
# A .gpu/env.sh (libraries carried to a bare GPU machine) is sourced when there is one.
# Exit status: 0 when no suite failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
[ -f .gpu/env.sh ] && . .gpu/env.sh
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR OUT_DIR" >&2
    exit 2
fi
B=$1
OUT=$2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CASES=${GPU_CASES:-$OUT/cases}
GEN=${GEN:-tests/data/gen}
DEVICE=${GPU_DEVICE:-cuda:0}
BUDGET_S=${BUDGET_S:-470}
SANITIZER_S=${SANITIZER_S:-180}
START=$(date +%s)
SUITES=()
export GRAFT_TEST_GPU_DEVICE=$DEVICE

left() { echo $((BUDGET_S - ($(date +%s) - START))); }
note() { printf '== [%4ds] %s\n' "$(($(date +%s) - START))" "$*"; }

# record NAME PASSED FAILED SKIPPED SECONDS NOTE: one row of the summary table.
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >"$OUT/$1.result"
}

# run_suite NAME LIMIT_S COMMAND...: runs a test program (log OUT/NAME.log) under a time limit
# and counts its PASS/FIXED, FAIL and SKIP/KNOWN lines. A program that exits non-zero without a
# FAIL line (a crash) counts one failure; a time-out too, noted in the table.
run_suite() {
    local name=$1 limit=$2
    shift 2
    SUITES+=("$name")
    local log="$OUT/$name.log" t0 rc p f s why=""
    if [ "$limit" -le 5 ]; then
        record "$name" 0 0 0 0 "not run: the time budget is spent"
        return
    fi
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    p=$(grep -cE '^(PASS|FIXED) ' "$log")
    f=$(grep -cE '^FAIL ' "$log")
    s=$(grep -cE '^(SKIP|KNOWN) ' "$log")
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        why="timed out after ${limit}s"
        f=$((f + 1))
    elif [ "$rc" = 77 ]; then
        why="skipped: $(tail -1 "$log")"
    elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        why="exit status $rc without a FAIL line"
        f=1
    fi
    record "$name" "$p" "$f" "$s" "$(($(date +%s) - t0))" "$why"
}

# sanitize NAME TOOL [ENV...]: compute-sanitizer over the small fp32 and integer op cases (with
# ENV, e.g. GRAFT_CUDA_ATTENTION=fused, over the small half-precision attention cases with the
# fused kernel forced). Its reported errors count as failures.
sanitize() {
    local name=$1 tool=$2 limit log n
    shift 2
    local select=(--small --no-half)
    [ $# -gt 0 ] && select=(--filter fuse_attention_small)
    limit=$(left)
    [ "$limit" -gt "$SANITIZER_S" ] && limit=$SANITIZER_S
    run_suite "$name" "$limit" env "$@" "$SANITIZER" --tool "$tool" --print-limit 20 \
        --error-exitcode 86 "$B/tests/test_gpu_ops" "$CASES" "${select[@]}" --runs 0
    log="$OUT/$name.log"
    n=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" | grep -oE '[0-9]+' | tail -1)
    [ -z "$n" ] && n=$(grep -oE 'RACECHECK SUMMARY: .*\(([0-9]+) error' "$log" |
        grep -oE '\([0-9]+' | tr -d '(' | tail -1)
    n=${n:-0}
    if [ "$n" -gt 0 ]; then
        IFS=$'\t' read -r _ p f s secs why <"$OUT/$name.result"
        # An error makes the program exit 86 with no FAIL line: run_suite counted that as one.
        grep -qE '^FAIL ' "$log" || f=$((f - 1))
        record "$name" "$p" "$((f + n))" "$s" "$secs" "$n $tool error(s): see $log"
    fi
}

# ---- (a) the op cases and the models, made in parallel ----
note "making the op cases in $CASES and the models in $GEN"
t0=$(date +%s)
python3 tools/make_gpu_op_cases.py --out "$CASES" >"$OUT/make_gpu_op_cases.log" 2>&1 &
cases_pid=$!
python3 tools/make_models.py --out "$GEN" \
    --only resnet18,resnet50,mobilenet_tiny,bert_tiny_decomposed,bert_base,reshape_views \
    >"$OUT/make_models.log" 2>&1 &
models_pid=$!
wait "$cases_pid"
cases_rc=$?
wait "$models_pid"
models_rc=$?
SUITES+=(make_cases make_models)
if [ "$cases_rc" = 0 ]; then
    record make_cases 1 0 0 "$(($(date +%s) - t0))" "$(tail -1 "$OUT/make_gpu_op_cases.log")"
else
    record make_cases 0 1 0 "$(($(date +%s) - t0))" "see $OUT/make_gpu_op_cases.log"
fi
if [ "$models_rc" = 0 ]; then
    record make_models 1 0 0 "$(($(date +%s) - t0))" ""
else
    record make_models 0 1 0 "$(($(date +%s) - t0))" "see $OUT/make_models.log"
fi

# ---- (b) the suites whose times matter run alone ----
note "test_gpu_ops ($DEVICE)"
run_suite gpu_ops "$(left)" "$B/tests/test_gpu_ops" "$CASES"
# The attention cases again with the fused kernels forced at every size (by default small grids
# take the products and the fused softmax inside the group).
run_suite gpu_ops_attention_kernel "$(left)" env GRAFT_CUDA_ATTENTION=fused \
    "$B/tests/test_gpu_ops" "$CASES" --filter fuse_attention
note "test_gpu_models ($DEVICE)"
run_suite gpu_models "$(left)" "$B/tests/test_gpu_models" "$GEN"
note "test_gpu_train: head training on the GPU against the CPU"
run_suite gpu_train "$(left)" "$B/tests/test_gpu_train" models/digits_cnn.onnx
note "models against ONNX Runtime's outputs in fp32, fp16 and bf16; device selection"
for p in fp32 fp16 bf16; do
    run_suite "parity_$p" "$(left)" "$B/tests/test_parity" "$GEN" --device "$DEVICE" \
        --precision "$p" resnet18 resnet50 bert_base bert_tiny_decomposed mobilenet_tiny reshape_views
done
run_suite exec_views "$(left)" "$B/tests/test_exec_views" "$GEN" --device "$DEVICE" \
    reshape_views bert_tiny_decomposed bert_base resnet18
run_suite device "$(left)" "$B/tests/test_device" models/digits_cnn.onnx
run_suite device_io "$(left)" "$B/tests/test_device_io" models/digits_cnn.onnx
note "test_gpu_jpeg: nvJPEG decoding against the CPU's images (needs libnvjpeg at run time)"
run_suite gpu_jpeg "$(left)" "$B/tests/test_gpu_jpeg" models/digits_cnn.onnx tests/data/images
note "test_gpu_decode: --decode gpu's prefetching sources against the CPU's"
python3 tools/make_image_folder.py "$OUT/decode_folder" --per-class 24 --size 96 >/dev/null &&
    run_suite gpu_decode "$(left)" "$B/tests/test_gpu_decode" models/digits_cnn.onnx \
        "$OUT/decode_folder"
rm -rf "$OUT/decode_folder"

# ---- (b, c) ONNX node tests and the sanitizers, side by side ----
DATA=${ONNX_NODE_DATA:-/usr/share/libonnx-testdata/data/node}
[ -d "$DATA" ] || [ -n "${ONNX_NODE_DATA:-}" ] || DATA=.gpu-node/node
if [ ! -d "$DATA" ] && [ -z "${ONNX_NODE_DATA:-}" ]; then
    DATA=$(python3 -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__),
        "backend", "test", "data", "node"))' 2>/dev/null)
fi
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
note "conformance --device $DEVICE, compute-sanitizer memcheck and racecheck (in parallel)"
(
    if [ -n "$DATA" ] && [ -d "$DATA" ]; then
        run_suite conformance_gpu "$(left)" "$B/tests/conformance" --data "$DATA" \
            --device "$DEVICE" --known tests/known_failures.txt
    else
        record conformance_gpu 0 0 0 0 "skipped: no ONNX node tests (set ONNX_NODE_DATA)"
    fi
) &
conf_pid=$!
if [ -x "$SANITIZER" ] && nvidia-smi -L >/dev/null 2>&1; then
    (sanitize memcheck memcheck) &
    mem_pid=$!
    (sanitize racecheck racecheck) &
    race_pid=$!
    wait "$mem_pid" "$race_pid"
    sanitize memcheck_attention memcheck GRAFT_CUDA_ATTENTION=fused
    sanitize racecheck_attention racecheck GRAFT_CUDA_ATTENTION=fused
else
    for n in memcheck racecheck memcheck_attention racecheck_attention; do
        record "$n" 0 0 0 0 "skipped: no compute-sanitizer or no GPU"
    done
    SUITES+=(memcheck_attention racecheck_attention)
fi
wait "$conf_pid"
SUITES+=(conformance_gpu memcheck racecheck)

# ---- (d) the summary ----
echo
for name in "${SUITES[@]}"; do
    log="$OUT/$name.log"
    [ -f "$log" ] && grep -E '^FAIL ' "$log" | head -40 | sed "s/^/$name: /"
done
echo
printf '%-16s %7s %7s %7s %8s  %s\n' suite passed failed skipped seconds note
total_failed=0
for name in "${SUITES[@]}"; do
    [ -f "$OUT/$name.result" ] || continue
    IFS=$'\t' read -r n p f s secs why <"$OUT/$name.result"
    printf '%-16s %7s %7s %7s %8s  %s\n' "$n" "$p" "$f" "$s" "$secs" "$why"
    total_failed=$((total_failed + f))
done
printf 'total %ds; logs in %s\n' "$(($(date +%s) - START))" "$OUT"
[ "$total_failed" = 0 ]
