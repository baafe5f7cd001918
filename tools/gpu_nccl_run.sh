#!/usr/bin/env bash
# tools/gpu_nccl_run.sh: the NCCL backend on one GPU (docs/distributed.md; issue 18's GPU
# check): the collectives over NCCL in a group of one; the digits head and its fine-tuned blocks
# trained by a torchrun-style launch over NCCL equal the plain run's (checkpoints within 1e-5);
# torchrun itself (--no-python) as the launcher; two ranks on one GPU refused clearly.
# On the GPU machine (carry .gpu): source .gpu/env.sh && bash tools/gpu_nccl_run.sh
. tools/gpu_run_common.sh
gpu_setup
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
ONE=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517
    GRAFT_DIST_BACKEND=nccl)
"${ONE[@]}" $B/tests/test_dist >"$OUT/dist_nccl.log" 2>&1
summary "dist over NCCL (1 rank)" $? "$OUT/dist_nccl.log"
$B/tests/test_rendezvous >"$OUT/rendezvous.log" 2>&1
summary rendezvous $? "$OUT/rendezvous.log"
# TrainLoss's grad_scale input (a rank's share per run) on the GPU against the CPU
$B/tests/test_train_loss --device cuda:0 >"$OUT/train_loss.log" 2>&1
summary "train_loss cuda" $? "$OUT/train_loss.log"

IMG=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
R=($B/graft finetune --model models/digits_cnn.onnx --data examples/digits/train
    --val examples/digits/val "${IMG[@]}" --seed 1 --no-cache --device cuda)
# NAME ARGS...: a plain run on cuda:0 and one launched as rank 0 of 1 over NCCL: the same weights.
same_as_plain() {
    local name=$1
    shift
    rm -rf "/tmp/$name-plain" "/tmp/$name-nccl"
    "${R[@]}" "$@" --checkpoint "/tmp/$name-plain" --out "/tmp/$name-plain.onnx" \
        >"$OUT/$name-plain.log" 2>&1 || fail "$name" "plain: $(tail -2 "$OUT/$name-plain.log")"
    GRAFT_LOG=info "${ONE[@]}" "${R[@]}" "$@" --checkpoint "/tmp/$name-nccl" \
        --out "/tmp/$name-nccl.onnx" >"$OUT/$name-nccl.log" 2>&1
    local rc=$? d same
    d=$(python3 tools/compare_checkpoints.py "/tmp/$name-plain/last.safetensors" \
        "/tmp/$name-nccl/last.safetensors" 2>&1)
    same=$?
    if [ $rc = 0 ] && [ $same = 0 ]; then
        pass "$name ($d)"
    else fail "$name" "rc $rc, $d: $(tail -3 "$OUT/$name-nccl.log")"; fi
    grep -h -m3 -i "nccl\|device \|summed" "$OUT/$name-nccl.log" | cut -c1-160
}
# resident on the GPU by default: the device gradients summed there over NCCL
same_as_plain head_nccl --head mlp:64 --epochs 4
same_as_plain blocks_nccl --epochs 4 --train-from /backbone/backbone.6/MaxPool_output_0
for n in head_nccl blocks_nccl; do
    grep -q "gradients are summed where they are" "$OUT/$n-nccl.log" && pass "$n resident" ||
        fail "$n resident" "no 'summed where they are' line"
done
# the host path (GRAFT_DIST_RESIDENT=0): host copies summed
export GRAFT_DIST_RESIDENT=0
same_as_plain head_nccl_host --head mlp:64 --epochs 4
same_as_plain blocks_nccl_host --epochs 4 --train-from /backbone/backbone.6/MaxPool_output_0
unset GRAFT_DIST_RESIDENT

# --nproc without mpirun (none on the GPU machine): graft starts its ranks itself over NCCL; one
# rank (GRAFT_DIST_BACKEND=nccl makes --nproc 1 a group), and 2 on one GPU refused.
rm -rf /tmp/np1
# (PATH without mpirun, which the GPU machine has: graft's own ranks)
timeout 300 env PATH=/nonexistent GRAFT_DIST_BACKEND=nccl "${R[@]}" --head mlp:64 --epochs 4 --nproc 1 \
    --checkpoint /tmp/np1 --out /tmp/np1.onnx >"$OUT/nproc1.log" 2>&1
rc=$?
d=$(python3 tools/compare_checkpoints.py /tmp/head_nccl-plain/last.safetensors \
    /tmp/np1/last.safetensors 2>&1)
same=$?
if [ $rc = 0 ] && [ $same = 0 ]; then pass "nproc_1_over_nccl ($d)"
else fail nproc_1_over_nccl "rc $rc, $d: $(tail -3 "$OUT/nproc1.log")"; fi
timeout 60 env PATH=/nonexistent "${R[@]}" --epochs 1 --nproc 2 --out /tmp/np2.onnx >"$OUT/nproc2.log" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "fewer GPUs" "$OUT/nproc2.log"; then pass nproc_2_one_gpu_refused
else fail nproc_2_one_gpu_refused "rc $rc: $(tail -2 "$OUT/nproc2.log")"; fi

# torchrun as the launcher (--no-python runs graft itself), one rank.
if command -v torchrun >/dev/null; then
    rm -rf /tmp/tr
    GRAFT_DIST_BACKEND=nccl timeout 300 torchrun --no-python --nproc-per-node 1 \
        --master-port 29518 "${R[@]}" --head mlp:64 --epochs 4 --checkpoint /tmp/tr \
        --out /tmp/tr.onnx >"$OUT/torchrun.log" 2>&1
    rc=$?
    d=$(python3 tools/compare_checkpoints.py /tmp/head_nccl-plain/last.safetensors \
        /tmp/tr/last.safetensors 2>&1)
    same=$?
    if [ $rc = 0 ] && [ $same = 0 ]; then
        pass "torchrun_one_rank ($d)"
    else fail torchrun_one_rank "rc $rc, $d: $(tail -3 "$OUT/torchrun.log")"; fi
    # two ranks on one GPU: NCCL cannot; a clear error from each rank, no hang
    timeout 120 torchrun --no-python --nproc-per-node 2 --master-port 29519 "${R[@]}" \
        --epochs 1 --out /tmp/tr2.onnx >"$OUT/torchrun2.log" 2>&1
    rc=$?
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "at most one rank per device" "$OUT/torchrun2.log"; then
        pass torchrun_two_ranks_one_gpu_refused
    else fail torchrun_two_ranks_one_gpu_refused "rc $rc: $(grep -m2 graft "$OUT/torchrun2.log")"; fi
else
    echo "SKIP torchrun: not installed"
fi
echo "done in $(since)"
