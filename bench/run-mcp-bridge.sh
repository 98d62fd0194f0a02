#!/bin/sh
# MCP bridge benchmark: sequential `tools/call echo` round trips
#   bridge  through the conductor's stdio bridge: bench_mcp_stdio spawns
#           `acp mcp-shim SOCKET TOKEN` of a running chain
#           `acp conductor agent "acp proxy tools" "acp agent --mcp-acp off"`;
#           each call goes shim -> unix socket -> conductor -> mcp/message
#           -> the tools proxy (and back); the shim passes its stdin and
#           stdout to the conductor (SCM_RIGHTS), so the conductor reads
#           and writes the client's pipes itself;
#   bridge-relay  the same with ACP_MCP_SHIM_RELAY=1 (the shim copies the
#           bytes: two more hops per round trip);
#   plain   the same tool as a plain stdio MCP server (`acp mcp serve
#           --everything --read-spin-us 0`, stdio; without its read spin,
#           which no process on the bridge's path has: the ratio is what
#           the bridge's path costs, and run-mcp.sh shows the spin's gain).
#   http-bridge  through the conductor's HTTP bridge (`--mcp-bridge http`):
#           wrk with one connection (sequential round trips) POSTs
#           tools/call to the `acp mcp http-bridge` helper with the bearer
#           token; each call goes HTTP -> helper -> unix socket ->
#           conductor -> mcp/message -> the tools proxy (and back);
#   plain-http  the same wrk run against `acp mcp serve --everything --http`
#           (what HTTP itself costs, for reference).
# The stdio runs alternate, bridge then plain, for --rounds rounds (default
# 5), so that both see the same moments of a shared machine; the ratio
# reported is the median of the rounds' ratios. The relay mode runs once.
# Each round also measures the floor of the design: bench/mcp_null_server
# (answers without parsing) alone, and behind a raw line relay
# (bench/relay.c), i.e. four pipes and three processes doing no work, as
# the bridge has four pipes and three processes; their ratio is what any
# bridge of this shape costs at least. Issue 11's target is on the bridge
# against that floor: the median of the rounds' bridge p50 / four-pipe null
# p50 (`bridge_over_floor_p50`, printed as bridge/floor) at most 1.3.
# The agent's stdin is copied with tee to learn the declaration (not
# --debug-dir, which would add two file writes to every bridged call).
# Prints one JSON line per run and the latency ratios. Target: the bridge's
# median latency at most 2x the plain stdio server's. The HTTP runs need
# wrk and curl (skipped with a note otherwise).
#
# Usage: bench/run-mcp-bridge.sh [--quick] [--calls N] [--rounds N]
# Env:   ACP_BIN (default build-release/acp), ACP_BENCH_MCP_STDIO (default
#        bench/bench_mcp_stdio beside ACP_BIN's build).
# Exit 0, 1 if a run failed, 77 if a prerequisite is missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/.." && pwd)
calls=20000
warmup=500
seconds=10
rounds=5
while [ $# -gt 0 ]; do
  case $1 in
  --quick) calls=2000; warmup=100; seconds=3; rounds=3 ;;
  --calls) calls=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  *) echo "usage: $0 [--quick] [--calls N] [--rounds N]" >&2; exit 2 ;;
  esac
  shift
done
case $calls$rounds in *[!0-9]*) echo "usage: $0 [--quick] [--calls N] [--rounds N] (N: a number)" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] || { echo "$0: --rounds must be at least 1" >&2; exit 2; }
ACP=${ACP_BIN:-$ROOT/build-release/acp}
BENCH=${ACP_BENCH_MCP_STDIO:-$(dirname "$ACP")/bench/bench_mcp_stdio}
[ -x "$ACP" ] || { echo "skip: no $ACP"; exit 77; }
[ -x "$BENCH" ] || { echo "skip: no $BENCH"; exit 77; }
NULLSRV=$(dirname "$BENCH")/mcp_null_server

T=$(mktemp -d "${TMPDIR:-/tmp}/acp-bench-bridge.XXXXXX")
export TMPDIR="$T"
cpid=
cleanup() {
  exec 3>&- 2>/dev/null || true
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

RELAY=
if [ -x "$NULLSRV" ] && cc -O2 -o "$T/relay" "$here/relay.c" 2>/dev/null; then
  RELAY=$T/relay
fi
# start_chain PATTERN [CONDUCTOR OPTIONS...]: a chain
# `acp conductor agent "acp proxy tools" "acp agent --mcp-acp off"` fed
# through fd 3, initialized, with one session, once PATTERN shows in the
# agent's stdin (its bridged declaration).
start_chain() {
  pat=$1
  shift
  rm -f "$T/in" "$T/out" "$T/agent.stdin"
  mkfifo "$T/in"
  "$ACP" conductor agent --quiet-stderr "$@" "$ACP proxy tools" \
    "sh -c 'tee \"$T/agent.stdin\" | exec \"$ACP\" agent --mcp-acp off'" \
    <"$T/in" >"$T/out" 2>"$T/err" &
  cpid=$!
  exec 3>"$T/in"
  printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}' >&3
  i=0
  while [ $i -lt 100 ] && ! grep -q '"id":1,"result"' "$T/out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  printf '%s\n' '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}' >&3
  i=0
  while [ $i -lt 100 ] && ! grep -q "$pat" "$T/agent.stdin" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
}

start_chain mcp-shim
decl=$(grep -h -o '"args":\["mcp-shim","[^"]*","[^"]*"\]' "$T/agent.stdin" | head -1)
SOCK=$(echo "$decl" | cut -d'"' -f6)
TOKEN=$(echo "$decl" | cut -d'"' -f8)
[ -n "$TOKEN" ] || { echo "no bridged declaration"; cat "$T/err"; exit 1; }

p50() { echo "$1" | sed 's/.*"p50_us":\([0-9.]*\).*/\1/'; }
p99() { echo "$1" | sed 's/.*"p99_us":\([0-9.]*\).*/\1/'; }
# median: the middle of the numbers on stdin (the lower middle of an even
# count).
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: >"$T/ratios"
: >"$T/plain"
: >"$T/floor"
: >"$T/bfloor"
r=1
while [ "$r" -le "$rounds" ]; do
  bridge=$("$BENCH" --calls "$calls" --warmup "$warmup" --impl bridge -- "$ACP" mcp-shim "$SOCK" "$TOKEN")
  echo "$bridge"
  plain=$("$BENCH" --calls "$calls" --warmup "$warmup" --impl plain -- "$ACP" mcp serve --everything --read-spin-us 0)
  echo "$plain"
  awk -v b="$(p50 "$bridge")" -v p="$(p50 "$plain")" -v b9="$(p99 "$bridge")" -v p9="$(p99 "$plain")" \
    'BEGIN { printf "%.3f %.3f\n", b / p, b9 / p9 }' >>"$T/ratios"
  echo "$(p50 "$plain") $(p99 "$plain")" >>"$T/plain"
  if [ -n "$RELAY" ]; then
    null2=$("$BENCH" --calls "$calls" --warmup "$warmup" --impl null -- "$NULLSRV")
    null4=$("$BENCH" --calls "$calls" --warmup "$warmup" --impl relay-null -- "$RELAY" "$NULLSRV")
    echo "$null2"
    echo "$null4"
    awk -v b="$(p50 "$null4")" -v p="$(p50 "$null2")" 'BEGIN { printf "%.3f\n", b / p }' >>"$T/floor"
    awk -v b="$(p50 "$bridge")" -v p="$(p50 "$null4")" 'BEGIN { printf "%.3f\n", b / p }' >>"$T/bfloor"
  fi
  r=$((r + 1))
done
relay=$(ACP_MCP_SHIM_RELAY=1 "$BENCH" --calls "$calls" --warmup "$warmup" --impl bridge-relay -- "$ACP" mcp-shim "$SOCK" "$TOKEN")
echo "$relay"
printf '{"bridge_over_plain_p50":%.2f,"bridge_over_plain_p99":%.2f,"rounds":%d,"p50_ratios":"%s","design_floor_p50":%s,"target":2}\n' \
  "$(cut -d' ' -f1 "$T/ratios" | median)" "$(cut -d' ' -f2 "$T/ratios" | median)" "$rounds" \
  "$(cut -d' ' -f1 "$T/ratios" | tr '\n' ' ' | sed 's/ $//')" \
  "$( [ -s "$T/floor" ] && median <"$T/floor" || echo null)"
if [ -s "$T/bfloor" ]; then
  bf=$(median <"$T/bfloor")
  printf '{"bridge_over_floor_p50":%s,"rounds":%d,"p50_ratios":"%s","target":1.3}\n' \
    "$bf" "$rounds" "$(tr '\n' ' ' <"$T/bfloor" | sed 's/ $//')"
  awk -v r="$bf" -v n="$rounds" 'BEGIN { printf "bridge/floor p50 %.2fx (bridge over the four-pipe null path, median of %d alternating rounds; target <= 1.3: %s)\n", r, n, r <= 1.3 ? "met" : "NOT met" }'
else
  echo "bridge/floor: n/a (no bench/mcp_null_server or relay)"
fi

# ---- HTTP bridge ----------------------------------------------------------
if ! command -v wrk >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  echo "note: wrk or curl missing: HTTP bridge runs skipped"
  exit 0
fi
exec 3>&-
wait "$cpid" 2>/dev/null || true
cpid=
start_chain '"type":"http"' --mcp-bridge http
URL=$(grep -h -o '"url":"[^"]*"' "$T/agent.stdin" | head -1 | cut -d'"' -f4)
AUTH=$(grep -h -o 'Bearer [0-9a-f]*' "$T/agent.stdin" | head -1)
[ -n "$URL" ] || { echo "no HTTP-bridged declaration"; cat "$T/err"; exit 1; }

# http_run IMPL URL [AUTH]: initialize, initialized, then wrk -c1.
http_run() {
  impl=$1 url=$2 auth=${3:-}
  set -- -sS --max-time 10 -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream'
  [ -n "$auth" ] && set -- "$@" -H "Authorization: $auth"
  curl "$@" -D "$T/h" -o "$T/b" --data-binary \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' "$url"
  sid=$(tr -d '\r' <"$T/h" | awk 'tolower($1) == "mcp-session-id:" {print $2}')
  pv=$(grep -o '"protocolVersion":"[^"]*"' "$T/b" | head -n 1 | cut -d'"' -f4)
  curl "$@" -H "Mcp-Session-Id: $sid" -H "Mcp-Protocol-Version: $pv" -o /dev/null \
    --data-binary '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url"
  MCP_SID=$sid MCP_PV=$pv MCP_AUTH=$auth timeout $((seconds + 30)) \
    wrk -t1 -c1 -d"${seconds}s" -s "$here/mcp_wrk.lua" "$url" >"$T/wrk-$impl.log" 2>&1 || true
  line=$(sed -n 's/^WRK_JSON //p' "$T/wrk-$impl.log")
  [ -n "$line" ] || { echo "$impl: wrk failed"; tail -5 "$T/wrk-$impl.log"; return 1; }
  echo "$line" | sed "s/^{/{\"impl\":\"$impl\",\"conns\":1,/"
}
hbridge=$(http_run http-bridge "$URL" "$AUTH")
echo "$hbridge"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$ACP" mcp serve --everything --http "127.0.0.1:$port" >"$T/serve.log" 2>&1 &
spid=$!
i=0
while [ $i -lt 100 ] && ! curl -s -o /dev/null "http://127.0.0.1:$port/mcp" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
hplain=$(http_run plain-http "http://127.0.0.1:$port/mcp")
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
echo "$hplain"
# Against the median of the plain stdio runs above.
awk -v b="$(p50 "$hbridge")" -v p="$(cut -d' ' -f1 "$T/plain" | median)" \
  -v b9="$(p99 "$hbridge")" -v p9="$(cut -d' ' -f2 "$T/plain" | median)" \
  -v h="$(p50 "$hplain")" \
  'BEGIN { printf "{\"http_bridge_over_plain_stdio_p50\":%.2f,\"http_bridge_over_plain_stdio_p99\":%.2f,\"http_bridge_over_plain_http_p50\":%.2f,\"target\":2}\n", b / p, b9 / p9, b / h }'
