# tools/gpu_run_common.sh: what the tools/gpu_*_run.sh scripts share (sourced, not run): the
# build and model folders, $OUT made, `since` (seconds since the start), `summary NAME RC LOG`
# (pass/fail counts and the first failures), `gpu_setup` (meson for the H200's sm_90) and
# `digits_train_from_on_both` (the digits demo's `--train-from` on the CPU and on cuda:0, there
# resident and with GRAFT_RESIDENT=0).
set -u
T0=$(date +%s)
B=/tmp/build
G=/tmp/gen
mkdir -p "$OUT"
since() { echo "$(($(date +%s) - T0))s"; }
summary() { echo "$1: rc=$2 pass $(grep -c '^PASS' "$3") fail $(grep -c '^FAIL' "$3")"; grep -m8 '^FAIL' "$3" | cut -c1-300; }
# The packages beyond ../shared/device/debs.txt that graft needs (tools/gpu_prepare.sh puts them
# in .gpu), unpacked into env.sh's root even when a warm machine's root was made without them.
gpu_extra_debs() {
    local f
    for f in .gpu/libjansson*.deb .gpu/libicu*.deb; do
        [ -f "$f" ] || { echo "no $f: run tools/gpu_prepare.sh here first"; exit 1; }
        dpkg -x "$f" /tmp/sysroot
    done
    sed -i "s|^prefix=.*|prefix=/tmp/sysroot/usr|" /tmp/sysroot/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
}
gpu_setup() {
    gpu_extra_debs
    [ -f $B/build.ninja ] && return
    rm -rf $B
    meson setup $B --buildtype=release -Dcuda=enabled -Dgpu_arch=90 >"$OUT/setup.log" 2>&1 ||
        { tail -30 "$OUT/setup.log"; exit 1; }
}
digits_train_from_on_both() {
    local img=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
    for d in cpu cuda:0 cuda:0-host; do
        GRAFT_RESIDENT=$([ $d = cuda:0-host ] && echo 0 || echo 1) $B/graft finetune --model models/digits_cnn.onnx --data examples/digits/train \
            --val examples/digits/val --out "$OUT/digits_$d.onnx" "${img[@]}" --lr 0.01 \
            --weight-decay 1e-4 --epochs 200 --device ${d%-host} \
            --train-from /backbone/backbone.6/MaxPool_output_0 >"$OUT/finetune_$d.log" 2>&1
        echo "finetune --train-from on $d: rc=$? $(grep -E '^  val accuracy' "$OUT/finetune_$d.log")"
        grep -E '^epoch 200/|^  (device|time) |blocks after' "$OUT/finetune_$d.log"
    done
}
# The same blocks on cuda:0 (resident there) with AdamW: 30 epochs straight, and 15 then
# --resume to 30 from the checkpoint (the weights and optimizer state brought back to the host,
# saved, loaded and uploaded again): the two last epochs' lines must be the same.
resume_on_gpu() {
    local img=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
    local f=($B/graft finetune --model models/digits_cnn.onnx --data examples/digits/train
        --val examples/digits/val "${img[@]}" --lr 0.01 --weight-decay 1e-4 --optimizer adamw
        --device cuda:0 --train-from /backbone/backbone.6/MaxPool_output_0)
    rm -rf /tmp/rA /tmp/rB
    "${f[@]}" --out /tmp/ra.onnx --epochs 30 --checkpoint /tmp/rA >"$OUT/resume_a.log" 2>&1
    "${f[@]}" --out /tmp/rb.onnx --epochs 15 --checkpoint /tmp/rB >"$OUT/resume_b1.log" 2>&1
    "${f[@]}" --out /tmp/rb.onnx --epochs 30 --checkpoint /tmp/rB --resume >"$OUT/resume_b2.log" 2>&1
    local a b
    a=$(grep '^epoch 30/' "$OUT/resume_a.log" | sed 's/, [0-9.]*s$//')
    b=$(grep '^epoch 30/' "$OUT/resume_b2.log" | sed 's/, [0-9.]*s$//')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS resume_on_gpu: $a"; else
        echo "FAIL resume_on_gpu: straight '$a', resumed '$b'"; fi
}
# --accumulate 2 on cuda:0, resident (the gradients summed on the device) and not: the same
# last epoch.
accumulate_on_gpu() {
    local img=(--resize 0 --crop 8 --grayscale --mean 0.3053,0.3053,0.3053 --std 0.376,0.376,0.376)
    local f=($B/graft finetune --model models/digits_cnn.onnx --data examples/digits/train
        --val examples/digits/val "${img[@]}" --lr 0.01 --weight-decay 1e-4 --optimizer adamw
        --device cuda:0 --train-from /backbone/backbone.6/MaxPool_output_0 --epochs 30
        --accumulate 2 --batch 16 --out /tmp/acc.onnx)
    "${f[@]}" >"$OUT/acc_resident.log" 2>&1
    GRAFT_RESIDENT=0 "${f[@]}" >"$OUT/acc_host.log" 2>&1
    local a b
    a=$(grep '^epoch 30/' "$OUT/acc_resident.log" | sed 's/, [0-9.]*s$//')
    b=$(grep '^epoch 30/' "$OUT/acc_host.log" | sed 's/, [0-9.]*s$//')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS accumulate_on_gpu: $a"; else
        echo "FAIL accumulate_on_gpu: resident '$a', host '$b'"; fi
}
