#!/usr/bin/env bash
# tools/gpu_forward_run.sh: build, the GPU checks of the forward's fused groups and memory plan
# (fused-group op cases against the CPU, models against ONNX Runtime, reshape views, the
# attention kernels under compute-sanitizer), then BERT-base's forward with and without views
# and the folded attention, the device-resident forward against PyTorch and graft's per-op
# profiles. Usage, on the GPU machine from the project root (the device tool: carry .gpu, see
# ../shared/device/README.md): source .gpu/env.sh && bash tools/gpu_forward_run.sh (logs in $OUT).
. tools/gpu_run_common.sh
declare -A ms

# Issue 14: ResNet-50 bf16 batch 256 from host uint8 images within 10% of the resident
# forward's throughput. `--uint8`: each run copies the uint8 NHWC batch in from pageable memory
# and waits for it; `--uint8 --pinned`: the batch in pinned memory, the next batch's copy
# started (graft_model_copy_async) before each run, as a loader feeds a GPU. Alternated twice.
resnet50_host_uint8() {
    local rep mode
    for rep in 1 2; do
        for mode in resident uint8 pinned; do
            local flags=(--$mode)
            [ $mode = pinned ] && flags=(--uint8 --pinned)
            $B/graft bench $G/resnet50.onnx --device cuda:0 --precision bf16 --batch 256 \
                "${flags[@]}" --iters 30 --json >"$OUT/resnet50_${mode}_$rep.log" 2>&1
            ms[$rep$mode]=$(sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p' "$OUT/resnet50_${mode}_$rep.log")
        done
        echo "resnet50 bf16 256 run $rep: resident ${ms[${rep}resident]} ms, host uint8" \
            "${ms[${rep}uint8]} ms, pinned uint8 overlapped ${ms[${rep}pinned]} ms: /resident" \
            "$(python3 -c "r = ${ms[${rep}resident]:-1}; print(round(${ms[${rep}uint8]:-0} / r, 3), round(${ms[${rep}pinned]:-0} / r, 3))")"
    done
}

# The staged copy from pageable host memory with its host side on one thread (`--threads 1`, as
# before stop 39) and on several (the default): ResNet-50 bf16 batch 256 fed uint8 (38.5 MB a
# run) and fp32 (154 MB), alternated twice.
host_copy_threads() {
    local rep input t
    for rep in 1 2; do
        for input in uint8 fp32; do
            for t in 1 0; do
                local flags=(--threads $t)
                [ $input = uint8 ] && flags+=(--uint8)
                ms[$rep$input$t]=$($B/graft bench $G/resnet50.onnx --device cuda:0 --precision bf16 \
                    --batch 256 "${flags[@]}" --iters 20 --json 2>>"$OUT/copy_threads.log" |
                    sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p')
            done
            echo "resnet50 bf16 256 from pageable $input, run $rep: copy on 1 thread" \
                "${ms[${rep}${input}1]} ms, on several ${ms[${rep}${input}0]} ms"
        done
    done
}

gpu_setup
python3 tools/make_gpu_op_cases.py --out /tmp/cases >"$OUT/make_cases.log" 2>&1 &
python3 tools/make_models.py --out $G --only resnet18,resnet50,bert_base,bert_tiny_decomposed,reshape_views \
    >"$OUT/make_models.log" 2>&1 &
ninja -C $B >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
wait
echo "built, cases and models made at $(since)"
if [ "${ONLY:-}" = uint8 ]; then
    $B/tests/test_device_io models/digits_cnn.onnx >"$OUT/device_io.log" 2>&1
    summary device_io $? "$OUT/device_io.log"
    resnet50_host_uint8
    host_copy_threads
    python3 tools/bench_gpu.py --graft $B/graft --gen $G --resident --precisions bf16 \
        --batches resnet50=256 --iters 30 >"$OUT/forward.log" 2>&1
    echo "forward rc=$?"; tail -6 "$OUT/forward.log"
    exit 0
fi

if [ "${GRAFT_NCU:-}" = only ]; then
    # BERT-base's attention kernel at batch 128 under Nsight Compute: where its warps stall.
    ncu --kernel-name regex:attention_mma --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section WarpStateStats --section SchedulerStats \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
        $B/graft bench $G/bert_base.onnx --device cuda:0 --precision bf16 --batch 128 --resident \
        --iters 1 --warmup 0 >"$OUT/ncu_attention_bert.log" 2>&1
    grep -E 'stalled' "$OUT/ncu_attention_bert.log" | awk '$NF + 0 >= 0.05' | sed 's/smsp__average_warps_issue_stalled_//'
    grep -E '^ +[A-Z][A-Za-z /\-]+ +(%|us|cycle|inst|register|block|warp|Kbyte|byte|Gbyte/s|Tbyte/s|ms)? +[0-9.,]+$|Stall|stall' \
        "$OUT/ncu_attention_bert.log" | head -70
    exit 0
fi
$B/tests/test_gpu_ops /tmp/cases --filter fuse_ >"$OUT/gpu_ops_fused.log" 2>&1
summary gpu_ops_fused $? "$OUT/gpu_ops_fused.log"
GRAFT_CUDA_ATTENTION=fused $B/tests/test_gpu_ops /tmp/cases --filter fuse_attention \
    >"$OUT/gpu_ops_attention_kernel.log" 2>&1
summary gpu_ops_attention_kernel $? "$OUT/gpu_ops_attention_kernel.log"
grep -E '^(PASS|FAIL) fuse_attention_(bshd|kt)' "$OUT/gpu_ops_fused.log" | cut -c1-200
for p in fp32 fp16 bf16; do
    $B/tests/test_parity $G --device cuda:0 --precision $p resnet18 bert_base bert_tiny_decomposed \
        reshape_views >"$OUT/parity_$p.log" 2>&1
    summary "parity_$p" $? "$OUT/parity_$p.log"
done
$B/tests/test_exec_views $G --device cuda:0 reshape_views bert_tiny_decomposed bert_base resnet18 \
    >"$OUT/exec_views.log" 2>&1
summary exec_views $? "$OUT/exec_views.log"
grep 'planned as views' "$OUT/exec_views.log"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
    for tool in memcheck; do
        GRAFT_CUDA_ATTENTION=fused timeout 240 "$SAN" --tool $tool --error-exitcode 9 \
            $B/tests/test_gpu_ops /tmp/cases --filter fuse_attention_small >"$OUT/san_$tool.log" 2>&1
        echo "sanitizer $tool rc=$? pass $(grep -c '^PASS' "$OUT/san_$tool.log") fail $(grep -c '^FAIL' "$OUT/san_$tool.log") errors: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log")"
    done
fi
echo "checks done at $(since)"
[ -n "${CHECKS_ONLY:-}" ] && exit 0

# BERT-base bf16, resident: switches off one at a time (MODES overrides the list).
for mode in ${MODES:-default views_off attention_unfused gelu_exact gemm_tune_off}; do
    env_set=()
    [ $mode = views_off ] && env_set=(GRAFT_PLAN_VIEWS=0)
    [ $mode = attention_unfused ] && env_set=(GRAFT_CUDA_ATTENTION=unfused)
    [ $mode = attention_items1 ] && env_set=(GRAFT_CUDA_ATTENTION_ITEMS=1)
    [ $mode = gelu_exact ] && env_set=(GRAFT_CUDA_GELU=exact)
    [ $mode = gemm_tune_off ] && env_set=(GRAFT_CUDA_GEMM_TUNE=0)
    for rep in 1 2; do
        env "${env_set[@]}" $B/graft bench $G/bert_base.onnx --device cuda:0 --precision bf16 \
            --batch 1,128 --resident --iters 30 >"$OUT/bert_${mode}_$rep.log" 2>&1
        echo "bert_base bf16 $mode run $rep: $(awk '$1 ~ /^[0-9]+$/ {printf "batch %s %s ms; ", $1, $2}' "$OUT/bert_${mode}_$rep.log")"
    done
    env "${env_set[@]}" $B/graft bench $G/bert_base.onnx --device cuda:0 --precision bf16 \
        --batch 128 --resident --profile --iters 10 >"$OUT/profile_bert_${mode}.log" 2>&1
    echo "  profile: $(grep -m1 -i 'attention' "$OUT/profile_bert_${mode}.log" | tr -s ' ')"
done
for spec in "bert_base bf16 128" "bert_base bf16 1" "resnet50 bf16 256" "resnet50 fp16 256"; do
    set -- $spec
    $B/graft bench $G/$1.onnx --device cuda:0 --precision $2 --batch $3 --resident --profile \
        --iters 10 >"$OUT/profile_$1_$2_$3.log" 2>&1
    echo "== profile $1 $2 batch $3"
    sed -n '2,24p' "$OUT/profile_$1_$2_$3.log"
done
resnet50_host_uint8
# PyTorch's fused attention on BERT-base's shape (batch 128), the kernel graft's attention
# group is measured against in the profile above.
python3 - <<'PY' 2>&1 | tail -3
import torch, torch.nn.functional as F
q, k, v = (torch.randn(128, 12, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
mask = torch.zeros(128, 1, 1, 128, device="cuda", dtype=torch.bfloat16)
for name, m in (("no mask", None), ("additive mask", mask)):
    for _ in range(5): F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(50): F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    e.record(); torch.cuda.synchronize()
    print(f"torch SDPA (128, 12, 128, 64) bf16, {name}: {s.elapsed_time(e) / 50 * 1e3:.1f} us")
PY
echo "profilers: $(command -v ncu nsys 2>/dev/null | tr '\n' ' ') $(ls /usr/local/cuda/bin 2>/dev/null | grep -E 'ncu|nsys' | tr '\n' ' ')"
if [ -n "${GRAFT_NCU:-}" ] && command -v ncu >/dev/null; then
    # Nsight Compute: the attention kernel's limits, then every kernel of one BERT-base forward
    # (batch 128, bf16; the first run goes node by node) summed by name.
    ncu --kernel-name regex:attention_mma --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats \
        $B/tests/test_gpu_ops /tmp/cases --filter fuse_attention_bshd >"$OUT/ncu_attention.log" 2>&1
    grep -E 'Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Shared Memory Config|Block Limit|Stall|Warp Cycles|Waves' \
        "$OUT/ncu_attention.log" | head -40
    GRAFT_CUDA_GEMM_TUNE=0 ncu --metrics gpu__time_duration.sum --csv --launch-count 260 \
        $B/graft bench $G/bert_base.onnx --device cuda:0 --precision bf16 --batch 128 --resident \
        --iters 1 --warmup 0 >"$OUT/ncu_bert.csv" 2>"$OUT/ncu_bert.err"
    python3 - "$OUT/ncu_bert.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
ki, vi = head.index("Kernel Name"), head.index("Metric Value")
tot = collections.defaultdict(lambda: [0, 0.0])
for r in body:
    t = tot[r[ki][:90]]
    t[0] += 1
    t[1] += float(r[vi].replace(",", ""))
for name, (n, ns) in sorted(tot.items(), key=lambda x: -x[1][1])[:25]:
    print(f"{ns / 1e3:9.1f} us {n:4d}x  {ns / n / 1e3:7.1f} us  {name}")
print(f"total {sum(v[1] for v in tot.values()) / 1e6:.3f} ms over {sum(v[0] for v in tot.values())} kernels")
PY
fi
echo "benches done at $(since)"
python3 tools/bench_gpu.py --graft $B/graft --gen $G --resident --precisions bf16,fp16 \
    --batches resnet50=1,256:bert_base=1,128 --iters 30 >"$OUT/forward.log" 2>&1
echo "forward rc=$?"
tail -12 "$OUT/forward.log"
if [ -n "${PADDING:-}" ]; then
    # Padding to the batch's longest text on the GPU: a MiniLM-L6 graph with seeded random
    # weights (the real ones are not on this machine; the tokens are the real texts').
    python3 tools/minilm_fill.py --out /tmp/minilm --random-weights 1 \
        --vocab tests/data/gen/minilm/models/ts17/vocab.txt >"$OUT/minilm_fill.log" 2>&1
    for b in 32 256; do
        python3 tools/bench_padding.py --graft $B/graft --model /tmp/minilm/model.onnx \
            --vocab /tmp/minilm/vocab.txt --device cuda:0 --precision bf16 --batch $b \
            --replicate 20 --repeats 2 >"$OUT/padding_$b.log" 2>&1
        echo "== padding, batch $b (rc=$?)"; tail -6 "$OUT/padding_$b.log"
    done
fi
echo "all done at $(since)"
