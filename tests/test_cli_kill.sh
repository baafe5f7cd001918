#!/usr/bin/env bash
# tests/test_cli_kill.sh GRAFT: `graft finetune --checkpoint` killed with SIGKILL at 32 (up to 96)
# pseudo-random moments (a fixed seed; GRAFT_TEST_WRITE_PAUSE_MS holds every checkpoint write
# open a few milliseconds, so many kills land inside one), resumed each time: the exported head
# is byte-identical to the uninterrupted run's, every epoch's metrics and the checkpoints' tensors
# are the same, and no temporary file is left behind.
set -u
GRAFT=$(realpath "$1")
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
KILLS=32
RANDOM=16 # the kill moments' seed
DATA=examples/digits/val
IMG=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
R=(--model models/digits_cnn.onnx --data $DATA --val-split 0.25 "${IMG[@]}"
    --seed 1 --batch 4 --head mlp:32 --epochs 40 --cache "$TMP/cache")
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
if [ ! -d "$DATA" ]; then echo "SKIP cli_kill: $DATA missing"; exit 0; fi
export GRAFT_TEST_WRITE_PAUSE_MS=5
# What a run leaves: the epoch lines without their times, and each checkpoint's epoch and tensor
# checksums (equal checksums: equal tensors).
epochs() { sed -n 's/^\(epoch [0-9]*\/[0-9]*: .*\), [0-9.]*s$/\1/p' "$@" | sort -u; }
sums() { # DIR
    for w in best last; do
        "$PY" -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
print(sys.argv[2], m["epoch"], *sorted(k + "=" + v for k, v in m.items() if k.startswith("checksum.")))' \
            "$1/$w.safetensors" $w
    done
}

# Twice uninterrupted (the second with the features cached, as every later run has them): the
# same export both times, and the second's length sets the kill moments.
"$GRAFT" finetune "${R[@]}" --checkpoint "$TMP/cold" --out "$TMP/cold.onnx" >"$TMP/cold.txt" 2>&1
t0=$(date +%s%N)
"$GRAFT" finetune "${R[@]}" --checkpoint "$TMP/whole" --out "$TMP/whole.onnx" >"$TMP/whole.txt" 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "  uninterrupted run: ${ms}ms"
if [ $rc != 0 ] || ! cmp -s "$TMP/cold.onnx" "$TMP/whole.onnx"; then
    fail cli_kill_uninterrupted_runs_agree "rc $rc: $(tail -3 "$TMP/whole.txt")"
    exit 0
fi
# Moments from 0 to twice an attempt's share of the run plus the start-up (loading the model, the
# checkpoint and the cached features), so that most attempts train a little and some only start.
span=$((2 * ms / KILLS + 60))
in_write=0 resumed=0 stale=0 i=0 idle=0 last_seen=
# KILLS moments, and more (up to 3x) while too few have landed inside a write or after a
# checkpoint: on a loaded machine the start-up takes longer and early moments only start.
while [ $i -lt $KILLS ] ||
    { [ $i -lt $((3 * KILLS)) ] && { [ $in_write -lt 3 ] || [ $resumed -lt 10 ]; }; }; do
    i=$((i + 1))
    args=(--checkpoint "$TMP/ck" --out "$TMP/k.onnx")
    [ -e "$TMP/ck/last.safetensors" ] && args+=(--resume) && resumed=$((resumed + 1))
    "$GRAFT" finetune "${R[@]}" "${args[@]}" >>"$TMP/killed.txt" 2>&1 &
    pid=$!
    d=$(((RANDOM * 32768 + RANDOM) % span))
    sleep "$((d / 1000)).$(printf '%03d' $((d % 1000)))"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    # Four attempts in a row that left no new last checkpoint: the start-up or a checkpoint's
    # write (it syncs) takes longer than the moments reach, as on a machine loaded with CPU or
    # disk work, so the next moments reach a third further, up to three uninterrupted runs.
    e=$(stat -c %y "$TMP/ck/last.safetensors" 2>/dev/null)
    if [ "$e" = "$last_seen" ]; then idle=$((idle + 1)); else idle=0; fi
    last_seen=$e
    [ $idle -ge 4 ] && [ $span -lt $((3 * ms + 60)) ] && span=$((span * 4 / 3)) && idle=0
    n=$(find "$TMP/ck" -name '*.tmp.*' 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] && in_write=$((in_write + 1))
    [ "$n" -gt 1 ] && stale=$((stale + 1))
done
args=(--checkpoint "$TMP/ck" --out "$TMP/k.onnx")
[ -e "$TMP/ck/last.safetensors" ] && args+=(--resume)
"$GRAFT" finetune "${R[@]}" "${args[@]}" >"$TMP/final.txt" 2>&1
rc=$?
echo "  $i kills, $in_write inside a checkpoint write, $resumed resumed (moments up to ${span}ms)"
if [ $rc = 0 ] && cmp -s "$TMP/whole.onnx" "$TMP/k.onnx"; then pass cli_kill_export_identical
else fail cli_kill_export_identical "rc $rc: $(tail -3 "$TMP/final.txt")"; fi
if [ "$(epochs "$TMP/whole.txt" | wc -l)" = 40 ] &&
    cmp -s <(epochs "$TMP/whole.txt") <(epochs "$TMP/killed.txt" "$TMP/final.txt"); then
    pass cli_kill_epoch_metrics_identical
else
    fail cli_kill_epoch_metrics_identical "$(diff <(epochs "$TMP/whole.txt") \
        <(epochs "$TMP/killed.txt" "$TMP/final.txt") | head -4)"
fi
if cmp -s <(sums "$TMP/whole") <(sums "$TMP/ck"); then pass cli_kill_checkpoints_identical
else fail cli_kill_checkpoints_identical "$(diff <(sums "$TMP/whole") <(sums "$TMP/ck") | cut -c1-200)"; fi
left=$(find "$TMP/ck" -name '*.tmp.*' -printf '%P ')
# Between kills two temporaries may be there at once (a killed write of best and one of last, or a
# kill before the next run got as far as cleaning): what must hold is that none is left at the end.
echo "  $stale times more than one temporary between kills"
if [ -z "$left" ]; then pass cli_kill_no_temporary_left
else fail cli_kill_no_temporary_left "left at the end: '$left'"; fi
# A kill while the head is exported may leave <out>.tmp.*; the next export (the final run's)
# removes it (src/onnx/writer.c locks its temporary; core/temp_files.c removes unlocked ones).
left=$(find "$TMP" -maxdepth 1 -name 'k.onnx.tmp.*' -printf '%P ')
if [ -z "$left" ]; then pass cli_kill_no_export_temporary_left
else fail cli_kill_no_export_temporary_left "a kill during the export left $left"; fi
if [ $in_write -ge 3 ] && [ $resumed -ge 10 ]; then pass cli_kill_moments_cover_writes
else fail cli_kill_moments_cover_writes "$in_write kills inside a write, $resumed resumed"; fi
if ! grep -q 'damaged\|no checksum' "$TMP/killed.txt" "$TMP/final.txt"; then
    pass cli_kill_no_damaged_checkpoint
else fail cli_kill_no_damaged_checkpoint "$(grep -h 'damaged\|no checksum' "$TMP/killed.txt" | head -2)"; fi
exit 0
