#!/bin/sh
# MCP bridging in the conductor through real processes: `acp proxy tools`
# offers MCP servers over ACP; the agent does not speak MCP-over-ACP
# (`acp agent --mcp-acp off`), so the conductor rewrites each declaration
# into `acp mcp-shim SOCKET TOKEN` and relays the shim's MCP traffic as
# mcp/* messages. Usage: run-mcp-bridge.sh [path/to/acp]
NAME=acp-bridge-test
. "$(dirname "$0")/bridge-common.sh"

# 1. bridged: the agent lists and calls the proxy's tools through the shim.
out=$(timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call tools echo {"message":"hi"}' -- "$ACP" conductor agent \
  "$ACP proxy tools" "$ACP agent --mcp-acp off" 2>&1)
echo "$out" | grep -q 'tools (stdio): echo read_lines' && echo "$out" | grep -qx 'hi' &&
  ok "bridged list and call (stdio shim)" || ko "bridged list and call" "$out"

# 2. native agent: no bridge, the declaration passes untouched.
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call tools echo {"message":"hi"}' -- "$ACP" conductor agent \
  --debug-dir "$T/dbg" "$ACP proxy tools" "$ACP agent --mcp-acp native" 2>&1)
if echo "$out" | grep -q 'tools (acp): echo read_lines' && echo "$out" | grep -qx 'hi' &&
  grep -q '"type":"acp"' "$T/dbg/2-"*.stdin && ! grep -q mcp-shim "$T/dbg/2-"*.stdin; then
  ok "native agent: declarations untouched"
else
  ko "native agent" "$out"
fi

# 3. the client always sees mcpCapabilities.acp, the agent's answer is
# otherwise kept; --mcp-bridge off passes declarations untouched.
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client -p '/mcp-tools' -- "$ACP" conductor agent --mcp-bridge off \
  --debug-dir "$T/dbg" "$ACP proxy tools" "$ACP agent --mcp-acp off" 2>&1)
if grep -q '"mcpCapabilities":{"http":true,"sse":true,"acp":true}' "$T/dbg/0-client.out" &&
  grep -q '"type":"acp"' "$T/dbg/2-"*.stdin &&
  echo "$out" | grep -q 'not consumed'; then
  ok "capability advertised; --mcp-bridge off leaves declarations"
else
  ko "--mcp-bridge off" "$out"
fi

# 4. two servers from two proxies in one session.
out=$(timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call t1 echo {"message":"from-one"}
/mcp-call t2 echo {"message":"from-two"}' -- "$ACP" conductor agent \
  "$ACP proxy tools --name t1" "$ACP proxy tools --name t2" \
  "$ACP agent --mcp-acp off" 2>&1)
echo "$out" | grep -q 't1 (stdio): echo read_lines' &&
  echo "$out" | grep -q 't2 (stdio): echo read_lines' &&
  echo "$out" | grep -qx 'from-one' && echo "$out" | grep -qx 'from-two' &&
  ok "two servers from two proxies" || ko "two servers from two proxies" "$out"

# A chain driven line by line through a FIFO, shims run by hand.
start_chain() { # start_chain CONDUCTOR-ARGS...
  rm -rf "$T/dbg" "$T/in" "$T/out" "$T/err"
  mkfifo "$T/in"
  "$ACP" conductor agent --debug-dir "$T/dbg" "$@" <"$T/in" >"$T/out" 2>"$T/err" &
  cpid=$!
  exec 3>"$T/in"
  printf '%s\n' "$INIT" >&3
  i=0
  while [ $i -lt 100 ] && ! grep -q '"id":1,"result"' "$T/out"; do
    sleep 0.1
    i=$((i + 1))
  done
  printf '%s\n' "$NEWS" >&3
  i=0
  while [ $i -lt 100 ] && ! grep -q mcp-shim "$T/dbg/2-"*.stdin 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
  decl=$(grep -h -o '"args":\["mcp-shim","[^"]*","[^"]*"\]' "$T/dbg/2-"*.stdin | head -1)
  SOCK=$(echo "$decl" | cut -d'"' -f6)
  TOKEN=$(echo "$decl" | cut -d'"' -f8)
}
stop_chain() {
  exec 3>&-
  wait "$cpid" 2>/dev/null
  cstatus=$?
  cpid=
}
# stdin stays open this long for the answers (longer under valgrind, where
# five shims and their valgrinds start at once).
hold=1
[ -n "${ACP_VALGRIND:-}" ] && hold=8
# How long a call is given to cross the shim and the conductor.
hold_call=1
[ -n "${ACP_VALGRIND:-}" ] && hold_call=4
# wait_in PATTERN FILE: until PATTERN is in FILE, 60 s at most.
wait_in() {
  w=0
  while [ $w -lt 600 ] && ! grep -q "$1" "$2" 2>/dev/null; do
    sleep 0.1
    w=$((w + 1))
  done
}
shim() { # shim TOKEN LINES...
  tok=$1
  shift
  { for l in "$@"; do printf '%s\n' "$l"; done; sleep $hold; } |
    timeout 20 "$ACP" mcp-shim "$SOCK" "$tok"
}
# shim_to OUT TOKEN LINES...: as shim, into OUT, and its stdin stays open
# until the answer to id 2 is in OUT (60 s at most), not for a fixed time:
# five shims under ASan on a loaded machine can take more than a second.
# OUT is emptied first: the writer and the shim's redirection start
# together, and a file left by an earlier step would end the writer at once
# (a relaying shim then ends with its stdin, before any answer).
shim_to() {
  sout=$1
  tok=$2
  shift 2
  : >"$sout"
  { for l in "$@"; do printf '%s\n' "$l"; done; wait_in '"id":2,' "$sout"; } |
    timeout 90 "$ACP" mcp-shim "$SOCK" "$tok" >"$sout"
}

# 5. socket and directory are private; several concurrent connections.
start_chain "$ACP proxy tools" "$ACP agent --mcp-acp off"
dmode=$(stat -c %a "$(dirname "$SOCK")" 2>/dev/null)
smode=$(stat -c %a "$SOCK" 2>/dev/null)
[ "$dmode" = 700 ] && [ "$smode" = 600 ] && ok "socket 0600 in a 0700 directory" ||
  ko "socket modes: dir $dmode sock $smode"
for n in 1 2 3 4 5; do
  shim_to "$T/shim$n" "$TOKEN" "$MCPINIT" "$MCPINITED" "$(call 2 "conn-$n")" &
  eval "s$n=\$!"
done
wait "$s1" "$s2" "$s3" "$s4" "$s5"
good=0
for n in 1 2 3 4 5; do
  grep -q "\"id\":2,\"result\".*conn-$n" "$T/shim$n" && good=$((good + 1))
done
[ $good = 5 ] && ok "5 concurrent bridged connections" ||
  ko "concurrent connections ($good/5)" "$(cat "$T"/shim*)"

# 6. a wrong token is refused.
out=$(shim "0123456789abcdef0123456789abcdef" "$MCPINIT")
[ -z "$out" ] && grep -q 'wrong token' "$T/err" && ok "wrong token refused" ||
  ko "wrong token" "$out"

# 7. a tool call cancelled mid-flight: the tools proxy is stopped while the
# call is pending; notifications/cancelled becomes $/cancel_request for the
# outer request; the call's answer (whatever it is) is not passed on; the
# connection goes on.
tpid=$(ps -o pid= -o args= --ppid "$cpid" | grep 'proxy tools' | awk '{print $1}' | head -1)
out=$({
  printf '%s\n%s\n' "$MCPINIT" "$MCPINITED"
  sleep 1
  kill -STOP "$tpid"
  call 2 slow
  printf '\n%s\n' '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}'
  sleep 0.5
  kill -CONT "$tpid"
  sleep 0.5
  call 3 after
  printf '\n'
  sleep 1
} | timeout 20 "$ACP" mcp-shim "$SOCK" "$TOKEN")
if echo "$out" | grep -q '"id":3,"result".*after' && ! echo "$out" | grep -q '"id":2' &&
  grep -q 'cancel_request' "$T/dbg/1-"*.stdin; then
  ok "call cancelled mid-flight: \$/cancel_request sent, answer dropped, connection goes on"
else
  ko "cancel" "$out"
fi

# 8. the shim's connection ends: mcp/disconnect reaches the provider.
grep -q 'mcp/disconnect' "$T/dbg/1-"*.stdin && ok "mcp/disconnect on shim exit" ||
  ko "no mcp/disconnect"

# 9. the session ends (session/close): its open connections are closed
# (the shim exits although its stdin stays open) and its token stops
# working.
{ printf '%s\n' "$MCPINIT"; sleep 10; } | timeout 60 "$ACP" mcp-shim "$SOCK" "$TOKEN" >"$T/held" &
held=$!
i=0
while [ $i -lt 100 ] && ! grep -q '"id":1,"result"' "$T/held"; do sleep 0.1; i=$((i + 1)); done
printf '%s\n' '{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"sess_1"}}' >&3
i=0
while [ $i -lt 100 ] && kill -0 "$held" 2>/dev/null && ps -o args= -p "$held" | grep -q mcp-shim; do sleep 0.1; i=$((i + 1)); done
refused_before=$(grep -c 'wrong token' "$T/err")
out=$(shim "$TOKEN" "$MCPINIT")
refused_after=$(grep -c 'wrong token' "$T/err")
[ $i -lt 100 ] && [ -z "$out" ] && [ "$refused_after" -gt "$refused_before" ] &&
  ok "session/close closes its connections and revokes the token" ||
  ko "session/close (i=$i, refused $refused_before -> $refused_after)" "$out"
stop_chain
[ ! -e "$SOCK" ] && [ ! -e "$(dirname "$SOCK")" ] && ok "socket and directory removed" ||
  ko "socket left behind"

# 10. a proxy that dies while a tool call is pending: the MCP client gets an
# error naming it, and the chain follows its crash policy (fail: exit 1).
start_chain "$ACP proxy tools" "$ACP agent --mcp-acp off"
tpid=$(ps -o pid= -o args= --ppid "$cpid" | grep 'proxy tools' | awk '{print $1}' | head -1)
# Each step waits for what it needs rather than for a fixed time: under
# valgrind on a busy machine the shim can take seconds to answer.
: >"$T/dead"
{
  printf '%s\n%s\n' "$MCPINIT" "$MCPINITED"
  wait_in '"id":1,"result"' "$T/dead"
  kill -STOP "$tpid"
  call 2 pending
  printf '\n'
  sleep $hold_call
  kill -KILL "$tpid"
  wait_in '"id":2,"error"' "$T/dead"
} | timeout 90 "$ACP" mcp-shim "$SOCK" "$TOKEN" >"$T/dead"
stop_chain
grep -q '"id":2,"error".*tools' "$T/dead" && [ "$cstatus" = 1 ] &&
  ok "proxy died while pending: MCP error naming it, chain failed (exit $cstatus)" ||
  ko "dead proxy (exit $cstatus)" "$(cat "$T/dead")"

# 11. the same through the shim's byte relay (ACP_MCP_SHIM_RELAY=1: the
# shim copies bytes instead of passing its stdin and stdout to the
# conductor).
out=$(ACP_MCP_SHIM_RELAY=1 timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call tools echo {"message":"relayed"}' -- "$ACP" conductor agent \
  "$ACP proxy tools" "$ACP agent --mcp-acp off" 2>&1)
echo "$out" | grep -q 'tools (stdio): echo read_lines' && echo "$out" | grep -qx 'relayed' &&
  ok "relay mode: bridged list and call" || ko "relay mode list and call" "$out"
start_chain "$ACP proxy tools" "$ACP agent --mcp-acp off"
for n in 1 2 3; do
  ACP_MCP_SHIM_RELAY=1 shim_to "$T/shim$n" "$TOKEN" "$MCPINIT" "$MCPINITED" "$(call 2 "relay-$n")" &
  eval "s$n=\$!"
done
wait "$s1" "$s2" "$s3"
out=$(ACP_MCP_SHIM_RELAY=1 shim "0123456789abcdef0123456789abcdef" "$MCPINIT")
stop_chain
good=0
for n in 1 2 3; do
  grep -q "\"id\":2,\"result\".*relay-$n" "$T/shim$n" && good=$((good + 1))
done
[ $good = 3 ] && [ -z "$out" ] && ok "relay mode: 3 concurrent connections, wrong token refused" ||
  ko "relay mode concurrent ($good/3)" "$(cat "$T"/shim*) $out"

# 12. a pipelining client: session/new reaches the conductor before the
# agent (slow to start) answered initialize. The line is held until the
# answer says how to rewrite it, then rewritten like any other.
rm -rf "$T/dbg"
printf '%s\n%s\n' "$INIT" "$NEWS" | (cat; sleep 3) |
  timeout 30 "$ACP" conductor agent --debug-dir "$T/dbg" "$ACP proxy tools" \
    "sh -c 'sleep 1; exec $ACP agent --mcp-acp off'" >"$T/pipelined" 2>&1
if grep -q '"id":2,"result".*sessionId' "$T/pipelined" &&
  grep -q mcp-shim "$T/dbg/2-"*.stdin && ! grep -q '"type":"acp"' "$T/dbg/2-"*.stdin; then
  ok "pipelined session/new held until the agent's initialize answer, then rewritten"
else
  ko "pipelined session/new" "$(cat "$T/pipelined" "$T/dbg/2-"*.stdin)"
fi

# 13. the proxy that offered a server dies under --on-crash bypass: its
# connections are closed, later calls get an MCP error from the conductor,
# and nothing of it travels on to the client (which never declared it).
# The proxy is killed once the call before has its answer, and the shim's
# stdin stays open until the call after has one (a fixed second was too
# short for a proxy under valgrind on a loaded machine).
start_chain --on-crash bypass "$ACP proxy tools" "$ACP agent --mcp-acp off"
tpid=$(ps -o pid= -o args= --ppid "$cpid" | grep 'proxy tools' | awk '{print $1}' | head -1)
: >"$T/bypassed"
{
  printf '%s\n%s\n%s\n' "$MCPINIT" "$MCPINITED" "$(call 2 before)"
  wait_in '"id":2,' "$T/bypassed"
  kill -KILL "$tpid"
  sleep 1
  call 3 after
  printf '\n'
  wait_in '"id":3,' "$T/bypassed"
} | ACP_MCP_SHIM_RELAY=1 timeout 150 "$ACP" mcp-shim "$SOCK" "$TOKEN" >"$T/bypassed" 2>/dev/null
out=$(ACP_MCP_SHIM_RELAY=1 shim "$TOKEN" "$MCPINIT")
stop_chain
if grep -q '"id":2,"result".*before' "$T/bypassed" &&
  grep -q '"id":3,"error":{"code":-33001,"message":"MCP server .tools. is unavailable.*tools' "$T/bypassed" &&
  ! grep -q 'mcp/' "$T/dbg/0-"*.out && [ -z "$out" ] &&
  grep -q "server 'tools' is gone" "$T/err"; then
  ok "provider died (bypass): its connections closed, nothing leaks to the client"
else
  ko "dead provider's traffic" "$(cat "$T/bypassed" "$T/dbg/0-"*.out "$T/err")"
fi

# 14. the trace tells the truth: the agent's session/new as it received it
# (rewritten), and the bridge's hops with their real ends; --debug-dir
# keeps the bridge's hops in bridge.jsonl. Components are named by link
# (the proxy is 1, the agent 2): under valgrind their names are the
# wrapper's.
to_agent() { grep '"toLink":2,' "$1" | grep -v '"to":"bridge"'; }
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client -p '/mcp-call tools echo {"message":"traced"}' -- \
  "$ACP" conductor agent --trace "$T/trace" --debug-dir "$T/dbg" \
  "$ACP proxy tools" "$ACP agent --mcp-acp off" 2>&1)
if echo "$out" | grep -qx 'traced' &&
  to_agent "$T/trace" | grep '"session/new"' | grep -q 'mcp-shim' &&
  ! to_agent "$T/trace" | grep -q '"type":"acp"' &&
  grep '"from":"endpoint:1","fromLink":-1,"to":"bridge:tools"' "$T/trace" | grep -q '"tools/call"' &&
  grep '"from":"bridge","fromLink":2,"to":"[^"]*","toLink":1,' "$T/trace" | grep -q '"mcp/connect"' &&
  grep '"to":"bridge"' "$T/trace" | grep -q 'traced' &&
  grep '"from":"bridge:tools","fromLink":2,"to":"endpoint:1"' "$T/trace" | grep -q 'traced' &&
  ! to_agent "$T/trace" | grep -q 'mcp/message' &&
  grep '"from":"endpoint:1"' "$T/dbg/bridge.jsonl" | grep -q '"tools/call"' &&
  grep '"from":"bridge","fromLink":2,"to":"[^"]*","toLink":1,' "$T/dbg/bridge.jsonl" | grep -q 'mcp/connect' &&
  grep '"to":"endpoint:1"' "$T/dbg/bridge.jsonl" | grep -q 'traced' &&
  ! grep -q 'mcp/message' "$T/dbg/2-"*.stdin; then
  ok "trace and debug dir: the agent's rewritten session/new, bridge hops with their real ends"
else
  ko "trace" "$(cat "$T/trace")"
fi

# 15. the same with an agent that speaks MCP-over-ACP itself: once the
# provider died, the router answers the agent's traffic for its server
# (-33001) and the client never sees it.
wait_for() { # wait_for PATTERN FILE
  i=0
  while [ $i -lt 100 ] && ! grep -q "$1" "$2"; do sleep 0.1; i=$((i + 1)); done
}
prompt() { # prompt ID TEXT
  printf '{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":{"sessionId":"%s","prompt":[{"type":"text","text":"%s"}]}}\n' \
    "$1" "$sid" "$2" >&3
}
rm -rf "$T/dbg" "$T/in" "$T/out" "$T/err"
mkfifo "$T/in"
"$ACP" conductor agent --on-crash bypass --debug-dir "$T/dbg" "$ACP proxy tools" \
  "$ACP agent --mcp-acp native" <"$T/in" >"$T/out" 2>"$T/err" &
cpid=$!
exec 3>"$T/in"
printf '%s\n' "$INIT" >&3
wait_for '"id":1,"result"' "$T/out"
printf '%s\n' "$NEWS" >&3
wait_for '"id":2,"result"' "$T/out"
sid=$(grep -o '"sessionId":"[^"]*"' "$T/out" | head -1 | cut -d'"' -f4)
prompt 3 '/mcp-call tools echo {\"message\":\"alive\"}'
wait_for '"id":3,"result"' "$T/out"
tpid=$(ps -o pid= -o args= --ppid "$cpid" | grep 'proxy tools' | awk '{print $1}' | head -1)
kill -KILL "$tpid"
wait_for 'bypassing' "$T/err"
prompt 4 '/mcp-call tools echo {\"message\":\"dead\"}'
wait_for '"id":4,"result"' "$T/out"
stop_chain
if grep -q '"text":"alive"' "$T/out" && grep -q 'MCP server unavailable (-33001)' "$T/out" &&
  ! grep -q 'mcp/' "$T/dbg/0-"*.out; then
  ok "native agent, provider died (bypass): its MCP traffic answered -33001, nothing leaks to the client"
else
  ko "native agent, dead provider" "$(cat "$T/out" "$T/err")"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
