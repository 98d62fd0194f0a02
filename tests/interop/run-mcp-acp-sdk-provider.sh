#!/bin/sh
# run-mcp-acp-sdk-provider.sh - libacp's native MCP-over-ACP consumer
# (`acp agent --mcp-acp native`) against the official ACP TypeScript SDK
# 2.4's MCP-over-ACP PROVIDER (McpOverAcpProvider serving an
# @modelcontextprotocol/server 2.4 McpServer through fromMcpServer):
#
#   mcp_acp_sdk_client.mjs (SDK client, offers "tools") -> acp agent
#
# The SDK's provider knows no mcp/connect (it answers -32601) and speaks
# only the connectionless binding, mcp/message {serverId, requestId, method,
# params} -> {result} / {error} carrier, and only MCP 2026-07-28 inside it
# (requests without the io.modelcontextprotocol/* _meta never reach the
# server). The agent's MCP client speaks 2025-11-25: the consumer falls back
# to the connectionless form and translates (initialize from
# server/discover, _meta added, resultType and cache hints removed).
#
# Checked: the agent lists the SDK server's tools (/mcp-tools) and calls
# them (/mcp-call: echo, add); an awkward message is echoed unchanged; an
# unknown tool's MCP error reaches the agent with its code; the provider
# served server/discover first and never initialize, and saw the agent's
# clientInfo in the _meta; a second server name works; session/cancel
# while a tool call runs cancels it at the provider (the SDK sees the
# abort) and the session goes on; with --mcp-acp off nothing is consumed
# and the provider serves nothing. Then the same provider through `acp
# conductor agent`, bridged over stdio and over HTTP to an agent whose MCP
# client is the MCP TypeScript SDK, and to a native agent behind it.
#
# Needs ACP_BIN (the built acp) and node; installs the pinned peers if
# missing (tools/install-peers.sh). Exit 0 when all passed, 1 on a failure,
# 77 (skipped, reason printed) when a peer cannot be installed. Starts only
# the Node client, which starts the agent; kills nothing.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
client="$here/mcp_acp_sdk_client.mjs"

need_cmd node
need_peers
peers=${ACP_PEERS_DIR:-$root/build/peers/acp}
for f in @agentclientprotocol/sdk/dist/mcp/core.js @agentclientprotocol/sdk/dist/mcp/mcp-server.js \
  @modelcontextprotocol/server/package.json; do
  [ -f "$peers/node_modules/$f" ] ||
    { echo "SKIP: $f is missing in $peers (tools/install-peers.sh)"; exit 77; }
done


# run CLIENT-ARGS... -- AGENT...: stdout in $out, status in $rc, stderr in
# $work/err.
run() {
  out=$(timeout 60 node "$client" "$@" 2>"$work/err")
  rc=$?
}
has() { printf '%s\n' "$out" | grep -qxF -- "$1"; }
line() { printf '%s\n' "$out" | grep "^$1" | head -1; }

msg=$(printf 'quote " back\\ slash \303\274ber\ttab')
json_msg=$(printf '%s' "$msg" | sed 's/\\/\\\\/g; s/"/\\"/g; s/	/\\t/g')

# 1. The SDK's provider, consumed natively.
run --prompt '/mcp-tools' \
  --prompt '/mcp-call tools echo {"message":"hi sdk"}' \
  --prompt '/mcp-call tools add {"a":2,"b":40}' \
  --prompt "/mcp-call tools echo {\"message\":\"$json_msg\"}" \
  --prompt '/mcp-call tools no_such_tool {}' \
  -- "$acp" agent --mcp-acp native
if [ $rc -ne 0 ]; then
  ko "the SDK client ran to the end" "exit $rc" "$out" "$(cat "$work/err")"
else
  ok "the SDK client ran to the end"
fi
if has 'agent mcpCapabilities.acp true'; then
  ok "acp agent advertises mcpCapabilities.acp"
else
  ko "mcpCapabilities.acp not advertised" "$out"
fi
tools=$(line 'tools (acp):')
case "$tools" in
  'tools (acp): '*echo*) case "$tools" in
    *add*) ok "tools/list through the SDK's provider: $tools" ;;
    *) ko "tool list has no add" "$tools" ;;
  esac ;;
  *) ko "tool list has no echo" "$out" "$(cat "$work/err")" ;;
esac
if has 'hi sdk'; then ok "tools/call echo: 'hi sdk'"; else ko "echo" "$out"; fi
if has '42'; then ok "tools/call add 2+40: 42"; else ko "add" "$out"; fi
if has "$msg"; then ok "awkward message echoed unchanged"; else ko "awkward message" "want: $msg" "$out"; fi
bad=$(line 'tools/no_such_tool')
case "$bad" in
  *'(-32602)') ok "unknown tool: the server's MCP error reaches the agent ($bad)" ;;
  *) ko "unknown tool not reported with its MCP error code" "${bad:-no line}" "$out" ;;
esac
served=$(line 'provider ' | sed 's/^provider //')
case ",$served," in
  *,initialize,*) ko "the provider was sent initialize (2026-07-28 has none)" "$served" ;;
  ,server/discover,*tools/list*tools/call*) ok "provider served server/discover first, then tools: $served" ;;
  *) ko "provider did not serve server/discover, tools/list and tools/call" "${served:-nothing}" "$out" ;;
esac
who=$(line 'provider-client ')
case "$who" in
  'provider-client {"name":"acp-agent",'*) ok "the agent's clientInfo travels in _meta ($who)" ;;
  *) ko "no clientInfo in the requests' _meta" "${who:-no line}" ;;
esac

# 2. Another declared name.
run --name t2 --prompt '/mcp-call t2 echo {"message":"second"}' -- "$acp" agent
if [ $rc -eq 0 ] && has 'second'; then
  ok "a server declared as t2 is called by that name"
else
  ko "server t2" "exit $rc" "$out" "$(cat "$work/err")"
fi

# 3. session/cancel while the agent's tools/call runs at the provider: the
# agent cancels the call ($/cancel_request for the outer mcp/message, which
# the SDK turns into an abort of the request) before the turn ends, and
# the session takes the next prompt.
run --cancel-on sleep \
  --prompt 'before\n/mcp-call tools sleep {"ms":600000}\nafter' \
  --prompt '/mcp-call tools echo {"message":"next turn"}' -- "$acp" agent
if [ $rc -eq 0 ] && has 'stop cancelled' && has 'provider-cancelled tools/call' &&
  ! has 'after' && ! has 'slept'; then
  ok "session/cancel mid tools/call: the SDK's provider saw the request cancelled"
else
  ko "cancel mid tools/call" "exit $rc" "$out" "$(cat "$work/err")"
fi
if [ $rc -eq 0 ] && has 'next turn'; then
  ok "the session goes on after the cancelled call"
else
  ko "next turn after cancel" "exit $rc" "$out"
fi

# 4. Expected failure: --mcp-acp off consumes nothing.
run --prompt '/mcp-tools' -- "$acp" agent --mcp-acp off
if [ $rc -eq 0 ] && has 'agent mcpCapabilities.acp false' &&
  printf '%s\n' "$out" | grep -q 'not consumed' && has 'provider '; then
  ok "--mcp-acp off: not advertised, not consumed, nothing served"
else
  ko "--mcp-acp off" "exit $rc" "$out" "$(cat "$work/err")"
fi

# 5. Through `acp conductor agent`, to an agent that does not speak
# MCP-over-ACP (mcp_bridge_agent.mjs: the ACP SDK agent whose MCP client is
# the MCP TypeScript SDK, 2025 era): the conductor bridges the SDK
# provider's declaration to a stdio shim, then to loopback HTTP. The
# provider answers mcp/connect -32601, so the bridge goes on in the
# connectionless form and translates both eras. And to `acp agent --mcp-acp
# native` through the conductor, which passes the declaration untouched.
bridge_agent="$here/mcp_bridge_agent.mjs"
if ! "$root/tools/install-mcp-peers.sh" interop >/dev/null 2>&1; then
  ko "the MCP TypeScript SDK could not be installed (tools/install-mcp-peers.sh interop)"
else
  export MCP_SDK_DIR="${ACP_PEERS_ROOT:-$root/build/peers}/mcp/interop/node_modules"
  # The conductor's bridge directory goes under TMPDIR: keep it in ours.
  for how in stdio http; do
    if [ $how = http ]; then
      set -- --mcp-bridge http "node $bridge_agent --http"
    else
      set -- "node $bridge_agent"
    fi
    out=$(TMPDIR="$work" timeout 60 node "$client" --prompt "$msg" -- \
      "$acp" conductor agent "$@" 2>"$work/err")
    rc=$?
    served=$(line 'provider ' | sed 's/^provider //')
    if [ $rc -eq 0 ] && has "$msg" &&
      printf '%s\n' "$out" | grep -q "^server tools .*tools echo,add,sleep$" &&
      [ "$served" = "server/discover,tools/list,tools/call" ]; then
      ok "$how bridge: the MCP SDK client lists and calls the SDK provider's tools through acp conductor ($served)"
    else
      ko "$how bridge: SDK provider -> acp conductor -> MCP SDK client" "exit $rc" "$out" "$(tail -5 "$work/err")"
    fi
  done
  if [ -n "$(ls -A "$work" | grep '^acp-bridge' || true)" ]; then
    ko "a bridge directory was left behind" "$(ls "$work")"
  else
    ok "no bridge directory left behind"
  fi
  run --prompt '/mcp-call tools echo {"message":"native via conductor"}' -- \
    "$acp" conductor agent "$acp agent --mcp-acp native"
  if [ $rc -eq 0 ] && has 'native via conductor'; then
    ok "acp conductor agent -> acp agent --mcp-acp native: the declaration passes untouched and the call works"
  else
    ko "native agent behind the conductor" "exit $rc" "$out" "$(tail -5 "$work/err")"
  fi
fi

finish
