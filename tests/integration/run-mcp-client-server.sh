#!/bin/sh
# `acp client --mcp-tools`: the client offers an MCP server named "client"
# (tools echo and client_info) over the ACP connection itself
# (MCP-over-ACP, client-provided case), to a native agent, through a
# conductor that bridges it to a stdio shim or over HTTP, and next to a proxy's server.
# Usage: run-mcp-client-server.sh [path/to/acp]
set -u
ACP=${1:-${ACP_BIN:-acp}}
T=$(mktemp -d "${TMPDIR:-/tmp}/acp-client-srv-test.XXXXXX")
export TMPDIR="$T"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; [ -n "${2:-}" ] && echo "$2" | head -20; }
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT

LIST_AND_ECHO='/mcp-tools
/mcp-call client echo {"message":"hi"}'

# 1. native agent: the agent connects back to the client over ACP.
out=$(timeout 30 "$ACP" client --mcp-tools -p "$LIST_AND_ECHO" -- \
  "$ACP" agent --mcp-acp native 2>&1)
st=$?
[ $st = 0 ] && echo "$out" | grep -q '^client (acp): echo client_info$' && echo "$out" | grep -qx 'hi' &&
  ok "native agent lists and calls the client's server" || ko "native agent" "$out"

# Without --mcp-tools nothing is declared: the same prompt finds no server.
out=$(timeout 30 "$ACP" client -p "$LIST_AND_ECHO" -- \
  "$ACP" agent --mcp-acp native 2>&1)
echo "$out" | grep -q 'no MCP servers in this session' && ! echo "$out" | grep -qx 'hi' &&
  ok "without --mcp-tools no server is declared" || ko "without --mcp-tools" "$out"

# 2. through a conductor, bridged to a stdio shim for an agent that does not
# speak MCP-over-ACP.
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client --mcp-tools -p "$LIST_AND_ECHO" -- "$ACP" conductor agent \
  --debug-dir "$T/dbg" "$ACP agent --mcp-acp off" 2>&1)
st=$?
if [ $st = 0 ] && echo "$out" | grep -q '^client (stdio): echo client_info$' && echo "$out" | grep -qx 'hi' &&
  grep -q '"serverId":"[0-9a-f]\{32\}"' "$T/dbg/0-client.in" &&
  grep -q 'mcp-shim' "$T/dbg/1-"*.stdin; then
  ok "bridged through the conductor: lists and calls via the shim"
else
  ko "bridged through the conductor" "$out"
fi

# 3. a native agent behind a proxy that offers its own server: both servers
# in one session, both called.
out=$(timeout 30 "$ACP" client --mcp-tools -p '/mcp-tools
/mcp-call client echo {"message":"from-client"}
/mcp-call tools echo {"message":"from-proxy"}' -- "$ACP" conductor agent \
  "$ACP proxy tools" "$ACP agent --mcp-acp native" 2>&1)
st=$?
if [ $st = 0 ] && echo "$out" | grep -q '^client (acp): echo client_info$' &&
  echo "$out" | grep -q '^tools (acp): echo read_lines$' &&
  echo "$out" | grep -qx 'from-client' && echo "$out" | grep -qx 'from-proxy'; then
  ok "client and proxy servers in one session"
else
  ko "client and proxy servers" "$out"
fi

# 4. client_info names the session the call belongs to: the one the agent
# created (as seen by the conductor) and the client noted.
rm -rf "$T/dbg"
out=$(timeout 30 "$ACP" client --mcp-tools -p '/mcp-call client client_info {}' -- \
  "$ACP" conductor agent --debug-dir "$T/dbg" "$ACP agent --mcp-acp native" 2>&1)
st=$?
wire=$(grep -o '"id":1,"result":{"sessionId":"[^"]*"' "$T/dbg/0-client.out" 2>/dev/null |
  head -1 | sed 's/.*"sessionId":"//; s/"$//')
noted=$(echo "$out" | sed -n 's/^\[mcp\] offering MCP server "client" (id [0-9a-f]*) over ACP on session //p')
info=$(echo "$out" | sed -n 's/^acp-client [^;]*; session //p')
if [ $st = 0 ] && [ -n "$wire" ] && [ "$info" = "$wire" ] && [ "$noted" = "$wire" ]; then
  ok "client_info names the session ($info)"
else
  ko "client_info session (wire '$wire', noted '$noted', info '$info')" "$out"
fi

# 5. an agent without mcpCapabilities.acp: a note, no declaration, the turn
# still works.
out=$(timeout 30 "$ACP" client --mcp-tools -p 'hello' -- "$ACP" agent --mcp-acp off 2>"$T/err")
st=$?
if [ $st = 0 ] && [ "$out" = hello ] &&
  grep -q 'cannot take MCP-over-ACP servers' "$T/err" && ! grep -q '\[mcp\] offering' "$T/err"; then
  ok "no capability: note printed, turn works"
else
  ko "no capability (exit $st)" "$out $(cat "$T/err")"
fi

# 6. a scripted agent drives the client's server directly: unknown server
# and connection ids are refused, the three wire shapes are answered, the
# calls carry the session the agent named.
cat >"$T/fake-agent.sh" <<'EOF'
#!/bin/sh
log=$1
say() { printf '%s\n' "$1"; }
ask() { printf '%s\n' "$1"; read -r l; printf '%s\n' "$l" >>"$log"; }
read -r l
say '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}}'
read -r l
printf '%s\n' "$l" >>"$log"
sid=$(printf '%s' "$l" | sed -n 's/.*"serverId":"\([0-9a-f]*\)".*/\1/p')
say '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"fake_7"}}'
read -r l
ask '{"jsonrpc":"2.0","id":100,"method":"mcp/connect","params":{"serverId":"00000000000000000000000000000000"}}'
ask '{"jsonrpc":"2.0","id":101,"method":"mcp/connect","params":{"serverId":"'"$sid"'","acpId":"'"$sid"'"}}'
cid=$(tail -1 "$log" | sed -n 's/.*"connectionId":"\([^"]*\)".*/\1/p')
ask '{"jsonrpc":"2.0","id":102,"method":"mcp/message","params":{"connectionId":"'"$cid"'","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fake","version":"1"}}}}'
say '{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"'"$cid"'","method":"notifications/initialized"}}'
ask '{"jsonrpc":"2.0","id":103,"method":"mcp/message","params":{"connectionId":"'"$cid"'","method":"tools/call","params":{"name":"client_info","arguments":{}}}}'
ask '{"jsonrpc":"2.0","id":104,"method":"mcp/message","params":{"connectionId":"nope:1","method":"tools/list"}}'
ask '{"jsonrpc":"2.0","id":105,"method":"mcp/message","params":{"connectionId":"'"$cid"'","method":"tools/call","params":{"name":"echo","arguments":{"message":7}}}}'
ask '{"jsonrpc":"2.0","id":106,"method":"mcp/disconnect","params":{"connectionId":"'"$cid"'"}}'
ask '{"jsonrpc":"2.0","id":107,"method":"mcp/message","params":{"serverId":"'"$sid"'","requestId":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m2"}}}}'
ask '{"jsonrpc":"2.0","id":108,"method":"mcp/message","params":{"serverId":"ffffffffffffffffffffffffffffffff","requestId":2,"method":"tools/list"}}'
ask '{"jsonrpc":"2.0","id":109,"method":"_mcp/connect","params":{"acp_url":"acp:'"$sid"'"}}'
ask '{"jsonrpc":"2.0","id":110,"method":"_other/thing","params":{}}'
say '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
cat >/dev/null
EOF
: >"$T/fake.log"
out=$(timeout 30 "$ACP" client --mcp-tools -p 'go' -- sh "$T/fake-agent.sh" "$T/fake.log" 2>&1)
st=$?
L=$T/fake.log
chk() { # chk ID PATTERN
  grep -q "\"id\":$1,.*$2" "$L" || {
    echo "missing: id $1 $2"
    return 1
  }
}
if [ $st = 0 ] && grep -q '"mcpServers":\[{"type":"acp","name":"client","serverId":"[0-9a-f]\{32\}"}\]' "$L" &&
  chk 100 '"error":{"code":-32602' && chk 101 '"connectionId":"[0-9a-f]*:[0-9]*"' &&
  chk 102 '"serverInfo":{"name":"acp-client"' && chk 103 'session fake_7' &&
  chk 104 '"error":{"code":-32602' && chk 105 '"isError":true' &&
  chk 106 '"result":{}' && chk 107 '"result":{"content":\[{"type":"text","text":"m2"}' &&
  chk 108 '"error":{"code":-33001' && chk 109 '"connection_id":"' &&
  chk 110 '"error":{"code":-32601'; then
  ok "scripted agent: bad ids refused, M1/M2/M0 answered, session fake_7"
else
  ko "scripted agent (exit $st)" "$out
$(cat "$L")"
fi

# 6b. through a conductor bridging over HTTP (--mcp-bridge http): the
# agent reaches the client's server at the conductor's HTTP endpoint.
out=$(timeout 30 "$ACP" client --mcp-tools -p '/mcp-tools
/mcp-call client echo {"message":"over-http"}' -- "$ACP" conductor agent \
  --mcp-bridge http "$ACP agent --mcp-acp off" 2>&1)
st=$?
if [ $st = 0 ] && echo "$out" | grep -q '^client (http): echo client_info$' &&
  echo "$out" | grep -qx 'over-http'; then
  ok "bridged over HTTP: lists and calls the client's server"
else
  ko "bridged over HTTP" "$out"
fi

# 7. usage: the option is documented, and a stray argument is refused.
"$ACP" client --help | grep -q -- '--mcp-tools' && ok "--mcp-tools in the usage" ||
  ko "--mcp-tools missing from the usage"
"$ACP" client --mcp-tools=yes -p x >/dev/null 2>&1
[ $? = 2 ] && ok "--mcp-tools=VALUE refused" || ko "--mcp-tools=VALUE accepted"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
