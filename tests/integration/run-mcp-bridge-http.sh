#!/bin/sh
# MCP bridging over Streamable HTTP (`acp conductor --mcp-bridge http`):
# `acp proxy tools` offers an MCP server over ACP; the agent does not speak
# MCP-over-ACP but advertises mcpCapabilities.http, so the conductor
# rewrites the declaration into an http server on 127.0.0.1 with a bearer
# token, served by its `acp mcp http-bridge` helper. Checked with the
# reference agent (through `acp mcp relay`), with curl, and with our MCP
# client. Usage: run-mcp-bridge-http.sh [path/to/acp]
command -v curl >/dev/null 2>&1 || { echo "skip: curl not installed"; exit 77; }
NAME=acp-bridge-http-test
. "$(dirname "$0")/bridge-common.sh"
# post AUTH SESSION BODY [CURL-ARGS...]: headers and body in one output,
# the status last ("status=NNN").
post() {
  a=$1 s=$2 b=$3
  shift 3
  set -- -sS -i --max-time 5 -X POST -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -d "$b" -w 'status=%{http_code}\n' "$@"
  [ -n "$a" ] && set -- "$@" -H "Authorization: $a"
  [ -n "$s" ] && set -- "$@" -H "Mcp-Session-Id: $s"
  curl "$@" "$URL"
}
sid_of() { grep -i '^mcp-session-id:' | head -1 | cut -d' ' -f2 | tr -d '\r'; }

# 1. the reference agent lists and calls the proxy's tools over HTTP (it
# reaches http servers through `acp mcp relay`), and what it was given is
# an http declaration with a bearer token.
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call tools echo {"message":"over http"}' -- "$ACP" conductor agent \
  --mcp-bridge http --debug-dir "$T/dbg" "$ACP proxy tools" "$ACP agent --mcp-acp off" 2>&1)
decl=$(grep -h -o '"mcpServers":\[[^]]*\]' "$T/dbg/2-"*.stdin 2>/dev/null | head -1)
if echo "$out" | grep -q 'tools (http): echo read_lines' && echo "$out" | grep -qx 'over http' &&
  echo "$decl" | grep -Eq '"type":"http","name":"tools","url":"http://127\.0\.0\.1:[0-9]+/mcp","headers":\[\{"name":"Authorization","value":"Bearer [0-9a-f]{32}"\}' &&
  ! grep -q mcp-shim "$T/dbg/2-"*.stdin; then
  ok "http bridged list and call (agent through acp mcp relay)"
else
  ko "http bridged list and call" "$out
$decl"
fi

# 2. an agent that does not advertise mcpCapabilities.http is bridged over
# stdio, with a note.
out=$(timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call tools echo {"message":"fallback"}' -- "$ACP" conductor agent \
  --mcp-bridge http "$ACP proxy tools" "$ACP agent --mcp-acp off --mcp-http off" 2>&1)
echo "$out" | grep -q 'tools (stdio): echo read_lines' && echo "$out" | grep -qx 'fallback' &&
  echo "$out" | grep -q 'does not advertise mcpCapabilities.http; bridging over stdio' &&
  ok "agent without mcpCapabilities.http: stdio bridge, noted" || ko "http fallback" "$out"

# 2b. two servers from two proxies: one helper, one port, one token each.
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call t1 echo {"message":"from-t1"}
/mcp-call t2 echo {"message":"from-t2"}' -- "$ACP" conductor agent --mcp-bridge http \
  --debug-dir "$T/dbg" "$ACP proxy tools --name t1" "$ACP proxy tools --name t2" \
  "$ACP agent --mcp-acp off" 2>&1)
urls=$(grep -h -o '"url":"[^"]*"' "$T/dbg/3-"*.stdin 2>/dev/null | sort -u | wc -l)
toks=$(grep -h -o 'Bearer [0-9a-f]*' "$T/dbg/3-"*.stdin 2>/dev/null | sort -u | wc -l)
if echo "$out" | grep -q '^t1 (http): echo read_lines' && echo "$out" | grep -q '^t2 (http): echo read_lines' &&
  echo "$out" | grep -qx 'from-t1' && echo "$out" | grep -qx 'from-t2' &&
  [ "$urls" = 1 ] && [ "$toks" = 2 ]; then
  ok "two servers from two proxies over HTTP (one endpoint, two tokens)"
else
  ko "two servers over HTTP (urls $urls, tokens $toks)" "$out"
fi

# A chain driven line by line through a FIFO; HTTP requests made by hand.
start_chain() { # start_chain CONDUCTOR-ARGS...
  rm -rf "$T/dbg" "$T/in" "$T/out" "$T/err"
  mkfifo "$T/in"
  "$ACP" conductor agent --mcp-bridge http --debug-dir "$T/dbg" "$@" <"$T/in" >"$T/out" 2>"$T/err" &
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
  while [ $i -lt 100 ] && ! grep -q '"type":"http"' "$T/dbg/2-"*.stdin 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
  URL=$(grep -h -o '"url":"[^"]*"' "$T/dbg/2-"*.stdin | head -1 | cut -d'"' -f4)
  AUTH=$(grep -h -o 'Bearer [0-9a-f]*' "$T/dbg/2-"*.stdin | head -1)
  # This chain's socket (the helper's --socket): a chain of an earlier
  # case that was killed (slow under valgrind) may have left its own.
  SOCK=$(ps -o args= --ppid "$cpid" | grep http-bridge | sed -n 's/.*--socket \([^ ]*\).*/\1/p' | head -1)
}
stop_chain() {
  exec 3>&-
  wait "$cpid" 2>/dev/null
  cstatus=$?
  cpid=
}
helper_pids() { ps -o pid= -o args= --ppid "$cpid" | grep 'http-bridge' | awk '{print $1}'; }

# 3. authorization: a missing or wrong bearer token is refused with 401
# (WWW-Authenticate: Bearer) and makes no session; the right one opens a
# session whose later requests must carry it too.
start_chain "$ACP proxy tools" "$ACP agent --mcp-acp off"
r_none=$(post "" "" "$MCPINIT")
r_bad=$(post "Bearer 0123456789abcdef0123456789abcdef" "" "$MCPINIT")
r_init=$(post "$AUTH" "" "$MCPINIT")
SID=$(echo "$r_init" | sid_of)
r_inited=$(post "$AUTH" "$SID" "$MCPINITED")
r_call=$(post "$AUTH" "$SID" "$(call 2 "by hand")")
r_noauth=$(post "" "$SID" "$(call 3 "no auth")")
if echo "$r_none" | grep -q 'status=401' && echo "$r_none" | grep -qi '^www-authenticate: bearer' &&
  echo "$r_bad" | grep -q 'status=401' && ! echo "$r_bad" | grep -qi 'mcp-session-id' &&
  echo "$r_init" | grep -q '"id":1,"result".*"serverInfo":{"name":"acp-proxy-tools"' &&
  [ -n "$SID" ] && echo "$r_inited" | grep -q 'status=202' &&
  echo "$r_call" | grep -q '"id":2,"result".*by hand' &&
  echo "$r_noauth" | grep -q 'status=401'; then
  ok "401 without or with a wrong token; the right one opens a session"
else
  ko "authorization" "$r_none
$r_bad
$r_init
$r_inited
$r_call
$r_noauth"
fi

# 4. several concurrent sessions (our MCP client, --header).
for n in 1 2 3 4 5; do
  timeout 20 "$ACP" mcp call --url "$URL" --header "Authorization: $AUTH" echo message="conn-$n" \
    >"$T/c$n" 2>&1 &
  eval "c$n=\$!"
done
wait "$c1" "$c2" "$c3" "$c4" "$c5"
good=0
for n in 1 2 3 4 5; do
  grep -qx "conn-$n" "$T/c$n" && good=$((good + 1))
done
[ $good = 5 ] && ok "5 concurrent HTTP sessions" || ko "concurrent sessions ($good/5)" "$(cat "$T"/c*)"

# 5. a call cancelled mid-flight: the proxy is stopped while the call is
# pending; notifications/cancelled becomes $/cancel_request; the session
# goes on.
tpid=$(ps -o pid= -o args= --ppid "$cpid" | grep 'proxy tools' | awk '{print $1}' | head -1)
kill -STOP "$tpid"
post "$AUTH" "$SID" "$(call 4 slow)" --max-time 3 >"$T/slow" 2>&1 &
slow=$!
sleep 0.5
r_cancel=$(post "$AUTH" "$SID" '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}')
sleep 0.3
kill -CONT "$tpid"
wait "$slow"
r_after=$(post "$AUTH" "$SID" "$(call 5 after)")
if echo "$r_cancel" | grep -q 'status=202' && ! grep -q '"id":4' "$T/slow" &&
  echo "$r_after" | grep -q '"id":5,"result".*after' &&
  grep -q 'cancel_request' "$T/dbg/1-"*.stdin; then
  ok "call cancelled mid-flight: \$/cancel_request sent, no answer, session goes on"
else
  ko "cancel" "$r_cancel
$(cat "$T/slow")
$r_after"
fi

# 6. DELETE ends the session: the provider gets mcp/disconnect; the id is
# then unknown (404).
n_disc=$(grep -c 'mcp/disconnect' "$T/dbg/1-"*.stdin)
r_del=$(curl -sS --max-time 5 -X DELETE -H "Authorization: $AUTH" -H "Mcp-Session-Id: $SID" \
  -w 'status=%{http_code}\n' "$URL")
sleep 0.3
r_gone=$(post "$AUTH" "$SID" "$(call 6 gone)")
n_disc2=$(grep -c 'mcp/disconnect' "$T/dbg/1-"*.stdin)
echo "$r_del" | grep -q 'status=200' && echo "$r_gone" | grep -q 'status=404' &&
  [ "$n_disc2" -gt "$n_disc" ] && ok "DELETE: mcp/disconnect, then 404" ||
  ko "DELETE ($n_disc -> $n_disc2)" "$r_del
$r_gone"

# 7. session/close: the session's HTTP sessions end (404) and its token is
# revoked (401).
r_init=$(post "$AUTH" "" "$MCPINIT")
SID=$(echo "$r_init" | sid_of)
printf '%s\n' '{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"sess_1"}}' >&3
i=0
while [ $i -lt 50 ] && ! grep -q '"id":3,"result"' "$T/out"; do sleep 0.1; i=$((i + 1)); done
sleep 0.3
r_ended=$(post "$AUTH" "$SID" "$(call 7 ended)")
r_revoked=$(post "$AUTH" "" "$MCPINIT")
[ -n "$SID" ] && echo "$r_ended" | grep -q 'status=404' && echo "$r_revoked" | grep -q 'status=401' &&
  ok "session/close ends its HTTP sessions and revokes the token" ||
  ko "session/close" "$r_ended
$r_revoked"

# 8. the chain ends: the helper leaves on its own (the end of its control
# input; the conductor reports a helper that needed a signal or failed),
# the port refuses, the socket and its directory are removed.
hpid=$(helper_pids | head -1)
stop_chain
sleep 0.3
if [ -n "$hpid" ] && ! kill -0 "$hpid" 2>/dev/null && ! grep -q 'HTTP helper ended' "$T/err" &&
  ! curl -s --max-time 2 -o /dev/null "$URL" && [ -n "$SOCK" ] && [ ! -e "$SOCK" ] &&
  [ ! -e "$(dirname "$SOCK")" ]; then
  ok "chain end: helper left cleanly, port closed, socket removed"
else
  alive=no
  kill -0 "$hpid" 2>/dev/null && alive=yes
  ko "chain end (helper '$hpid' alive: $alive, sock '$SOCK')" \
    "$(ls -la "$(dirname "$SOCK")" 2>&1; cat "$T/err")"
fi

# 9. a proxy that dies while a tool call is pending: the HTTP client gets
# an MCP error naming it; the chain follows its crash policy (fail: exit 1)
# and the helper goes with it.
start_chain "$ACP proxy tools" "$ACP agent --mcp-acp off"
hpid=$(helper_pids | head -1)
SID=$(post "$AUTH" "" "$MCPINIT" | sid_of)
post "$AUTH" "$SID" "$MCPINITED" >/dev/null
tpid=$(ps -o pid= -o args= --ppid "$cpid" | grep 'proxy tools' | awk '{print $1}' | head -1)
kill -STOP "$tpid"
post "$AUTH" "$SID" "$(call 2 pending)" >"$T/dead" 2>&1 &
dead=$!
sleep 0.5
kill -KILL "$tpid"
wait "$dead"
stop_chain
sleep 0.3
grep -q '"id":2,"error".*tools' "$T/dead" && [ "$cstatus" = 1 ] && [ -n "$hpid" ] &&
  ! kill -0 "$hpid" 2>/dev/null &&
  ok "proxy died while pending: MCP error naming it, chain failed (exit $cstatus), helper gone" ||
  ko "dead proxy (exit $cstatus, helper '$hpid')" "$(cat "$T/dead")"

# 10. the helper on its own: a bad command line is a usage error (2); a
# descriptor that is not a listening socket is refused clearly (1).
"$ACP" mcp http-bridge >/dev/null 2>"$T/u1"
u1=$?
"$ACP" mcp http-bridge --socket "$T/none.sock" --listen-fd 2 >/dev/null 2>"$T/u2"
u2=$?
"$ACP" mcp http-bridge --socket "$T/none.sock" --listen-fd 3 3</dev/null </dev/null >/dev/null 2>"$T/u3"
u3=$?
if [ $u1 = 2 ] && grep -q 'are required' "$T/u1" && [ $u2 = 2 ] && grep -q 'descriptor >= 3' "$T/u2" &&
  [ $u3 = 1 ] && grep -q 'cannot start' "$T/u3"; then
  ok "http-bridge: usage errors (2), a non-listening descriptor refused (1)"
else
  ko "http-bridge usage ($u1 $u2 $u3)" "$(cat "$T/u1" "$T/u2" "$T/u3")"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
