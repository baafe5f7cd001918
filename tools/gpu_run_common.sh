# tools/gpu_run_common.sh: what the tools/gpu_*_run.sh scripts share (sourced, not run): the
# build and model folders, $OUT made, `since` (seconds since the start), `summary NAME RC LOG`
# (pass/fail counts and the first failures) and `gpu_setup` (meson for the H200's sm_90).
set -u
T0=$(date +%s)
B=/tmp/build
G=/tmp/gen
mkdir -p "$OUT"
since() { echo "$(($(date +%s) - T0))s"; }
summary() { echo "$1: rc=$2 pass $(grep -c '^PASS' "$3") fail $(grep -c '^FAIL' "$3")"; grep -m8 '^FAIL' "$3" | cut -c1-300; }
gpu_setup() {
    [ -d $B ] || meson setup $B --buildtype=release -Dcuda=enabled -Dgpu_arch=90 >"$OUT/setup.log" 2>&1 ||
        { tail -30 "$OUT/setup.log"; exit 1; }
}
