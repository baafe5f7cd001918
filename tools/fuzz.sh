#!/usr/bin/env bash
# tools/fuzz.sh: builds the libFuzzer targets (build/fuzz: clang, ASan+UBSan, reference kernels),
# fuzzes each from seeds made of the test fixtures, then replays the committed regression inputs
# (tests/fuzz/regress/<target>/); prints PASS/FAIL fuzz_<target> lines.
# Usage: tools/fuzz.sh --ci [TARGET...]: the test command's run: a fixed number of inputs per
#          target from a fresh corpus of committed seeds, seed 1, so every machine runs the same
#          inputs (a finding fails CI only when a change makes one, not by luck of the clock).
#        tools/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]: exploration (default 20 s): the corpus
#          under build/fuzz-work/corpus grows from run to run; FUZZ_SEED=0 draws a new seed.
set -uo pipefail
cd "$(dirname "$0")/.."
CI_MODE=0
if [ "${1:-}" = --ci ]; then
    CI_MODE=1
    shift
    SECS=0
else
    SECS=${1:-20}
    shift $(($# > 0 ? 1 : 0))
fi
TARGETS=${*:-onnx image safetensors feature_cache tokenizer csv npy}
# Inputs per target in --ci mode: about 15 s each on the 2-core development machine.
declare -A CI_RUNS=([onnx]=25000 [image]=8000 [safetensors]=1500000 [feature_cache]=50000
    [tokenizer]=30000 [csv]=100000 [npy]=150000)
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

# Committed files matching the patterns (--ci: generated fixtures differ with the Python
# packages' versions, so they would change the run); every file outside a git checkout.
tracked() {
    if git rev-parse --git-dir >/dev/null 2>&1; then git ls-files -- "$@"; else find -L "${@%%/*}"; fi
}

# The files named on stdin smaller than $1 (find's -size -N).
small() { xargs -r sh -c 'find "$@" -size "-$0"' "$1"; }

make_seeds() {
    local t=$1 c=$2
    mkdir -p "$c"
    if [ "$CI_MODE" = 1 ]; then make_ci_seeds "$t" "$c"; return; fi
    case $t in
    onnx)
        seed "$c" tests/fuzz/seeds/onnx/*.onnx
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
    *) make_ci_seeds "$t" "$c" ;;
    esac
}

# Seeds from committed files only, in a fixed order (the --ci run's).
make_ci_seeds() {
    local t=$1 c=$2
    case $t in
    onnx)
        seed "$c" tests/fuzz/seeds/onnx/*.onnx $(tracked 'models/*.onnx' | small 256k)
        seed "$c" $(find /usr/share/libonnx-testdata/data/node -name model.onnx -size -64k 2>/dev/null |
            sort | awk 'NR % 4 == 1')
        ;;
    image) seed "$c" $(tracked 'tests/data/images/*.jpg' 'tests/data/images/*.png') ;;
    safetensors | feature_cache) GRAFT_FUZZ_MAKE_SEED=$c/seed_made "$B/tests/fuzz/fuzz_$t" ;;
    tokenizer) seed "$c" tests/data/tokenizer/vocab.txt tests/fuzz/seeds/tokenizer/*.json ;;
    csv)
        seed_opt "$c" 00 tests/data/text/*.csv
        seed_opt "$c" 02 tests/data/text/multi.csv
        seed_opt "$c" 06 tests/data/text/basic.csv
        seed_opt "$c" 11 tests/data/text/pairs.tsv
        seed_opt "$c" 05 tests/data/text/regress.tsv
        seed_opt "$c" 09 tests/data/text/*.tsv
        ;;
    npy) seed "$c" $(tracked 'tests/data/*.npy' | small 64k | head -40) ;;
    esac
}

for t in $TARGETS; do
    exe=$B/tests/fuzz/fuzz_$t
    log=$W/$t.log
    art=$W/crashes/$t
    mkdir -p "$art"
    if [ "$CI_MODE" = 1 ]; then
        corpus=$W/ci-corpus/$t
        rm -rf "$corpus"
        limit=(-runs="${CI_RUNS[$t]}" -max_total_time=180)
    else
        corpus=$W/corpus/$t
        limit=(-max_total_time="$SECS")
    fi
    make_seeds "$t" "$corpus"
    dict=()
    case $t in
    onnx) dict=(-dict=tests/fuzz/onnx.dict) ;;
    tokenizer | safetensors) dict=(-dict=tests/fuzz/json.dict) ;;
    esac
    # A fixed seed (FUZZ_SEED, default 1; 0 draws a new one).
    t0=$SECONDS
    "$exe" -seed="${FUZZ_SEED:-1}" "${limit[@]}" -rss_limit_mb=2048 -timeout=10 -detect_leaks=1 \
        -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$corpus" >"$log" 2>&1
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
    echo "PASS fuzz_$t ($runs inputs in $((SECONDS - t0)) s, $n regression inputs)"
done
