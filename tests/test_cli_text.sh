#!/usr/bin/env bash
# tests/test_cli_text.sh GRAFT [GEN]: `graft predict` and `graft eval` on a text classifier that
# `graft finetune --vocab` trained on the tiny BERT: the export carries its tokenizer, predict's
# probabilities equal ONNX Runtime's on `graft tokenize`'s ids, every way of giving texts agrees,
# eval's accuracy equals the one predict's output gives, and the errors (no vocabulary, another
# vocabulary, an empty text, a CSV without the text column, text options on an image model).
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BERT=$GEN/bert_tiny_decomposed.onnx
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
check() { if [ "$2" = 0 ]; then pass "$1"; else fail "$1" "$3"; fi; }

if [ ! -f "$BERT" ]; then echo "SKIP cli_text: $BERT not generated"; exit 0; fi

# The tiny BERT's embedding has 1000 rows: the vocabulary keeps the first 1000 entries.
V=$TMP/vocab.txt
head -1000 tests/data/tokenizer/vocab.txt >"$V"
{
    echo "text,label"
    for w in good great fine nice happy; do echo "the $w movie,pos"; echo "a $w day,pos"; done
    for w in bad poor sad awful dull; do echo "the $w movie,neg"; echo "a $w day,neg"; done
    for w in table chair door; do echo "$w and $w,other"; done
} >"$TMP/train.csv"
"$GRAFT" finetune --model "$BERT" --data "$TMP/train.csv" --vocab "$V" --max-len 16 \
    --pooling mean --val-split 0 --epochs 30 --lr 0.01 --no-cache --out "$TMP/t.onnx" \
    >"$TMP/ft.txt" 2>&1
rc=$?
if [ $rc != 0 ] || [ ! -s "$TMP/t.onnx" ]; then
    fail text_finetune "rc $rc: $(tail -3 "$TMP/ft.txt")"
    exit 0
fi
pass text_finetune

# The export carries the vocabulary itself and the tokenizer's settings.
python3 - "$TMP/t.onnx" "$V" <<'PY'
import sys, onnx
meta = {p.key: p.value for p in onnx.load(sys.argv[1]).metadata_props}
want = {"graft.text.cased": "0", "graft.text.max_len": "16", "graft.text.pooling": "mean",
        "graft.text.special_ids": "[CLS]=2,[SEP]=3,[PAD]=0,[UNK]=1",
        "graft.text.inputs": "ids=input_ids,mask=attention_mask,type_ids=token_type_ids",
        "graft.classes": '["neg","other","pos"]'}
bad = [k for k, v in want.items() if meta.get(k) != v]
if meta.get("graft.text.vocab") != open(sys.argv[2], encoding="utf-8").read():
    bad.append("graft.text.vocab")
print("PASS text_export_metadata" if not bad else "FAIL text_export_metadata: %s" % bad)
PY

# predict against ONNX Runtime on graft tokenize's ids (padded to the model's max_len).
cat >"$TMP/lines.txt" <<'EOF'
the good movie
a dull day
chair and door
Hello, World! Tokens: café naïve
an unknownword xyzzy that runs on and on and on past the sixteen token limit of the model
EOF
"$GRAFT" predict --model "$TMP/t.onnx" --lines "$TMP/lines.txt" --format jsonl --top-k 3 \
    >"$TMP/p.jsonl" 2>"$TMP/p.err"
check text_predict_lines $? "$(cat "$TMP/p.err")"
"$GRAFT" tokenize --vocab "$V" --max-len 16 --pad "$TMP/lines.txt" >"$TMP/ids.jsonl"
python3 - "$TMP/t.onnx" "$TMP/ids.jsonl" "$TMP/p.jsonl" <<'PY'
import json, sys
import numpy as np, onnxruntime as ort
rows = [json.loads(l) for l in open(sys.argv[2])]
feed = {k: np.array([r[k] for r in rows], dtype=np.int64)
        for k in ("input_ids", "attention_mask", "token_type_ids")}
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
probs = sess.run(None, feed)[0]
names = json.loads(next(p.value for p in __import__("onnx").load(sys.argv[1]).metadata_props
                        if p.key == "graft.classes"))
got = [json.loads(l) for l in open(sys.argv[3])]
bad = []
if len(got) != len(rows):
    bad.append("%d predictions for %d lines" % (len(got), len(rows)))
for i, (g, p) in enumerate(zip(got, probs)):
    if g["file"] != "%s:%d" % (sys.argv[3].replace("p.jsonl", "lines.txt"), i + 1):
        bad.append("line %d named %s" % (i + 1, g["file"]))
    order = list(np.argsort(-p, kind="stable"))
    for r, t in enumerate(g["top"]):
        if t["index"] != order[r] or t["class"] != names[order[r]] or \
                abs(t["probability"] - p[order[r]]) > 1e-4:
            bad.append("line %d rank %d: %s, ORT %d %.6f" % (i + 1, r + 1, t, order[r], p[order[r]]))
print("PASS text_predict_matches_ort" if not bad else "FAIL text_predict_matches_ort: %s" % bad[:3])
PY

# The same text as --text, a .txt file, a folder, standard input and a CSV row: one answer.
T="the great day"
mkdir -p "$TMP/dir/sub"
printf '%s\n' "$T" >"$TMP/dir/sub/a.txt"
printf 'ignored' >"$TMP/dir/sub/b.md"
printf 'id\ttext\n7\t%s\n' "$T" >"$TMP/one.tsv"
"$GRAFT" predict --model "$TMP/t.onnx" --format csv --top-k 3 --text "$T" "$TMP/dir/sub/a.txt" \
    "$TMP/dir" "$TMP/one.tsv" - <<<"$T" >"$TMP/same.csv" 2>"$TMP/same.err"
rc=$?
names=$(awk -F, '$2 == 1 {print $1}' "$TMP/same.csv" | tr '\n' ' ')
want="text:1 $TMP/dir/sub/a.txt $TMP/dir/sub/a.txt $TMP/one.tsv:2 stdin:1 "
answers=$(cut -d, -f2- "$TMP/same.csv" | sed 1d | sort | uniq -c | awk '{print $1}' | sort -u)
if [ $rc = 0 ] && [ "$names" = "$want" ] && [ "$answers" = 5 ]; then pass text_predict_sources_agree
else fail text_predict_sources_agree "rc $rc, names '$names', counts '$answers': $(cat "$TMP/same.err")"; fi

# Without arguments, the lines of standard input when it is not a terminal.
printf '%s\n\n' "$T" | "$GRAFT" predict --model "$TMP/t.onnx" --top-k 1 >"$TMP/pipe.txt" 2>"$TMP/pipe.err"
rc=$?
if [ $rc = 1 ] && grep -q '^stdin:1: ' "$TMP/pipe.txt" && grep -q 'skipped stdin:2: empty text' "$TMP/pipe.err"
then pass text_predict_stdin_implicit; else fail text_predict_stdin_implicit "rc $rc: $(cat "$TMP/pipe.err")"; fi

# eval on a CSV and on a folder: its accuracy is the one predict's top-1 gives.
{
    echo "label,text"
    for w in good nice bad sad table; do
        case $w in good | nice) l=pos ;; table) l=other ;; *) l=neg ;; esac
        echo "$l,what a $w thing"; echo "$l,$w"
    done
} >"$TMP/test.csv"
for c in pos neg other; do mkdir -p "$TMP/folder/$c"; done
n=0
tail -n +2 "$TMP/test.csv" | while IFS=, read -r l t; do
    n=$((n + 1)); printf '%s' "$t" >"$TMP/folder/$l/$n.txt"
done
for data in "$TMP/test.csv" "$TMP/folder"; do
    kind=$([ -d "$data" ] && echo folder || echo csv)
    "$GRAFT" eval --model "$TMP/t.onnx" --data "$data" --json >"$TMP/e.json" 2>"$TMP/e.err" &&
        "$GRAFT" predict --model "$TMP/t.onnx" --top-k 1 --format csv "$data" >"$TMP/e.csv" \
            2>>"$TMP/e.err"
    rc=$?
    python3 - "$TMP/e.json" "$TMP/e.csv" "$data" <<PY
import csv, json, os, sys
ev = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2])))
data = sys.argv[3]
if os.path.isdir(data):
    truth = {r["file"]: os.path.basename(os.path.dirname(r["file"])) for r in rows}
else:
    labels = [r["label"] for r in csv.DictReader(open(data))]
    truth = {r["file"]: labels[int(r["file"].rsplit(":", 1)[1]) - 2] for r in rows}
right = sum(r["class"] == truth[r["file"]] for r in rows)
ok = $rc == 0 and ev["samples"] == len(rows) == 10 and ev["correct"] == right and \
    abs(ev["accuracy"] - right / len(rows)) < 1e-6 and len(ev["confusion"]) == 3
print("PASS text_eval_$kind" if ok else "FAIL text_eval_$kind: eval %s/%s, predict %d/%d" %
      (ev.get("correct"), ev.get("samples"), right, len(rows)))
PY
done
"$GRAFT" eval --model "$TMP/t.onnx" --data "$TMP/test.csv" >"$TMP/e.txt" 2>&1
if grep -q '^data .*: 10 texts in 3 classes' "$TMP/e.txt" && grep -q '^confusion matrix' "$TMP/e.txt"
then pass text_eval_tables; else fail text_eval_tables "$(head -3 "$TMP/e.txt")"; fi

# graft info gives the vocabulary's size, not its 1000 lines.
"$GRAFT" info "$TMP/t.onnx" >"$TMP/info.txt"
if grep -q 'graft.text.vocab = (1000 lines' "$TMP/info.txt" && [ "$(wc -l <"$TMP/info.txt")" -lt 40 ]
then pass text_info_vocab_summary; else fail text_info_vocab_summary "$(grep vocab "$TMP/info.txt")"; fi

# A TSV whose columns are named otherwise: --text-column and --label-column, recorded in the
# checkpoint so that graft export replays them.
{
    printf 'id\treview\tsentiment\n'
    tail -n +2 "$TMP/train.csv" | awk -F, '{printf "%d\t%s\t%s\n", NR, $1, $2}'
} >"$TMP/named.tsv"
"$GRAFT" finetune --model "$BERT" --data "$TMP/named.tsv" --vocab "$V" --max-len 16 \
    --text-column review --label-column sentiment --val-split 0 --epochs 2 --no-cache \
    --checkpoint "$TMP/nck" --out "$TMP/named.onnx" >"$TMP/named.txt" 2>&1 &&
    "$GRAFT" export --checkpoint "$TMP/nck" --out "$TMP/named_export.onnx" >>"$TMP/named.txt" 2>&1
rc=$?
python3 - "$TMP/nck/last.safetensors" $rc <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb")
meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
want = {"graft.run.text-column": "review", "graft.run.label-column": "sentiment",
        "graft.run.pad": "longest", "graft.classes": "3"}
bad = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
ok = sys.argv[2] == "0" and not bad
print("PASS text_columns_named" if ok else "FAIL text_columns_named: rc %s, %s" % (sys.argv[2], bad))
PY
[ $rc = 0 ] || tail -3 "$TMP/named.txt"

# Padding: per batch (the default) and to --max-len give the same predictions and accuracy.
"$GRAFT" predict --model "$TMP/t.onnx" --lines "$TMP/lines.txt" --format jsonl --top-k 3 \
    --pad max >"$TMP/pmax.jsonl" 2>"$TMP/pmax.err"
python3 - "$TMP/p.jsonl" "$TMP/pmax.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
d = max(abs(x["probability"] - y["probability"]) for r, s in zip(a, b)
        for x, y in zip(r["top"], s["top"])) if len(a) == len(b) == 5 else 1
same = all([t["index"] for t in r["top"]] == [t["index"] for t in s["top"]] for r, s in zip(a, b))
print("PASS text_predict_pad_max_same" if d < 1e-5 and same else
      "FAIL text_predict_pad_max_same: max difference %g" % d)
PY
"$GRAFT" eval --model "$TMP/t.onnx" --data "$TMP/test.csv" --json >"$TMP/e1.json" 2>&1
"$GRAFT" eval --model "$TMP/t.onnx" --data "$TMP/test.csv" --json --pad max >"$TMP/e2.json" 2>&1
if [ "$(grep -v '"seconds"' "$TMP/e1.json")" = "$(grep -v '"seconds"' "$TMP/e2.json")" ] && grep -q '"samples": *10' "$TMP/e1.json"; then
    pass text_eval_pad_max_same
else fail text_eval_pad_max_same "$(head -c 300 "$TMP/e2.json")"; fi

# One --cache folder keeps a feature set per setting: max-len 16, then 12, then 16 again (its
# set reused: no sample through the backbone); --pad max is another set (the padding mode is in
# the key). Each set has a training and a validation file.
cache_run() { # NAME OPTIONS...: the samples the backbone ran, from the summary
    local name=$1
    shift
    "$GRAFT" finetune --model "$BERT" --data "$TMP/train.csv" --vocab "$V" --epochs 1 \
        --cache "$TMP/fc" --out "$TMP/fc.onnx" "$@" >"$TMP/fc_$name.txt" 2>&1 || echo failed
    sed -n 's/.*time *backbone [0-9.]*s (\([0-9]*\) samples run.*/\1/p' "$TMP/fc_$name.txt"
}
runs="$(cache_run a --max-len 16) $(cache_run b --max-len 12) $(cache_run c --max-len 16)"
runs="$runs $(cache_run d --max-len 16 --pad max) $(cache_run e --max-len 16 --pooling mean)"
files=$(find "$TMP/fc" -name 'features-*.cache' | wc -l)
if [ "$runs" = "23 23 0 23 23" ] && [ "$files" = 8 ]; then pass text_cache_folder_sets
else fail text_cache_folder_sets "samples run: '$runs' (want 23 23 0 23 23), $files files (want 8)"; fi

# Errors: one line on stderr naming what is wrong.
one_error() { # NAME STATUS PATTERN COMMAND...
    local name=$1 want=$2 pat=$3
    shift 3
    "$@" >/dev/null 2>"$TMP/err.txt" </dev/null
    local rc=$?
    if [ $rc = "$want" ] && [ "$(wc -l <"$TMP/err.txt")" = 1 ] && grep -q -- "$pat" "$TMP/err.txt"
    then pass "$name"; else fail "$name" "rc $rc: $(head -3 "$TMP/err.txt")"; fi
}
python3 - "$TMP/t.onnx" "$TMP/bare.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
keep = [p for p in m.metadata_props if not p.key.startswith("graft.text.")]
del m.metadata_props[:]
m.metadata_props.extend(keep)
onnx.save(m, sys.argv[2])
PY
one_error text_predict_no_vocab 1 'with --vocab or --tokenizer' \
    "$GRAFT" predict --model "$TMP/bare.onnx" --text "$T"
one_error text_eval_no_vocab 1 'carries no tokenizer' \
    "$GRAFT" eval --model "$TMP/bare.onnx" --data "$TMP/test.csv"
"$GRAFT" predict --model "$TMP/bare.onnx" --vocab "$V" --max-len 16 --lines "$TMP/lines.txt" \
    --format jsonl --top-k 3 >"$TMP/bare.jsonl" 2>"$TMP/bare.err"
rc=$?
sed -i "s|$TMP/lines.txt|L|" "$TMP/bare.jsonl"
sed "s|$TMP/lines.txt|L|" "$TMP/p.jsonl" >"$TMP/p2.jsonl"
if [ $rc = 0 ] && cmp -s "$TMP/bare.jsonl" "$TMP/p2.jsonl"; then pass text_predict_vocab_option
else fail text_predict_vocab_option "rc $rc: $(cat "$TMP/bare.err")"; fi
# A vocabulary whose [CLS] has another id than the model was trained with.
{ sed -n 3p "$V"; sed -n 1,2p "$V"; sed -n '4,$p' "$V"; } >"$TMP/other_vocab.txt"
one_error text_predict_other_vocab 1 '\[CLS\] is id 0 there but the model was trained with id 2' \
    "$GRAFT" predict --model "$TMP/t.onnx" --vocab "$TMP/other_vocab.txt" --text "$T"
one_error text_predict_empty_text 1 'skipped text:1: empty text' \
    "$GRAFT" predict --model "$TMP/t.onnx" --text "  "
: >"$TMP/empty.txt"
one_error text_predict_empty_file 1 "skipped $TMP/empty.txt: empty text" \
    "$GRAFT" predict --model "$TMP/t.onnx" "$TMP/empty.txt"
printf 'body,label\nhello,pos\n' >"$TMP/nocol.csv"
one_error text_predict_csv_no_text_column 1 "nocol.csv: the header (line 1) has no text column 'text'" \
    "$GRAFT" predict --model "$TMP/t.onnx" "$TMP/nocol.csv"
one_error text_eval_csv_no_text_column 1 "has no text column 'text'" \
    "$GRAFT" eval --model "$TMP/t.onnx" --data "$TMP/nocol.csv"
if "$GRAFT" predict --model "$TMP/t.onnx" --text-column body "$TMP/nocol.csv" 2>/dev/null |
    grep -q "nocol.csv:2: "; then pass text_predict_text_column
else fail text_predict_text_column "no prediction for nocol.csv:2"; fi
one_error text_predict_missing_file 2 "cannot read '$TMP/nope.txt'" \
    "$GRAFT" predict --model "$TMP/t.onnx" "$TMP/nope.txt"
mkdir "$TMP/notxt" && : >"$TMP/notxt/x.md"
one_error text_predict_folder_without_txt 2 "no .txt files under '$TMP/notxt'" \
    "$GRAFT" predict --model "$TMP/t.onnx" "$TMP/notxt"
one_error text_options_on_image_model 2 'are for text models' \
    "$GRAFT" predict --model models/digits_cnn.onnx --text "$T"
one_error text_predict_bad_max_len 2 "max-len" \
    "$GRAFT" predict --model "$TMP/t.onnx" --max-len 2 --text "$T"
one_error text_columns_need_vocab 2 '\-\-text-column review: is for text data' \
    "$GRAFT" finetune --model models/digits_cnn.onnx --data examples/digits/train \
    --text-column review --out "$TMP/x.onnx"
one_error text_pad_bad_choice 2 'pad' \
    "$GRAFT" finetune --model "$BERT" --data "$TMP/train.csv" --vocab "$V" --pad short \
    --out "$TMP/x.onnx"
exit 0
