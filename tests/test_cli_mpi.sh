#!/usr/bin/env bash
# tests/test_cli_mpi.sh GRAFT: data-parallel finetune over MPI (docs/distributed.md): 2 ranks
# (mpirun -np 2 and --nproc 2) train the head a one-process run trains, within 1e-5 relative; a
# killed or hung rank ends the run with an error within a timeout; a 2-rank checkpoint resumes
# with 1 and with 3 ranks; launches graft cannot serve are refused clearly. SKIP without mpirun.
set -u
GRAFT=$(realpath "$1")
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
M=models/digits_cnn.onnx
TRAIN=examples/digits/train
VAL=examples/digits/val
IMG=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
# CI runs as root on 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --oversubscribe --bind-to none)

# torchrun's variables without a way to reach the other ranks: a clear error, whatever the build.
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$GRAFT" finetune --model $M --data $TRAIN "${IMG[@]}" \
    --epochs 1 --no-cache --out "$TMP/t.onnx" >"$TMP/t.txt" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "torchrun" "$TMP/t.txt" && [ ! -e "$TMP/t.onnx" ]; then
    pass torchrun_variables_refused
else fail torchrun_variables_refused "rc $rc: $(tail -2 "$TMP/t.txt")"; fi

# --nproc without mpirun on the PATH: exit 2 and what to install.
PATH=/nonexistent "$GRAFT" finetune --model $M --data $TRAIN "${IMG[@]}" --nproc 2 \
    --out "$TMP/n.onnx" >"$TMP/n.txt" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "needs mpirun on the PATH" "$TMP/n.txt"; then pass nproc_without_mpirun
else fail nproc_without_mpirun "rc $rc: $(tail -2 "$TMP/n.txt")"; fi

# --nproc with an mpirun that is not Open MPI's (here one that starts a lone process): refused,
# never N independent runs.
mkdir -p "$TMP/fake"
printf '#!/bin/sh\nwhile [ $# -gt 0 ] && ! [ -f "$1" ]; do shift; done\nexec "$@"\n' >"$TMP/fake/mpirun"
chmod +x "$TMP/fake/mpirun"
PATH="$TMP/fake:$PATH" "$GRAFT" finetune --model $M --data $TRAIN "${IMG[@]}" --nproc 2 \
    --epochs 1 --no-cache --out "$TMP/f.onnx" >"$TMP/f.txt" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "is the mpirun on the PATH Open MPI's" "$TMP/f.txt" &&
    [ ! -e "$TMP/f.onnx" ]; then pass nproc_foreign_mpirun_refused
else fail nproc_foreign_mpirun_refused "rc $rc: $(tail -2 "$TMP/f.txt")"; fi

if ! command -v mpirun >/dev/null; then
    for t in dist_3_ranks two_ranks_equal_one nproc_2_equal_one short_batches_equal_one \
        dropout_equals_one train_from_blocks_equal_one feature_cache_per_rank killed_rank_fails hung_rank_times_out \
        nproc_ctrl_c_writes_checkpoint resume_2_ranks_with_1 resume_2_ranks_with_3; do
        echo "SKIP $t: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"
    done
    exit 0
fi
if "$GRAFT" finetune --help 2>&1 | grep -q nproc && ! grep -q "GRAFT_HAVE_MPI 1" \
    "$(dirname "$GRAFT")/graft_config.h" 2>/dev/null; then
    echo "SKIP mpi: this graft was built without MPI (meson -Dmpi=enabled)"
    exit 0
fi

# The process group's collectives across 3 real ranks (rank 0 prints; tests/test_dist.c).
UNIT=$(dirname "$GRAFT")/tests/test_dist
if [ -x "$UNIT" ]; then
    timeout 60 "${MPIRUN[@]}" -np 3 "$UNIT" >"$TMP/unit.txt" 2>&1
    rc=$?
    sed 's/^\(PASS\|FAIL\) /\1 dist_3_ranks_/' "$TMP/unit.txt" | grep -E '^(PASS|FAIL) '
    [ $rc = 0 ] || fail dist_3_ranks "exit $rc: $(tail -3 "$TMP/unit.txt")"
fi

# Two runs' trained heads (and optimizer state) equal within 1e-5 relative (the checkpoints).
same_head() { "$PY" tools/compare_checkpoints.py "$1" "$2"; }
R=(--model $M --data $TRAIN --val $VAL "${IMG[@]}" --seed 1 --head mlp:64 --no-cache)

"$GRAFT" finetune "${R[@]}" --epochs 4 --checkpoint "$TMP/one" --out "$TMP/one.onnx" \
    >"$TMP/one.txt" 2>&1 || fail one_process "$(tail -3 "$TMP/one.txt")"
timeout 120 "${MPIRUN[@]}" -np 2 "$GRAFT" finetune "${R[@]}" --epochs 4 --checkpoint "$TMP/two" \
    --out "$TMP/two.onnx" >"$TMP/two.txt" 2>&1
rc=$?
d=$(same_head "$TMP/one/last.safetensors" "$TMP/two/last.safetensors" 2>&1)
same=$?
if [ $rc = 0 ] && [ $same = 0 ] && [ -s "$TMP/two.onnx" ] &&
    [ "$(grep -c '^summary' "$TMP/two.txt")" = 1 ]; then
    pass "two_ranks_equal_one ($d)"
else fail two_ranks_equal_one "rc $rc, $d: $(tail -3 "$TMP/two.txt")"; fi

timeout 120 "$GRAFT" finetune "${R[@]}" --epochs 4 --nproc 2 --checkpoint "$TMP/np" \
    --out "$TMP/np.onnx" >"$TMP/np.txt" 2>&1
rc=$?
d=$(same_head "$TMP/one/last.safetensors" "$TMP/np/last.safetensors" 2>&1)
same=$?
if [ $rc = 0 ] && [ $same = 0 ] && [ -s "$TMP/np.onnx" ]; then pass "nproc_2_equal_one ($d)"
else fail nproc_2_equal_one "rc $rc, $d: $(tail -3 "$TMP/np.txt")"; fi

# NAME TAG ARGS...: finetune ARGS in one process and under mpirun -np 2 (checkpoints TAG1, TAG2):
# the same trained weights.
one_vs_two() {
    local name=$1 tag=$2
    shift 2
    "$GRAFT" finetune "$@" --checkpoint "$TMP/${tag}1" --out "$TMP/${tag}1.onnx" \
        >"$TMP/${tag}1.txt" 2>&1
    timeout 120 "${MPIRUN[@]}" -np 2 "$GRAFT" finetune "$@" --checkpoint "$TMP/${tag}2" \
        --out "$TMP/${tag}2.onnx" >"$TMP/${tag}2.txt" 2>&1
    local rc=$? d same
    d=$(same_head "$TMP/${tag}1/last.safetensors" "$TMP/${tag}2/last.safetensors" 2>&1)
    same=$?
    if [ $rc = 0 ] && [ $same = 0 ]; then pass "$name ($d)"
    else fail "$name" "rc $rc, $d: $(tail -3 "$TMP/${tag}2.txt")"; fi
}

# Batches of 7 (the last of one sample: a rank with no rows), accumulation, clipping, SGD and
# label smoothing: still the one-process head.
one_vs_two short_batches_equal_one s "${R[@]}" --epochs 3 --batch 7 --accumulate 2 --clip 0.5 \
    --optimizer sgd --lr 0.05 --label-smoothing 0.1

# Dropout after two hidden layers: each rank draws the one-process run's masks for its rows.
one_vs_two dropout_equals_one d "${R[@]}" --epochs 3 --batch 16 --head mlp:64,32 --dropout 0.3

# Fine-tuned blocks (--train-from) with the head: the blocks' weights too.
one_vs_two train_from_blocks_equal_one b "${R[@]}" --epochs 2 --batch 16 --lr 0.01 --device cpu \
    --train-from /backbone/backbone.6/MaxPool_output_0

# Each rank caches its share's features in its own file; a second run reads them all back.
C=(--model $M --data $TRAIN --val $VAL "${IMG[@]}" --seed 1 --head mlp:64 --epochs 2
    --cache "$TMP/cache")
for k in 1 2; do
    timeout 120 "${MPIRUN[@]}" -np 2 "$GRAFT" finetune "${C[@]}" --checkpoint "$TMP/c$k" \
        --out "$TMP/c$k.onnx" >"$TMP/c$k.txt" 2>&1 || fail "cache_run_$k" "$(tail -3 "$TMP/c$k.txt")"
done
n=$(find "$TMP/cache" -name '*.cache*' | wc -l)
d=$(same_head "$TMP/c1/last.safetensors" "$TMP/c2/last.safetensors" 2>&1)
same=$?
if [ "$n" -ge 4 ] && grep -q '; 0 through the backbone' "$TMP/c2.txt" && [ $same = 0 ]; then
    pass "feature_cache_per_rank ($n files)"
else fail feature_cache_per_rank "$n files, $d: $(grep '^backbone:' "$TMP/c2.txt")"; fi

# The rank with OMPI_COMM_WORLD_RANK=$2 among mpirun $1's children.
rank_pid() {
    for c in $(pgrep -P "$1"); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$c"
            return
        fi
    done
}
# Start a long run, wait for its training, stop rank 1 with signal $1; the run must end
# non-zero within 60 s.
long_run() {
    GRAFT_DIST_TIMEOUT=${3:-1800} timeout 60 "${MPIRUN[@]}" -np 2 "$GRAFT" finetune "${R[@]}" \
        --epochs 1000000 --out "$TMP/k.onnx" >"$TMP/$2.txt" 2>&1 &
    local job=$! pid="" i
    for i in $(seq 100); do
        pid=$(rank_pid "$(pgrep -n -P $job mpirun || echo $job)" 1)
        [ -n "$pid" ] && grep -q '^epoch 2/' "$TMP/$2.txt" 2>/dev/null && break
        sleep 0.2
    done
    local t0=$SECONDS
    [ -n "$pid" ] && kill "-$1" "$pid"
    wait $job
    echo "$? $((SECONDS - t0)) $pid"
}
read -r rc took pid < <(long_run KILL killed)
if [ -n "$pid" ] && [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$took" -lt 30 ] &&
    grep -q "exited on signal 9" "$TMP/killed.txt"; then
    pass "killed_rank_fails (exit $rc after ${took}s)"
else fail killed_rank_fails "pid '$pid', rc $rc after ${took}s: $(tail -4 "$TMP/killed.txt")"; fi

# A rank that hangs (stopped): the others' collectives give up after GRAFT_DIST_TIMEOUT.
read -r rc took pid < <(long_run STOP hung 3)
if [ -n "$pid" ] && [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$took" -lt 30 ] &&
    grep -q "did not arrive within 3 s" "$TMP/hung.txt"; then
    pass "hung_rank_times_out (exit $rc after ${took}s)"
else fail hung_rank_times_out "pid '$pid', rc $rc after ${took}s: $(tail -4 "$TMP/hung.txt")"; fi
[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null

# Ctrl-C on `graft finetune --nproc 2` (SIGINT to graft, which mpirun's ranks get as SIGUSR1):
# the ranks stop together at one step, rank 0 writes the checkpoint, the exit status is 130.
"$GRAFT" finetune "${R[@]}" --nproc 2 --epochs 1000000 --checkpoint "$TMP/int" \
    --out "$TMP/int.onnx" >"$TMP/int.txt" 2>&1 &
job=$!
for i in $(seq 100); do
    grep -q '^epoch 2/' "$TMP/int.txt" 2>/dev/null && break
    sleep 0.2
done
kill -INT $job
t0=$SECONDS
timeout 60 tail --pid=$job -f /dev/null
wait $job
rc=$?
if [ $rc = 130 ] && [ $((SECONDS - t0)) -lt 30 ] &&
    grep -q "checkpoint written to $TMP/int/last.safetensors" "$TMP/int.txt" &&
    [ "$(grep -c 'checkpoint written' "$TMP/int.txt")" = 1 ]; then
    pass nproc_ctrl_c_writes_checkpoint
else fail nproc_ctrl_c_writes_checkpoint "rc $rc: $(tail -3 "$TMP/int.txt")"; fi

# A 2-rank checkpoint after 2 epochs resumes with 1 and with 3 ranks to the 4-epoch head.
timeout 120 "${MPIRUN[@]}" -np 2 "$GRAFT" finetune "${R[@]}" --epochs 2 --checkpoint "$TMP/r2" \
    --out "$TMP/r2.onnx" >"$TMP/r2.txt" 2>&1 || fail resume_first_part "$(tail -3 "$TMP/r2.txt")"
for n in 1 3; do
    cp -r "$TMP/r2" "$TMP/r2_$n"
    if [ $n = 1 ]; then L=(); else L=(timeout 120 "${MPIRUN[@]}" -np $n); fi
    "${L[@]}" "$GRAFT" finetune "${R[@]}" --epochs 4 --checkpoint "$TMP/r2_$n" --resume \
        --out "$TMP/r2_$n.onnx" >"$TMP/r2_$n.txt" 2>&1
    rc=$?
    d=$(same_head "$TMP/one/last.safetensors" "$TMP/r2_$n/last.safetensors" 2>&1)
    same=$?
    if [ $rc = 0 ] && [ $same = 0 ] && grep -q "resuming from" "$TMP/r2_$n.txt"; then
        pass "resume_2_ranks_with_$n ($d)"
    else fail "resume_2_ranks_with_$n" "rc $rc, $d: $(tail -3 "$TMP/r2_$n.txt")"; fi
done
