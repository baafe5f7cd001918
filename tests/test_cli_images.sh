#!/usr/bin/env bash
# tests/test_cli_images.sh GRAFT [GEN]: image folders and preprocessing defaults end to end:
# finetune, eval and predict list the same files (nested class folders, image names only,
# hidden entries and non-images ignored, link loops ended, each image once), and the
# preprocessing comes from the options, else the model's metadata, else its declared input
# shape, else ImageNet's defaults, with the source shown by `graft info` and by finetune.
set -u
GRAFT=$1
GEN=${2:-tests/data/gen}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
F=$TMP/fx
check() { # check NAME CONDITION-EXIT-CODE DETAIL
    if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1: $3"; fi
}
# prep_line FILE FIELD VALUE SOURCE: the preprocessing block has "  FIELD  VALUE  SOURCE"
prep_line() { grep -qE "^  $2 +$3 +$4\$" "$1"; }

python3 "$ROOT/tools/make_image_prep_fixtures.py" "$F" >"$TMP/fx.log" 2>&1
check cli_images_fixtures $? "$(tail -3 "$TMP/fx.log")"
[ -f "$F/expected.txt" ] || exit 1
IMAGES=$F/images

# ---- graft info: the preprocessing a run would use, and where each value comes from ----
"$GRAFT" info "$F/fixed32.onnx" >"$TMP/info.txt" 2>&1 && grep -q '^preprocessing$' "$TMP/info.txt" &&
    prep_line "$TMP/info.txt" resize 36 'model input shape' &&
    prep_line "$TMP/info.txt" crop 32 'model input shape' &&
    prep_line "$TMP/info.txt" channels '3 \(RGB\)' 'model input shape' &&
    prep_line "$TMP/info.txt" mean 0.485,0.456,0.406 default &&
    prep_line "$TMP/info.txt" std 0.229,0.224,0.225 default
check cli_images_info_input_shape $? "$(cat "$TMP/info.txt")"
"$GRAFT" info "$F/fixed32_meta.onnx" >"$TMP/info.txt" 2>&1 &&
    prep_line "$TMP/info.txt" resize 40 'model metadata' &&
    prep_line "$TMP/info.txt" crop 32 'model metadata' &&
    prep_line "$TMP/info.txt" channels '3 \(RGB\)' 'model input shape' &&
    prep_line "$TMP/info.txt" mean 0.5,0.5,0.5 'model metadata'
check cli_images_info_metadata_over_input_shape $? "$(tail -6 "$TMP/info.txt")"
"$GRAFT" info "$F/dynamic.onnx" >"$TMP/info.txt" 2>&1 &&
    prep_line "$TMP/info.txt" resize 256 default && prep_line "$TMP/info.txt" crop 224 default
check cli_images_info_default $? "$(tail -6 "$TMP/info.txt")"
"$GRAFT" info "$F/fixed32_meta.onnx" --json >"$TMP/info.json" 2>&1 && python3 - "$TMP/info.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["preprocessing"]
assert p["resize"] == {"value": 40, "source": "model metadata"}, p
assert p["crop"] == {"value": 32, "source": "model metadata"}, p
assert p["grayscale"] == {"value": False, "source": "model input shape"}, p
assert p["mean"]["value"] == [0.5] * 3 and p["std"]["source"] == "model metadata", p
PY
check cli_images_info_json $? "$(cat "$TMP/info.json")"
if [ -f "$GEN/bert_tiny_decomposed.onnx" ]; then
    "$GRAFT" info "$GEN/bert_tiny_decomposed.onnx" >"$TMP/info.txt" 2>&1 &&
        ! grep -q preprocessing "$TMP/info.txt" &&
        "$GRAFT" info "$GEN/bert_tiny_decomposed.onnx" --json |
        python3 -c 'import json,sys; assert json.load(sys.stdin)["preprocessing"] is None'
    check cli_images_info_text_model $? "$(grep preprocessing "$TMP/info.txt")"
else
    echo "SKIP cli_images_info_text_model: $GEN/bert_tiny_decomposed.onnx not generated"
fi

# ---- finetune: a (N, 3, 32, 32) backbone without metadata on 32x32 images, no --resize/--crop ----
FT=(finetune --model "$F/fixed32.onnx" --data "$IMAGES" --val-split 0.25 --epochs 2 --seed 1)
"$GRAFT" "${FT[@]}" --out "$TMP/a.onnx" >"$TMP/ft.txt" 2>"$TMP/ft.err"
rc=$?
[ $rc = 0 ] && [ -s "$TMP/a.onnx" ] && prep_line "$TMP/ft.txt" resize 36 'model input shape' &&
    prep_line "$TMP/ft.txt" crop 32 'model input shape'
check cli_images_finetune_input_shape $? "rc $rc: $(tail -3 "$TMP/ft.err")"
# The export records what was used: the model's metadata now says 36/32.
"$GRAFT" info "$TMP/a.onnx" >"$TMP/info.txt" 2>&1 &&
    prep_line "$TMP/info.txt" resize 36 'model metadata' &&
    prep_line "$TMP/info.txt" crop 32 'model metadata'
check cli_images_export_records_preprocessing $? "$(tail -6 "$TMP/info.txt")"
# Options over metadata, metadata over the input shape.
"$GRAFT" finetune --model "$F/fixed32_meta.onnx" --data "$IMAGES" --val-split 0.25 --epochs 1 \
    --resize 48 --mean 0.4,0.4,0.4 --out "$TMP/b.onnx" >"$TMP/ft.txt" 2>"$TMP/ft.err"
rc=$?
[ $rc = 0 ] && prep_line "$TMP/ft.txt" resize 48 option &&
    prep_line "$TMP/ft.txt" crop 32 'model metadata' &&
    prep_line "$TMP/ft.txt" mean 0.4,0.4,0.4 option &&
    prep_line "$TMP/ft.txt" std 0.25,0.25,0.25 'model metadata' &&
    prep_line "$TMP/ft.txt" channels '3 \(RGB\)' 'model input shape'
check cli_images_finetune_option_over_metadata $? "rc $rc: $(grep -A6 ^preprocessing "$TMP/ft.txt") $(tail -2 "$TMP/ft.err")"
# A crop the input cannot take is one error line naming both.
"$GRAFT" "${FT[@]}" --crop 64 --out "$TMP/c.onnx" >"$TMP/ft.txt" 2>"$TMP/ft.err"
rc=$?
[ $rc != 0 ] && [ "$(grep -vc 'warning' "$TMP/ft.err")" = 1 ] && grep -q -- '--crop 64, but input .image. takes 32x32' "$TMP/ft.err"
check cli_images_finetune_crop_mismatch $? "rc $rc: $(cat "$TMP/ft.err")"
"$GRAFT" "${FT[@]}" --grayscale --out "$TMP/c.onnx" >"$TMP/ft.txt" 2>"$TMP/ft.err"
rc=$?
[ $rc != 0 ] && grep -q -- '--grayscale, but input .image. takes 3 channels' "$TMP/ft.err"
check cli_images_finetune_channels_mismatch $? "rc $rc: $(cat "$TMP/ft.err")"

# ---- the same files in eval and predict ----
read -r _ want_images <"$F/expected.txt"
"$GRAFT" eval --model "$TMP/a.onnx" --data "$IMAGES" --json >"$TMP/eval.json" 2>"$TMP/eval.err" &&
    python3 - "$TMP/eval.json" "$want_images" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["samples"] == int(sys.argv[2]), d["samples"]
assert [s["path"].rsplit("/", 1)[1] for s in d["skipped"]] == ["self", "loop", "old.bmp"], d["skipped"]
assert d["skipped"][0]["reason"].startswith("link loop: leads back to "), d["skipped"]
assert d["skipped"][1]["reason"].endswith("/images' (not entered again)"), d["skipped"]
assert "not supported" in d["skipped"][2]["reason"], d["skipped"]
PY
check cli_images_eval_nested_once $? "$(cat "$TMP/eval.err")"
timeout 60 "$GRAFT" predict --model "$TMP/a.onnx" --top-k 1 "$IMAGES" >"$TMP/pred.txt" 2>"$TMP/pred.err"
rc=$?
files=$(cut -d: -f1 "$TMP/pred.txt" | sort -u | wc -l)
[ $rc = 1 ] && [ "$(wc -l <"$TMP/pred.txt")" = "$want_images" ] && [ "$files" = "$want_images" ] &&
    grep -q 'more/deeper/red7.jpg' "$TMP/pred.txt" &&
    grep -q "skipped '.*red/old.bmp': BMP images are not supported" "$TMP/pred.err" &&
    grep -q "skipped '.*red/loop': link loop: leads back to '.*/images' (not entered again)" "$TMP/pred.err" &&
    ! grep -qE 'notes.txt|hidden|\.cache' "$TMP/pred.txt" "$TMP/pred.err"
check cli_images_predict_loop_each_image_once $? "rc $rc, $(wc -l <"$TMP/pred.txt") lines, $files files: $(cat "$TMP/pred.err")"
# A link to '.' alone: every image once, the loop listed as skipped, and success (no image was
# left out).
timeout 60 "$GRAFT" predict --model "$TMP/a.onnx" --top-k 1 "$IMAGES/blue" >"$TMP/pred.txt" 2>"$TMP/pred.err"
rc=$?
[ $rc = 0 ] && [ "$(wc -l <"$TMP/pred.txt")" = 8 ] && [ "$(wc -l <"$TMP/pred.err")" = 1 ] &&
    grep -q "skipped '.*blue/self': link loop: leads back to '.*/blue' (not entered again)" "$TMP/pred.err" &&
    ! grep -q '/self/' "$TMP/pred.txt"
check cli_images_predict_link_to_dot $? "rc $rc: $(cat "$TMP/pred.txt" "$TMP/pred.err")"
# Sorted by folder, then name (torchvision's sorted(os.walk)): blue/ before blue/more/.
"$GRAFT" predict --model "$TMP/a.onnx" --top-k 1 --format csv "$IMAGES/blue" 2>/dev/null |
    tail -n +2 | cut -d, -f1 | sed "s|^$IMAGES/||" >"$TMP/order.txt"
printf '%s\n' blue/blue0.png blue/blue1.jpg blue/blue2.png blue/blue3.jpg blue/blue4.png \
    blue/more/blue5.jpg blue/more/blue6.png blue/more/deeper/blue7.jpg | diff - "$TMP/order.txt" >/dev/null
check cli_images_predict_order $? "$(tr '\n' ' ' <"$TMP/order.txt")"

# ---- JPEG decoding: full size by default (as PIL), --fast-decode reduced: other features ----
# 160x120 JPEGs for a 36/32 preprocessing: twice the target, so --fast-decode decodes at 1/2.
python3 - "$TMP/big" <<'PY'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(3)
for c, tint in (("warm", (200, 90, 40)), ("cool", (40, 90, 200))):
    os.makedirs(os.path.join(sys.argv[1], c))
    for i in range(4):
        y, x = np.mgrid[0:120, 0:160]
        img = np.stack([(x * 3 + t + i * 9 + (y // 5) * 11) % 256 for t in tint], -1)
        img = np.clip(img + rng.integers(-20, 21, img.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(sys.argv[1], c, "%d.jpg" % i), quality=90)
PY
big_run() { # OPTIONS...: the samples the backbone ran
    "$GRAFT" finetune --model "$F/fixed32.onnx" --data "$TMP/big" --val-split 0.25 --epochs 1 \
        --cache "$TMP/bigcache" --out "$TMP/big.onnx" "$@" >"$TMP/big.txt" 2>&1 || echo failed
    sed -n 's/.*time *backbone [0-9.]*s (\([0-9]*\) samples run.*/\1/p' "$TMP/big.txt"
}
runs="$(big_run) $(big_run --fast-decode) $(big_run) $(big_run --fast-decode)"
files=$(find "$TMP/bigcache" -name 'features-*.cache' | wc -l)
[ "$runs" = "8 8 0 0" ] && [ "$files" = 4 ]
check cli_images_fast_decode_own_cache $? "samples run '$runs' (want 8 8 0 0), $files files (want 4)"
# A damaged cache file is rebuilt, and the run says why.
for f in "$TMP"/bigcache/features-*.cache; do
    printf 'garbage' | dd of="$f" bs=1 seek=4200 conv=notrunc 2>/dev/null
done
runs=$(big_run)
[ "$runs" = 8 ] && grep -qE "^graft: warning: the feature cache of the training data was rebuilt: corrupt.*: $TMP/bigcache/features-" "$TMP/big.txt"
check cli_images_cache_rebuild_reason $? "samples run '$runs' (want 8); $(grep -i cache "$TMP/big.txt" | head -3)"
"$GRAFT" predict --model "$TMP/big.onnx" --top-k 2 --format jsonl "$TMP/big" >"$TMP/full.jsonl" \
    2>"$TMP/fd.err" &&
    "$GRAFT" predict --model "$TMP/big.onnx" --top-k 2 --format jsonl --fast-decode "$TMP/big" \
        >"$TMP/fast.jsonl" 2>>"$TMP/fd.err" &&
    "$GRAFT" eval --model "$TMP/big.onnx" --data "$TMP/big" --fast-decode >/dev/null 2>>"$TMP/fd.err" &&
    [ "$(wc -l <"$TMP/fast.jsonl")" = 8 ] && ! cmp -s "$TMP/full.jsonl" "$TMP/fast.jsonl"
check cli_images_predict_fast_decode $? "$(cat "$TMP/fd.err")"
