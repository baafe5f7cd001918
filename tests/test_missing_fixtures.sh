#!/usr/bin/env bash
# tests/test_missing_fixtures.sh BUILD: the model-based test programs pointed at an empty folder
# (as after a failed set-up) fail cleanly: FAIL lines naming the missing fixture, no crash, no
# sanitizer report.
set -u
B=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/gen" "$TMP/out"
check() {
    local name=$1
    shift
    "$@" >"$TMP/$name.log" 2>&1
    local rc=$?
    if [ "$rc" -ge 128 ] || grep -qE 'runtime error|ERROR: AddressSanitizer|ERROR: LeakSanitizer' "$TMP/$name.log"; then
        echo "FAIL missing_fixtures_$name: crashed (exit $rc): $(tail -3 "$TMP/$name.log" | tr '\n' ' ')"
    elif [ "$rc" != 0 ] && grep -q '^FAIL .*fixture missing' "$TMP/$name.log"; then
        echo "PASS missing_fixtures_$name"
    else
        echo "FAIL missing_fixtures_$name: exit $rc without a 'fixture missing' FAIL line"
    fi
}
check prune_channels "$B/tests/test_prune_channels" "$TMP/gen" "$TMP/out" mobilenet_tiny
check prune_heads "$B/tests/test_prune_heads" "$TMP/gen" "$TMP/out"
check prune_schedule "$B/tests/test_prune_schedule" "$TMP/gen" "$TMP/gen/none.onnx" --quick
check cut "$B/tests/test_cut" "$TMP/gen"
check freeze_points "$B/tests/test_freeze_points" "$TMP/gen"
check export "$B/tests/test_export" "$TMP/gen" "$TMP/out"
check parity "$B/tests/test_parity" "$TMP/gen" mobilenet_tiny
check block_parity "$B/tests/test_block_parity" "$TMP/gen" tests/data/block_parity_fixture.txt
