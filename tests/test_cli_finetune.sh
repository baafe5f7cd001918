#!/usr/bin/env bash
# tests/test_cli_finetune.sh GRAFT [GEN]: `graft finetune` on the bundled digits demo (models/ and
# examples/): a run with its outputs, non-terminal output, --config, every option's error
# cases, resume from a checkpoint, and Ctrl-C.
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
M=models/digits_cnn.onnx
TRAIN=examples/digits/train
VAL=examples/digits/val
IMG=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

if [ ! -d "$TRAIN" ]; then echo "SKIP cli_finetune: $TRAIN missing"; exit 0; fi

"$GRAFT" finetune --model $M --data $TRAIN --val $VAL --out "$TMP/a.onnx" "${IMG[@]}" \
    --epochs 6 --report "$TMP/report" --seed 1 >"$TMP/out.txt" 2>"$TMP/err.txt"
rc=$?
lines=$(grep -c '^epoch [0-9]*/6:' "$TMP/out.txt")
if [ $rc = 0 ] && [ -s "$TMP/a.onnx" ] && [ "$lines" = 6 ] && grep -q 'val accuracy' "$TMP/out.txt" &&
    ! grep -q $'\r' "$TMP/out.txt"; then
    pass finetune_run_plain_output
else fail finetune_run_plain_output "rc $rc, $lines epoch lines: $(tail -3 "$TMP/err.txt")"; fi
for f in metrics.jsonl report.html; do
    if [ -s "$TMP/report/$f" ]; then pass "finetune_report_$f"; else fail "finetune_report_$f" missing; fi
done
if ls "$TMP"/report/events.out.tfevents.* >/dev/null 2>&1; then pass finetune_report_events
else fail finetune_report_events missing; fi
# The summary's validation accuracy (the head on the fit's validation features) is what the
# exported model gives on the validation folder.
want=$(sed -n 's/^  val accuracy *\([0-9.]*\) (\([0-9]*\) of \([0-9]*\).*/\2 of \3/p' "$TMP/out.txt")
got=$("$GRAFT" eval --model "$TMP/a.onnx" --data $VAL 2>/dev/null | sed -n 's/^accuracy *[0-9.]* (\(.*\))$/\1/p')
if [ -n "$want" ] && [ "$want" = "$got" ]; then pass finetune_val_accuracy_is_the_exports
else fail finetune_val_accuracy_is_the_exports "summary '$want', graft eval '$got'"; fi
# The cache's key holds every listed file's size and modification time (the listing's own
# look at it): a rerun of an unchanged folder runs no sample through the backbone, a file touched
# since makes a new set (every sample runs again).
cp -r $TRAIN "$TMP/idtrain"
ran() { # the backbone's sample count of a cached run
    "$GRAFT" finetune --model $M --data "$TMP/idtrain" "${IMG[@]}" --epochs 1 --cache "$TMP/idcache" \
        --out "$TMP/id.onnx" 2>/dev/null | sed -n 's/.*backbone [0-9.]*s (\([0-9]*\) samples run.*/\1/p'
}
n1=$(ran) n2=$(ran)
touch -d 2020-01-02 "$(find "$TMP/idtrain" -type f | sort | head -1)"
n3=$(ran)
if [ -n "$n1" ] && [ "$n1" -gt 0 ] && [ "$n2" = 0 ] && [ "$n3" = "$n1" ]; then
    pass finetune_cache_key_follows_file_times
else fail finetune_cache_key_follows_file_times "samples run: '$n1', then '$n2', after a touch '$n3'"; fi
# A feature cache with no room on its disk (a file size limit here, as a full disk): a clear error
# naming the file, at the start; no crash (before, a full disk was a SIGBUS while rows were put).
(ulimit -f 4 && "$GRAFT" finetune --model $M --data $TRAIN "${IMG[@]}" --epochs 1 \
    --cache "$TMP/fullcache" --out "$TMP/full.onnx") >"$TMP/full.out" 2>"$TMP/full.err"
rc=$?
if [ $rc = 1 ] && grep -q "feature cache '.*/fullcache/features-.*': cannot reserve .* on its disk" \
    "$TMP/full.err"; then
    pass finetune_cache_no_room_is_an_error
else fail finetune_cache_no_room_is_an_error "rc $rc: $(grep -v '^ ' "$TMP/full.err" | head -2)"; fi
# --train-from: the blocks after the tensor train with the head; the exported model carries them
# (graft eval agrees with the summary), a checkpoint rebuilds the same model, and the part
# before the tensor runs once per sample.
FROM=/backbone/backbone.6/MaxPool_output_0
"$GRAFT" finetune --model $M --data $TRAIN --val $VAL --out "$TMP/b.onnx" "${IMG[@]}" \
    --epochs 8 --lr 0.01 --seed 1 --device cpu --train-from $FROM --checkpoint "$TMP/bck" \
    >"$TMP/b.txt" 2>"$TMP/b.err"
rc=$?
want=$(sed -n 's/^  val accuracy *\([0-9.]*\) (\([0-9]*\) of \([0-9]*\).*/\2 of \3/p' "$TMP/b.txt")
got=$("$GRAFT" eval --model "$TMP/b.onnx" --data $VAL 2>/dev/null | sed -n 's/^accuracy *[0-9.]* (\(.*\))$/\1/p')
if [ $rc = 0 ] && [ -n "$want" ] && [ "$want" = "$got" ] && grep -q '319 samples run' "$TMP/b.txt"
then pass finetune_train_from
else fail finetune_train_from "rc $rc, summary '$want', eval '$got': $(tail -2 "$TMP/b.err")"; fi
"$GRAFT" export --checkpoint "$TMP/bck" --which last --out "$TMP/be.onnx" >/dev/null 2>"$TMP/be.err"
got2=$("$GRAFT" eval --model "$TMP/be.onnx" --data $VAL 2>/dev/null | sed -n 's/^accuracy *[0-9.]* (\(.*\))$/\1/p')
if [ -n "$got2" ] && [ "$got2" = "$got" ]; then pass finetune_train_from_checkpoint_export
else fail finetune_train_from_checkpoint_export "'$got2' vs '$got': $(tail -2 "$TMP/be.err")"; fi
# --augment with --train-from: the frozen part runs once per sample on its one augmented view,
# which the cache keeps: a rerun reads every row from it and trains the same blocks.
for run in 1 2; do
    "$GRAFT" finetune --model $M --data $TRAIN --val $VAL --out "$TMP/aug$run.onnx" "${IMG[@]}" \
        --epochs 3 --lr 0.01 --seed 2 --train-from $FROM --augment --cache "$TMP/augcache" \
        >"$TMP/aug$run.txt" 2>"$TMP/aug$run.err" || break
done
acc1=$(grep '^  val accuracy' "$TMP/aug1.txt")
if [ -s "$TMP/aug2.onnx" ] && grep -q '319 samples run' "$TMP/aug1.txt" &&
    grep -q '(0 samples run' "$TMP/aug2.txt" && [ -n "$acc1" ] &&
    [ "$acc1" = "$(grep '^  val accuracy' "$TMP/aug2.txt")" ]; then
    pass finetune_train_from_augment_cached
else fail finetune_train_from_augment_cached "$(tail -2 "$TMP/aug1.err" "$TMP/aug2.err")"; fi
"$GRAFT" finetune --model $M --data $TRAIN --out "$TMP/u.onnx" "${IMG[@]}" --unfreeze 1 \
    >/dev/null 2>"$TMP/u.err"
rc=$?
if [ $rc = 1 ] && grep -q 'unfreeze' "$TMP/u.err" && [ ! -e "$TMP/u.onnx" ]; then
    pass finetune_unfreeze_needs_stages
else fail finetune_unfreeze_needs_stages "rc $rc: $(tail -2 "$TMP/u.err")"; fi
"$GRAFT" finetune --model $M --data $TRAIN --out "$TMP/u.onnx" "${IMG[@]}" --unfreeze 1 \
    --train-from $FROM >/dev/null 2>"$TMP/u.err"
rc=$?
if [ $rc = 2 ] && grep -q 'not both' "$TMP/u.err"; then pass finetune_unfreeze_or_train_from
else fail finetune_unfreeze_or_train_from "rc $rc: $(tail -2 "$TMP/u.err")"; fi
"$GRAFT" finetune --model $M --data $TRAIN --out "$TMP/u.onnx" "${IMG[@]}" --blocks-lr 1e-4 \
    >/dev/null 2>"$TMP/u.err"
rc=$?
if [ $rc = 2 ] && grep -q 'needs --unfreeze' "$TMP/u.err"; then pass finetune_blocks_lr_needs_blocks
else fail finetune_blocks_lr_needs_blocks "rc $rc: $(tail -2 "$TMP/u.err")"; fi
"$GRAFT" finetune --model $M --data $TRAIN --out "$TMP/u.onnx" "${IMG[@]}" \
    --train-from no_such_tensor >/dev/null 2>"$TMP/u.err"
rc=$?
if [ $rc = 1 ] && grep -q "no_such_tensor" "$TMP/u.err"; then pass finetune_train_from_unknown
else fail finetune_train_from_unknown "rc $rc: $(tail -2 "$TMP/u.err")"; fi
# --decode gpu needs nvJPEG and a model on a GPU: otherwise an error naming why, exit 1.
if ! "$GRAFT" devices 2>/dev/null | grep -q '^cuda:'; then
    for mode in gpu gpu+cpu; do
        "$GRAFT" finetune --model $M --data $TRAIN "${IMG[@]}" --out "$TMP/g.onnx" \
            --epochs 1 --decode $mode >/dev/null 2>"$TMP/g.err"
        rc=$?
        if [ $rc = 1 ] && grep -qE 'graft finetune: --decode gpu: the model runs on the CPU' "$TMP/g.err" &&
            [ ! -e "$TMP/g.onnx" ]; then pass "finetune_decode_${mode}_needs_a_gpu"
        else fail "finetune_decode_${mode}_needs_a_gpu" "rc $rc: $(tail -2 "$TMP/g.err")"; fi
    done
fi
# Where the wall time went: one line in the summary, the same phases in the run log's summary.
if grep -qE '^  wall time +[0-9.]+s: load [0-9.]+s, features and head [0-9.]+s, export checked on the validation data [0-9.]+s, export [0-9.]+s$' "$TMP/out.txt" &&
    grep -q '"seconds_fit"' "$TMP/report/metrics.jsonl" && grep -q '"seconds_check_export"' "$TMP/report/metrics.jsonl"
then pass finetune_phase_times
else fail finetune_phase_times "$(grep 'wall time' "$TMP/out.txt")"; fi
grep -E '^  (best epoch|val accuracy|time|skipped files|exported)' "$TMP/out.txt" | sed 's/^/  /'
# The run's metrics.jsonl against its documented schema (docs/metrics.md), typed options, one
# epoch record per epoch; its TensorBoard scalars and hparams against the records.
J=$TMP/report/metrics.jsonl
if python3 tools/check_metrics.py "$J" >"$TMP/schema.txt" 2>&1 &&
    [ "$(grep -c '^{"kind": "epoch", ' "$J")" = 6 ] &&
    head -1 "$J" | grep -qF '"resize": 0, "crop": 8, "grayscale": true, ' &&
    head -1 "$J" | grep -qF '"epochs": 6, ' && tail -1 "$J" | grep -qF '"status": "completed"'
then pass finetune_report_metrics_schema
else fail finetune_report_metrics_schema "$(grep -v ^PASS "$TMP/schema.txt" | head -3)"; fi
if python3 tools/check_tensorboard.py "$TMP/report" >"$TMP/tb.txt" 2>&1; then
    pass finetune_report_tensorboard_hparams
else fail finetune_report_tensorboard_hparams "$(grep ^FAIL "$TMP/tb.txt" | head -3)"; fi

if "$GRAFT" finetune --help | grep -q -- '--early-stop N' && "$GRAFT" finetune --help | grep -q default
then pass finetune_help; else fail finetune_help "options or defaults missing"; fi

# A config file; the command line wins over it.
printf '# digits\nmodel %s\ndata %s\nval %s\nepochs 50\nresize 0\ncrop 8\ngrayscale\n' $M $TRAIN $VAL \
    >"$TMP/ft.conf"
"$GRAFT" finetune --config "$TMP/ft.conf" --epochs 2 --out "$TMP/c.onnx" \
    --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376 >"$TMP/out.txt" 2>&1
if [ $? = 0 ] && [ "$(grep -c '^epoch [0-9]*/2:' "$TMP/out.txt")" = 2 ]; then pass finetune_config_file
else fail finetune_config_file "$(tail -2 "$TMP/out.txt")"; fi

expect_usage_error() { # NAME NEEDLE ARGS...: exit 2, one line on stderr naming NEEDLE, no output file
    local name=$1 needle=$2
    shift 2
    "$GRAFT" finetune "$@" >"$TMP/o.txt" 2>"$TMP/e.txt"
    local rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$TMP/e.txt")" = 1 ] && grep -q -- "$needle" "$TMP/e.txt"; then
        pass "$name"
    else fail "$name" "rc $rc: $(cat "$TMP/e.txt")"; fi
}
B=(--model $M --data $TRAIN --out "$TMP/x.onnx")
expect_usage_error finetune_err_unknown_option "--frob" "${B[@]}" --frob
expect_usage_error finetune_err_missing_required "required" --data $TRAIN
expect_usage_error finetune_err_missing_model "no such file" --model "$TMP/none.onnx" --data $TRAIN --out "$TMP/x.onnx"
expect_usage_error finetune_err_missing_data "no such file" --model $M --data "$TMP/none" --out "$TMP/x.onnx"
expect_usage_error finetune_err_epochs_zero "--epochs" "${B[@]}" --epochs 0
expect_usage_error finetune_err_lr_text "--lr" "${B[@]}" --lr abc
expect_usage_error finetune_err_no_value "needs a value" "${B[@]}" --batch
expect_usage_error finetune_err_optimizer "--optimizer" "${B[@]}" --optimizer adagrad
expect_usage_error finetune_err_head "--head" "${B[@]}" --head mlp:
expect_usage_error finetune_err_val_and_split "not both" "${B[@]}" --val $VAL --val-split 0.3
expect_usage_error finetune_err_resume_needs_checkpoint "--checkpoint" "${B[@]}" --resume
# --device cuda:0: a build without CUDA rejects the option; a CUDA build without a usable GPU
# fails at load naming why; with a GPU it runs (tools/gpu-check.sh's finetune runs cover that).
GPU_STATE=$("$GRAFT" devices --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
print("gpu" if d["gpu_usable"] else "nogpu" if d["cuda_built"] else "nocuda")')
if [ "$GPU_STATE" = nocuda ]; then
    expect_usage_error finetune_err_cuda "without CUDA" "${B[@]}" --device cuda:0
elif [ "$GPU_STATE" = nogpu ]; then
    "$GRAFT" finetune "${B[@]}" --device cuda:0 >"$TMP/o.txt" 2>"$TMP/e.txt"
    rc=$?
    if [ $rc = 1 ] && grep -q "no usable GPU" "$TMP/e.txt" && [ ! -f "$TMP/x.onnx" ]; then
        pass finetune_err_cuda
    else fail finetune_err_cuda "rc $rc: $(cat "$TMP/e.txt")"; fi
fi
expect_usage_error finetune_err_ridge_mlp "--head linear" "${B[@]}" --ridge --head mlp:16
expect_usage_error finetune_err_mean "--mean" "${B[@]}" --mean 1,2
expect_usage_error finetune_err_text_without_vocab "--vocab" --model $M --data tests/data/text/basic.csv --out "$TMP/x.onnx"
expect_usage_error finetune_err_stray_argument "unexpected" "${B[@]}" stray

# Resume: 3 epochs with a checkpoint, then to 6 with --resume, equals 6 straight.
R=(--model $M --data $TRAIN --val $VAL "${IMG[@]}" --seed 1)
"$GRAFT" finetune "${R[@]}" --epochs 6 --out "$TMP/s.onnx" >"$TMP/straight.txt" 2>&1
"$GRAFT" finetune "${R[@]}" --epochs 3 --checkpoint "$TMP/ck" --out "$TMP/p.onnx" >/dev/null 2>&1
"$GRAFT" finetune "${R[@]}" --epochs 6 --checkpoint "$TMP/ck" --resume --out "$TMP/r.onnx" \
    >"$TMP/resumed.txt" 2>&1
want=$(grep '^epoch 6/6:' "$TMP/straight.txt" | sed 's/, [0-9.]*s$//')
got=$(grep '^epoch 6/6:' "$TMP/resumed.txt" | sed 's/, [0-9.]*s$//')
if grep -q '^resuming from' "$TMP/resumed.txt" && ! grep -q '^epoch 3/6:' "$TMP/resumed.txt" &&
    [ -n "$want" ] && [ "$want" = "$got" ]; then pass finetune_resume_equals_straight
else fail finetune_resume_equals_straight "'$want' vs '$got'"; fi

# graft export rebuilds the same model from the checkpoint; predict agrees with the run's export.
"$GRAFT" export "${R[@]}" --epochs 6 --checkpoint "$TMP/ck" --out "$TMP/e.onnx" >"$TMP/exp.txt" 2>&1
rc=$?
"$GRAFT" predict --model "$TMP/r.onnx" --format csv "$VAL/five" >"$TMP/p1.csv" 2>/dev/null
"$GRAFT" predict --model "$TMP/e.onnx" --format csv "$VAL/five" >"$TMP/p2.csv" 2>/dev/null
if [ $rc = 0 ] && [ -s "$TMP/p1.csv" ] && cmp -s "$TMP/p1.csv" "$TMP/p2.csv"; then
    pass export_from_checkpoint
else fail export_from_checkpoint "rc $rc: $(tail -2 "$TMP/exp.txt")"; fi
"$GRAFT" export --help >"$TMP/eh.txt" 2>&1
if [ $? = 0 ] && grep -q -- '--checkpoint' "$TMP/eh.txt" && head -1 "$TMP/eh.txt" | grep -q '^usage: graft export' &&
    ! head -1 "$TMP/eh.txt" | grep -q 'graft finetune'; then pass export_help
else fail export_help "$(head -3 "$TMP/eh.txt")"; fi
"$GRAFT" export "${R[@]}" --out "$TMP/e2.onnx" >/dev/null 2>"$TMP/e.txt"
if [ $? = 2 ] && grep -q checkpoint "$TMP/e.txt"; then pass export_needs_checkpoint
else fail export_needs_checkpoint "$(cat "$TMP/e.txt")"; fi
"$GRAFT" export "${R[@]}" --checkpoint "$TMP/nothing" --out "$TMP/e3.onnx" >/dev/null 2>"$TMP/e.txt"
if [ $? = 2 ] && grep -q "no checkpoint" "$TMP/e.txt"; then pass export_missing_checkpoint
else fail export_missing_checkpoint "$(cat "$TMP/e.txt")"; fi

# Every option with a good value is accepted (one short run each); numbers out of range are not.
GOOD=("--val-split 0.3" "--cut auto" "--head mlp:16,8" "--activation gelu" "--dropout 0.1"
    "--batch 8" "--lr 0.05" "--optimizer sgd" "--optimizer adam" "--optimizer lamb" "--momentum 0.5"
    "--scheduler step" "--scheduler cosine --warmup 2" "--scheduler onecycle" "--scheduler plateau"
    "--weight-decay 0" "--label-smoothing 0.1" "--clip 1" "--accumulate 2" "--precision bf16"
    "--precision fp16" "--precision fp32" "--device cpu" "--augment" "--ridge" "--cache $TMP/cache"
    "--no-cache" "--seed 7" "--threads 1" "--early-stop 1" "--no-softmax" "--fp16-weights")
ok=0
for opt in "${GOOD[@]}"; do
    # shellcheck disable=SC2086
    if "$GRAFT" finetune --model $M --data $TRAIN --out "$TMP/g.onnx" "${IMG[@]}" --epochs 2 $opt \
        >"$TMP/g.txt" 2>&1 && [ -s "$TMP/g.onnx" ]; then ok=$((ok + 1))
    else echo "  $opt failed: $(tail -1 "$TMP/g.txt")"; fi
    rm -f "$TMP/g.onnx"
done
if [ $ok = ${#GOOD[@]} ]; then pass finetune_every_option_accepted
else fail finetune_every_option_accepted "$ok of ${#GOOD[@]}"; fi
BADV=("--epochs -1" "--batch 0" "--accumulate 0" "--early-stop -2" "--lr 0" "--momentum 2"
    "--weight-decay -1" "--clip -1" "--label-smoothing 2" "--dropout 1" "--warmup -3"
    "--val-split 1" "--threads -1" "--max-len 2" "--resize -1" "--crop 0" "--std 1,2,x"
    "--activation swish" "--scheduler linear" "--pooling max" "--precision int8" "--device tpu")
ok=0
for opt in "${BADV[@]}"; do
    # shellcheck disable=SC2086
    "$GRAFT" finetune "${B[@]}" $opt >/dev/null 2>"$TMP/b.txt"
    if [ $? = 2 ] && [ "$(wc -l <"$TMP/b.txt")" = 1 ]; then ok=$((ok + 1))
    else echo "  $opt: $(cat "$TMP/b.txt")"; fi
done
if [ $ok = ${#BADV[@]} ]; then pass finetune_every_bad_value_rejected
else fail finetune_every_bad_value_rejected "$ok of ${#BADV[@]}"; fi

# Text: a CSV through the WordPiece tokenizer into the tiny BERT (its vocabulary is 1000 ids, so
# the test's vocab keeps the first 1000 entries).
BERT=${GEN:-tests/data/gen}/bert_tiny_decomposed.onnx
if [ -f "$BERT" ]; then
    head -1000 tests/data/tokenizer/vocab.txt >"$TMP/vocab.txt"
    "$GRAFT" finetune --model "$BERT" --data tests/data/text/basic.csv --vocab "$TMP/vocab.txt" \
        --max-len 12 --pooling mean --val-split 0 --epochs 3 --out "$TMP/t.onnx" >"$TMP/t.txt" 2>&1
    if [ $? = 0 ] && [ -s "$TMP/t.onnx" ] && grep -q 'skipped files     8' "$TMP/t.txt"; then
        pass finetune_text_csv
    else fail finetune_text_csv "$(tail -3 "$TMP/t.txt")"; fi
else echo "SKIP finetune_text_csv: $BERT not generated"; fi

# Ctrl-C: the current step ends, the last checkpoint is written, exit 130.
"$GRAFT" finetune "${R[@]}" --epochs 100000 --checkpoint "$TMP/ci" --out "$TMP/i.onnx" \
    >"$TMP/int.txt" 2>&1 &
pid=$!
for _ in $(seq 50); do grep -q '^epoch 2/' "$TMP/int.txt" && break; sleep 0.2; done
kill -INT $pid
wait $pid
rc=$?
if [ $rc = 130 ] && [ -s "$TMP/ci/last.safetensors" ] && grep -q "checkpoint written to" "$TMP/int.txt" &&
    [ ! -e "$TMP/i.onnx" ]; then pass finetune_ctrl_c_checkpoints
else fail finetune_ctrl_c_checkpoints "rc $rc: $(tail -2 "$TMP/int.txt")"; fi
# Blocks under an MLP head (with and without dropout) as one step graph, and with the head and
# its loss in the blocks' pause (GRAFT_STEP_GRAPH=0): the same epochs to the digit.
for d in 0 0.3; do
    sg=(--model $M --data $TRAIN --val $VAL "${IMG[@]}" --seed 1 --head mlp:64 --dropout $d
        --no-cache --epochs 5 --batch 16 --lr 0.01 --device cpu
        --train-from /backbone/backbone.6/MaxPool_output_0)
    "$GRAFT" finetune "${sg[@]}" --out "$TMP/sg1.onnx" >"$TMP/sg1.txt" 2>&1
    GRAFT_STEP_GRAPH=0 "$GRAFT" finetune "${sg[@]}" --out "$TMP/sg0.onnx" >"$TMP/sg0.txt" 2>&1
    a=$(grep '^epoch 5/5' "$TMP/sg1.txt" | sed 's/, [0-9.]*s$//')
    b=$(grep '^epoch 5/5' "$TMP/sg0.txt" | sed 's/, [0-9.]*s$//')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "step_graph_equals_pause_mlp_dropout_$d"
    else fail "step_graph_equals_pause_mlp_dropout_$d" "'$a' vs '$b': $(tail -1 "$TMP/sg1.txt")"; fi
done
exit 0
