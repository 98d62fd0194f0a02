#!/bin/sh
# Instructions per prompt turn, client and agent, under callgrind: a
# measure that does not move with the machine's load (bench/README.md).
# Counted inside uv_run only; each payload runs twice (N and 3N turns) and
# the difference divided by 2N removes initialize and session/new.
#
# Usage: bench/instr-turns.sh [--acp BIN] [--agent-args "agent --echo"]
#        [--payloads "5 65536 1048576"] [--turns N (1 MiB: N/10, min 5)]
# Prints one JSON line per payload:
#   {"bench":"instr-turns","payload":S,"client_instr_per_turn":C,
#    "agent_instr_per_turn":A,"total_instr_per_turn":C+A}
# Needs valgrind. Slow (valgrind runs about 50x slower), but needs no quiet
# machine: instruction counts are the same under any load.
set -eu
ACP=build/acp
AGENT_ARGS="agent --echo"
PAYLOADS="5 65536 1048576"
TURNS=200
while [ $# -gt 0 ]; do
  case "$1" in
  --acp) ACP=$2; shift 2 ;;
  --agent-args) AGENT_ARGS=$2; shift 2 ;;
  --payloads) PAYLOADS=$2; shift 2 ;;
  --turns) TURNS=$2; shift 2 ;;
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
  *) echo "instr-turns.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "instr-turns.sh: valgrind not found" >&2; exit 1; }
ACP=$(cd "$(dirname "$ACP")" && pwd)/$(basename "$ACP")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# total instructions of the client (first file) and the agent (the other)
run() { # payload turns -> "client agent"
  rm -f "$TMP"/cg.*
  # shellcheck disable=SC2086
  # Only inside the event loop: not the client's start-up, nor its sort of
  # the latencies at the end (which grows faster than the turns).
  valgrind --tool=callgrind --trace-children=yes --toggle-collect=uv_run \
    --callgrind-out-file="$TMP/cg.%p" \
    "$ACP" bench-client --payload "$1" --turns "$2" -- "$ACP" $AGENT_ARGS \
    >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
  cpid=$(ls "$TMP"/cg.* | sed 's/.*cg\.//' | sort -n | head -1)
  c=0; a=0
  for f in "$TMP"/cg.*; do
    n=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$f")
    [ -n "$n" ] || n=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$f")
    if [ "${f##*.}" = "$cpid" ]; then c=$n; else a=$((a + n)); fi
  done
  echo "$c $a"
}

for p in $PAYLOADS; do
  n=$TURNS
  if [ "$p" -ge 1048576 ]; then n=$((TURNS / 10)); [ "$n" -ge 5 ] || n=5; fi
  set -- $(run "$p" "$n"); c1=$1; a1=$2
  set -- $(run "$p" $((3 * n))); c3=$1; a3=$2
  c=$(((c3 - c1) / (2 * n))); a=$(((a3 - a1) / (2 * n)))
  echo "{\"bench\":\"instr-turns\",\"payload\":$p,\"client_instr_per_turn\":$c,\"agent_instr_per_turn\":$a,\"total_instr_per_turn\":$((c + a))}"
done
