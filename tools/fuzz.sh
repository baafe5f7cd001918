#!/usr/bin/env bash
# tools/fuzz.sh: builds the libFuzzer targets (build/fuzz: clang, ASan+UBSan, reference kernels),
# fuzzes each for a fixed time from seeds made of the test fixtures, then replays the committed
# regression inputs (tests/fuzz/regress/<target>/); prints PASS/FAIL fuzz_<target> lines.
# Usage: tools/fuzz.sh [SECONDS_PER_TARGET [TARGET...]] (default 20 s, every target).
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
shift $(($# > 0 ? 1 : 0))
TARGETS=${*:-onnx image safetensors feature_cache tokenizer csv npy}
B=build/fuzz
W=build/fuzz-work
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
export TMPDIR=$PWD/$W/tmp # the targets write their inputs here when a reader takes a path
mkdir -p "$W/tmp"

if [ ! -f "$B/build.ninja" ]; then
    CC=clang meson setup "$B" --buildtype=debugoptimized -Ddnnl=disabled -Dcuda=disabled \
        -Dopenmp=disabled -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fno-sanitize-recover=all -Dfuzz=enabled >"$W/setup.log" 2>&1 ||
        { tail -20 "$W/setup.log"; echo "FAIL fuzz_build: meson setup (see $W/setup.log)"; exit 1; }
fi
bins=()
for t in $TARGETS; do bins+=("tests/fuzz/fuzz_$t"); done
ninja -C "$B" -j"${FUZZ_JOBS:-2}" "${bins[@]}" >"$W/build.log" 2>&1 ||
    { tail -30 "$W/build.log"; echo "FAIL fuzz_build: ninja (see $W/build.log)"; exit 1; }

# seed DIR FILE...: copy fixtures into a corpus folder, named by their path.
seed() {
    local dir=$1 f
    shift
    for f in "$@"; do
        [ -f "$f" ] && cp "$f" "$dir/seed_$(echo "$f" | tr '/' '_')"
    done
}
# Seeds with a leading options byte (the csv target's first byte picks its options).
seed_opt() {
    local dir=$1 byte=$2 f
    shift 2
    for f in "$@"; do
        [ -f "$f" ] && { printf "\\x$byte"; cat "$f"; } >"$dir/seed_${byte}_$(basename "$f")"
    done
}

make_seeds() {
    local t=$1 c=$W/corpus/$1
    mkdir -p "$c"
    case $t in
    onnx)
        seed "$c" $(find -L tests/data/gen models -name '*.onnx' -size -256k 2>/dev/null)
        seed "$c" $(find /usr/share/libonnx-testdata/data/node -name model.onnx -size -64k 2>/dev/null |
            sort | awk 'NR % 4 == 1')
        ;;
    image) seed "$c" tests/data/images/*.jpg tests/data/images/*.png ;;
    safetensors | feature_cache) GRAFT_FUZZ_MAKE_SEED=$c/seed_made "$B/tests/fuzz/fuzz_$t" ;;
    tokenizer)
        # tokenizer.json files: the test command's (build/hf-tokenizers), else made here (3 s).
        local hf=build/hf-tokenizers
        if [ ! -d "$hf" ] && [ -x .venv/bin/python3 ]; then
            hf=$W/hf
            [ -d "$hf" ] || .venv/bin/python3 tools/make_hf_tokenizers.py "$hf" >"$W/hf.log" 2>&1
        fi
        seed "$c" tests/data/tokenizer/vocab.txt $(find "$hf" -name tokenizer.json -size -100k 2>/dev/null)
        ;;
    csv)
        seed_opt "$c" 00 tests/data/text/*.csv
        seed_opt "$c" 02 tests/data/text/multi.csv
        seed_opt "$c" 06 tests/data/text/basic.csv
        seed_opt "$c" 11 tests/data/text/pairs.tsv
        seed_opt "$c" 05 tests/data/text/regress.tsv
        seed_opt "$c" 09 tests/data/text/*.tsv
        ;;
    npy) seed "$c" $(find -L tests/data -name '*.npy' -size -64k | head -40) ;;
    esac
}

for t in $TARGETS; do
    exe=$B/tests/fuzz/fuzz_$t
    log=$W/$t.log
    art=$W/crashes/$t
    mkdir -p "$art"
    make_seeds "$t"
    dict=()
    case $t in
    onnx) dict=(-dict=tests/fuzz/onnx.dict) ;;
    tokenizer | safetensors) dict=(-dict=tests/fuzz/json.dict) ;;
    esac
    # A fixed seed (FUZZ_SEED, default 1): the test command's run is the same sequence of inputs
    # on every machine (a slower one runs a prefix of it); FUZZ_SEED=0 draws a new one.
    "$exe" -seed="${FUZZ_SEED:-1}" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -detect_leaks=1 \
        -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$W/corpus/$t" >"$log" 2>&1
    rc=$?
    if [ "$rc" != 0 ]; then
        why=$(grep -m1 -E 'ERROR: |runtime error|SUMMARY' "$log")
        echo "FAIL fuzz_$t: ${why:-exit status $rc}; input: $(grep -m1 -oE "$art/[a-z-]+-[0-9a-f]+" "$log"); log: $log"
        continue
    fi
    runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    reg=(tests/fuzz/regress/"$t"/*)
    if [ -f "${reg[0]}" ]; then
        if ! "$exe" -rss_limit_mb=2048 -timeout=10 "${reg[@]}" >"$log.regress" 2>&1; then
            echo "FAIL fuzz_$t: a regression input crashes: $(grep -m1 -E 'ERROR: |runtime error' "$log.regress"); log: $log.regress"
            continue
        fi
        n=${#reg[@]}
    else
        n=0
    fi
    echo "PASS fuzz_$t ($runs inputs in ${SECS} s, $n regression inputs)"
done
