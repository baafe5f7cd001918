#!/usr/bin/env bash
# tests/test_cli_text_hf.sh GRAFT [GEN] [HFDIR]: `graft finetune --tokenizer tokenizer.json` on
# the tiny BERT with RoBERTa's (byte-level BPE) and XLM-R's (Unigram) layouts: the export carries
# the tokenizer.json and its special tokens' ids, predict's probabilities equal ONNX Runtime's on
# the tokenizers package's ids, eval runs from the model alone, and a vocab.txt whose special
# tokens differ is refused. HFDIR (default build/hf-tokenizers) comes from
# tools/make_hf_tokenizers.py, made here when missing.
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
HF=${3:-build/hf-tokenizers}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BERT=$GEN/bert_tiny_decomposed.onnx
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

if [ ! -f "$BERT" ]; then echo "SKIP cli_text_hf: $BERT not generated"; exit 0; fi
if ! python3 -c 'import tokenizers, sentencepiece' 2>/dev/null; then
    echo "SKIP cli_text_hf: no tokenizers/sentencepiece package (tools/install-deps.sh)"; exit 0
fi
if [ ! -f "$HF/roberta_small/tokenizer.json" ]; then
    python3 tools/make_hf_tokenizers.py "$HF" >/dev/null || { fail cli_text_hf_fixtures "make"; exit 0; }
fi
{
    echo "text,label"
    for w in good great fine nice happy; do echo "the $w movie,pos"; echo "a $w day,pos"; done
    for w in bad poor sad awful dull; do echo "the $w movie,neg"; echo "a $w day,neg"; done
    for w in table chair door; do echo "$w and $w,other"; done
} >"$TMP/train.csv"
cat >"$TMP/lines.txt" <<'EOF'
the good movie
a dull day
chair and door
Hello, World! Tokens: café naïve <mask> 日本語
an unknownword xyzzy that runs on and on and on past the sixteen token limit of the model
EOF

for name in roberta_small xlmr_small; do
    TOK=$HF/$name/tokenizer.json
    OUT=$TMP/$name.onnx
    "$GRAFT" finetune --model "$BERT" --data "$TMP/train.csv" --tokenizer "$TOK" --max-len 16 \
        --pooling mean --val-split 0 --epochs 20 --lr 0.01 --no-cache --out "$OUT" \
        >"$TMP/ft.txt" 2>&1
    rc=$?
    if [ $rc != 0 ] || [ ! -s "$OUT" ]; then
        fail "${name}_finetune" "rc $rc: $(tail -3 "$TMP/ft.txt")"
        continue
    fi
    pass "${name}_finetune"
    "$GRAFT" predict --model "$OUT" --lines "$TMP/lines.txt" --format jsonl --top-k 3 \
        >"$TMP/p.jsonl" 2>"$TMP/p.err" || fail "${name}_predict" "$(cat "$TMP/p.err")"
    python3 - "$OUT" "$TOK" "$TMP/lines.txt" "$TMP/p.jsonl" "$name" <<'PY'
import json, sys
import numpy as np, onnx, onnxruntime as ort
from tokenizers import Tokenizer
model, tok_path, lines_path, pred_path, name = sys.argv[1:]
meta = {p.key: p.value for p in onnx.load(model).metadata_props}
bad = []
if meta.get("graft.text.tokenizer") != open(tok_path, encoding="utf-8").read():
    bad.append("graft.text.tokenizer is not the file")
if "graft.text.vocab" in meta:
    bad.append("a graft.text.vocab too")
if meta.get("graft.text.special_ids") != "<s>=0,</s>=2,<pad>=1,<unk>=3":
    bad.append("special_ids %r" % meta.get("graft.text.special_ids"))
print(f"PASS {name}_export_metadata" if not bad else f"FAIL {name}_export_metadata: {bad}")
tok = Tokenizer.from_file(tok_path)
tok.enable_truncation(max_length=16)
tok.enable_padding(pad_id=1, pad_token="<pad>", length=16)
lines = open(lines_path, encoding="utf-8").read().split("\n")[:-1]
enc = [tok.encode(t) for t in lines]
feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
probs = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)[0]
got = [json.loads(l) for l in open(pred_path)]
bad = [] if len(got) == len(lines) else ["%d predictions for %d lines" % (len(got), len(lines))]
for i, (g, p) in enumerate(zip(got, probs)):
    order = list(np.argsort(-p, kind="stable"))
    for r, t in enumerate(g["top"]):
        if t["index"] != order[r] or abs(t["probability"] - p[order[r]]) > 1e-4:
            bad.append("line %d rank %d: %s, ORT %d %.6f" % (i + 1, r + 1, t, order[r], p[order[r]]))
print(f"PASS {name}_predict_matches_ort" if not bad else f"FAIL {name}_predict_matches_ort: {bad[:3]}")
PY
    if "$GRAFT" eval --model "$OUT" --data "$TMP/train.csv" --json >"$TMP/e.json" 2>"$TMP/e.err" &&
        grep -q '"accuracy"' "$TMP/e.json"; then pass "${name}_eval"
    else fail "${name}_eval" "$(cat "$TMP/e.err")"; fi
    # A BERT vocab.txt has none of <s>, </s>, <pad>, <unk>: predict refuses it, naming the token.
    head -1000 tests/data/tokenizer/vocab.txt >"$TMP/vocab.txt"
    "$GRAFT" predict --model "$OUT" --vocab "$TMP/vocab.txt" --text "a good day" \
        >/dev/null 2>"$TMP/v.err"
    rc=$?
    if [ $rc != 0 ] && grep -q "<s> is id -1 there but the model was trained with id 0" "$TMP/v.err"
    then pass "${name}_other_vocab_refused"; else fail "${name}_other_vocab_refused" "rc $rc: $(cat "$TMP/v.err")"; fi
done
