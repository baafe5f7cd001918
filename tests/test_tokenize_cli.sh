#!/usr/bin/env bash
# tests/test_tokenize_cli.sh: `graft tokenize` against BertTokenizer's output (recorded with tools/make_tokenizer_fixtures.py's vocab).
# usage: tests/test_tokenize_cli.sh path/to/graft [tests/data/tokenizer]
set -u
GRAFT=$1
DIR=${2:-$(dirname "$0")/data/tokenizer}
V=$DIR/vocab.txt
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

# expect NAME EXPECTED_STDOUT COMMAND...: runs COMMAND, compares its stdout and checks it exits 0.
expect() {
    local name=$1 want=$2
    shift 2
    local got
    got=$("$@" 2>"$TMP/err")
    local rc=$?
    if [ "$rc" = 0 ] && [ "$got" = "$want" ]; then
        echo "PASS $name"
    else
        echo "FAIL $name: exit $rc; got '$got' want '$want'; stderr: $(head -c 300 "$TMP/err")"
        failures=$((failures + 1))
    fi
}

# expect_error NAME COMMAND...: COMMAND must exit non-zero with one line on stderr.
expect_error() {
    local name=$1
    shift
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$TMP/err")
    if [ "$rc" != 0 ] && [ "$lines" = 1 ]; then
        echo "PASS $name"
    else
        echo "FAIL $name: exit $rc, $lines stderr lines: $(head -c 300 "$TMP/err")"
        failures=$((failures + 1))
    fi
}

printf 'Hello, World!\ncafé\tCAFÉ\n' >"$TMP/in.txt"
expect tokenize_uncased_file \
'{"input_ids": [2, 735, 36, 659, 25, 3], "token_type_ids": [0, 0, 0, 0, 0, 0], "attention_mask": [1, 1, 1, 1, 1, 1]}
{"input_ids": [2, 91, 1150, 1155, 1154, 91, 1150, 1155, 1154, 3], "token_type_ids": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "attention_mask": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}' \
    "$GRAFT" tokenize --vocab "$V" "$TMP/in.txt"
expect tokenize_cased_pair_stdin \
'{"input_ids": [2, 736, 36, 660, 3], "token_type_ids": [0, 0, 0, 0, 0], "attention_mask": [1, 1, 1, 1, 1]}
{"input_ids": [2, 807, 3, 59, 3], "token_type_ids": [0, 0, 0, 1, 1], "attention_mask": [1, 1, 1, 1, 1]}' \
    sh -c "\"$GRAFT\" tokenize --vocab \"$V\" --cased --pair --max-len 5 <\"$TMP/in.txt\""
expect tokenize_pad \
'{"input_ids": [2, 1575, 3, 0, 0, 0], "token_type_ids": [0, 0, 0, 0, 0, 0], "attention_mask": [1, 1, 1, 0, 0, 0]}' \
    sh -c "printf 'ab\n' | \"$GRAFT\" tokenize --vocab \"$V\" --max-len 6 --pad"
expect_error tokenize_no_vocab "$GRAFT" tokenize "$TMP/in.txt"
expect_error tokenize_missing_vocab "$GRAFT" tokenize --vocab "$TMP/nope.txt" "$TMP/in.txt"
expect_error tokenize_bad_max_len "$GRAFT" tokenize --vocab "$V" --max-len zero "$TMP/in.txt"
expect_error tokenize_bad_option "$GRAFT" tokenize --vocab "$V" --frobnicate "$TMP/in.txt"
expect_error tokenize_missing_file "$GRAFT" tokenize --vocab "$V" "$TMP/absent.txt"
printf 'ok\n\377bad\n' >"$TMP/bad.txt"
expect_error tokenize_bad_utf8 "$GRAFT" tokenize --vocab "$V" "$TMP/bad.txt"
[ "$failures" = 0 ]
