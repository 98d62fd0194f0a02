#!/bin/sh
# Instructions per 1 MiB turn through the conductor, per process, under
# callgrind: the shapes cond0 and emb0 of bench/run-conductor.sh
# (`acp bench-client --payload S --turns N -- acp conductor agent
# --quiet-stderr "acp agent --echo"`, and the same with bench_conductor).
# Counted inside uv_run only; each shape runs twice (N and 3N turns) and
# the difference divided by 2N removes start-up, initialize and
# session/new. A turn carries two messages of the payload's size through
# the conductor (the prompt, the echoed session/update) and one small one
# (the answer). Load does not change the counts (bench/README.md).
#
# Usage: bench/instr-conductor.sh [--acp BIN] [--bench-dir DIR]
#        [--payload S (1048576)] [--turns N (5)] [--shapes "cond0 emb0"]
# Prints one JSON line per shape:
#   {"bench":"instr-conductor","impl":"cond0","payload":S,
#    "client_instr_per_turn":C,"conductor_instr_per_turn":K,
#    "agent_instr_per_turn":A}
set -eu
ACP=build/acp
BDIR=
PAYLOAD=1048576
TURNS=5
SHAPES="cond0 emb0"
while [ $# -gt 0 ]; do
  case "$1" in
  --acp) ACP=$2; shift 2 ;;
  --bench-dir) BDIR=$2; shift 2 ;;
  --payload) PAYLOAD=$2; shift 2 ;;
  --turns) TURNS=$2; shift 2 ;;
  --shapes) SHAPES=$2; shift 2 ;;
  -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
  *) echo "instr-conductor.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null ||
  { echo "instr-conductor.sh: valgrind not found" >&2; exit 1; }
ACP=$(cd "$(dirname "$ACP")" && pwd)/$(basename "$ACP")
[ -n "$BDIR" ] || BDIR=$(dirname "$ACP")/bench
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# "client conductor agent": instructions of each process, told apart by
# the command line callgrind records.
run() { # shape turns
  rm -f "$TMP"/cg.*
  case $1 in
  cond0) set -- "$2" "$ACP" conductor agent --quiet-stderr "$ACP agent --echo" ;;
  emb0) set -- "$2" "$BDIR/bench_conductor" agent "$ACP agent --echo" ;;
  *) echo "instr-conductor.sh: unknown shape $1" >&2; exit 2 ;;
  esac
  n=$1
  shift
  valgrind --tool=callgrind --trace-children=yes --toggle-collect=uv_run \
    --callgrind-out-file="$TMP/cg.%p" \
    "$ACP" bench-client --payload "$PAYLOAD" --turns "$n" -- "$@" \
    >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
  c=0; k=0; a=0
  for f in "$TMP"/cg.*; do
    v=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$f")
    [ -n "$v" ] || v=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$f")
    cmd=$(sed -n 's/^cmd: //p' "$f")
    case $cmd in
    *bench-client*) c=$((c + v)) ;;
    *conductor*) k=$((k + v)) ;;
    *agent*) a=$((a + v)) ;;
    esac
  done
  echo "$c $k $a"
}

for s in $SHAPES; do
  set -- $(run "$s" "$TURNS"); c1=$1; k1=$2; a1=$3
  set -- $(run "$s" $((3 * TURNS))); c3=$1; k3=$2; a3=$3
  d=$((2 * TURNS))
  echo "{\"bench\":\"instr-conductor\",\"impl\":\"$s\",\"payload\":$PAYLOAD,\"client_instr_per_turn\":$(((c3 - c1) / d)),\"conductor_instr_per_turn\":$(((k3 - k1) / d)),\"agent_instr_per_turn\":$(((a3 - a1) / d))}"
done
