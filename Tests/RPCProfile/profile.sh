#!/bin/bash
# Instructions and syscalls per unary echo call, server and client apart (see RPCProfile.swift):
#   Tests/RPCProfile/profile.sh SIZE CALLERS CALLS [--tls DIR]
# Server: callgrind counters zeroed after a warm-up, dumped after CALLS calls. Client: two runs under
# callgrind (CALLS/4 and CALLS), the difference over the calls between them. Syscalls: strace -c -f
# attached to a native server for CALLS calls. Prints per-call figures; the dumps stay in $OUT.
set -euo pipefail
size=$1 callers=$2 calls=$3; shift 3
tls=("$@")
bin=${RPC_PROFILE_BIN:-.build/release/rpc-profile}
OUT=${OUT:-/tmp/rpc-profile}
mkdir -p "$OUT"
cg=(valgrind --tool=callgrind --dump-instr=no)

start_server() {  # $@: command prefix; sets pid and address
    "$@" "$bin" server "${tls[@]}" > "$OUT/address" 2> "$OUT/server.err" &
    pid=$!
    for _ in $(seq 600); do [ -s "$OUT/address" ] && break; sleep 0.1; done
    address=$(head -1 "$OUT/address")
}
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'; }

# Server under callgrind.
rm -f "$OUT"/server.cg*
start_server "${cg[@]}" --callgrind-out-file="$OUT/server.cg"
"$bin" client "$address" 200 "$callers" "$size" "${tls[@]}"
callgrind_control -z "$pid" > /dev/null
"$bin" client "$address" "$calls" "$callers" "$size" "${tls[@]}"
callgrind_control -d "$pid" > /dev/null
kill "$pid"; wait "$pid" 2> /dev/null || true
dump=$(ls -t "$OUT"/server.cg.* | head -1)
echo "server: $(( $(total "$dump") / calls )) instructions per call ($dump)"

# Client under callgrind, against a native server.
start_server
few=$(( calls / 4 ))
"${cg[@]}" --callgrind-out-file="$OUT/client-few.cg" "$bin" client "$address" "$few" "$callers" "$size" "${tls[@]}" 2> /dev/null
"${cg[@]}" --callgrind-out-file="$OUT/client.cg" "$bin" client "$address" "$calls" "$callers" "$size" "${tls[@]}" 2> /dev/null
echo "client: $(( ($(total "$OUT/client.cg") - $(total "$OUT/client-few.cg")) / (calls - few) )) instructions per call ($OUT/client.cg)"

# Syscalls of the native server.
"$bin" client "$address" 200 "$callers" "$size" "${tls[@]}"
strace -c -f -o "$OUT/server.strace" -p "$pid" 2> /dev/null &
tracer=$!
sleep 1
"$bin" client "$address" "$calls" "$callers" "$size" "${tls[@]}"
kill -INT "$tracer"; wait "$tracer" 2> /dev/null || true
awk -v calls="$calls" '$NF == "total" { printf "server: %.2f syscalls per call\n", $4 / calls }' "$OUT/server.strace"
strace -c -f -o "$OUT/client.strace" "$bin" client "$address" "$calls" "$callers" "$size" "${tls[@]}"
awk -v calls="$calls" '$NF == "total" { printf "client: %.2f syscalls per call (whole process)\n", $4 / calls }' "$OUT/client.strace"
kill "$pid"; wait "$pid" 2> /dev/null || true
