#!/bin/sh
# run-turns-bench.sh - the prompt-turn benchmark's pieces work, in a few
# turns (bench/run-turns.sh, `make bench`):
#   bench/acp_null_agent: acp bench-client's turns of 5 B, 64 KiB and UTF-8
#     text echoed (bench-client checks every echo); answers a line that
#     arrives in pieces, ignores a notification, ends with its input;
#     refuses a line longer than its buffer with a message
#   bench/run-turns.sh --only ours: every round runs ours, the floor, the
#     blocking floor and our client against the null agent; the report
#     prints the client/agent split; summary.mjs names the split for the
#     one-CPU row (--pin) and not for the others
#   the other floor programs that share bench/bench_io.h with it:
#     bench/mcp_null_server under bench_mcp_stdio, and bench/relay (built
#     here with cc, as run-conductor.sh does) twice between bench-client
#     and the null agent
# Real processes over pipes; node for the report (skipped without it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
null_agent=${ACP_NULL_AGENT_BIN:-$(dirname "$acp")/bench/acp_null_agent}
floor=$(dirname "$acp")/bench/uv_cat_floor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

[ -x "$null_agent" ] || { echo "skip: no $null_agent"; exit 77; }

# MARK: - the null agent
# turns NAME PAYLOAD N [ARGS...]: the JSON line must say N turns.
turns() {
  name=$1 size=$2 n=$3
  shift 3
  if timeout 120 "$acp" bench-client "$@" --payload "$size" --turns "$n" \
    -- "$null_agent" >"$work/b.json" 2>"$work/b.err" &&
    grep -q "\"turns\":${n}[,}]" "$work/b.json"; then
    ok "$name"
  else
    ko "$name" "$(cat "$work/b.json" "$work/b.err")"
  fi
}
turns "acp_null_agent: 200 turns of 5 B" 5 200
turns "acp_null_agent: 20 turns of 64 KiB" 65536 20
turns "acp_null_agent: 3 turns of 1 MiB" 1048576 3
turns "acp_null_agent: 50 turns of UTF-8 text, compared byte for byte" 300 50 --text utf8

# A prompt in three writes, a notification, a prompt whose members come in
# another order than the bench client's (the searching path, not the fast
# one), then the end of input: two answers, each an update and a response
# with the id and the text as sent.
{
  printf '{"jsonrpc":"2.0","id":7,"method":"session/pro'
  sleep 0.2
  printf 'mpt","params":{"sessionId":"s","prompt":[{"type":"text","text":"a\\"b'
  sleep 0.2
  printf '"}]}}\n{"jsonrpc":"2.0","method":"session/cancel","params":{}}\n'
  printf '{"method":"session/prompt","params":{"prompt":[{"text":"z\\\\","type":"text"}],"sessionId":"s"},"id":8,"jsonrpc":"2.0"}\n'
} | timeout 20 "$null_agent" >"$work/pieces.out" 2>"$work/pieces.err"
rc=$?
if [ "$rc" -eq 0 ] && [ "$(wc -l <"$work/pieces.out")" -eq 4 ] &&
  sed -n 1p "$work/pieces.out" | grep -q '"text":"a\\"b"}}}}$' &&
  sed -n 2p "$work/pieces.out" | grep -q '^{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}$' &&
  sed -n 3p "$work/pieces.out" | grep -q '"text":"z\\\\"}}}}$' &&
  sed -n 4p "$work/pieces.out" | grep -q '^{"jsonrpc":"2.0","id":8,"result":{"stopReason":"end_turn"}}$'; then
  ok "acp_null_agent: a line in pieces, a notification ignored, members in another order, exit 0 at the end"
else
  ko "acp_null_agent: a line in pieces, a notification ignored, members in another order, exit 0 at the end" \
    "exit $rc" "$(cat "$work/pieces.out" "$work/pieces.err")"
fi

# A line longer than its buffer (8 MiB): a clear message and status 1.
head -c 9000000 /dev/zero | tr '\0' x | timeout 20 "$null_agent" >/dev/null 2>"$work/long.err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q '^acp_null_agent: line longer than 8388608 bytes$' "$work/long.err"; then
  ok "acp_null_agent: a line over 8 MiB ends it with a message, status 1"
else
  ko "acp_null_agent: a line over 8 MiB ends it with a message, status 1" "exit $rc" "$(cat "$work/long.err")"
fi

# MARK: - the other floor programs
mcp_bench=$(dirname "$acp")/bench/bench_mcp_stdio
null_server=$(dirname "$acp")/bench/mcp_null_server
if [ -x "$mcp_bench" ] && [ -x "$null_server" ]; then
  if timeout 60 "$mcp_bench" --calls 200 -- "$null_server" >"$work/m.json" 2>"$work/m.err" &&
    grep -q '"calls":200[,}]' "$work/m.json"; then
    ok "mcp_null_server: 200 tools/call answered"
  else
    ko "mcp_null_server: 200 tools/call answered" "$(cat "$work/m.json" "$work/m.err")"
  fi
else
  echo "skip: no bench_mcp_stdio or mcp_null_server"
fi
if command -v cc >/dev/null 2>&1 && cc -O2 -o "$work/relay" "$root/bench/relay.c" 2>"$work/cc.err"; then
  if timeout 60 "$acp" bench-client --payload 65536 --turns 50 -- "$work/relay" "$work/relay" \
    "$null_agent" >"$work/r.json" 2>"$work/r.err" && grep -q '"turns":50[,}]' "$work/r.json"; then
    ok "relay: 50 turns of 64 KiB through two relays"
  else
    ko "relay: 50 turns of 64 KiB through two relays" "$(cat "$work/r.json" "$work/r.err")"
  fi
else
  ko "relay: builds with cc" "$(cat "$work/cc.err" 2>/dev/null)"
fi

# MARK: - run-turns.sh and its report
if ! command -v node >/dev/null 2>&1; then
  echo "skip: node not found: run-turns.sh's report not checked"
elif [ ! -x "$floor" ]; then
  ko "run-turns.sh: the floor is built" "no $floor"
else
  mkdir -p "$work/last"
  if ACP_BIN=$acp sh "$root/bench/run-turns.sh" --only ours --payloads 5 \
    --turns 300 --rounds 2 --out "$work/last/turns.jsonl" >"$work/rt.out" 2>"$work/rt.err"; then
    ok "run-turns.sh --only ours: exit 0"
  else
    ko "run-turns.sh --only ours: exit 0" "$(tail -20 "$work/rt.err")"
  fi
  for impl in ours floor floor-block null-agent; do
    c=$(grep -c "\"impl\":\"$impl\"" "$work/last/turns.jsonl" 2>/dev/null)
    if [ "${c:-0}" -eq 2 ]; then
      ok "run-turns.sh: two rounds of $impl"
    else
      ko "run-turns.sh: two rounds of $impl" "got ${c:-0}"
    fi
  done
  # The split's two columns hold numbers (a negative one is noise, but a
  # number), not n/a.
  if grep -q 'us/turn over floor: client' "$work/rt.out" &&
    grep -E '^5 B ' "$work/rt.out" | tail -1 | grep -Eq ' -?[0-9]+\.[0-9]+ +-?[0-9]+\.[0-9]+$'; then
    ok "report.mjs: the client and agent shares of 5 B"
  else
    ko "report.mjs: the client and agent shares of 5 B" "$(cat "$work/rt.out")"
  fi
  if command -v taskset >/dev/null 2>&1; then
    ACP_BIN=$acp sh "$root/bench/run-turns.sh" --pin first --payloads 5 --turns 300 \
      --rounds 2 --out "$work/last/turns-pinned.jsonl" >/dev/null 2>"$work/rtp.err" ||
      ko "run-turns.sh --pin first: exit 0" "$(tail -20 "$work/rtp.err")"
    node "$root/bench/summary.mjs" "$work/last" >"$work/sum.out" 2>&1
    one=$(grep -c "both on one CPU:.*our time over the floor's, us/turn: client -\{0,1\}[0-9]" "$work/sum.out")
    all=$(grep -c "our time over the floor's" "$work/sum.out")
    if [ "$one" -eq 1 ] && [ "$all" -eq 1 ]; then
      ok "summary.mjs: the split for the one-CPU row only"
    else
      ko "summary.mjs: the split for the one-CPU row only" "$(cat "$work/sum.out")"
    fi
  else
    echo "skip: no taskset: run-turns.sh --pin not checked"
  fi
fi

echo "turns-bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
