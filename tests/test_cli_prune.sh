#!/usr/bin/env bash
# tests/test_cli_prune.sh GRAFT GEN: `graft prune` end to end: each method writes a model graft
# reloads, the report has its rows, channel pruning makes the file smaller, accuracy before and
# after on labelled data, and the error cases.
set -u
GRAFT=$1
GEN=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
R18=$GEN/resnet18.onnx
if [ ! -f "$R18" ]; then echo "SKIP cli_prune: $R18 not generated"; exit 0; fi

for method in magnitude channels 2:4; do
    name=prune_${method/:/_}
    "$GRAFT" prune --model "$R18" --method $method --sparsity 0.5 --iters 2 --out "$TMP/$name.onnx" \
        >"$TMP/$name.txt" 2>&1
    rc=$?
    if [ $rc = 0 ] && [ -s "$TMP/$name.onnx" ] && grep -q '^  parameters' "$TMP/$name.txt" &&
        grep -q 'latency ms' "$TMP/$name.txt" && "$GRAFT" info "$TMP/$name.onnx" >/dev/null 2>&1; then
        pass "cli_$name"
    else fail "cli_$name" "rc $rc: $(tail -2 "$TMP/$name.txt")"; fi
    grep -E '^  (parameters|non-zero|FLOPs|file|latency)' "$TMP/$name.txt" | sed 's/^/  /'
done
before=$(stat -c %s "$R18")
after=$(stat -c %s "$TMP/prune_channels.onnx" 2>/dev/null || echo "$before")
if [ "$after" -lt $((before * 7 / 10)) ]; then pass cli_prune_channels_smaller_file
else fail cli_prune_channels_smaller_file "$after of $before bytes"; fi

# A grafted digits model (class names and preprocessing inside): accuracy before and after.
"$GRAFT" finetune --model models/digits_cnn.onnx --data examples/digits/train --val examples/digits/val \
    --out "$TMP/digits.onnx" --resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 \
    --std 0.376,0.376,0.376 --lr 0.01 --epochs 30 >/dev/null 2>&1
"$GRAFT" prune --model "$TMP/digits.onnx" --method magnitude --sparsity 0.3 --iters 2 \
    --data examples/digits/val --out "$TMP/digits_pruned.onnx" >"$TMP/d.txt" 2>&1
if [ $? = 0 ] && grep -q '^  accuracy' "$TMP/d.txt"; then pass cli_prune_accuracy_report
else fail cli_prune_accuracy_report "$(tail -2 "$TMP/d.txt")"; fi
grep '^  accuracy' "$TMP/d.txt" | sed 's/^/  /'

# Prune then refit on the bundled demo: the head is fitted to the pruned backbone's features;
# accuracy reported against the dense result.
D=(--model models/digits_cnn.onnx --data examples/digits/train --val examples/digits/val
    --resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376
    --lr 0.01 --weight-decay 1e-4 --epochs 200)
ok=1
for variant in dense channels 2:4; do
    extra=()
    [ $variant = dense ] || extra=(--prune $variant --prune-sparsity 0.5)
    "$GRAFT" finetune "${D[@]}" "${extra[@]}" --out "$TMP/demo_${variant/:/_}.onnx" >"$TMP/v.txt" 2>&1 || ok=0
    acc=$(grep -o 'val accuracy *[0-9.]*' "$TMP/v.txt" | grep -o '[0-9.]*$')
    echo "  demo $variant + refit: val accuracy ${acc:-?} $(grep -o 'FLOPs.*' "$TMP/v.txt" | head -1)"
    [ -n "$acc" ] || ok=0
done
if [ $ok = 1 ]; then pass cli_prune_refit_demo; else fail cli_prune_refit_demo "a run failed"; fi

err() { # NAME NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    "$GRAFT" prune "$@" >/dev/null 2>"$TMP/e.txt"
    if [ $? = 2 ] && [ "$(wc -l <"$TMP/e.txt")" = 1 ] && grep -q -- "$needle" "$TMP/e.txt"; then
        pass "$name"
    else fail "$name" "$(cat "$TMP/e.txt")"; fi
}
err cli_prune_err_method "--method" --model "$R18" --method random --out "$TMP/x.onnx"
err cli_prune_err_sparsity "--sparsity" --model "$R18" --sparsity 1 --out "$TMP/x.onnx"
err cli_prune_err_required "required" --model "$R18"
err cli_prune_err_unknown "unknown option" --model "$R18" --out "$TMP/x.onnx" --fast
err cli_prune_err_importance "--importance" --model "$R18" --importance l3 --out "$TMP/x.onnx"
if "$GRAFT" prune --help | grep -q -- '--global'; then pass cli_prune_help; else fail cli_prune_help ""; fi
exit 0
