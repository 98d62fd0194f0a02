#!/bin/sh
# shellcheck disable=SC2086 # $wrap is split into words on purpose
# run-mcp-cli.sh - `acp mcp` end to end: `acp mcp serve` over stdio and over
# HTTP (Streamable HTTP at /mcp, legacy HTTP+SSE at /sse) driven by the
# `acp mcp` client verbs (tools, resources, prompts, call, read, get), the
# fallback probing from Streamable HTTP to legacy SSE, exit statuses and bad
# command lines. Every server listens on 127.0.0.1 and is stopped by pid.
#
# Env: ACP_BIN           the built acp (default: build/acp)
#      ACP_VALGRIND_WRAP a command prefix (e.g. valgrind ...) for the clients
# Exit status: 0 all passed, 1 some failed, 77 skipped (acp not built).
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
wrap=${ACP_VALGRIND_WRAP:-}
if [ -n "$wrap" ]; then T=300; else T=30; fi

# a FAIL line shows what the last command wrote
ko_show="out err"

# run NAME EXPECTED_STATUS EXPECTED_STDOUT_SUBSTRING -- acp args...
run() {
  name=$1 want=$2 sub=$3
  shift 4
  timeout $T $wrap "$acp" "$@" >"$work/out" 2>"$work/err"
  got=$?
  if [ "$got" -ne "$want" ]; then ko "$name (exit $got, wanted $want)"; return; fi
  if [ -n "$sub" ] && ! grep -qF -- "$sub" "$work/out"; then ko "$name (stdout lacks '$sub')"; return; fi
  ok "$name"
}

# --- stdio ---
run stdio-tools 0 "echo - Echoes back the message" -- mcp tools --stdio "$acp" mcp serve
run stdio-call 0 "5.5" -- mcp call --stdio "$acp" mcp serve -- add a=2 b=3.5
run stdio-call-json 0 '{"content":[{"type":"text","text":"hi"}]' -- mcp call --json --stdio "$acp" mcp serve -- echo message=hi
# --protocol: a forced stateful revision is negotiated and shown by --json
run stdio-protocol-forced 0 '"protocolVersion":"2025-03-26"}' -- mcp call --json --protocol 2025-03-26 --stdio "$acp" mcp serve -- echo message=hi
run stdio-protocol-auto 0 '"protocolVersion":"20' -- mcp tools --json --protocol auto --stdio "$acp" mcp serve
run stdio-protocol-bad 2 '' -- mcp tools --protocol 1999-01-01 --stdio "$acp" mcp serve
# Our client and our server at the stateless revision (no initialize).
run stdio-protocol-2026 0 '"protocolVersion":"2026-07-28"}' -- mcp call --json --protocol 2026-07-28 --stdio "$acp" mcp serve -- echo message=hi
run stdio-read 0 "an MCP server built on libacp" -- mcp read --stdio "$acp" mcp serve -- acp://readme
run stdio-get 0 "user: Please greet Bob warmly." -- mcp get --stdio "$acp" mcp serve -- greet name=Bob
run stdio-resources-json 0 '"resourceTemplates":[]' -- mcp resources --json --stdio "$acp" mcp serve
run stdio-prompts 0 "greet - Greets someone" -- mcp prompts --stdio "$acp" mcp serve
run stdio-tool-error 3 "message must be a string" -- mcp call --stdio "$acp" mcp serve -- echo message=42
run stdio-unknown-tool 1 "" -- mcp call --stdio "$acp" mcp serve -- nope
# A server->client request with a 10 s timeout gets the client's answer
# (the conn's clock must be the loop's, or the deadline is already past).
# The ping tool pings the client: a server->client request, which only the
# stateful revisions have (2026-07-28 has none), so these ask 2025-11-25.
run stdio-ping-client 0 "pong" -- mcp call --protocol 2025-11-25 --stdio "$acp" mcp serve -- ping
run stdio-server-missing 1 "" -- mcp tools --stdio /nonexistent/server
# The read-side spin (--read-spin-us, stdio only): the same answers, a
# server->client ping answered while the server polls included.
run stdio-spin-call 0 '{"content":[{"type":"text","text":"hi"}]' -- mcp call --json --stdio "$acp" mcp serve --read-spin-us 200 -- echo message=hi
run stdio-spin-ping 0 "pong" -- mcp call --protocol 2025-11-25 --stdio "$acp" mcp serve --read-spin-us 200 -- ping
run stdio-spin-tools 0 "greet - Greets someone" -- mcp prompts --stdio "$acp" mcp serve --read-spin-us 1
run spin-not-http 2 "" -- mcp serve --http 127.0.0.1:0 --read-spin-us 50
grep -q "read-spin-us is for stdio" "$work/err" || ko "spin-not-http (stderr lacks the reason)"
run spin-bad-value 2 "" -- mcp serve --read-spin-us 5x
if [ -f "$root/src/fixtures/mcp_everything.c" ]; then
  run stdio-everything 0 "test_simple_text" -- mcp tools --stdio "$acp" mcp serve --everything
  # call --task: a task in both eras (the fixture's jobs end at once)
  for pv in 2025-11-25 2026-07-28; do
    run stdio-task-tool-error-$pv 3 "simulated tool error" -- mcp call --task --protocol $pv --stdio "$acp" mcp serve --everything -- failing_job
    run stdio-task-failed-$pv 1 "" -- mcp call --task --protocol $pv --stdio "$acp" mcp serve --everything -- protocol_error_job
    grep -q "the job crashed" "$work/err" || ko "stdio-task-failed-$pv (stderr lacks the error)"
    run stdio-task-json-$pv 3 "\"protocolVersion\":\"$pv\"}" -- mcp call --json --task --protocol $pv --stdio "$acp" mcp serve --everything -- failing_job
  done
  run stdio-task-related-2025 3 "io.modelcontextprotocol/related-task" -- mcp call --json --task --protocol 2025-11-25 --stdio "$acp" mcp serve --everything -- failing_job
  run stdio-task-old-revision 1 "" -- mcp call --task --protocol 2025-06-18 --stdio "$acp" mcp serve --everything -- greet name=x
  # a task-required tool without --task
  run stdio-task-required 1 "" -- mcp call --protocol 2025-11-25 --stdio "$acp" mcp serve --everything -- failing_job
  # over HTTP slow_compute sleeps on a timer: polled while working
  start_mcp_http "$work/ev.log" --everything
  ev_pid=$mcp_pid evurl=$url
  for pv in 2025-11-25 2026-07-28; do
    run http-task-slow-$pv 0 "Computed L in 1 s" -- mcp call --task --protocol $pv --url "$evurl" slow_compute seconds=1 label=L
    grep -Eq '^task [0-9a-f]{32}$' "$work/err" || ko "http-task-slow-$pv (no task id on stderr)"
  done
  stop_pid "$ev_pid"
fi

# A stdio server needs no HTTP stack: acp serves it itself, mapping no
# libcurl (acp-mcp's; it would take ~6 MiB and ~6 ms a start). Checked on
# a server that has answered a ping, so it is past any exec.
# program_of PID: "EXE curl|nocurl", from /proc.
program_of() {
  _exe=$(basename "$(readlink "/proc/$1/exe" 2>/dev/null)")
  if grep -q 'libcurl' "/proc/$1/maps" 2>/dev/null; then
    echo "$_exe curl"
  else
    echo "$_exe nocurl"
  fi
}
rm -f "$work/fifo" && mkfifo "$work/fifo"
"$acp" mcp serve --everything <"$work/fifo" >"$work/ping.out" 2>"$work/err" &
st_pid=$!
exec 3>"$work/fifo"
echo '{"jsonrpc":"2.0","id":7,"method":"ping"}' >&3
i=0
while [ $i -lt 200 ] && ! grep -q '"id":7' "$work/ping.out"; do
  sleep 0.05; i=$((i + 1))
done
got=$(program_of "$st_pid")
exec 3>&-
wait "$st_pid"
st=$?
case "$got" in
"acp nocurl") if [ "$st" -eq 0 ]; then ok "stdio-serve-in-acp"; else ko "stdio-serve-in-acp (exit $st)"; fi ;;
*) ko "stdio-serve-in-acp (got '$got', wanted 'acp nocurl')" ;;
esac

# --- HTTP ---
start_mcp_http "$work/serve.log"
srv_pid=$mcp_pid
base=${url%/mcp}
got=$(program_of "$srv_pid")
case "$got" in
"acp-mcp curl") ok "http-serve-in-acp-mcp" ;;
*) ko "http-serve-in-acp-mcp (got '$got', wanted 'acp-mcp curl')" ;;
esac
run http-tools 0 "add - Adds two numbers" -- mcp tools --url "$url"
run http-ping-client 0 "pong" -- mcp call --protocol 2025-11-25 --url "$url" ping
run http-call 0 "5" -- mcp call --url "$url" add a=2 b=3
run http-call-json 0 '"structuredContent":{"sum":5}' -- mcp call --json --url "$url" add a=2 b=3
run http-protocol-forced 0 '"protocolVersion":"2025-06-18"}' -- mcp call --json --protocol 2025-06-18 --url "$url" add a=2 b=3
run http-protocol-2026 0 '"structuredContent":{"sum":5}' -- mcp call --json --protocol 2026-07-28 --url "$url" add a=2 b=3
run http-protocol-2026-read 0 '"protocolVersion":"2026-07-28"}' -- mcp read --json --protocol 2026-07-28 --url "$url" acp://readme
run http-read 0 "an MCP server built on libacp" -- mcp read --url "$url" acp://readme
run http-get 0 "Please greet Ann warmly." -- mcp get --url "$url" greet name=Ann
run http-streamable-explicit 0 "echo" -- mcp tools --transport streamable --url "$url"
run legacy-sse 0 "echo - Echoes back the message" -- mcp tools --transport sse --url "$base/sse"
run legacy-sse-call 0 "legacy" -- mcp call --transport sse --url "$base/sse" echo message=legacy
run fallback-probe 0 "probed" -- mcp call --url "$base/sse" echo message=probed
run http-bad-path 1 "" -- mcp tools --transport streamable --url "$base/nowhere"
stop_pid "$srv_pid"
run http-refused 1 "" -- mcp tools --url "$url"

# --- command line ---
run help 0 "usage: acp mcp serve" -- mcp --help
run no-target 2 "" -- mcp tools
run both-targets 2 "" -- mcp tools --url "$url" --stdio x
run bad-arg 2 "" -- mcp call --url "$url" echo notkeyvalue
run bad-transport 2 "" -- mcp tools --transport carrier-pigeon --url "$url"
run worker-id-bad 2 "" -- mcp serve --http 127.0.0.1:0 --worker-id bad-name
run worker-id-no-http 2 "" -- mcp serve --worker-id w1
# acp serves stdio itself but leaves a missing value to acp-mcp, which names it
run serve-spin-missing 2 "" -- mcp serve --read-spin-us
grep -q "read-spin-us needs a value" "$work/err" || ko "serve-spin-missing (stderr lacks the reason)"
run bad-http-addr 2 "" -- mcp serve --http nope
run unknown-verb 2 "" -- mcp frobnicate

finish
