#!/usr/bin/env bash
# tests/test_readme.sh GRAFT [BUILD]: runs every command example of README.md as written, in order, in a
# scratch folder that looks like a fresh clone (models/, examples/, tests/data/, tools/), with
# `graft` meaning GRAFT. An example is an indented line (with its `\` continuations) that starts
# with `graft `, `python3 tools/`, `cc `, `export `, `head ` or `echo/cat ... | graft`; one PASS/FAIL line each
# (SKIP for a line marked `# benchmark`, and for `# needs GPUs` without several GPUs). `sudo meson install` is tests/test_install.sh's.
set -uo pipefail
GRAFT=$(realpath "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
[ -n "${KEEP_README_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
# A clone's files as links (so the examples cannot change the repository), outputs in WORK.
mkdir -p "$WORK/models" "$WORK/tests/data" "$WORK/build/release"
for f in "$ROOT"/models/*; do ln -s "$f" "$WORK/models/"; done
for f in "$ROOT"/tests/data/*; do [ "$(basename "$f")" = gen ] || ln -s "$f" "$WORK/tests/data/"; done
ln -s "$ROOT/examples" "$WORK/examples"
ln -s "$ROOT/tools" "$WORK/tools"
ln -s "$ROOT/include" "$WORK/include"
ln -s "$GRAFT" "$WORK/build/release/graft"
# The `cc` examples build against an installed graft: BUILD installed under a DESTDIR stands in
# for `sudo meson install`.
if [ -n "${2:-}" ] && DESTDIR="$WORK/root" meson install -C "$2" --no-rebuild --quiet >/dev/null 2>&1; then
    pc=$(find "$WORK/root" -name graft.pc | head -1)
    export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$WORK/root"
    export LD_LIBRARY_PATH="$WORK/root$(pkg-config --variable=libdir graft | sed "s#^$WORK/root##")"
fi

# The examples, one per line, continuations joined.
extract() {
    awk '
        /^    / { line = substr($0, 5)
                  if (cont != "") { cmd = cont " " line } else { cmd = line }
                  if (cmd ~ /\\$/) { cont = substr(cmd, 1, length(cmd) - 1); next }
                  cont = ""
                  if (cmd ~ /^(graft |python3 tools\/|cc |export |head |(echo|cat) .*\| *graft )/) print cmd
                  next }
        { cont = "" }' "$ROOT/README.md"
}

# Data-parallel examples run mpirun, which refuses root (CI) without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
n=0
passed=0
while IFS= read -r cmd; do
    n=$((n + 1))
    name="readme_example_$n"
    case $cmd in
    *"# benchmark"*) echo "SKIP $name: a benchmark (minutes; docs/benchmarks.md has its runs): $cmd"
        continue ;;
    *"# needs GPUs"*)
        if [ "$("$GRAFT" devices 2>/dev/null | grep -c '^cuda:')" -lt 2 ]; then
            echo "SKIP $name: needs several GPUs (tools/gpu_nccl_run.sh checks the path on one): $cmd"
            continue
        fi ;;
    *"--nproc "*)
        if ! command -v mpirun >/dev/null; then
            echo "SKIP $name: no mpirun (apt-get install openmpi-bin): $cmd"
            continue
        fi ;;
    esac
    (
        cd "$WORK" || exit 1
        graft() { "$GRAFT" "$@"; }
        export -f graft 2>/dev/null
        export GRAFT
        eval "$cmd"
    ) >"$WORK/out_$n.txt" 2>&1 </dev/null
    rc=$?
    if [ "$rc" = 0 ]; then
        echo "PASS $name: $cmd"
        passed=$((passed + 1))
    else
        echo "FAIL $name: exit $rc: $cmd"
        tail -5 "$WORK/out_$n.txt" | sed 's/^/  /'
    fi
done < <(extract)
[ "$n" -gt 0 ] || echo "FAIL readme_examples: no examples found in README.md"
echo "readme: $passed of $n examples ran"
