#!/usr/bin/env bash
# tests/test_cli_names.sh GRAFT [GEN]: models under the names exporters write
# (tools/make_name_fixtures.py): image inputs named x, input.1, pixel_values, 0..., NHWC,
# over-long names, and names equal to graft's own (features, logits, probabilities, head.0.weight)
# load, fine-tune, export (checked against ONNX Runtime), predict, eval and prune; text models
# with 1, 2 or 3 inputs under any names get each input's role from the graph, record it, and
# predict and eval match ONNX Runtime; inputs whose role cannot be told are clear errors.
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
F=$TMP/fx
check() { if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi; }

for m in mobilenet_tiny bert_tiny_decomposed; do
    if [ ! -f "$GEN/$m.onnx" ]; then echo "SKIP cli_names: $GEN/$m.onnx not generated"; exit 0; fi
done
python3 "$ROOT/tools/make_name_fixtures.py" "$GEN" "$F" >"$TMP/fx.log" 2>&1
check names_fixtures $? "$(tail -3 "$TMP/fx.log")"
[ -f "$F/roles.txt" ] || exit 1

# 64x64 images (the model's input size), so that --resize 0 --crop 64 gives the pixels as they
# are and ONNX Runtime can be fed the same arrays.
python3 - "$TMP/images" <<'PY'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c, color in (("blue", (30, 40, 200)), ("red", (200, 40, 30))):
    os.makedirs(os.path.join(sys.argv[1], c))
    for i in range(6):
        px = np.clip(np.array(color) + rng.normal(0, 40, (64, 64, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(px).save(os.path.join(sys.argv[1], c, "%d.png" % i))
PY

# ort_run MODEL OUTDIR: ONNX Runtime on random inputs saved as OUTDIR/in.<k>.npy (the declared
# shape, batch 2); graft run on the same; "ok" when they agree within 1e-4 relative.
ort_vs_graft() {
    local model=$1 dir=$2
    mkdir -p "$dir/graft"
    python3 - "$model" "$dir" >"$dir/args" <<'PY' || return 1
import sys
import numpy as np, onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
rng = np.random.default_rng(1)
feeds = {}
for k, i in enumerate(sess.get_inputs()):
    shape = [d if isinstance(d, int) else (2 if j == 0 else 16) for j, d in enumerate(i.shape)]
    if i.type == "tensor(float)":
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    else:
        feeds[i.name] = rng.integers(0, 2, shape).astype(np.int64)
    np.save("%s/in.%d.npy" % (sys.argv[2], k), feeds[i.name])
    print("--input=%s=%s/in.%d.npy" % (i.name, sys.argv[2], k))
np.save(sys.argv[2] + "/ort.npy", sess.run(None, feeds)[0])
PY
    local args=()
    while IFS= read -r a; do args+=("$a"); done <"$dir/args"
    "$GRAFT" run "$model" "${args[@]}" --output-dir "$dir/graft" >/dev/null 2>"$dir/err" || return 1
    python3 - "$model" "$dir" <<'PY'
import glob, sys
import numpy as np, onnx
first = onnx.load(sys.argv[1]).graph.output[0].name
if len(first.encode()) > 200:  # cut, with an FNV-1a hash of the whole name (graft run --help)
    h = 0xcbf29ce484222325
    for c in first.encode():
        h = ((h ^ c) * 0x100000001b3) % 2**64
    first = first.encode()[:183].decode() + "~%016x" % h
name = "".join("_" if c in "/:\\" else c for c in first)
want, got = np.load(sys.argv[2] + "/ort.npy"), np.load("%s/graft/%s.npy" % (sys.argv[2], name))
err = np.abs(want - got).max() / max(np.abs(want).max(), 1e-12)
sys.exit(0 if want.shape == got.shape and err < 1e-4 else "%s vs %s, error %g" %
         (want.shape, got.shape, err))
PY
}

# predict's probabilities against ONNX Runtime on the folder's pixels, ImageNet-normalised.
predict_vs_ort() {
    python3 - "$1" "$2" "$TMP/images" <<'PY'
import json, sys
import numpy as np, onnxruntime as ort
from PIL import Image
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
inp = sess.get_inputs()[0]
rows = [json.loads(l) for l in open(sys.argv[2])]
mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
x = np.stack([(np.asarray(Image.open(r["file"]).convert("RGB")) / 255.0 - mean) / std
              for r in rows]).astype(np.float32)
if inp.shape[1] != 64:
    x = x.transpose(0, 3, 1, 2)
probs = sess.run(None, {inp.name: x})[0]
worst = max(abs(probs[i][t["index"]] - t["probability"]) for i, r in enumerate(rows)
            for t in r["top"])
sys.exit(0 if len(rows) == 12 and worst < 1e-4 else "%d rows, worst %g" % (len(rows), worst))
PY
}

IMG=(--resize 0 --crop 64 --epochs 3 --val-split 0 --seed 3)
for model in "$F"/img_*.onnx; do
    tag=$(basename "$model" .onnx)
    D=$TMP/$tag
    mkdir -p "$D"
    out=$(ort_vs_graft "$model" "$D/load" 2>&1)
    check "names_run_${tag}" $? "$out $(cat "$D/load/err" 2>/dev/null)"
    cache=(--no-cache)
    [ "$tag" = img_collide ] && cache=(--cache "$D/cache")
    "$GRAFT" finetune --model "$model" --data "$TMP/images" "${IMG[@]}" "${cache[@]}" \
        --out "$D/t.onnx" >"$D/ft.txt" 2>&1
    check "names_finetune_${tag}" $? "$(tail -2 "$D/ft.txt")"
    [ -s "$D/t.onnx" ] || continue
    out=$(ort_vs_graft "$D/t.onnx" "$D/export" 2>&1)
    check "names_export_ort_${tag}" $? "$out $(cat "$D/export/err" 2>/dev/null)"
    "$GRAFT" predict --model "$D/t.onnx" "$TMP/images" --format jsonl --top-k 2 >"$D/p.jsonl" \
        2>"$D/p.err"
    check "names_predict_${tag}" $? "$(cat "$D/p.err")"
    out=$(predict_vs_ort "$D/t.onnx" "$D/p.jsonl" 2>&1)
    check "names_predict_ort_${tag}" $? "$out"
    "$GRAFT" eval --model "$D/t.onnx" --data "$TMP/images" >"$D/e.txt" 2>&1 &&
        grep -q '^accuracy ' "$D/e.txt"
    check "names_eval_${tag}" $? "$(tail -2 "$D/e.txt")"
    "$GRAFT" prune --model "$model" --method channels --sparsity 0.3 --iters 1 \
        --out "$D/pruned.onnx" >"$D/pr.txt" 2>&1 &&
        python3 -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]))' \
            "$D/pruned.onnx"
    check "names_prune_${tag}" $? "$(tail -2 "$D/pr.txt")"
done

# ---- text: roles from the graph ----
V=$TMP/vocab.txt
head -1000 "$ROOT/tests/data/tokenizer/vocab.txt" >"$V"
{
    echo "text,label"
    for w in good great fine nice happy; do echo "the $w movie,pos"; echo "a $w day,pos"; done
    for w in bad poor sad awful dull; do echo "the $w movie,neg"; echo "a $w day,neg"; done
} >"$TMP/train.csv"
printf 'the good movie\na dull day\nchair and door\nan unknownword xyzzy\n' >"$TMP/lines.txt"
"$GRAFT" tokenize --vocab "$V" --max-len 16 --pad "$TMP/lines.txt" >"$TMP/ids.jsonl"
while read -r file roles; do
    tag=${file%.onnx}
    D=$TMP/$tag
    mkdir -p "$D"
    pooling=mean
    case $roles in *mask=*) ;; *) pooling=cls ;; esac
    "$GRAFT" finetune --model "$F/$file" --data "$TMP/train.csv" --vocab "$V" --max-len 16 \
        --pooling $pooling --val-split 0 --epochs 20 --lr 0.01 --seed 3 --no-cache \
        --out "$D/t.onnx" >"$D/ft.txt" 2>&1
    check "names_text_finetune_${tag}" $? "$(tail -2 "$D/ft.txt")"
    [ -s "$D/t.onnx" ] || continue
    python3 - "$D/t.onnx" "$roles" <<'PY'
import sys, onnx
meta = {p.key: p.value for p in onnx.load(sys.argv[1]).metadata_props}
sys.exit(0 if meta.get("graft.text.inputs") == sys.argv[2] else meta.get("graft.text.inputs"))
PY
    check "names_text_roles_${tag}" $? "recorded roles differ from '$roles'"
    "$GRAFT" predict --model "$D/t.onnx" --lines "$TMP/lines.txt" --format jsonl --top-k 2 \
        >"$D/p.jsonl" 2>"$D/p.err"
    check "names_text_predict_${tag}" $? "$(cat "$D/p.err")"
    python3 - "$D/t.onnx" "$roles" "$TMP/ids.jsonl" "$D/p.jsonl" <<'PY'
import json, sys
import numpy as np, onnxruntime as ort
arrays = {"ids": "input_ids", "mask": "attention_mask", "type_ids": "token_type_ids"}
rows = [json.loads(l) for l in open(sys.argv[3])]
feed = {}
for pair in sys.argv[2].split(","):
    role, name = pair.split("=", 1)
    feed[name] = np.array([r[arrays[role]] for r in rows], dtype=np.int64)
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
probs = sess.run(None, feed)[0]
got = [json.loads(l) for l in open(sys.argv[4])]
worst = max(abs(probs[i][t["index"]] - t["probability"]) for i, g in enumerate(got)
            for t in g["top"])
sys.exit(0 if len(got) == len(rows) and worst < 1e-4 else "worst %g" % worst)
PY
    check "names_text_predict_ort_${tag}" $? "predict differs from ONNX Runtime"
    "$GRAFT" eval --model "$D/t.onnx" --data "$TMP/train.csv" >"$D/e.txt" 2>&1 &&
        grep -q '^accuracy ' "$D/e.txt"
    check "names_text_eval_${tag}" $? "$(tail -2 "$D/e.txt")"
done <"$F/roles.txt"

# Without the type-ids input (folded to row 0 of its table, what all-zero type ids give) the
# model computes what the 3-input one does: the same head, the same probabilities.
python3 - "$TMP/txt2_hf/p.jsonl" "$TMP/txt3_dotted/p.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
worst = max(abs(x["probability"] - y["probability"]) for r, s in zip(a, b)
            for x, y in zip(r["top"], s["top"]))
sys.exit(0 if len(a) == len(b) == 4 and worst < 1e-4 else "worst %g" % worst)
PY
check names_text_two_inputs_equal_three $? "2- and 3-input predictions differ"

# Inputs whose role cannot be told: one error line naming the inputs, before any training.
"$GRAFT" finetune --model "$F/bad_position_ids.onnx" --data "$TMP/train.csv" --vocab "$V" \
    --max-len 16 --out "$TMP/bad.onnx" >"$TMP/o.txt" 2>"$TMP/e.txt"
[ $? = 1 ] && [ "$(wc -l <"$TMP/e.txt")" = 1 ] && grep -q "'position_ids'" "$TMP/e.txt" &&
    grep -q "1 to 3 inputs" "$TMP/e.txt" && [ ! -e "$TMP/bad.onnx" ]
check names_text_error_four_inputs $? "$(cat "$TMP/e.txt")"
"$GRAFT" finetune --model "$F/bad_unknown.onnx" --data "$TMP/train.csv" --vocab "$V" \
    --max-len 16 --out "$TMP/bad.onnx" >"$TMP/o.txt" 2>"$TMP/e.txt"
[ $? = 1 ] && [ "$(wc -l <"$TMP/e.txt")" = 1 ] &&
    grep -q "'tokens', 'attention_mask', 'extra': cannot tell what 'extra' takes" "$TMP/e.txt"
check names_text_error_no_role $? "$(cat "$TMP/e.txt")"
