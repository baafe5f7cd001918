#!/usr/bin/env bash
# tests/test_torchrun.sh BUILD: graft's rendezvous under the real torchrun (tests/test_rendezvous
# as each rank): one host of 3 ranks, two "hosts" of 2 (two torchrun agents with --nnodes 2 on
# loopback), --standalone and the c10d rendezvous; torchrun's agent holds MASTER_PORT, graft's
# ranks meet on the next port. SKIP without torchrun (PyTorch is not in CI's set-up).
set -u
UNIT=$1/tests/test_rendezvous
TR=$(command -v torchrun)
if [ -z "$TR" ]; then
    echo "SKIP torchrun_ranks: no torchrun on the PATH (pip install torch)"
    exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# NAME EXPECTED LOG: every rank passed
check() {
    local got
    got=$(grep -c '^PASS torchrun_rank_' "$3")
    if [ "$got" = "$2" ] && ! grep -q '^FAIL' "$3"; then echo "PASS $1 ($got ranks met)"
    else echo "FAIL $1: $got of $2 ranks met: $(grep -m2 -E '^FAIL|Error' "$3")"; fi
}
timeout 120 "$TR" --no-python --nproc-per-node 3 --master-port "$(port)" "$UNIT" >"$TMP/one.txt" 2>&1
check torchrun_one_host 3 "$TMP/one.txt"
P=$(port)
for n in 0 1; do
    timeout 120 "$TR" --no-python --nnodes 2 --node-rank $n --nproc-per-node 2 \
        --master-addr 127.0.0.1 --master-port "$P" "$UNIT" >"$TMP/node$n.txt" 2>&1 &
done
wait
cat "$TMP/node0.txt" "$TMP/node1.txt" >"$TMP/nodes.txt"
check torchrun_two_hosts 4 "$TMP/nodes.txt"
timeout 120 "$TR" --no-python --standalone --nproc-per-node 2 "$UNIT" >"$TMP/sa.txt" 2>&1
check torchrun_standalone 2 "$TMP/sa.txt"
timeout 120 "$TR" --no-python --nnodes 1 --nproc-per-node 2 --rdzv-backend c10d \
    --rdzv-endpoint "127.0.0.1:$(port)" "$UNIT" >"$TMP/c10d.txt" 2>&1
check torchrun_c10d 2 "$TMP/c10d.txt"
