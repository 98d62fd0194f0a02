#!/bin/sh
# run-mcp-acp-sdk.sh - libacp's MCP-over-ACP provider against the official
# ACP TypeScript SDK 2.4's MCP-over-ACP caller (McpOverAcpCaller, the
# connectionless binding: mcp/message {serverId, requestId, method, params}
# -> {result} / {error} carrier).
#
#   acp client -> acp conductor agent -> acp proxy tools -> mcp_acp_sdk_agent
#
# The agent advertises mcpCapabilities.acp, so the conductor passes the
# proxy's {"type":"acp"} declaration through; the agent lists the tools of
# the declared server, calls echo {message: PROMPT}, calls an unknown tool
# and sends a request to an undeclared server id, and reports each as an
# agent_message_chunk line (see the agent's header).
#
# Checked: the strict run (the SDK validates session/new; KNOWN BUG:
# `acp proxy tools` declares {"type":"acp","name","id"} but the 2.4 schema
# requires serverId, so the SDK answers -32602: reported as XFAIL, neither
# passed nor failed, and as PASS once fixed); with the agent's --accept-id
# filter: the echo, the tool list (echo, read_lines), the unknown tool's MCP
# error as a carrier or JSON-RPC error, an undeclared server id as an outer
# error, an awkward message echoed unchanged; and without a proxy, no server.
#
# Needs ACP_BIN (the built acp) and node; installs the pinned SDK if missing
# (tools/install-peers.sh). Exit 0 when all passed, 1 on a failure, 77
# (skipped, reason printed) when a prerequisite is missing. Starts processes
# only through `acp client` and kills nothing.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
agent="$here/mcp_acp_sdk_agent.mjs"

need_cmd node
need_peers
peers=${ACP_PEERS_DIR:-$root/build/peers/acp}
[ -f "$peers/node_modules/@agentclientprotocol/sdk/dist/mcp/core.js" ] ||
  { echo "SKIP: the ACP TypeScript SDK with MCP-over-ACP (2.4) is missing in $peers"; exit 77; }

xfail=0

# run PROMPT AGENT-FLAGS CONDUCTOR-ARGS... : stdout in $out, status in $rc,
# stderr in $work/err.
run() {
  p=$1
  flags=$2
  shift 2
  out=$(timeout 60 "$acp" client --quiet --cwd "$work" -p "$p" -- \
    "$acp" conductor agent "$@" "node $agent $flags" 2>"$work/err")
  rc=$?
}
line() { printf '%s\n' "$out" | grep "^$1 " | head -1; }

# 1. Strict: the SDK validates the proxy's declaration as sent.
out=$(timeout 60 "$acp" client --cwd "$work" -p "hello sdk" -- \
  "$acp" conductor agent "$acp proxy tools" "node $agent" 2>"$work/err")
rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 'echo hello sdk'; then
  ok "strict SDK agent accepts the proxy's declaration and echoes"
elif [ $rc -ne 0 ] && grep -q 'session/new failed: Invalid params' "$work/err"; then
  xfail=$((xfail + 1))
  echo "XFAIL known bug: acp proxy tools declares {\"type\":\"acp\",...,\"id\"}; the SDK 2.4 schema requires serverId (session/new -32602)"
else
  ko "strict run" "exit $rc" "$out" "$(cat "$work/err")"
fi

# 2. The SDK's MCP-over-ACP caller against the tools proxy.
run "hello sdk" --accept-id "$acp proxy tools"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 'echo hello sdk'; then
  ok "McpOverAcpCaller tools/call echo through the conductor: 'hello sdk'"
else
  ko "echo" "exit $rc" "$out" "$(cat "$work/err")"
fi
tools=$(line 'server tools' | sed -n 's/^server tools tools \([^ ]*\)$/\1/p')
case ",$tools," in
  *,echo,*) case ",$tools," in
    *,read_lines,*) ok "tools/list: $tools" ;;
    *) ko "tool list has no read_lines" "$(line 'server tools')" ;;
  esac ;;
  *) ko "tool list has no echo" "$out" ;;
esac
bad=$(line unknown-tool)
case "$bad" in
  'unknown-tool carrier '*no_such_tool* | 'unknown-tool outer '*)
    ok "unknown tool: MCP error reported ($bad)" ;;
  *) ko "unknown tool not reported as an MCP error" "${bad:-no unknown-tool line}" "$out" ;;
esac
bad=$(line unknown-server)
case "$bad" in
  'unknown-server outer -33001 '*) ok "undeclared server id: the binding's serverUnavailable (-33001) ($bad)" ;;
  *) ko "undeclared server id not an outer error" "${bad:-no unknown-server line}" "$out" ;;
esac
if printf '%s\n' "$out" | grep -q '^error:'; then
  ko "the agent reported an error" "$out"
else
  ok "no error reported by the agent"
fi

# 3. An awkward message (quotes, backslash, non-ASCII, tab) survives the
# SDK's JSON, the carrier and the conductor unchanged.
msg=$(printf 'quote " back\\ slash \303\274ber\ttab')
run "$msg" --accept-id "$acp proxy tools"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qxF "echo $msg"; then
  ok "awkward message echoed unchanged"
else
  ko "awkward message" "exit $rc" "want: echo $msg" "$out" "$(cat "$work/err")"
fi

# 4. Two servers from two proxies, each answering its own serverId.
run "two" --accept-id "$acp proxy tools --name t1" "$acp proxy tools --name t2"
n=$(printf '%s\n' "$out" | grep -cx 'echo two')
if [ $rc -eq 0 ] && [ "$n" = 2 ] && [ -n "$(line 'server t1')" ] && [ -n "$(line 'server t2')" ]; then
  ok "two servers from two proxies, both echoed"
else
  ko "two servers" "exit $rc (echoes: $n)" "$out" "$(cat "$work/err")"
fi

# 5. Expected failure: no proxy, no acp server, no echo.
run "hello sdk" --accept-id
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 'error: no acp MCP server' &&
  ! printf '%s\n' "$out" | grep -q '^echo '; then
  ok "no proxy: the agent reports no acp MCP server"
else
  ko "no proxy" "exit $rc" "$out" "$(cat "$work/err")"
fi

[ $xfail -eq 0 ] || echo "($xfail expected failure: known bug, see XFAIL above)"
finish
