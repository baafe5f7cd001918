#!/usr/bin/env bash
# tests/test_cli_checkpoint.sh GRAFT [GEN]: finetune's best and last checkpoints and what they
# record (`graft export` from the checkpoint alone), damaged, older and out-of-range checkpoints
# refused or warned about, Ctrl-C mid-training and in the backbone
# phase, --resume, the vocabulary check, skipped files with --val-split, and the progress
# display (sized to the terminal, the epoch clock after the backbone phase).
set -u
GRAFT=$(realpath "$1")
GEN=${2:-tests/data/gen}
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
M=models/digits_cnn.onnx
TRAIN=examples/digits/train
VAL=examples/digits/val
IMG=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
meta() { # FILE KEY: a checkpoint's metadata value
    "$PY" -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"].get(sys.argv[2], ""))' "$1" "$2"
}
same_outputs() { # A.onnx B.onnx: the same outputs on the same inputs (ONNX Runtime) and metadata
    "$PY" -c 'import sys, numpy as np, onnx, onnxruntime as ort
a, b = sys.argv[1:3]
x = np.random.default_rng(0).standard_normal((16, 1, 8, 8)).astype(np.float32)
ya = ort.InferenceSession(a).run(None, {"input": x})[0]
yb = ort.InferenceSession(b).run(None, {"input": x})[0]
ma = {p.key: p.value for p in onnx.load(a).metadata_props}
mb = {p.key: p.value for p in onnx.load(b).metadata_props}
sys.exit(0 if np.array_equal(ya, yb) and ma == mb else 1)' "$1" "$2"
}

if [ ! -d "$TRAIN" ]; then echo "SKIP cli_checkpoint: $TRAIN missing"; exit 0; fi

# A run whose best epoch (2) is not its last (8): best and last differ; export from the
# checkpoint alone, from another folder, equals the run's own export (the last epoch's head).
R=(--model $M --data $TRAIN --val $VAL "${IMG[@]}" --seed 1 --lr 0.5 --optimizer sgd --head mlp:64)
"$GRAFT" finetune "${R[@]}" --epochs 8 --checkpoint "$TMP/ck" --out "$TMP/run.onnx" \
    >"$TMP/run.txt" 2>&1
rc=$?
best=$(meta "$TMP/ck/best.safetensors" epoch)
last=$(meta "$TMP/ck/last.safetensors" epoch)
if [ $rc = 0 ] && [ "$best" = 2 ] && [ "$last" = 8 ] &&
    grep -q 'best epoch        2' "$TMP/run.txt" &&
    ! cmp -s "$TMP/ck/best.safetensors" "$TMP/ck/last.safetensors"; then
    pass checkpoint_best_and_last
else fail checkpoint_best_and_last "rc $rc, best epoch '$best', last '$last'"; fi
(cd "$TMP" && "$GRAFT" export --checkpoint ck --which last --out last.onnx >exp.txt 2>&1)
rc=$?
if [ $rc = 0 ] && same_outputs "$TMP/run.onnx" "$TMP/last.onnx"; then
    pass export_checkpoint_only_equals_run
else fail export_checkpoint_only_equals_run "rc $rc: $(tail -2 "$TMP/exp.txt")"; fi
"$GRAFT" export --checkpoint "$TMP/ck" --out "$TMP/best.onnx" >"$TMP/exp.txt" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q 'best.safetensors (after epoch 2' "$TMP/exp.txt" &&
    ! same_outputs "$TMP/run.onnx" "$TMP/best.onnx"; then pass export_takes_best_by_default
else fail export_takes_best_by_default "rc $rc: $(tail -2 "$TMP/exp.txt")"; fi
# Options on the command line win over the recorded ones.
"$GRAFT" export --checkpoint "$TMP/ck" --out "$TMP/half.onnx" --fp16-weights >/dev/null 2>&1
if [ -s "$TMP/half.onnx" ] && [ "$(stat -c %s "$TMP/half.onnx")" -lt "$(stat -c %s "$TMP/best.onnx")" ]
then pass export_command_line_overrides
else fail export_command_line_overrides "fp16 export not smaller"; fi

# Export trains nothing: fewer --epochs than the checkpoint has done is fine there.
"$GRAFT" export --checkpoint "$TMP/ck" --which last --epochs 2 --out "$TMP/e2.onnx" >"$TMP/o.txt" 2>&1
if [ $? = 0 ] && same_outputs "$TMP/run.onnx" "$TMP/e2.onnx"; then pass export_ignores_epochs
else fail export_ignores_epochs "$(tail -2 "$TMP/o.txt")"; fi

# Without validation data best is last; the default export equals the run's.
"$GRAFT" finetune --model $M --data $TRAIN --val-split 0 "${IMG[@]}" --epochs 3 \
    --checkpoint "$TMP/nv" --out "$TMP/nv.onnx" >/dev/null 2>&1
"$GRAFT" export --checkpoint "$TMP/nv" --out "$TMP/nv_best.onnx" >/dev/null 2>&1
if [ "$(meta "$TMP/nv/best.safetensors" epoch)" = 3 ] && same_outputs "$TMP/nv.onnx" "$TMP/nv_best.onnx"
then pass checkpoint_best_is_last_without_validation
else fail checkpoint_best_is_last_without_validation "best is not the last epoch"; fi

# Export's errors name `graft export`; an older checkpoint (no recorded options) asks for them.
expect_export_error() { # NAME NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    "$GRAFT" export "$@" >"$TMP/o.txt" 2>"$TMP/e.txt"
    local rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$TMP/e.txt")" = 1 ] && grep -q '^graft export: ' "$TMP/e.txt" &&
        grep -q -- "$needle" "$TMP/e.txt"; then pass "$name"
    else fail "$name" "rc $rc: $(cat "$TMP/e.txt")"; fi
}
expect_export_error export_err_no_checkpoint "no checkpoint" --checkpoint "$TMP/none" --out "$TMP/x.onnx"
expect_export_error export_err_needs_out "--out" --checkpoint "$TMP/ck"
expect_export_error export_err_which "expected one of best, last" --checkpoint "$TMP/ck" --which middle --out "$TMP/x.onnx"
mkdir -p "$TMP/old"
"$PY" -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"] = {k: v for k, v in h["__metadata__"].items()
                    if not k.startswith("graft.") and not k.startswith("checksum")}
j = json.dumps(h).encode()
j += b" " * (-(8 + len(j)) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])' \
    "$TMP/ck/last.safetensors" "$TMP/old/trainer.safetensors"
expect_export_error export_err_older_checkpoint "give the run's options" --checkpoint "$TMP/old" --out "$TMP/x.onnx"
"$GRAFT" export "${R[@]}" --checkpoint "$TMP/old" --out "$TMP/old.onnx" >"$TMP/o.txt" 2>&1
if [ $? = 0 ] && same_outputs "$TMP/run.onnx" "$TMP/old.onnx"; then pass export_older_checkpoint_with_options
else fail export_older_checkpoint_with_options "$(tail -2 "$TMP/o.txt")"; fi

# --resume needs a checkpoint.
"$GRAFT" finetune --model $M --data $TRAIN "${IMG[@]}" --checkpoint "$TMP/empty" --resume \
    --out "$TMP/x.onnx" >/dev/null 2>"$TMP/e.txt"
if [ $? = 2 ] && grep -q 'no checkpoint in' "$TMP/e.txt" && [ ! -e "$TMP/x.onnx" ]; then
    pass resume_without_checkpoint_fails
else fail resume_without_checkpoint_fails "$(cat "$TMP/e.txt")"; fi

# Checked checkpoints: a damaged byte is refused on resume and export, naming the file and the
# tensor; fewer --epochs than the checkpoint has done is refused naming the field; an older
# checkpoint (no checksums) resumes with a warning.
mkdir -p "$TMP/dmg"
cp "$TMP/ck/last.safetensors" "$TMP/dmg/last.safetensors"
"$PY" -c 'import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[-100] ^= 4
open(sys.argv[1], "wb").write(b)' "$TMP/dmg/last.safetensors"
"$GRAFT" finetune "${R[@]}" --epochs 9 --checkpoint "$TMP/dmg" --resume --out "$TMP/d.onnx" \
    >/dev/null 2>"$TMP/e.txt"
rc=$?
if [ $rc = 1 ] && grep -q "loading checkpoint '$TMP/dmg/last.safetensors': the file is damaged: tensor '[a-z0-9_.]*' does not match its checksum" "$TMP/e.txt" &&
    [ ! -e "$TMP/d.onnx" ]; then pass resume_damaged_checkpoint_refused
else fail resume_damaged_checkpoint_refused "rc $rc: $(cat "$TMP/e.txt")"; fi
"$GRAFT" export --checkpoint "$TMP/dmg" --which last --out "$TMP/d.onnx" >/dev/null 2>"$TMP/e.txt"
rc=$?
if [ $rc != 0 ] && grep -q "dmg/last.safetensors'.*the file is damaged" "$TMP/e.txt" &&
    [ ! -e "$TMP/d.onnx" ]; then pass export_damaged_checkpoint_refused
else fail export_damaged_checkpoint_refused "rc $rc: $(cat "$TMP/e.txt")"; fi
"$GRAFT" finetune "${R[@]}" --epochs 5 --checkpoint "$TMP/ck" --resume --out "$TMP/d.onnx" \
    >/dev/null 2>"$TMP/e.txt"
rc=$?
if [ $rc = 1 ] && grep -q "ck/last.safetensors': the field 'epoch' is 8: expected an integer from 0 to 5" "$TMP/e.txt"
then pass resume_fewer_epochs_than_done_refused
else fail resume_fewer_epochs_than_done_refused "rc $rc: $(cat "$TMP/e.txt")"; fi
mkdir -p "$TMP/unsealed"
"$PY" -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"] = {k: v for k, v in h["__metadata__"].items() if not k.startswith("checksum")}
j = json.dumps(h).encode()
j += b" " * (-(8 + len(j)) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])' \
    "$TMP/ck/last.safetensors" "$TMP/unsealed/last.safetensors"
"$GRAFT" finetune "${R[@]}" --epochs 9 --checkpoint "$TMP/unsealed" --resume --out "$TMP/u.onnx" \
    >/dev/null 2>"$TMP/e.txt"
rc=$?
if [ $rc = 0 ] && grep -q "unsealed/last.safetensors' has no checksum" "$TMP/e.txt" &&
    [ "$(meta "$TMP/unsealed/last.safetensors" epoch)" = 9 ] &&
    [ -n "$(meta "$TMP/unsealed/last.safetensors" checksum)" ]; then pass resume_unsealed_checkpoint_warns
else fail resume_unsealed_checkpoint_warns "rc $rc: $(cat "$TMP/e.txt")"; fi

# Ctrl-C mid-training: the last checkpoint is written at the step boundary (mostly mid-epoch:
# 269 steps of batch 1 an epoch; at an epoch's end now and then), and resuming it gives the
# uninterrupted run's epochs exactly (test_fit covers a stop mid-epoch deterministically).
I=(--model $M --data $VAL --val $TRAIN "${IMG[@]}" --seed 1 --batch 1 --head mlp:256)
: >"$TMP/int.txt"
"$GRAFT" finetune "${I[@]}" --epochs 100000 --checkpoint "$TMP/ci" --out "$TMP/i.onnx" \
    >"$TMP/int.txt" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^epoch 2/' "$TMP/int.txt" && break; sleep 0.1; done
kill -INT $pid
wait $pid
rc=$?
done_epochs=$(meta "$TMP/ci/last.safetensors" epoch)
at=$(meta "$TMP/ci/last.safetensors" epoch_samples)
echo "  interrupted after $done_epochs epochs and $at samples"
if [ $rc = 130 ] && grep -q 'checkpoint written to .*last.safetensors' "$TMP/int.txt" &&
    [ -n "$done_epochs" ] && [ ! -e "$TMP/i.onnx" ]; then pass ctrl_c_checkpoints_at_once
else fail ctrl_c_checkpoints_at_once "rc $rc: $(tail -2 "$TMP/int.txt")"; fi
n=$((${done_epochs:-0} + 2))
"$GRAFT" finetune "${I[@]}" --epochs $n --checkpoint "$TMP/ci" --resume --out "$TMP/r.onnx" \
    >"$TMP/res.txt" 2>&1
"$GRAFT" finetune "${I[@]}" --epochs $n --out "$TMP/s.onnx" >"$TMP/str.txt" 2>&1
want=$(grep "^epoch $n/$n:" "$TMP/str.txt" | sed 's/, [0-9.]*s$//')
got=$(grep "^epoch $n/$n:" "$TMP/res.txt" | sed 's/, [0-9.]*s$//')
if grep -q '^resuming from' "$TMP/res.txt" && [ -n "$want" ] && [ "$want" = "$got" ]; then
    pass ctrl_c_resume_equals_straight
else fail ctrl_c_resume_equals_straight "'$want' vs '$got'"; fi

# Ctrl-C in the backbone phase (ResNet-18 at 224 x 224, one image a batch: seconds for the
# digits) stops at the next batch, before the phase's end, and claims no checkpoint; the
# features so far stay in the cache (one file per data set: on a fast GPU the training set's may
# be complete and the validation set's begun).
RN=$GEN/resnet18.onnx
if [ -f "$RN" ]; then
    : >"$TMP/bb.txt"
    "$GRAFT" finetune --model "$RN" --data $TRAIN --val $VAL --resize 224 --crop 224 --batch 1 \
        --checkpoint "$TMP/cb" --cache "$TMP/cache" --out "$TMP/b.onnx" >"$TMP/bb.txt" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q '^backbone:' "$TMP/bb.txt" && break; sleep 0.1; done
    sleep 0.5
    t0=$(date +%s%N)
    kill -INT $pid
    wait $pid
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "  stopped ${ms}ms after Ctrl-C"
    if [ $rc = 130 ] && ! grep -q '^backbone: 319 samples' "$TMP/bb.txt" &&
        ! grep -q '^epoch' "$TMP/bb.txt" && grep -q 'no checkpoint written' "$TMP/bb.txt" &&
        ! grep -q 'checkpoint written to' "$TMP/bb.txt" && [ ! -e "$TMP/cb/last.safetensors" ] &&
        [ "$(find "$TMP/cache" -name 'features-*.cache' -size +0 | wc -l)" -ge 1 ]; then
        pass ctrl_c_in_backbone_phase
    else fail ctrl_c_in_backbone_phase "rc $rc after ${ms}ms: $(tail -2 "$TMP/bb.txt")"; fi
else echo "SKIP ctrl_c_in_backbone_phase: $RN not generated"; fi

# The epoch clock starts after the backbone phase: the 319 digits through the tiny MobileNet
# (64 x 64) take longer than an epoch of a linear head on their features.
MN=$GEN/mobilenet_tiny.onnx
if [ -f "$MN" ]; then
    "$GRAFT" finetune --model "$MN" --data $TRAIN --val $VAL --resize 64 --crop 64 --batch 1 \
        --epochs 1 --out "$TMP/f.onnx" >"$TMP/few.txt" 2>&1
    # the backbone's own seconds (two decimals); the epoch's are printed to 0.1 s, and an epoch
    # of ~0.05 s read 0.0 or 0.1 from run to run: one that counted the backbone reads >= it
    bb=$(sed -n 's/^backbone: 319 samples in .*: backbone \([0-9.]*\)s,.*/\1/p' "$TMP/few.txt")
    ep=$(sed -n 's/^epoch 1\/1: .*, \([0-9.]*\)s$/\1/p' "$TMP/few.txt")
    echo "  backbone ${bb}s, epoch 1 ${ep}s"
    if [ -n "$bb" ] && [ -n "$ep" ] && "$PY" -c "import sys; sys.exit(0 if $ep < $bb else 1)"; then
        pass epoch_clock_after_backbone
    else fail epoch_clock_after_backbone "backbone '$bb's, epoch 1 '$ep's: $(tail -2 "$TMP/few.txt")"; fi
else echo "SKIP epoch_clock_after_backbone: $MN not generated"; fi

# Plain output: a line at the backbone phase's start and end, nothing drawn in place.
"$GRAFT" finetune --model $M --data $TRAIN --val $VAL "${IMG[@]}" --epochs 1 \
    --out "$TMP/p.onnx" >"$TMP/plain.txt" 2>&1
if [ "$(grep -c '^backbone: ' "$TMP/plain.txt")" = 2 ] &&
    grep -q '^backbone: 319 samples in' "$TMP/plain.txt" && ! grep -q $'\r' "$TMP/plain.txt"; then
    pass backbone_progress_plain_lines
else fail backbone_progress_plain_lines "$(head -3 "$TMP/plain.txt")"; fi

# On a terminal the progress line fits its width, narrow or wide.
for cols in 40 100; do
    res=$("$PY" tools/pty_run.py $cols "$GRAFT" finetune --model $M --data $TRAIN --val $VAL \
        "${IMG[@]}" --epochs 3 --batch 1 --out "$TMP/t.onnx")
    drawn=$(echo "$res" | sed -n 's/.* drawn \([0-9]*\) .*/\1/p')
    longest=$(echo "$res" | sed -n 's/.* longest \([0-9]*\)$/\1/p')
    if [ "${drawn:-0}" -ge 3 ] && [ "${longest:-999}" -lt $cols ]; then
        pass "progress_fits_terminal_$cols"
    else fail "progress_fits_terminal_$cols" "$res"; fi
done

# --val-split: the skipped files of the one folder are counted and listed once.
mkdir -p "$TMP/sk"
cp -r $VAL/. "$TMP/sk/"
echo junk >"$TMP/sk/five/broken.png"
echo junk >"$TMP/sk/six/bad.png"
"$GRAFT" finetune --model $M --data "$TMP/sk" --val-split 0.3 "${IMG[@]}" --epochs 1 \
    --out "$TMP/sk.onnx" >"$TMP/sk.txt" 2>/dev/null
if grep -q '^  skipped files     2$' "$TMP/sk.txt" && [ "$(grep -c 'broken.png' "$TMP/sk.txt")" = 1 ] &&
    [ "$(grep -c 'bad.png' "$TMP/sk.txt")" = 1 ]; then pass val_split_skipped_listed_once
else fail val_split_skipped_listed_once "$(grep -A3 'skipped files' "$TMP/sk.txt")"; fi

# A vocabulary with more tokens than the model embeds: one error before any work.
BERT=$GEN/bert_tiny_decomposed.onnx
if [ -f "$BERT" ]; then
    "$GRAFT" finetune --model "$BERT" --data tests/data/text/basic.csv \
        --vocab tests/data/tokenizer/vocab.txt --max-len 12 --val-split 0 --epochs 1 \
        --out "$TMP/v.onnx" >"$TMP/o.txt" 2>"$TMP/e.txt"
    rc=$?
    if [ $rc = 2 ] && [ "$(grep -c . "$TMP/e.txt" | tr -d ' ')" -le 2 ] &&
        grep -q '2154 tokens.*bert_tiny_decomposed.onnx has 1000 token embeddings' "$TMP/e.txt" &&
        grep -q 'vocab.txt' "$TMP/e.txt" && ! grep -q 'backbone' "$TMP/o.txt"; then
        pass vocab_larger_than_model_rejected
    else fail vocab_larger_than_model_rejected "rc $rc: $(cat "$TMP/e.txt")"; fi
    # A text run's checkpoint records the vocabulary: export needs nothing else.
    head -1000 tests/data/tokenizer/vocab.txt >"$TMP/vocab.txt"
    "$GRAFT" finetune --model "$BERT" --data tests/data/text/basic.csv --vocab "$TMP/vocab.txt" \
        --max-len 12 --pooling mean --val-split 0 --epochs 2 --checkpoint "$TMP/tk" \
        --out "$TMP/text.onnx" >/dev/null 2>&1
    "$GRAFT" export --checkpoint "$TMP/tk" --out "$TMP/text_e.onnx" >"$TMP/o.txt" 2>&1
    if [ $? = 0 ] && [ "$(meta "$TMP/tk/best.safetensors" graft.run.pooling)" = mean ] &&
        cmp -s <("$PY" -c 'import onnx, sys; print(onnx.load(sys.argv[1]).graph)' "$TMP/text.onnx") \
            <("$PY" -c 'import onnx, sys; print(onnx.load(sys.argv[1]).graph)' "$TMP/text_e.onnx")
    then pass export_text_checkpoint_only
    else fail export_text_checkpoint_only "$(tail -2 "$TMP/o.txt")"; fi
else
    echo "SKIP vocab_larger_than_model_rejected: $BERT not generated"
    echo "SKIP export_text_checkpoint_only: $BERT not generated"
fi

# A run that diverges (a huge learning rate) stops at the step whose loss is NaN/Inf, names it
# and points at the last checkpoint to resume from.
"$GRAFT" finetune --model $M --data $TRAIN --val $VAL "${IMG[@]}" --seed 1 --lr 1e6 \
    --optimizer sgd --epochs 20 --checkpoint "$TMP/nan" --out "$TMP/nan.onnx" \
    >"$TMP/nan.txt" 2>&1
rc=$?
if [ $rc = 1 ] && grep -qE "training loss is (NaN|infinite) at epoch [0-9]+, step [0-9]+ \(the batch of samples" "$TMP/nan.txt" &&
    grep -q "the last checkpoint written is $TMP/nan/" "$TMP/nan.txt" && [ ! -e "$TMP/nan.onnx" ]; then
    pass cli_checkpoint_nan_loss_stops
else
    fail cli_checkpoint_nan_loss_stops "exit $rc: $(tail -3 "$TMP/nan.txt")"
fi
# ... and names the files of that batch: each a file of the training data, and as many as the
# error's sample list names (at most 8).
files=$(sed -n 's/^graft finetune: in that batch: //p' "$TMP/nan.txt")
listed=$(grep -oE 'the batch of samples [0-9, ]+' "$TMP/nan.txt" | grep -oE '[0-9]+' | wc -l)
ok=1
[ -n "$files" ] || ok=0
for f in $files; do case $f in "$TRAIN"/*) [ -f "$f" ] || ok=0 ;; *) ok=0 ;; esac; done
if [ $ok = 1 ] && [ "$(echo "$files" | wc -l)" = "$listed" ]; then pass cli_checkpoint_nan_loss_names_files
else fail cli_checkpoint_nan_loss_names_files "files '$files', $listed samples named: $(grep -m2 'batch' "$TMP/nan.txt")"; fi

exit 0
