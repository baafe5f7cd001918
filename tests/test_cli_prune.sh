#!/usr/bin/env bash
# tests/test_cli_prune.sh GRAFT GEN: `graft prune` end to end: each method writes a model graft
# reloads, the report has its rows, channel pruning makes the file smaller, accuracy before and
# after on labelled data, `graft prune --refit` (a new head on the pruned backbone), BN-scale importance and the inner scope, `graft finetune`'s gradual
# prune-and-refit rounds, and the error cases.
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

# --refit on the demo folder: prune the pretrained CNN, fit a new head on the pruned features (a
# few epochs), export; the output loads with the data's 5 classes and the report has accuracy
# (dense + head before, pruned + head after) on --val.
"$GRAFT" prune --model models/digits_cnn.onnx --method channels --sparsity 0.5 --iters 2 \
    --data examples/digits/train --val examples/digits/val --resize 0 --crop 8 --grayscale \
    --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376 --lr 0.01 --epochs 5 --refit \
    --out "$TMP/refit.onnx" >"$TMP/refit.txt" 2>&1
rc=$?
if [ $rc = 0 ] && grep -qE '^  accuracy +[0-9.]+ +[0-9.]+' "$TMP/refit.txt" &&
    "$GRAFT" info "$TMP/refit.onnx" 2>/dev/null | grep -qE 'probabilities +float32 +\(.*, 5\)'; then
    pass cli_prune_refit
else fail cli_prune_refit "rc $rc: $(tail -3 "$TMP/refit.txt")"; fi
grep -E '^  (accuracy|FLOPs)' "$TMP/refit.txt" | sed 's/^/  /'
# --val-split instead of --val: the held-out part of --data.
"$GRAFT" prune --model models/digits_cnn.onnx --method magnitude --sparsity 0.5 --iters 1 \
    --data examples/digits/val --val-split 0.3 --resize 0 --crop 8 --grayscale --epochs 3 --refit \
    --out "$TMP/refit_split.onnx" >"$TMP/refit_split.txt" 2>&1
if [ $? = 0 ] && grep -qE '^  accuracy +[0-9.]+ +[0-9.]+' "$TMP/refit_split.txt" && [ -s "$TMP/refit_split.onnx" ]
then pass cli_prune_refit_val_split
else fail cli_prune_refit_val_split "$(tail -3 "$TMP/refit_split.txt")"; fi

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

# Importance bn and the inner scope through the tool.
"$GRAFT" prune --model "$R18" --method channels --sparsity 0.5 --importance bn --iters 1 \
    --out "$TMP/bn.onnx" >"$TMP/bn.txt" 2>&1
if [ $? = 0 ] && grep -q 'sparsity reached *0.5000' "$TMP/bn.txt"; then pass cli_prune_importance_bn
else fail cli_prune_importance_bn "$(tail -2 "$TMP/bn.txt")"; fi
MB=$GEN/mobilenet_tiny.onnx
if [ -f "$MB" ]; then
    "$GRAFT" prune --model "$MB" --method channels --importance bn --iters 1 --out "$TMP/mb.onnx" \
        >/dev/null 2>"$TMP/mb.txt"
    if [ $? = 1 ] && grep -q "Conv '/features/.*BatchNormalization" "$TMP/mb.txt" && [ ! -e "$TMP/mb.onnx" ]
    then pass cli_prune_importance_bn_needs_bn
    else fail cli_prune_importance_bn_needs_bn "$(cat "$TMP/mb.txt")"; fi
fi
"$GRAFT" prune --model "$R18" --method channels --sparsity 0.5 --scope inner --iters 1 \
    --out "$TMP/inner.onnx" >"$TMP/inner.txt" 2>&1
all_units=$(grep -o 'units removed *[0-9]*' "$TMP/prune_channels.txt" | grep -o '[0-9]*$')
inner_units=$(grep -o 'units removed *[0-9]*' "$TMP/inner.txt" | grep -o '[0-9]*$')
# ResNet-18: the inner channels are the outputs of each basic block's first conv (2 x (64 + 128 +
# 256 + 512)), half of them go; the residual groups go too without the scope.
if [ "${inner_units:-0}" = 960 ] && [ "${all_units:-0}" -gt 960 ]; then pass cli_prune_scope_inner
else fail cli_prune_scope_inner "inner ${inner_units:-?}, all ${all_units:-?} channels removed"; fi

# Gradual pruning with a refit per round: one line per round, sparsities on the cubic schedule
# (magnitude reaches them to rounding), non-zero weights only fall; channels with bn end at S.
rounds() { # NAME EXPECTED_LINES ARGS...
    local name=$1 want=$2
    shift 2
    "$GRAFT" finetune "${D[@]}" --epochs 20 "$@" --out "$TMP/$name.onnx" >"$TMP/$name.txt" 2>&1
    local rc=$?
    grep '^prune round' "$TMP/$name.txt" | sed 's/^/  /'
    grep '^prune round' "$TMP/$name.txt" | awk -v want="$want" -v rc=$rc '
        { sub(/:$/, "", $3); split($3, kn, "/"); k = kn[1] + 0; n = kn[2] + 0; s = $5 + 0
          sched = $7; gsub(/[(),]/, "", sched); sched += 0; nz = $10 + 0
          left = 1 - k / n; f = S * (1 - left * left * left)
          if (k != NR || n != want + 0) bad = "round numbering"
          if (sched - f > 5e-5 || f - sched > 5e-5) bad = "schedule " sched " vs formula " f
          if (s - sched > TOL || sched - s > TOL) bad = "reached " s " vs schedule " sched
          if (NR > 1 && nz >= prev) bad = "non-zero weights did not fall"
          prev = nz; last = s }
        END { if (rc != 0) bad = "exit status " rc
              if (NR != want) bad = NR " round lines"
              if (!bad && (last - S > TOL || S - last > TOL)) bad = "ends at " last
              if (bad) { print "FAIL '"$name"': " bad; exit 1 } print "PASS '"$name"'" }' \
        S="$S" TOL="$TOL"
}
S=0.6 TOL=0.001 rounds cli_finetune_prune_rounds_magnitude 3 --prune magnitude --prune-sparsity 0.6 \
    --prune-rounds 3 --checkpoint "$TMP/ck"
S=0.5 TOL=0.02 rounds cli_finetune_prune_rounds_channels_bn 2 --prune channels --prune-sparsity 0.5 \
    --prune-rounds 2 --prune-importance bn
# graft export replays every round: the same pruned backbone as the run's own export.
"$GRAFT" export "${D[@]}" --epochs 20 --prune magnitude --prune-sparsity 0.6 --prune-rounds 3 \
    --checkpoint "$TMP/ck" --out "$TMP/re.onnx" >"$TMP/re.txt" 2>&1
p1=$("$GRAFT" info "$TMP/cli_finetune_prune_rounds_magnitude.onnx" --json 2>/dev/null | grep -o '"parameters": [0-9]*')
p2=$("$GRAFT" info "$TMP/re.onnx" --json 2>/dev/null | grep -o '"parameters": [0-9]*')
z1=$(python3 -c "import onnx,numpy as n,sys;m=onnx.load(sys.argv[1]);print(sum(int((onnx.numpy_helper.to_array(t)==0).sum()) for t in m.graph.initializer))" "$TMP/cli_finetune_prune_rounds_magnitude.onnx" 2>/dev/null)
z2=$(python3 -c "import onnx,numpy as n,sys;m=onnx.load(sys.argv[1]);print(sum(int((onnx.numpy_helper.to_array(t)==0).sum()) for t in m.graph.initializer))" "$TMP/re.onnx" 2>/dev/null)
if [ -n "$p1" ] && [ "$p1" = "$p2" ] && [ -n "$z1" ] && [ "$z1" = "$z2" ]; then pass cli_export_replays_prune_rounds
else fail cli_export_replays_prune_rounds "$p1/$p2, zeros $z1/$z2: $(tail -1 "$TMP/re.txt")"; fi

ferr() { # NAME NEEDLE ARGS...: finetune refuses the combination with one line
    local name=$1 needle=$2
    shift 2
    "$GRAFT" finetune "${D[@]}" "$@" --out "$TMP/x.onnx" >/dev/null 2>"$TMP/e.txt"
    if [ $? = 2 ] && [ "$(wc -l <"$TMP/e.txt")" = 1 ] && grep -q -- "$needle" "$TMP/e.txt"; then
        pass "$name"
    else fail "$name" "$(cat "$TMP/e.txt")"; fi
}
ferr cli_finetune_err_rounds_need_prune "needs --prune" --prune-rounds 3
ferr cli_finetune_err_rounds_2_4 "rounds are for magnitude and channels" --prune 2:4 --prune-rounds 2
ferr cli_finetune_err_rounds_zero "--prune-rounds" --prune magnitude --prune-rounds 0
ferr cli_finetune_err_importance_bn "needs --prune channels" --prune magnitude --prune-importance bn
ferr cli_finetune_err_scope "--prune-scope" --prune channels --prune-scope outer

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
err cli_prune_err_scope "--scope" --model "$R18" --scope outer --out "$TMP/x.onnx"
err cli_prune_err_refit_needs_data "--refit needs --data" --model "$R18" --refit --out "$TMP/x.onnx"
err cli_prune_err_epochs_needs_refit "--epochs is for --refit" --model "$R18" --epochs 3 \
    --data examples/digits/val --out "$TMP/x.onnx"
err cli_prune_err_refit_lr "--lr" --model "$R18" --refit --data examples/digits/val --lr -1 \
    --out "$TMP/x.onnx"
if "$GRAFT" prune --help | grep -q -- '--global' && "$GRAFT" prune --help | grep -q -- '--refit'; then pass cli_prune_help; else fail cli_prune_help ""; fi
exit 0
