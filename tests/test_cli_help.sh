#!/usr/bin/env bash
# tests/test_cli_help.sh GRAFT: the tool's shared conventions: -h/--help on every command (with
# examples and what it writes), `graft help CMD`, --opt=value, "did you mean" for a misspelled
# option or command, the choices of a bad value, help grouped by topic and wrapped to the width.
set -u
GRAFT=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMANDS="info run finetune export prune tokenize predict eval devices bench"
M=models/digits_cnn.onnx
TRAIN=examples/digits/train
VOCAB=tests/data/tokenizer/vocab.txt
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
unset COLUMNS

# ---- every command's help ----
for c in $COMMANDS; do
    "$GRAFT" "$c" -h >"$TMP/short.txt" 2>"$TMP/err.txt"
    rc_short=$?
    "$GRAFT" "$c" --help >"$TMP/long.txt" 2>>"$TMP/err.txt"
    rc_long=$?
    "$GRAFT" help "$c" >"$TMP/via_help.txt" 2>>"$TMP/err.txt"
    rc_help=$?
    # The examples section: a heading, then at least one `graft CMD ...` line.
    examples=$(sed -n '/^examples:$/,/^$/p' "$TMP/long.txt" | grep -c "graft $c")
    writes=$(sed -n '/^writes:$/,/^$/p' "$TMP/long.txt" | grep -c '^  [A-Za-z]')
    if [ $rc_short = 0 ] && [ $rc_long = 0 ] && [ ! -s "$TMP/err.txt" ] &&
        head -1 "$TMP/long.txt" | grep -q "^usage: graft $c" && [ "$examples" -ge 1 ] &&
        [ "$writes" -ge 1 ] && cmp -s "$TMP/short.txt" "$TMP/long.txt"; then
        pass "help_${c}_has_examples_and_writes"
    else fail "help_${c}_has_examples_and_writes" "exit $rc_short/$rc_long, $examples example lines, $writes writes lines: $(head -c 300 "$TMP/err.txt")"; fi
    if [ $rc_help = 0 ] && cmp -s "$TMP/via_help.txt" "$TMP/long.txt"; then pass "help_cmd_${c}_equals_dash_help"
    else fail "help_cmd_${c}_equals_dash_help" "exit $rc_help; $(diff "$TMP/via_help.txt" "$TMP/long.txt" | head -3)"; fi
    if ! grep -q ' $' "$TMP/long.txt"; then pass "help_${c}_no_trailing_spaces"
    else fail "help_${c}_no_trailing_spaces" "$(grep -n ' $' "$TMP/long.txt" | head -2)"; fi
    # Examples wrap as shell continuation lines: joined again, they are the same at any width.
    for w in 40 100; do
        COLUMNS=$w "$GRAFT" "$c" --help | sed -n '/^examples:$/,/^$/p' | grep -v '^  #' |
            sed -e ':a' -e '/ \\$/{N; s/ \\\n *\([^ ]\)/ \1/; ba' -e '}' >"$TMP/ex$w.txt"
    done
    if [ -s "$TMP/ex40.txt" ] && cmp -s "$TMP/ex40.txt" "$TMP/ex100.txt"; then pass "help_${c}_examples_rewrap"
    else fail "help_${c}_examples_rewrap" "$(diff "$TMP/ex40.txt" "$TMP/ex100.txt" | head -4)"; fi
    # Wrapped to $COLUMNS when stdout is not a terminal.
    for w in 60 100; do
        long=$(COLUMNS=$w "$GRAFT" "$c" --help | awk -v w=$w 'length > w' | head -1)
        if [ -z "$long" ]; then pass "help_${c}_fits_${w}_columns"
        else fail "help_${c}_fits_${w}_columns" "'$long'"; fi
    done
done
long=$("$GRAFT" finetune --help | awk 'length > 80' | head -1)
if [ -z "$long" ]; then pass help_default_width_80; else fail help_default_width_80 "'$long'"; fi
n60=$(COLUMNS=60 "$GRAFT" finetune --help | wc -l)
n100=$(COLUMNS=100 "$GRAFT" finetune --help | wc -l)
widest=$(COLUMNS=100 "$GRAFT" finetune --help | awk '{ if (length > m) m = length } END { print m }')
if [ "$n60" -gt "$n100" ] && [ "$widest" -gt 80 ]; then pass help_rewraps_to_width
else fail help_rewraps_to_width "$n60 lines at 60 columns, $n100 at 100 (widest $widest)"; fi

# A terminal's own width (TIOCGWINSZ) wins over $COLUMNS.
python3 - "$GRAFT" <<'PY' >"$TMP/tty.txt" 2>&1
import fcntl, os, pty, struct, sys, termios
pid, fd = pty.fork()
if pid == 0:
    os.environ["COLUMNS"] = "100"
    os.execv(sys.argv[1], [sys.argv[1], "finetune", "--help"])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 50, 0, 0))
out = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
lines = out.decode().replace("\r", "").splitlines()
widest = max(len(l) for l in lines)
print(f"{len(lines)} lines, widest {widest}")
sys.exit(0 if len(lines) > 50 and 40 < widest <= 50 else 1)
PY
if [ $? = 0 ]; then pass help_terminal_width; else fail help_terminal_width "$(cat "$TMP/tty.txt")"; fi

# finetune's (and export's: its own first, then finetune's as overrides) options by topic.
for c in finetune export; do
    got=$("$GRAFT" "$c" --help | grep -E '^[a-z][a-z ,]*( \(.*\))?:$' | sed 's/ (.*)//' | tr '\n' '/')
    want="data:/model and cut:/head:/optimisation:/precision and device:/images:/text:/pruning:/output, logging and checkpoints:/general:/examples:/writes:/exit status:/"
    [ "$c" = export ] && want="export:/$want"
    if [ "$got" = "$want" ]; then pass "help_${c}_grouped"; else fail "help_${c}_grouped" "$got"; fi
done

# ---- the tool's own help ----
"$GRAFT" help >"$TMP/top1.txt" 2>&1
rc1=$?
"$GRAFT" --help >"$TMP/top2.txt" 2>&1
rc2=$?
missing=""
for c in $COMMANDS; do grep -q "^  $c " "$TMP/top1.txt" || missing="$missing $c"; done
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && cmp -s "$TMP/top1.txt" "$TMP/top2.txt" && [ -z "$missing" ]; then
    pass help_top_level
else fail help_top_level "exit $rc1/$rc2, missing:$missing"; fi
"$GRAFT" help help >"$TMP/hh.txt" 2>&1 && "$GRAFT" help version >"$TMP/hv.txt" 2>&1 &&
    cmp -s "$TMP/hh.txt" "$TMP/top1.txt" && head -1 "$TMP/hv.txt" | grep -q '^usage: graft version$'
if [ $? = 0 ]; then pass help_help_and_version; else fail help_help_and_version "$(head -2 "$TMP/hv.txt")"; fi
"$GRAFT" prune --model "$TMP/none.onnx" -h >"$TMP/later.txt" 2>&1
if [ $? = 0 ] && head -1 "$TMP/later.txt" | grep -q '^usage: graft prune'; then pass help_after_other_options
else fail help_after_other_options "$(head -2 "$TMP/later.txt")"; fi
"$GRAFT" >/dev/null 2>"$TMP/none.txt"
if [ $? = 2 ] && grep -q '^usage: graft' "$TMP/none.txt"; then pass help_no_command_usage_on_stderr
else fail help_no_command_usage_on_stderr "$(head -2 "$TMP/none.txt")"; fi

# ---- errors: one line on stderr, exit 2 ----
expect_error() { # NAME NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    "$GRAFT" "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
    local rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$TMP/err.txt")" = 1 ] && grep -qF -- "$needle" "$TMP/err.txt"; then
        pass "$name"
        sed 's/^/  /' "$TMP/err.txt"
    else fail "$name" "exit $rc: $(head -3 "$TMP/err.txt")"; fi
}
B=(--model $M --data $TRAIN --out "$TMP/x.onnx")
expect_error help_did_you_mean_command "unknown command 'fintune'; did you mean finetune?" fintune
expect_error help_did_you_mean_help_command "unknown command 'fintune'; did you mean finetune?" help fintune
expect_error help_unknown_command "unknown command 'frobnicate' (see graft --help)" frobnicate
expect_error help_did_you_mean_option "unknown option --epoch; did you mean --epochs?" finetune "${B[@]}" --epoch 3
expect_error help_did_you_mean_option_eq "unknown option --optimiser; did you mean --optimizer?" finetune "${B[@]}" --optimiser=sgd
expect_error help_did_you_mean_underscore "did you mean --max-len?" tokenize --vocab $VOCAB --max_len 8
expect_error help_did_you_mean_prune "did you mean --sparsity?" prune --model $M --out "$TMP/x.onnx" --sparsty 0.5
expect_error help_did_you_mean_single_dash "unknown option -json; did you mean --json?" info -json $M
expect_error help_did_you_mean_tool_option "unknown option --vesion; did you mean --version?" --vesion
expect_error help_no_suggestion "unknown option --zzz (see graft bench --help)" bench $M --zzz
expect_error help_choices_listed "--optimizer adamm: expected one of sgd, adam, adamw, lamb" finetune "${B[@]}" --optimizer adamm
expect_error help_choices_listed_eq "--scheduler linear: expected one of constant, step, cosine, onecycle, plateau" \
    finetune "${B[@]}" --scheduler=linear
expect_error help_choices_prune "--method random: expected one of magnitude, channels, heads, 2:4" prune --model $M --method random --out "$TMP/x.onnx"
expect_error help_choices_predict "--format xml: expected one of text, csv, jsonl" predict --model $M --format=xml x.png
expect_error help_flag_takes_no_value "--json takes no value" info --json=yes $M
expect_error help_missing_value "--iters needs a value (N)" bench $M --iters
expect_error help_value_not_an_option "--model needs a value (M.onnx)" finetune --model --data $TRAIN --out "$TMP/x.onnx"

# ---- --opt=value does what --opt value does ----
"$GRAFT" finetune --model=$M --data=$TRAIN --out="$TMP/eq.onnx" --resize=0 --crop=8 --grayscale \
    --epochs=3 --val-split=0.25 --seed=1 >"$TMP/eq.txt" 2>&1
if [ $? = 0 ] && [ "$(grep -c '^epoch [0-9]/3:' "$TMP/eq.txt")" = 3 ] && [ -s "$TMP/eq.onnx" ]; then
    pass help_opt_eq_value_finetune
else fail help_opt_eq_value_finetune "$(tail -2 "$TMP/eq.txt")"; fi
a=$(echo 'Hello, world! A longer line of text to be cut.' | "$GRAFT" tokenize --vocab=$VOCAB --max-len=8 2>&1)
b=$(echo 'Hello, world! A longer line of text to be cut.' | "$GRAFT" tokenize --vocab $VOCAB --max-len 8 2>&1)
if [ -n "$a" ] && [ "$a" = "$b" ] && echo "$a" | grep -qE '^\{"input_ids": \[2(, [0-9]+){6}, 3\]'; then
    pass help_opt_eq_value_tokenize
else fail help_opt_eq_value_tokenize "'$a' vs '$b'"; fi
"$GRAFT" bench $M --batch=1,2 --iters=2 --warmup=0 --json >"$TMP/bench.txt" 2>&1
if [ $? = 0 ] && [ "$(grep -c '"batch": [12]' "$TMP/bench.txt")" = 2 ]; then pass help_opt_eq_value_bench
else fail help_opt_eq_value_bench "$(tail -2 "$TMP/bench.txt")"; fi
"$GRAFT" info --json=1 $M >/dev/null 2>&1
if [ $? = 2 ]; then pass help_opt_eq_value_flag_rejected; else fail help_opt_eq_value_flag_rejected "exit $?"; fi

# ---- config files: `option value` and `option=value` lines; errors name the file and line ----
printf 'model=%s\ndata = %s\nout %s\nresize=0\ncrop 8\ngrayscale\nepochs=2\n' $M $TRAIN "$TMP/cf.onnx" \
    >"$TMP/run.conf"
"$GRAFT" finetune --config="$TMP/run.conf" --val-split 0.25 >"$TMP/cf.txt" 2>&1
if [ $? = 0 ] && [ "$(grep -c '^epoch [0-9]/2:' "$TMP/cf.txt")" = 2 ] && [ -s "$TMP/cf.onnx" ]; then
    pass help_config_eq_lines
else fail help_config_eq_lines "$(tail -2 "$TMP/cf.txt")"; fi
printf '# a typo on line 2\nepoch 2\n' >"$TMP/bad.conf"
expect_error help_config_did_you_mean "bad.conf:2: unknown option --epoch; did you mean --epochs?" \
    finetune "${B[@]}" --config "$TMP/bad.conf"
printf 'optimizer adamm\n' >"$TMP/bad2.conf"
expect_error help_config_choices "bad2.conf:1: --optimizer adamm: expected one of sgd, adam, adamw, lamb" \
    finetune "${B[@]}" --config "$TMP/bad2.conf"
exit 0
