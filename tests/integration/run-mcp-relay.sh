#!/bin/sh
# run-mcp-relay.sh - `acp mcp relay` end to end: a stdio MCP server that
# forwards to `acp mcp serve --http` (Streamable HTTP, legacy HTTP+SSE, the
# AUTO fallback), driven by the `acp mcp` client verbs over --stdio and by
# raw lines on stdin; errors (dead server, bad URL, bad --header, non-JSON
# input) and `--header` on the client verbs. Servers listen on 127.0.0.1
# and are stopped by pid.
#
# Usage: run-mcp-relay.sh [path/to/acp]   (or ACP_BIN)
# Env: ACP_VALGRIND_WRAP a command prefix (e.g. valgrind ...) for the relay
# Exit status: 0 all passed, 1 some failed, 77 skipped (acp not built).
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp "${1:-}"
wrap=${ACP_VALGRIND_WRAP:-}
if [ ! -x "$(dirname "$acp")/acp-mcp" ]; then
  echo "SKIP: acp-mcp is not built next to $acp"
  exit 77
fi
for tool in timeout grep sed; do
  command -v $tool >/dev/null 2>&1 || { echo "SKIP: $tool missing"; exit 77; }
done
if [ -n "$wrap" ]; then T=300; else T=30; fi
# The relay as the client verbs spawn it (optionally under valgrind).
relay="$acp mcp relay"
[ -n "$wrap" ] && relay="$wrap $(dirname "$acp")/acp-mcp relay"

# a FAIL line shows what the last command wrote
ko_show="out err"

# run NAME EXPECTED_STATUS EXPECTED_STDOUT_SUBSTRING -- command...
run() {
  name=$1 want=$2 sub=$3
  shift 4
  timeout $T "$@" <"$work/in" >"$work/out" 2>"$work/err"
  got=$?
  if [ "$got" -ne "$want" ]; then ko "$name (exit $got, wanted $want)"; return; fi
  if [ -n "$sub" ] && ! grep -qF -- "$sub" "$work/out"; then ko "$name (stdout lacks '$sub')"; return; fi
  ok "$name"
}
: >"$work/in"

start_mcp_http "$work/serve.log" --everything
srv_pid=$mcp_pid
base=${url%/mcp}

# --- through a client that speaks stdio ---
# shellcheck disable=SC2086 # $relay is split into words on purpose
run tools 0 "test_simple_text" -- "$acp" mcp tools --stdio $relay --url "$url" --
# shellcheck disable=SC2086
run call 0 "hi" -- "$acp" mcp call --stdio $relay --url "$url" -- echo message=hi
# shellcheck disable=SC2086
run call-header 0 "hdr" -- "$acp" mcp call --stdio $relay --url "$url" --header 'Authorization: Bearer t0k' -- echo message=hdr
# shellcheck disable=SC2086
run call-streamable 0 "strm" -- "$acp" mcp call --stdio $relay --streamable --url "$url" -- echo message=strm
# shellcheck disable=SC2086
run call-sse 0 "legacy" -- "$acp" mcp call --stdio $relay --sse --url "$base/sse" -- echo message=legacy
# shellcheck disable=SC2086
run call-fallback 0 "probed" -- "$acp" mcp call --stdio $relay --url "$base/sse" -- echo message=probed

# --- raw lines on stdin; end of input ends the relay with 0 ---
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
printf '%s\n' "$init" 'not json' '42' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"piped"}}}' >"$work/in"
# shellcheck disable=SC2086
run stdin-eof 0 '"id":2,"result"' -- $relay --url "$url"
if [ "$(grep -c '"code":-32700' "$work/out")" -eq 1 ] &&
   [ "$(grep -c '"code":-32600' "$work/out")" -eq 1 ] &&
   grep -qF '"protocolVersion":"2025-11-25"' "$work/out" &&
   grep -qF 'Echo: piped' "$work/out" &&
   [ "$(wc -l <"$work/out")" -eq 4 ]; then ok stdin-lines; else ko stdin-lines; fi
: >"$work/in"
# shellcheck disable=SC2086
run empty-stdin 0 "" -- $relay --url "$url"

# --- errors ---
run help 0 "usage: acp mcp relay" -- "$acp" mcp relay --help
run no-url 2 "" -- "$acp" mcp relay
run bad-url 2 "" -- "$acp" mcp relay --url nope
run bad-header 2 "" -- "$acp" mcp relay --url "$url" --header "$(printf 'X-A: 1\nX-B: 2')"
run bad-header-name 2 "" -- "$acp" mcp relay --url "$url" --header 'no colon'
run unknown-option 2 "" -- "$acp" mcp relay --url "$url" --frobnicate
run bad-path 1 "" -- "$acp" mcp tools --stdio "$acp" mcp relay --url "$base/nowhere" --
if grep -q "acp mcp relay: connection ended" "$work/err"; then ok bad-path-message; else ko bad-path-message; fi

# --- --header on the client verbs ---
run verb-header 0 "test_simple_text" -- "$acp" mcp tools --url "$url" --header 'X-Test: 1'
run verb-header-newline 2 "" -- "$acp" mcp tools --url "$url" --header "$(printf 'X-Test: 1\nX-Evil: 2')"
run verb-header-reaches 1 "" -- "$acp" mcp tools --url "$url" --header 'Origin: http://evil.example'
if grep -qF "403" "$work/err"; then ok verb-header-403; else ko verb-header-403; fi

# --- the agent that spawned a relay ends at the end of its input ---
# acp agent reaches an http server through `acp mcp relay`; once its input
# ends (here after the /mcp-tools turn answered), it must stop the relay
# and exit. Before, it waited for the relay, which waited for the end of
# its own stdin, which the agent held: both stayed for ever (seen orphaned
# under valgrind when the conductor above them was gone).
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}' \
  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\",\"params\":{\"cwd\":\"/tmp\",\"mcpServers\":[{\"type\":\"http\",\"name\":\"t\",\"url\":\"$url\",\"headers\":[]}]}}" \
  '{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"/mcp-tools"}]}}' >"$work/agent.in"
rm -f "$work/agent.out"
# shellcheck disable=SC2086
{ cat "$work/agent.in"; wait_for "$work/agent.out" '"id":3,"result"' 300; } |
  ACP_AGENT_SEQUENTIAL_IDS=1 timeout $T $wrap "$acp" agent --mcp-acp off >"$work/agent.out" 2>"$work/err"
got=$?
if [ $got -eq 0 ] && grep -q 't (http): ' "$work/agent.out" &&
   ! ps -eo args | grep -F -- "relay --url $url" | grep -qv grep; then
  ok agent-eof-stops-its-relay
else ko "agent-eof-stops-its-relay (exit $got)" "$(tail -3 "$work/agent.out")"; fi

stop_pid "$srv_pid"
# A dead server: a clear message from the relay, non-zero everywhere.
run dead-server 1 "" -- "$acp" mcp tools --stdio "$acp" mcp relay --url "$url" --
if grep -q "acp mcp relay: connection ended: .*connect" "$work/err"; then ok dead-server-message; else ko dead-server-message; fi
printf '%s\n' "$init" >"$work/in"
run dead-server-stdin 1 "" -- "$acp" mcp relay --url "$url"

finish
