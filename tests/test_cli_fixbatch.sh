#!/usr/bin/env bash
# tests/test_cli_fixbatch.sh GRAFT: models whose batch is fixed in the graph
# (tools/make_fixed_batch_models.py: declared by the inputs as the dynamo exporter writes them, or
# pinned by a Reshape under a symbolic batch as TorchScript exports of ShuffleNet have) run any
# batch in chunks: graft info says why the batch is fixed, graft run on a batch of 5 equals ONNX
# Runtime on each row alone, and finetune, export, predict and eval work; a fixed sequence length
# pads (or cuts) texts to it.
set -u
GRAFT=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
F=$TMP/fx
check() { if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi; }

python3 "$ROOT/tools/make_fixed_batch_models.py" "$F" >"$TMP/fx.log" 2>&1
check fixbatch_fixtures $? "$(tail -3 "$TMP/fx.log")"
[ -f "$F/bad_output.onnx" ] || exit 1

# ---- graft info: the batch and why ----
info_says() {
    "$GRAFT" info "$F/$1.onnx" >"$TMP/info.txt" 2>&1 && grep -qF "batch       $2" "$TMP/info.txt"
}
info_says fixed_cnn "fixed at 1 (the graph pins it in node 'pin' (Reshape))"
check fixbatch_info_fixed $? "$(grep batch "$TMP/info.txt")"
info_says pinned_cnn \
    "fixed at 1 (the inputs declare it symbolic, but the graph pins it in node 'shuffle_split'"
check fixbatch_info_pinned $? "$(grep batch "$TMP/info.txt")"
info_says declared_cnn "any (the inputs declare 1; nothing in the graph depends on it)" &&
    grep -q "x  *float32  (batch, 3, 16, 16)" "$TMP/info.txt"
check fixbatch_info_declared_let_go $? "$(cat "$TMP/info.txt")"
info_says fixed_text_b2 "fixed at 2 (the graph pins it in node 'heads_split' (Reshape))"
check fixbatch_info_text $? "$(grep batch "$TMP/info.txt")"
"$GRAFT" info --json "$F/fixed_text_b2.onnx" | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d["fixed_batch"] == 2 and "heads_split" in d["batch"] else d)'
check fixbatch_info_json $? "fixed_batch / batch not in graft info --json"

# ---- graft run: a batch of N against ONNX Runtime on each row alone (at the model's batch:
# the row repeated) ----
# run_vs_ort MODEL N: "ok" when graft's outputs for N random rows equal ONNX Runtime's per row.
run_vs_ort() {
    local model=$1 n=$2 dir=$TMP/run_$(basename "$1" .onnx)_$2
    mkdir -p "$dir/out"
    python3 - "$model" "$n" "$dir" >"$dir/args" <<'PY' || return 1
import sys
import numpy as np, onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
n, d = int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(n)
feeds = {}
for k, i in enumerate(sess.get_inputs()):
    shape = [n] + [s if isinstance(s, int) else 16 for s in i.shape[1:]]
    if i.type == "tensor(float)":
        x = rng.standard_normal(shape).astype(np.float32)
    elif "mask" in i.name:
        x = np.ones(shape, np.int64)
        for r in range(n):
            x[r, 16 - r:] = 0
    else:
        x = rng.integers(0, 1000, shape).astype(np.int64)
    feeds[i.name] = x
    np.save("%s/in.%d.npy" % (d, k), x)
    print("--input=%s=%s/in.%d.npy" % (i.name, d, k))
want = []
for r in range(n):
    b = sess.get_inputs()[0].shape[0]
    b = b if isinstance(b, int) else 1
    outs = sess.run(None, {k: np.repeat(v[r:r + 1], b, axis=0) for k, v in feeds.items()})
    want.append([o[:1] for o in outs])
for j, o in enumerate(sess.get_outputs()):
    np.save("%s/want.%d.npy" % (d, j), np.concatenate([w[j] for w in want]))
PY
    local args=()
    while IFS= read -r a; do args+=("$a"); done <"$dir/args"
    "$GRAFT" run "$model" "${args[@]}" --output-dir "$dir/out" >/dev/null 2>"$dir/err" || {
        cat "$dir/err"
        return 1
    }
    python3 - "$model" "$dir" <<'PY'
import sys
import numpy as np, onnx
for j, o in enumerate(onnx.load(sys.argv[1]).graph.output):
    want = np.load("%s/want.%d.npy" % (sys.argv[2], j))
    got = np.load("%s/out/%s.npy" % (sys.argv[2], o.name))
    err = np.abs(want - got).max() / max(np.abs(want).max(), 1e-12)
    if want.shape != got.shape or err > 1e-5:
        sys.exit("%s: %s vs ONNX Runtime %s, error %g" % (o.name, got.shape, want.shape, err))
PY
}
for m in fixed_cnn pinned_cnn declared_cnn fixed_text_b1 fixed_text_b2; do
    for n in 5 1; do
        out=$(run_vs_ort "$F/$m.onnx" $n 2>&1)
        check "fixbatch_run_${m}_batch$n" $? "$out"
    done
done
out=$(run_vs_ort "$F/fixed_text_b2.onnx" 2 2>&1) # exactly the batch: no chunks
check fixbatch_run_fixed_text_b2_batch2 $? "$out"

# An output without the batch as its leading dim cannot be put together from chunks.
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.zeros((2, 3, 16, 16), np.float32))' \
    "$TMP/x2.npy"
"$GRAFT" run "$F/bad_output.onnx" --input "x=$TMP/x2.npy" --output-dir "$TMP/bad" \
    >/dev/null 2>"$TMP/e.txt"
[ $? = 1 ] && grep -q "takes batches of 1 only, and its output 'per_channel' (3) does not lead" \
    "$TMP/e.txt"
check fixbatch_run_output_without_batch $? "$(cat "$TMP/e.txt")"
"$GRAFT" run "$F/bad_output.onnx" --input "x=${TMP}/x2.npy" --output-dir "$TMP/bad" \
    >/dev/null 2>&1 # the same failure again: nothing left half-done
check fixbatch_run_error_repeats $([ $? = 1 ] && echo 0 || echo 1) "a second run did not fail"
python3 - "$TMP" <<'PY'
import sys
import numpy as np
np.save(sys.argv[1] + "/ids5.npy", np.ones((5, 16), np.int64))
np.save(sys.argv[1] + "/mask4.npy", np.ones((4, 16), np.int64))
PY
"$GRAFT" run "$F/fixed_text_b2.onnx" --input "input_ids=$TMP/ids5.npy" \
    --input "attention_mask=$TMP/mask4.npy" --output-dir "$TMP/bad" >/dev/null 2>"$TMP/e.txt"
[ $? = 1 ] && grep -q "the inputs must agree on the batch" "$TMP/e.txt"
check fixbatch_run_inputs_disagree $? "$(cat "$TMP/e.txt")"

# ---- images: finetune, export (ONNX Runtime), predict, eval ----
python3 - "$TMP/images" <<'PY'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c, color in (("blue", (30, 40, 200)), ("red", (200, 40, 30))):
    os.makedirs(os.path.join(sys.argv[1], c))
    for i in range(7):
        px = np.clip(np.array(color) + rng.normal(0, 40, (16, 16, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(px).save(os.path.join(sys.argv[1], c, "%d.png" % i))
PY
# predict's probabilities against ONNX Runtime on the pixels, ImageNet-normalised, one image at a
# time at the export's declared batch.
predict_vs_ort() {
    python3 - "$1" "$2" <<'PY'
import json, sys
import numpy as np, onnxruntime as ort
from PIL import Image
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
inp = sess.get_inputs()[0]
rows = [json.loads(l) for l in open(sys.argv[2])]
mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
worst = 0.0
for r in rows:
    x = ((np.asarray(Image.open(r["file"]).convert("RGB")) / 255.0 - mean) / std)
    probs = sess.run(None, {inp.name: x.transpose(2, 0, 1)[None].astype(np.float32)})[0][0]
    worst = max([worst] + [abs(probs[t["index"]] - t["probability"]) for t in r["top"]])
sys.exit(0 if len(rows) == 14 and worst < 1e-4 else "%d rows, worst %g" % (len(rows), worst))
PY
}
for m in fixed_cnn pinned_cnn declared_cnn; do
    D=$TMP/$m
    mkdir -p "$D"
    "$GRAFT" finetune --model "$F/$m.onnx" --data "$TMP/images" --resize 0 --crop 16 \
        --epochs 3 --batch 8 --val-split 0 --seed 3 --no-cache --out "$D/t.onnx" \
        >"$D/ft.txt" 2>&1
    check "fixbatch_finetune_$m" $? "$(tail -2 "$D/ft.txt")"
    [ -s "$D/t.onnx" ] || continue
    out=$(run_vs_ort "$D/t.onnx" 5 2>&1)
    check "fixbatch_export_run_$m" $? "$out"
    "$GRAFT" predict --model "$D/t.onnx" "$TMP/images" --batch 4 --format jsonl --top-k 2 \
        >"$D/p.jsonl" 2>"$D/p.err"
    check "fixbatch_predict_$m" $? "$(cat "$D/p.err")"
    out=$(predict_vs_ort "$D/t.onnx" "$D/p.jsonl" 2>&1)
    check "fixbatch_predict_ort_$m" $? "$out"
    "$GRAFT" eval --model "$D/t.onnx" --data "$TMP/images" --batch 3 >"$D/e.txt" 2>&1 &&
        grep -q '^accuracy ' "$D/e.txt"
    check "fixbatch_eval_$m" $? "$(tail -2 "$D/e.txt")"
done
# The export of a let-go batch takes any batch in ONNX Runtime too; a pinned one keeps its batch.
python3 - "$TMP/declared_cnn/t.onnx" "$TMP/fixed_cnn/t.onnx" <<'PY'
import sys
import onnx
dims = lambda p: [d.dim_value or d.dim_param for d in
                  onnx.load(p).graph.input[0].type.tensor_type.shape.dim]
a, b = dims(sys.argv[1]), dims(sys.argv[2])
sys.exit(0 if a[0] == "batch" and b[0] == 1 else "%s %s" % (a, b))
PY
check fixbatch_export_batch_dims $? "declared_cnn's export should say 'batch', fixed_cnn's 1"

# ---- text: a fixed (B, 16) input: rows padded to 16; a longer --max-len cut to it (said once),
# a shorter one cuts the texts and still pads the rows to 16 ----
V=$TMP/vocab.txt
head -1000 "$ROOT/tests/data/tokenizer/vocab.txt" >"$V"
{
    echo "text,label"
    for w in good great fine nice happy; do echo "the $w movie,pos"; echo "a $w day,pos"; done
    for w in bad poor sad awful dull; do echo "the $w movie,neg"; echo "a $w day,neg"; done
    echo "the good and great and fine and nice and happy movie of a day that was not bad,pos"
} >"$TMP/train.csv"
printf 'the good movie\na dull day\nthe good and great and fine and nice and happy movie of a day that was not bad at all\n' >"$TMP/lines.txt"
# predict against ONNX Runtime fed graft tokenize's ids (cut at LEN, padded to 16), row by row.
text_vs_ort() {
    local model=$1 len=$2 preds=$3
    "$GRAFT" tokenize --vocab "$V" --max-len "$len" --pad "$TMP/lines.txt" >"$TMP/ids.jsonl"
    python3 - "$model" "$TMP/ids.jsonl" "$preds" <<'PY'
import json, sys
import numpy as np, onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
b = sess.get_inputs()[0].shape[0]
rows = [json.loads(l) for l in open(sys.argv[2])]
got = [json.loads(l) for l in open(sys.argv[3])]
worst = 0.0
for r, g in zip(rows, got):
    pad = 16 - len(r["input_ids"])
    ids = np.array(r["input_ids"] + [0] * pad, np.int64)[None].repeat(b, 0)
    mask = np.array(r["attention_mask"] + [0] * pad, np.int64)[None].repeat(b, 0)
    probs = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0][0]
    worst = max([worst] + [abs(probs[t["index"]] - t["probability"]) for t in g["top"]])
sys.exit(0 if len(got) == len(rows) == 3 and worst < 1e-4 else "worst %g" % worst)
PY
}
for m in fixed_text_b1 fixed_text_b2; do
    for len in 16 8 128; do
        D=$TMP/${m}_$len
        mkdir -p "$D"
        "$GRAFT" finetune --model "$F/$m.onnx" --data "$TMP/train.csv" --vocab "$V" \
            --max-len $len --pooling mean --val-split 0 --epochs 10 --lr 0.01 --seed 3 \
            --no-cache --batch 3 --out "$D/t.onnx" >"$D/ft.txt" 2>&1
        check "fixbatch_text_finetune_${m}_len$len" $? "$(tail -2 "$D/ft.txt")"
        [ -s "$D/t.onnx" ] || continue
        notes=$(grep -c "note: input 'input_ids' takes exactly 16 tokens: texts are cut to 16" \
            "$D/ft.txt")
        want=0
        [ $len = 128 ] && want=1
        check "fixbatch_text_note_${m}_len$len" $([ "$notes" = $want ] && echo 0 || echo 1) \
            "$notes notes about the fixed length (want $want)"
        "$GRAFT" predict --model "$D/t.onnx" --lines "$TMP/lines.txt" --format jsonl --top-k 2 \
            --batch 2 >"$D/p.jsonl" 2>"$D/p.err"
        check "fixbatch_text_predict_${m}_len$len" $? "$(cat "$D/p.err")"
        out=$(text_vs_ort "$D/t.onnx" $([ $len = 8 ] && echo 8 || echo 16) "$D/p.jsonl" 2>&1)
        check "fixbatch_text_predict_ort_${m}_len$len" $? "$out"
        "$GRAFT" eval --model "$D/t.onnx" --data "$TMP/train.csv" --batch 5 >"$D/e.txt" 2>&1 &&
            grep -q '^accuracy ' "$D/e.txt"
        check "fixbatch_text_eval_${m}_len$len" $? "$(tail -2 "$D/e.txt")"
    done
done

# Fine-tuning blocks of a model that runs one batch only: the training graph runs in chunks of
# it (batches of 3 over a batch pinned at 2: the last chunk padded); the export changed the
# trained projection and agrees with ONNX Runtime.
D=$TMP/fixed_text_b2_blocks
mkdir -p "$D"
"$GRAFT" finetune --model "$F/fixed_text_b2.onnx" --data "$TMP/train.csv" --vocab "$V" \
    --max-len 16 --pooling mean --val-split 0 --epochs 10 --lr 0.01 --seed 3 --no-cache \
    --batch 3 --train-from embedded --out "$D/t.onnx" >"$D/ft.txt" 2>&1
check fixbatch_text_train_from_chunks $? "$(tail -2 "$D/ft.txt")"
if [ -s "$D/t.onnx" ]; then
    "$GRAFT" predict --model "$D/t.onnx" --lines "$TMP/lines.txt" --format jsonl --top-k 2 \
        --batch 2 >"$D/p.jsonl" 2>"$D/p.err"
    out=$(text_vs_ort "$D/t.onnx" 16 "$D/p.jsonl" 2>&1)
    check fixbatch_text_train_from_export_ort $? "$out"
    python3 - "$F/fixed_text_b2.onnx" "$D/t.onnx" <<'PY'
import sys
import numpy as np, onnx
from onnx import numpy_helper
def weights(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
before, after = weights(sys.argv[1]), weights(sys.argv[2])
moved = [n for n, w in before.items() if n in after and after[n].shape == w.shape and
         w.dtype.kind == "f" and not np.array_equal(w, after[n])]
sys.exit(0 if moved else "no weight of the source model changed in the export")
PY
    check fixbatch_text_train_from_trained $? "the blocks' weights did not change"
fi

# A flatten computed from the input's batch (x.view(input.size(0), -1), as TorchScript writes
# it): shape inference leaves the feature size open at load; one probe run finds it, so a
# feature cache works (EfficientNet-Lite's export failed here with "a feature cache needs the
# feature size known when the model loads").
D=$TMP/computed_flatten
mkdir -p "$D"
"$GRAFT" finetune --model "$F/computed_flatten_cnn.onnx" --data "$ROOT/examples/digits/train" \
    --val-split 0.2 --epochs 1 --cache "$D/cache" --out "$D/t.onnx" >"$D/ft.txt" 2>&1 &&
    ls "$D"/cache/features-*.cache >/dev/null 2>&1
check fixbatch_computed_flatten_cache $? "$(tail -2 "$D/ft.txt")"
