#!/usr/bin/env bash
# tests/test_cli_data_folders.sh GRAFT [GEN]: data folders with link loops, links to '.', class
# folders linking to '.' or to another class, a file reached twice, a dangling link and a FIFO:
# `graft finetune` over class folders of images and of text and `graft predict` over an image
# folder and a text folder finish (under `timeout`: a FIFO opened would hang), list each file
# once, and name every entry left out with its reason.
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
check() { # check NAME CONDITION-EXIT-CODE DETAIL
    if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi
}
# same NAME WANT-FILE GOT-FILE: the lines are exactly these
same() {
    diff "$2" "$3" >"$TMP/diff.txt"
    check "$1" $? "$(cat "$TMP/diff.txt")"
}
# hostile DIR EXT: the entries every folder below gets (EXT: the listed files' suffix)
hostile() {
    ln -s .. "$1/sub/loop"
    ln -s . "$1/self"
    ln -s "a$2" "$1/twice$2"
    ln -s nowhere "$1/gone$2"
    mkfifo "$1/pipe$2"
}

# ---- image class folders: finetune, then predict over one class folder ----
python3 "$ROOT/tools/make_image_prep_fixtures.py" "$TMP/fx" >"$TMP/fx.log" 2>&1
check data_folders_fixtures $? "$(tail -3 "$TMP/fx.log")"
[ -f "$TMP/fx/fixed32.onnx" ] || exit 1
I=$TMP/img
mkdir -p "$I/blue/sub" "$I/red"
cp "$TMP/fx/images/blue/blue0.png" "$I/blue/a.png"
cp "$TMP/fx/images/blue/blue1.jpg" "$I/blue/b.jpg"
cp "$TMP/fx/images/blue/blue2.png" "$I/blue/sub/c.png"
cp "$TMP/fx/images/red/red0.png" "$I/red/r0.png"
cp "$TMP/fx/images/red/red1.jpg" "$I/red/r1.jpg"
cp "$TMP/fx/images/red/red2.png" "$I/red/r2.png"
hostile "$I/blue" .png
ln -s . "$I/dot"    # a class folder linking to '.'
ln -s red "$I/alias" # a class folder linking to another class
timeout 120 "$GRAFT" finetune --model "$TMP/fx/fixed32.onnx" --data "$I" --val-split 0 \
    --epochs 1 --seed 1 --no-cache --out "$TMP/a.onnx" >"$TMP/ft.txt" 2>"$TMP/ft.err"
rc=$?
check data_folders_finetune_images_finishes $([ $rc = 0 ] && [ -s "$TMP/a.onnx" ]; echo $?) \
    "rc $rc: $(tail -3 "$TMP/ft.err")"
cat >"$TMP/want.txt" <<EOF
  skipped files     7
    $I/alias: same folder as '$I/red' (listed once)
    $I/dot: link loop: leads back to '$I' (not entered again)
    $I/blue/gone.png: dangling link (to 'nowhere', which does not exist)
    $I/blue/pipe.png: not a regular file (a FIFO; not opened)
    $I/blue/self: link loop: leads back to '$I/blue' (not entered again)
    $I/blue/sub/loop: link loop: leads back to '$I/blue' (not entered again)
    $I/blue/twice.png: same file as '$I/blue/a.png' (listed once)
EOF
sed -n '/^  skipped files/,/^  [a-z]/p' "$TMP/ft.txt" | grep -E '^  (skipped files|  )' >"$TMP/got.txt"
same data_folders_finetune_images_skipped "$TMP/want.txt" "$TMP/got.txt"
# classes NAME MODEL N CLASSES-JSON: the export's classes, and N samples trained on (each once)
classes() {
    python3 -c 'import onnx, sys
m = {p.key: p.value for p in onnx.load(sys.argv[1]).metadata_props}
sys.exit(m.get("graft.classes") != sys.argv[2])' "$2" "$4" &&
        grep -q "^backbone: features of $3 samples" "$TMP/ft.txt"
    check "$1" $? "$(grep -E '^backbone: features' "$TMP/ft.txt")"
}
classes data_folders_finetune_images_classes "$TMP/a.onnx" 6 '["blue","red"]'

timeout 60 "$GRAFT" predict --model "$TMP/a.onnx" --top-k 1 --format csv "$I/blue" \
    >"$TMP/pred.csv" 2>"$TMP/pred.err"
rc=$?
tail -n +2 "$TMP/pred.csv" | cut -d, -f1 >"$TMP/got.txt"
printf '%s\n' "$I/blue/a.png" "$I/blue/b.jpg" "$I/blue/sub/c.png" >"$TMP/want.txt"
check data_folders_predict_images_rc $([ $rc = 1 ]; echo $?) "rc $rc (want 1: files skipped)"
same data_folders_predict_images_each_once "$TMP/want.txt" "$TMP/got.txt"
cat >"$TMP/want.txt" <<EOF
graft predict: warning: skipped '$I/blue/gone.png': dangling link (to 'nowhere', which does not exist)
graft predict: warning: skipped '$I/blue/pipe.png': not a regular file (a FIFO; not opened)
graft predict: warning: skipped '$I/blue/self': link loop: leads back to '$I/blue' (not entered again)
graft predict: warning: skipped '$I/blue/sub/loop': link loop: leads back to '$I/blue' (not entered again)
graft predict: warning: skipped '$I/blue/twice.png': same file as '$I/blue/a.png' (listed once)
EOF
same data_folders_predict_images_skipped "$TMP/want.txt" "$TMP/pred.err"
# Only repeats left out (a link loop, a file reached twice): nothing lost, success.
rm "$I/blue/gone.png" "$I/blue/pipe.png"
timeout 60 "$GRAFT" predict --model "$TMP/a.onnx" --top-k 1 "$I/blue" >"$TMP/pred.txt" 2>"$TMP/pred.err"
rc=$?
check data_folders_predict_images_repeats_only $([ $rc = 0 ] && [ "$(wc -l <"$TMP/pred.txt")" = 3 ] &&
    [ "$(wc -l <"$TMP/pred.err")" = 3 ]; echo $?) "rc $rc: $(cat "$TMP/pred.err")"

# ---- text class folders: finetune, then predict over a text folder ----
BERT=$GEN/bert_tiny_decomposed.onnx
if [ ! -f "$BERT" ]; then
    echo "SKIP data_folders_text: $BERT not generated"
    exit 0
fi
V=$TMP/vocab.txt
head -1000 "$ROOT/tests/data/tokenizer/vocab.txt" >"$V"
T=$TMP/text
mkdir -p "$T/pos/sub" "$T/neg"
echo "a good movie" >"$T/pos/a.txt"
echo "a great day" >"$T/pos/b.txt"
echo "a bad movie" >"$T/neg/a.txt"
echo "a dull day" >"$T/neg/b.txt"
hostile "$T/pos" .txt
ln -s . "$T/dot"
ln -s neg "$T/alias"
timeout 120 "$GRAFT" finetune --model "$BERT" --data "$T" --vocab "$V" --max-len 16 \
    --val-split 0 --epochs 1 --no-cache --out "$TMP/t.onnx" >"$TMP/ft.txt" 2>"$TMP/ft.err"
rc=$?
check data_folders_finetune_text_finishes $([ $rc = 0 ] && [ -s "$TMP/t.onnx" ]; echo $?) \
    "rc $rc: $(tail -3 "$TMP/ft.err")"
cat >"$TMP/want.txt" <<EOF
  skipped files     7
    $T/alias: same folder as '$T/neg' (listed once)
    $T/dot: link loop: leads back to '$T' (not entered again)
    $T/pos/gone.txt: dangling link (to 'nowhere', which does not exist)
    $T/pos/pipe.txt: not a regular file (a FIFO; not opened)
    $T/pos/self: a folder (the files of a class folder are read, not its subfolders)
    $T/pos/sub: a folder (the files of a class folder are read, not its subfolders)
    $T/pos/twice.txt: same file as '$T/pos/a.txt' (listed once)
EOF
sed -n '/^  skipped files/,/^  [a-z]/p' "$TMP/ft.txt" | grep -E '^  (skipped files|  )' >"$TMP/got.txt"
same data_folders_finetune_text_skipped "$TMP/want.txt" "$TMP/got.txt"
classes data_folders_finetune_text_classes "$TMP/t.onnx" 4 '["neg","pos"]'

echo "a fine day" >"$T/pos/sub/c.txt"
timeout 60 "$GRAFT" predict --model "$TMP/t.onnx" --top-k 1 --format csv "$T/pos" \
    >"$TMP/pred.csv" 2>"$TMP/pred.err"
rc=$?
tail -n +2 "$TMP/pred.csv" | cut -d, -f1 >"$TMP/got.txt"
printf '%s\n' "$T/pos/a.txt" "$T/pos/b.txt" "$T/pos/sub/c.txt" >"$TMP/want.txt"
check data_folders_predict_text_rc $([ $rc = 1 ]; echo $?) "rc $rc (want 1: files skipped)"
same data_folders_predict_text_each_once "$TMP/want.txt" "$TMP/got.txt"
cat >"$TMP/want.txt" <<EOF
graft predict: warning: skipped $T/pos/gone.txt: dangling link (to 'nowhere', which does not exist)
graft predict: warning: skipped $T/pos/pipe.txt: not a regular file (a FIFO; not opened)
graft predict: warning: skipped $T/pos/self: link loop: leads back to '$T/pos' (not entered again)
graft predict: warning: skipped $T/pos/sub/loop: link loop: leads back to '$T/pos' (not entered again)
graft predict: warning: skipped $T/pos/twice.txt: same file as '$T/pos/a.txt' (listed once)
EOF
same data_folders_predict_text_skipped "$TMP/want.txt" "$TMP/pred.err"

# ---- a FIFO named on the command line: refused, never opened for a blocking read ----
timeout 20 "$GRAFT" predict --model "$TMP/t.onnx" "$T/pos/pipe.txt" >/dev/null 2>"$TMP/f.err"
rc=$?
check data_folders_fifo_by_name_text $([ $rc != 124 ] && grep -q 'not a regular file (a FIFO' "$TMP/f.err"; echo $?) \
    "rc $rc: $(cat "$TMP/f.err")"
mkfifo "$TMP/pipe.npy"
timeout 20 "$GRAFT" run "$TMP/fx/fixed32.onnx" --input "input=$TMP/pipe.npy" --output-dir "$TMP/o" \
    >/dev/null 2>"$TMP/f.err"
rc=$?
check data_folders_fifo_by_name_npy $([ $rc = 1 ] && grep -q 'not a regular file (a FIFO' "$TMP/f.err"; echo $?) \
    "rc $rc: $(cat "$TMP/f.err")"

# ---- limits: a text over 64 MiB is skipped with the reason, a tokenizer file over 1 GiB refused;
# both checked before reading (sparse files, so the test stays fast) ----
mkdir -p "$TMP/big"
truncate -s 65M "$TMP/big/long.txt"
timeout 20 "$GRAFT" predict --model "$TMP/t.onnx" "$TMP/big/long.txt" >/dev/null 2>"$TMP/f.err"
check data_folders_text_over_limit $(grep -q "long.txt: over graft's limit of 64 MiB" "$TMP/f.err"; echo $?) \
    "$(cat "$TMP/f.err")"
truncate -s 1100M "$TMP/big/vocab.txt"
echo hello | timeout 20 "$GRAFT" tokenize --vocab "$TMP/big/vocab.txt" >/dev/null 2>"$TMP/f.err"
rc=$?
check data_folders_vocab_over_limit $([ $rc != 0 ] && grep -q "over graft's limit of 1073741824 bytes" "$TMP/f.err"; echo $?) \
    "rc $rc: $(cat "$TMP/f.err")"
