#!/bin/sh
# Instructions per sequential MCP stdio `tools/call` under callgrind, both
# sides of the run-mcp.sh stdio row: our client (bench_mcp_stdio, blocking
# pipes, against mcp_null_server) and our server (`acp-mcp serve
# --everything`, inside uv_run, driven by bench_mcp_stdio run natively).
# Each side runs at N and 3N calls; the difference over 2N removes start-up
# and initialize. The client figure is also given without the bench's own
# qsort of the latencies (its comparisons depend on the timings).
#
# Usage: bench/instr-mcp.sh [--build DIR] [--calls N]
# Prints one JSON line:
#   {"bench":"instr-mcp","calls":N,"client_instr_per_call":C,
#    "client_no_sort_instr_per_call":C2,"server_instr_per_call":S}
# Needs valgrind and callgrind_annotate. Slow, but needs no quiet machine.
set -eu
BUILD=build
CALLS=1000
while [ $# -gt 0 ]; do
  case "$1" in
  --build) BUILD=$2; shift 2 ;;
  --calls) CALLS=$2; shift 2 ;;
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
  *) echo "instr-mcp.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "instr-mcp.sh: valgrind not found" >&2; exit 1; }
BUILD=$(cd "$BUILD" && pwd)
BENCH=$BUILD/bench/bench_mcp_stdio
NULLSRV=$BUILD/bench/mcp_null_server
SERVER=$BUILD/acp-mcp
for f in "$BENCH" "$NULLSRV" "$SERVER"; do
  [ -x "$f" ] || { echo "instr-mcp.sh: $f is not built" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

total() { sed -n 's/^summary: \([0-9]*\).*/\1/p;s/^totals: \([0-9]*\).*/\1/p' "$1" | head -1; }
# Inclusive instructions of the libc sort (qsort and what it calls).
sort_cost() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    awk '/[^_]qsort|^ *[0-9,]+ .*\(qsort\)|:qsort /{gsub(",","",$1); if ($1+0 > m) m = $1+0} END {print m+0}'
}

client() { # calls -> "total sort"
  valgrind --tool=callgrind --trace-children=no --callgrind-out-file="$TMP/c.$1" \
    "$BENCH" --calls "$1" --warmup 0 -- "$NULLSRV" >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err" >&2; exit 1; }
  echo "$(total "$TMP/c.$1") $(sort_cost "$TMP/c.$1")"
}
server() { # calls -> total inside uv_run
  "$BENCH" --calls "$1" --warmup 0 -- valgrind --tool=callgrind \
    --toggle-collect=uv_run --callgrind-out-file="$TMP/s.$1" \
    "$SERVER" serve --everything >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err" >&2; exit 1; }
  total "$TMP/s.$1"
}

n=$CALLS
set -- $(client "$n"); c1=$1; q1=$2
set -- $(client $((3 * n))); c3=$1; q3=$2
s1=$(server "$n")
s3=$(server $((3 * n)))
c=$(((c3 - c1) / (2 * n)))
cq=$((((c3 - q3) - (c1 - q1)) / (2 * n)))
s=$(((s3 - s1) / (2 * n)))
echo "{\"bench\":\"instr-mcp\",\"calls\":$n,\"client_instr_per_call\":$c,\"client_no_sort_instr_per_call\":$cq,\"server_instr_per_call\":$s}"
