#!/usr/bin/env bash
# tests/test_cli.sh GRAFT GEN [CUTS]: the graft tool end to end: info (text and JSON; with CUTS,
# tools/make_cut_models.py's folder, the auto cut info prints for each family's head), run against
# ONNX Runtime's outputs, and a one-line error with a non-zero exit for every bad input.
set -u
GRAFT=$1
GEN=$2
CUTS=${3:-}
BAD=$GEN/bad
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check() { # check NAME CONDITION-EXIT-CODE DETAIL
    if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi
}

compare() { # compare MODEL OUTDIR: every recorded ORT output against graft's
    python3 - "$1" "$2" "$GEN" <<'PY'
import json, sys, numpy as np
model, outdir, gen = sys.argv[1:]
man = json.load(open(f"{gen}/{model}.json"))
worst = 0.0
for name in man["outputs"]:
    want = np.load(f"{gen}/{model}.out.{name}.npy")
    got = np.load(f"{outdir}/{name}.npy")
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
    worst = max(worst, float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12)))
print(f"  {model}: max relative error {worst:.3g}")
sys.exit(0 if worst <= 1e-4 else 1)
PY
}

for model in resnet18 resnet50 bert_base mobilenet_tiny; do
    [ -f "$GEN/$model.onnx" ] || { echo "SKIP cli_$model: not generated"; continue; }
    if [ "$model" = resnet50 ] || [ "$model" = bert_base ]; then
        case "$GRAFT" in *asan*) echo "SKIP cli_$model: too slow under ASan"; continue ;; esac
    fi
    "$GRAFT" info "$GEN/$model.onnx" >"$TMP/info.txt" 2>"$TMP/err.txt"
    check "cli_info_$model" $? "$(cat "$TMP/err.txt")"
    grep -E '^(auto cut|parameters|FLOPs)' "$TMP/info.txt" | sed 's/^/  /'
    "$GRAFT" info --json "$GEN/$model.onnx" >"$TMP/info.json" 2>"$TMP/err.txt" &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["inputs"] and d["ops"] and d["auto_cut"]' "$TMP/info.json"
    check "cli_info_json_$model" $? "$(cat "$TMP/err.txt")"
    args=()
    for f in "$GEN/$model".in.*.npy; do
        name=${f#"$GEN/$model.in."}
        args+=(--input "${name%.npy}=$f")
    done
    "$GRAFT" run "$GEN/$model.onnx" "${args[@]}" --output-dir "$TMP/out_$model" 2>"$TMP/err.txt" &&
        compare "$model" "$TMP/out_$model"
    check "cli_run_$model" $? "$(cat "$TMP/err.txt")"
done

# The auto cut as info prints it: tensor, pooling and feature size (text and JSON), or why not.
if [ -n "$CUTS" ]; then
    while read -r name tensor pooling features; do
        "$GRAFT" info "$CUTS/$name.onnx" >"$TMP/info.txt" 2>"$TMP/err.txt" &&
            "$GRAFT" info --json "$CUTS/$name.onnx" >"$TMP/info.json" 2>>"$TMP/err.txt" &&
            python3 - "$TMP/info.txt" "$TMP/info.json" "$tensor" "$pooling" "$features" <<'PY'
import json, sys
text, js, tensor, pooling, features = sys.argv[1:]
lines = open(text).read().splitlines()
d = json.load(open(js))
if tensor == "-":
    assert any(l.startswith("auto cut    none: no cut point") for l in lines), lines
    assert d["auto_cut"] is None and "no cut point" in d["auto_cut_why"], d
else:
    want = f"auto cut    {tensor} (pooling {pooling}, {features} features)"
    k = lines.index(want)
    assert lines[k + 1].startswith("  why       the input of") or "pooled" in lines[k + 1], lines[k + 1]
    assert (d["auto_cut"], d["auto_cut_pooling"], d["auto_cut_features"]) == \
        (tensor, pooling, int(features)), d
    assert d["auto_cut_why"] == lines[k + 1][len("  why       "):]
PY
        check "cli_info_auto_cut_$name" $? "$(cat "$TMP/err.txt")"
    done <"$CUTS/cut_models.txt"
fi

# The freeze points as info prints them (text and JSON): what each --unfreeze N takes, or why
# there is none.
freeze_info() { # freeze_info NAME MODEL UNITS KIND UNFREEZE1 COUNT
    "$GRAFT" info "$2" >"$TMP/info.txt" 2>"$TMP/err.txt" &&
        "$GRAFT" info --json "$2" >"$TMP/info.json" 2>>"$TMP/err.txt" &&
        python3 - "$TMP/info.txt" "$TMP/info.json" "${@:3}" <<'PY'
import json, sys
text, js, units, kind, first, count = sys.argv[1:]
lines = open(text).read().splitlines()
d = json.load(open(js))
freeze = [l for l in lines if l.startswith("freeze ")]
assert len(freeze) == 1 and lines.index(freeze[0]) > lines.index(next(l for l in lines if l.startswith("auto cut"))), lines
if kind == "-":
    assert "no stages or layers recognised (--unfreeze not available)" in freeze[0], freeze
    assert d["freeze_units"] == 0 and d["freeze_unit_kind"] is None, d
    assert not any(p["unfreeze"] for p in d["freeze_points"]), d["freeze_points"]
else:
    assert freeze[0].startswith(f"freeze      {units} {kind}s before the cut (--unfreeze 1..{units}); "
                                f"{count} candidate tensors"), freeze
    one = [l for l in lines if l.startswith("  --unfreeze 1 ")]
    assert len(one) == 1 and f"'{first}' (the last 1 {kind} from node '" in one[0], one
    assert sum(l.startswith("  --unfreeze ") for l in lines) == int(units), lines
    assert (d["freeze_units"], d["freeze_unit_kind"]) == (int(units), kind), d
    assert [p["tensor"] for p in d["freeze_points"] if p["unfreeze"] == 1] == [first], d
assert len(d["freeze_points"]) == int(count), d["freeze_points"]
assert all(p["kind"] in ("stage", "layer", "block", "tensor") and p["first_node"] and
           p["trainable_parameters"] >= 0 for p in d["freeze_points"]), d["freeze_points"]
PY
    check "cli_info_freeze_$1" $? "$(cat "$TMP/err.txt")"
}
if [ -f "$GEN/resnet18.onnx" ]; then
    freeze_info resnet18 "$GEN/resnet18.onnx" 4 stage /layer3/layer3.1/relu_1/Relu_output_0 19
    freeze_info bert_tiny "$GEN/bert_tiny_decomposed.onnx" 2 layer 143 25
fi
freeze_info digits_cnn models/digits_cnn.onnx 0 - - 7
if [ -n "$CUTS" ] && [ -f "$CUTS/cut_segmenter.onnx" ]; then
    "$GRAFT" info "$CUTS/cut_segmenter.onnx" | grep -q '^freeze      none: no cut point' &&
        "$GRAFT" info --json "$CUTS/cut_segmenter.onnx" | python3 -c '
import json, sys; d = json.load(sys.stdin)
assert d["freeze_points"] is None and "no cut point" in d["freeze_points_why"], d'
    check cli_info_freeze_none $? "no 'freeze      none' line or null freeze_points"
fi

expect_error() { # expect_error NAME NEEDLE ARGS...: non-zero exit, one stderr line naming NEEDLE
    local name=$1 needle=$2
    shift 2
    "$GRAFT" "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
    local rc=$?
    local lines
    lines=$(wc -l <"$TMP/err.txt")
    if [ "$rc" != 0 ] && [ "$lines" = 1 ] && grep -q -- "$needle" "$TMP/err.txt"; then
        echo "PASS $name"
        sed 's/^/  /' "$TMP/err.txt"
    else
        echo "FAIL $name: exit $rc, stderr: $(cat "$TMP/err.txt")"
    fi
}

IN="--input input=$BAD/valid_small.in.input.npy"
expect_error cli_bad_truncated truncated.onnx run "$BAD/truncated.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_not_protobuf not_protobuf.onnx run "$BAD/not_protobuf.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_size_mismatch bytes run "$BAD/size_mismatch.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_overflow overflow run "$BAD/overflow_shape.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_unsupported_op mystery_node run "$BAD/unsupported_op.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_missing_external "external data" run "$BAD/missing_external.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_wrong_shape "must have shape" run "$BAD/valid_small.onnx" --input "input=$BAD/wrong_shape.npy" --output-dir "$TMP/o"
expect_error cli_bad_wrong_dtype float64 run "$BAD/valid_small.onnx" --input "input=$BAD/wrong_dtype.npy" --output-dir "$TMP/o"
expect_error cli_bad_missing_npy nothere.npy run "$BAD/valid_small.onnx" --input "input=$TMP/nothere.npy" --output-dir "$TMP/o"
H=$BAD/hostile
expect_error cli_bad_npy_no_colon "no ':' after 'fortran_order'" run "$BAD/valid_small.onnx" --input "input=$H/npy_no_colon.npy" --output-dir "$TMP/o"
expect_error cli_bad_npy_beyond_file "needs 4294967296 bytes" run "$BAD/valid_small.onnx" --input "input=$H/npy_beyond_file.npy" --output-dir "$TMP/o"
expect_error cli_bad_deep_if "limit of 64" info "$H/deep_if.onnx"
expect_error cli_bad_fifo_external "not a regular file" info "$H/fifo_external.onnx"
expect_error cli_bad_missing_model nothere.onnx run "$TMP/nothere.onnx" $IN --output-dir "$TMP/o"
expect_error cli_bad_option "unknown option" run "$BAD/valid_small.onnx" --frobnicate
exit 0
