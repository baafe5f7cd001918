#!/usr/bin/env bash
# tests/test_cli_tools.sh GRAFT GEN: graft predict, eval, devices and bench end to end: results
# against ONNX Runtime, every option's parsing, and a one-line error for every bad input.
set -u
GRAFT=$1
GEN=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
F=$TMP/fx
ROOT=$(cd "$(dirname "$0")/.." && pwd)

check() { # check NAME CONDITION-EXIT-CODE DETAIL
    if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi
}

expect_error() { # expect_error NAME NEEDLE ARGS...: non-zero exit, one stderr line naming NEEDLE
    local name=$1 needle=$2
    shift 2
    "$GRAFT" "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
    local rc=$? lines
    lines=$(wc -l <"$TMP/err.txt")
    if [ "$rc" != 0 ] && [ "$lines" = 1 ] && grep -q -- "$needle" "$TMP/err.txt"; then
        echo "PASS $name"
    else
        echo "FAIL $name: exit $rc, $lines stderr lines (want 1 naming '$needle'): $(head -3 "$TMP/err.txt")"
    fi
}

expect_help() { # expect_help CMD NEEDLE...: --help exits 0 and documents every NEEDLE
    local cmd=$1 missing=""
    shift
    "$GRAFT" "$cmd" --help >"$TMP/help.txt" 2>&1
    local rc=$?
    for n in usage example "$@"; do grep -q -- "$n" "$TMP/help.txt" || missing="$missing $n"; done
    [ "$rc" = 0 ] && [ -z "$missing" ]
    check "cli_tools_${cmd}_help" $? "exit $rc, missing:$missing"
}

no_escapes() { # no_escapes FILE: plain text, no terminal control sequences
    ! grep -q $'\033' "$1"
}

python3 "$ROOT/tools/make_cli_tool_fixtures.py" "$F" >"$TMP/fx.log" 2>&1
check cli_tools_fixtures $? "$(tail -3 "$TMP/fx.log")"
[ -f "$F/expected.json" ] || exit 1

# ---- devices ----
"$GRAFT" devices >"$TMP/dev.txt" 2>"$TMP/err.txt" && grep -q '^cpu' "$TMP/dev.txt" &&
    { grep -q '^  cuda:0 ' "$TMP/dev.txt" || grep -qE 'no usable GPU: .+' "$TMP/dev.txt"; } &&
    grep -qE 'threads +[0-9]+' "$TMP/dev.txt" && no_escapes "$TMP/dev.txt"
check cli_tools_devices $? "$(cat "$TMP/dev.txt" "$TMP/err.txt")"
"$GRAFT" devices --json >"$TMP/dev.json" 2>"$TMP/err.txt" && python3 - "$TMP/dev.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cpu"]["model"] and d["cpu"]["threads"] >= 1 and d["cpu"]["cores_online"] >= 1
assert set(d["cpu"]["features"]) >= {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
if d["gpu_usable"]:
    g = d["gpus"][0]
    assert g["device"] == "cuda:0" and g["memory_total_bytes"] > 0 and g["cudnn"]
else:
    assert d["gpus"] == [] and d["gpu_note"], d
    assert d["cuda_built"] or "without CUDA" in d["gpu_note"]
PY
check cli_tools_devices_json $? "$(cat "$TMP/err.txt")"
OMP_NUM_THREADS=3 "$GRAFT" devices --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["cpu"]["threads"] == 3'
check cli_tools_devices_omp_threads $? "OMP_NUM_THREADS not honoured"
expect_help devices --json
expect_error cli_tools_devices_unknown_option "unknown option --gpu" devices --gpu
expect_error cli_tools_devices_extra_arg "unexpected argument" devices foo

# ---- bench ----
M=$ROOT/models/digits_cnn.onnx
"$GRAFT" bench "$M" --iters 3 --warmup 1 >"$TMP/bench.txt" 2>"$TMP/err.txt" &&
    [ "$(grep -cE '^ +(1|8|32) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$TMP/bench.txt")" = 3 ] &&
    grep -q 'median ms' "$TMP/bench.txt" && no_escapes "$TMP/bench.txt"
check cli_tools_bench_default_batches $? "$(cat "$TMP/bench.txt" "$TMP/err.txt")"
"$GRAFT" bench "$M" --batch 2,5 --iters 4 --warmup 0 --threads 1 --device cpu --json \
    >"$TMP/bench.jsonl" 2>"$TMP/err.txt" && python3 - "$TMP/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["batch"] for r in rows] == [2, 5], rows
for r in rows:
    assert r["iters"] == 4 and 0 < r["min_ms"] <= r["median_ms"] <= r["p90_ms"], r
    assert r["samples_per_s"] > 0, r
PY
check cli_tools_bench_json_options $? "$(cat "$TMP/bench.jsonl" "$TMP/err.txt")"
if [ -f "$GEN/bert_tiny_decomposed.onnx" ]; then
    "$GRAFT" bench "$GEN/bert_tiny_decomposed.onnx" --batch 2 --seq-len 16 --iters 2 --json \
        >"$TMP/bert.jsonl" 2>"$TMP/err.txt" && grep -q '"batch": 2' "$TMP/bert.jsonl"
    check cli_tools_bench_seq_len $? "$(cat "$TMP/err.txt")"
else
    echo "SKIP cli_tools_bench_seq_len: $GEN/bert_tiny_decomposed.onnx not generated"
fi
expect_help bench --batch --iters --warmup --threads --seq-len --device --json --pinned "default 1,8,32"
# --profile: a table of time (and GFLOP/s) per op type after each batch; every Conv node counted
"$GRAFT" bench "$M" --batch 2 --iters 3 --warmup 1 --profile >"$TMP/prof.txt" 2>"$TMP/err.txt" &&
    grep -q 'op (profiled)' "$TMP/prof.txt" && python3 - "$TMP/prof.txt" "$M" <<'PY'
import sys, onnx
rows = {l.split()[0]: l.split() for l in open(sys.argv[1]) if l.startswith("  ") and "%" in l}
convs = sum(n.op_type == "Conv" for n in onnx.load(sys.argv[2]).graph.node)
assert float(rows["Conv"][1]) == convs, (rows, convs)
assert abs(sum(float(r[3].rstrip("%")) for r in rows.values()) - 100) < 1, rows
# the rate the convolutions reached (their FLOPs over their time): the fused groups' (conv_act,
# ...) or, without fusion (reference kernels), Conv's own
conv_rates = [float(r[4]) for k, r in rows.items() if k.lower().startswith("conv")]
assert all(x > 0 for x in conv_rates if x) and max(conv_rates) > 0, rows
assert all(float(r[4]) > 0 for k, r in rows.items() if k.startswith("conv")), rows
PY
check cli_tools_bench_profile $? "$(cat "$TMP/prof.txt" "$TMP/err.txt")"
expect_error cli_tools_bench_bad_batch "'abc'" bench "$M" --batch abc
expect_error cli_tools_bench_zero_batch "'1,0'" bench "$M" --batch 1,0
expect_error cli_tools_bench_zero_iters "--iters '0'" bench "$M" --iters 0
expect_error cli_tools_bench_bad_warmup "--warmup '-1'" bench "$M" --warmup -1
expect_error cli_tools_bench_bad_threads "--threads 'x'" bench "$M" --threads x
expect_error cli_tools_bench_bad_seq_len "--seq-len '0'" bench "$M" --seq-len 0
expect_error cli_tools_bench_missing_value "--iters needs" bench "$M" --iters
expect_error cli_tools_bench_pinned_and_resident "--resident and --pinned: choose one" bench "$M" --pinned --resident
expect_error cli_tools_bench_pinned_cpu "--pinned: graft_model_set_device_io: the model runs on the CPU" bench "$M" --pinned
if "$GRAFT" devices --json | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["cuda_built"])'; then
    expect_error cli_tools_bench_cuda "without CUDA" bench "$M" --device cuda:0
elif "$GRAFT" devices --json | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["gpu_usable"])'; then
    expect_error cli_tools_bench_cuda "no usable GPU" bench "$M" --device cuda:0
fi
expect_error cli_tools_bench_bad_precision "--precision fp8: expected one of fp32, fp16, bf16" bench "$M" --precision fp8
expect_error cli_tools_bench_bad_device "'tpu'" bench "$M" --device tpu
expect_error cli_tools_bench_unknown_option "unknown option --fast" bench "$M" --fast
expect_error cli_tools_bench_no_model "no model given" bench --iters 2
expect_error cli_tools_bench_two_models "more than one model" bench "$M" "$M"
expect_error cli_tools_bench_missing_model "nothere.onnx" bench "$TMP/nothere.onnx"

# ---- predict ----
P=(predict --model "$F/model.onnx")
"$GRAFT" "${P[@]}" --format jsonl "$F/data" >"$TMP/pred.jsonl" 2>"$TMP/err.txt" &&
    [ ! -s "$TMP/err.txt" ] && python3 - "$TMP/pred.jsonl" "$F/expected.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = json.load(open(sys.argv[2]))["files"]
assert sorted(r["file"] for r in rows) == sorted(want), "files differ"
worst = 0.0
for r in rows:
    w = want[r["file"]]
    assert len(r["top"]) == 5, r
    assert r["top"][0]["class"] == w["top1"], (r, w["top1"])
    for t in r["top"]:
        assert t["class"] == "abcde"[t["index"]]
        worst = max(worst, abs(t["probability"] - w["probabilities"][t["index"]]))
    probs = [t["probability"] for t in r["top"]]
    assert probs == sorted(probs, reverse=True), probs
print(f"  predict vs ONNX Runtime: {len(rows)} files, top-1 equal, max |dp| {worst:.2g}")
assert worst < 1e-4
PY
check cli_tools_predict_vs_ort $? "$(cat "$TMP/err.txt")"
# Another batch size may take other oneDNN kernels (last-digit differences, as in PyTorch);
# the threads must not change anything, and the batch nothing beyond rounding.
"$GRAFT" "${P[@]}" --format jsonl --threads 1 "$F/data" >"$TMP/pred1.jsonl" 2>&1 &&
    cmp -s "$TMP/pred.jsonl" "$TMP/pred1.jsonl"
check cli_tools_predict_threads $? "--threads 1 differs from the default"
"$GRAFT" "${P[@]}" --format jsonl --batch 7 --threads 1 "$F/data" >"$TMP/pred7.jsonl" 2>&1 &&
    python3 - "$TMP/pred.jsonl" "$TMP/pred7.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert [r["file"] for r in a] == [r["file"] for r in b]
for x, y in zip(a, b):
    assert x["top"][0]["class"] == y["top"][0]["class"], (x, y)
    px = {t["class"]: t["probability"] for t in x["top"]}
    py = {t["class"]: t["probability"] for t in y["top"]}
    assert px.keys() == py.keys() and all(abs(px[k] - py[k]) <= 1e-6 for k in px), (x, y)
PY
check cli_tools_predict_batch_threads $? "--batch 7 --threads 1 differs from the default beyond 1e-6"
"$GRAFT" predict --model "$F/probs.onnx" --format jsonl "$F/data" >"$TMP/probs.jsonl" 2>&1 &&
    python3 - "$TMP/pred.jsonl" "$TMP/probs.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
for x, y in zip(a, b, strict=True):
    assert [t["index"] for t in x["top"]] == [t["index"] for t in y["top"]]
    assert max(abs(s["probability"] - t["probability"]) for s, t in zip(x["top"], y["top"])) < 1e-5
PY
check cli_tools_predict_probabilities_output $? "a softmax output was not taken as it is"
"$GRAFT" "${P[@]}" --top-k 2 --format csv "$F/data/b" "$F/data/a/0_000.png" >"$TMP/pred.csv" \
    2>"$TMP/err.txt" && python3 - "$TMP/pred.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert list(rows[0]) == ["file", "rank", "class", "index", "probability"]
assert len(rows) == 2 * 12, len(rows)
assert rows[-1]["file"].endswith("a/0_000.png") and rows[-2]["rank"] == "1"
assert all(r["rank"] in "12" and 0 <= float(r["probability"]) <= 1 for r in rows)
PY
check cli_tools_predict_csv_top_k $? "$(cat "$TMP/err.txt")"
"$GRAFT" "${P[@]}" --top-k 1 "$F/loose" >"$TMP/pred.txt" 2>"$TMP/err.txt" &&
    [ "$(wc -l <"$TMP/pred.txt")" = 3 ] && grep -q 'one/two/img2.png: c [0-9.]*%$' "$TMP/pred.txt" &&
    ! grep -q notes.txt "$TMP/pred.txt" && no_escapes "$TMP/pred.txt"
check cli_tools_predict_text_recursive $? "$(cat "$TMP/pred.txt" "$TMP/err.txt")"
"$GRAFT" "${P[@]}" --top-k 99 "$F/loose/img0.png" >"$TMP/pred.txt" 2>&1 &&
    [ "$(grep -o '%' "$TMP/pred.txt" | wc -l)" = 5 ]
check cli_tools_predict_top_k_clipped $? "$(cat "$TMP/pred.txt")"
"$GRAFT" predict --model "$M" --format jsonl "$F/loose" >"$TMP/pred.jsonl" 2>"$TMP/err.txt" &&
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert len(r)==3 and all(t["class"]==str(t["index"]) for x in r for t in x["top"])' "$TMP/pred.jsonl"
check cli_tools_predict_no_class_names $? "$(cat "$TMP/err.txt")"
"$GRAFT" "${P[@]}" "$F/broken/c" >"$TMP/pred.txt" 2>"$TMP/err.txt"
rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$TMP/err.txt")" = 1 ] && grep -q 'warning.*broken.png' "$TMP/err.txt" &&
    [ "$(wc -l <"$TMP/pred.txt")" = 12 ]
check cli_tools_predict_unreadable_file $? "exit $rc: $(cat "$TMP/err.txt")"
expect_help predict --model --top-k --format --batch --threads "default 5" "default 32" jsonl csv
expect_error cli_tools_predict_top_k_zero "--top-k '0'" "${P[@]}" --top-k 0 "$F/data"
expect_error cli_tools_predict_bad_batch "--batch 'abc'" "${P[@]}" --batch abc "$F/data"
expect_error cli_tools_predict_bad_threads "--threads '-2'" "${P[@]}" --threads -2 "$F/data"
expect_error cli_tools_predict_bad_format "--format xml: expected one of text, csv, jsonl" "${P[@]}" --format xml "$F/data"
expect_error cli_tools_predict_missing_value "--top-k needs" "${P[@]}" "$F/data" --top-k
expect_error cli_tools_predict_no_model "no --model" predict "$F/data"
expect_error cli_tools_predict_no_files "no image files" "${P[@]}"
expect_error cli_tools_predict_missing_file "nothere.png" "${P[@]}" "$F/data" "$TMP/nothere.png"
mkdir -p "$TMP/empty" && echo text >"$TMP/empty/notes.txt"
expect_error cli_tools_predict_empty_dir "no image files under" "${P[@]}" "$F/data" "$TMP/empty"
expect_error cli_tools_predict_missing_model "nothere.onnx" predict --model "$TMP/nothere.onnx" "$F/data"
expect_error cli_tools_predict_unknown_option "unknown option --topk; did you mean --top-k?" "${P[@]}" --topk 3 "$F/data"

# ---- eval ----
E=(eval --model "$F/model.onnx")
"$GRAFT" "${E[@]}" --data "$F/data" --json >"$TMP/eval.json" 2>"$TMP/err.txt" &&
    python3 - "$TMP/eval.json" "$F/expected.json" <<'PY'
import json, sys
import numpy as np
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
assert got["samples"] == want["samples"] and got["correct"] == want["correct"], (got, want)
assert abs(got["accuracy"] - want["accuracy"]) < 1e-6 and got["top5_accuracy"] == 1.0
cm = np.zeros((5, 5), dtype=int)
for f in want["files"].values():
    cm[f["label"], "abcde".index(f["top1"])] += 1
assert (np.array(got["confusion"]) == cm).all(), (got["confusion"], cm)
for c, row in enumerate(got["classes"]):
    tp, p, r = cm[c, c], max(cm[:, c].sum(), 1), max(cm[c].sum(), 1)
    assert row["name"] == "abcde"[c] and row["support"] == cm[c].sum()
    assert abs(row["precision"] - tp / p) < 1e-6 and abs(row["recall"] - tp / r) < 1e-6
    f1 = 2 * tp / (p + r) if tp else 0.0
    assert abs(row["f1"] - f1) < 1e-6, (row, f1)
assert got["skipped"] == []
print(f"  eval vs ONNX Runtime: accuracy {got['accuracy']:.4f} on {got['samples']} images")
PY
check cli_tools_eval_vs_ort $? "$(cat "$TMP/err.txt")"
"$GRAFT" "${E[@]}" --data "$F/broken" --batch 5 --threads 1 >"$TMP/eval.txt" 2>"$TMP/err.txt" &&
    grep -q "^accuracy   $(python3 -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["accuracy"])' "$F/expected.json")" "$TMP/eval.txt" &&
    grep -q '^top-5' "$TMP/eval.txt" && grep -q '^confusion matrix' "$TMP/eval.txt" &&
    grep -qE '^a +12 +1 +0 +0 +0$' "$TMP/eval.txt" && grep -q '^skipped .*broken.png' "$TMP/eval.txt" &&
    grep -q '1 skipped' "$TMP/eval.txt" && no_escapes "$TMP/eval.txt"
check cli_tools_eval_text_skipped $? "$(cat "$TMP/eval.txt" "$TMP/err.txt")"
"$GRAFT" eval --model "$M" --data "$F/data" --json >"$TMP/eval2.json" 2>"$TMP/err.txt" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"]==60 and [c["name"] for c in d["classes"]]==list("abcde")' "$TMP/eval2.json"
check cli_tools_eval_no_class_names $? "$(cat "$TMP/err.txt")"
expect_help eval --model --data --batch --threads --json "default 32" confusion
expect_error cli_tools_eval_class_mismatch "class 'x'" "${E[@]}" --data "$F/mismatch"
cp -r "$F/data" "$TMP/sub" && rm -r "$TMP/sub/e"
expect_error cli_tools_eval_missing_class "class 'e' has no folder" "${E[@]}" --data "$TMP/sub"
expect_error cli_tools_eval_no_data "no --data" "${E[@]}"
expect_error cli_tools_eval_no_model "no --model" eval --data "$F/data"
expect_error cli_tools_eval_missing_data "nothere" "${E[@]}" --data "$TMP/nothere"
expect_error cli_tools_eval_bad_batch "--batch '0'" "${E[@]}" --data "$F/data" --batch 0
expect_error cli_tools_eval_bad_threads "--threads 'many'" "${E[@]}" --data "$F/data" --threads many
expect_error cli_tools_eval_missing_value "--data needs" "${E[@]}" --data
expect_error cli_tools_eval_unknown_option "unknown option --top5" "${E[@]}" --data "$F/data" --top5
expect_error cli_tools_eval_extra_arg "unexpected argument" "${E[@]}" --data "$F/data" extra

# ---- the tool's own usage ----
"$GRAFT" --help >"$TMP/usage.txt" && for c in predict eval devices bench; do
    grep -q "^  $c " "$TMP/usage.txt" || exit 1
done
check cli_tools_usage_lists_commands $? "$(cat "$TMP/usage.txt")"
