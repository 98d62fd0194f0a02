#!/bin/sh
# run-mcp-bridge-interop.sh - the conductor's MCP bridge against third-party
# peers: an ACP agent written with the official ACP TypeScript SDK
# (mcp_bridge_agent.mjs) that does not advertise mcpCapabilities.acp and
# consumes stdio MCP servers with the official MCP TypeScript SDK client.
#
#   acp client -> acp conductor agent -> acp proxy tools -> mcp_bridge_agent
#
# The proxy declares an MCP-over-ACP server; the conductor rewrites it into
# `acp mcp-shim SOCKET TOKEN`; the agent's MCP SDK client (StdioClientTransport)
# spawns the shim, lists the tools and calls echo, so the echo travels MCP SDK
# client -> acp mcp-shim -> conductor -> mcp/* over ACP -> the tools proxy's
# MCP server, and back. Checked: the echo of the prompt, the tool list (echo,
# read_lines), the declaration rewritten into an absolute acp + mcp-shim, no
# mcp-shim left afterwards, the bridge's socket directory removed; JSON
# escaping of an awkward message; two servers from two proxies; and the
# expected failures with `--mcp-bridge off` (the SDK refuses the acp
# declaration in session/new) and without any proxy (no server at all).
#
# Needs ACP_BIN (the built acp) and node; installs the pinned peers if missing
# (tools/install-peers.sh, tools/install-mcp-peers.sh interop). Exit 0 when all
# passed, 1 on a failure, 77 (skipped, reason printed) when a prerequisite is
# missing. Starts processes only through `acp client` and kills nothing.
# Also over HTTP (`--mcp-bridge http`, the agent run with --http): the
# declaration becomes an http server on 127.0.0.1 with a bearer token and
# the MCP SDK's StreamableHTTPClientTransport reaches the conductor's
# `acp mcp http-bridge` helper.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
agent="$here/mcp_bridge_agent.mjs"

need_cmd node
need_cmd pgrep "needed for the leftover check"
"$acp" mcp-shim --help >/dev/null 2>&1
[ $? -ne 127 ] || { echo "SKIP: acp has no mcp-shim"; exit 77; }
need_peers
if ! "$root/tools/install-mcp-peers.sh" interop >/dev/null 2>&1; then
  echo "SKIP: the MCP TypeScript SDK could not be installed (tools/install-mcp-peers.sh interop)"
  exit 77
fi
export MCP_SDK_DIR="${ACP_PEERS_ROOT:-$root/build/peers}/mcp/interop/node_modules"
[ -d "$MCP_SDK_DIR/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: the MCP TypeScript SDK is missing ($MCP_SDK_DIR)"; exit 77; }

# The conductor makes its bridge directory under TMPDIR: keep it in ours, so
# every socket path of this run is unique to it.
export TMPDIR="$work"

# run PROMPT CONDUCTOR-ARGS... : the chain's stdout in $out, status in $rc.
run() {
  p=$1
  shift
  out=$(timeout 60 "$acp" client --quiet --cwd "$work" -p "$p" -- \
    "$acp" conductor agent "$@" 2>"$work/err")
  rc=$?
}

# The socket named in the agent's "server NAME ..." line.
sock_of() { printf '%s\n' "$out" | sed -n "s/^server $1 command .* socket \([^ ]*\) tools .*/\1/p" | head -1; }

# leftovers SOCK: no process (the shim or anything else) still names SOCK,
# and the bridge directory is gone. The chain has exited when `acp client`
# returns; give the kernel up to 5 s to reap.
leftovers() {
  i=0
  while [ $i -lt 50 ] && pgrep -f "$1" >/dev/null 2>&1; do
    sleep 0.1
    i=$((i + 1))
  done
  if pgrep -f "$1" >/dev/null 2>&1; then
    left="processes left: $(pgrep -a -f "$1" | tr '\n' ';')"
    return 1
  fi
  if [ -e "$(dirname "$1")" ]; then
    left="bridge directory left: $(dirname "$1")"
    return 1
  fi
  return 0
}

# 1. The bridged echo through both SDKs.
run "hello bridge" "$acp proxy tools" "node $agent"
line=$(printf '%s\n' "$out" | grep '^server tools ')
sock=$(sock_of tools)
tools=$(printf '%s\n' "$line" | sed -n 's/.* tools \([^ ]*\)$/\1/p')
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 'hello bridge'; then
  ok "MCP SDK client -> acp mcp-shim -> conductor -> tools proxy: echo 'hello bridge'"
else
  ko "bridged echo" "exit $rc" "$out" "$(cat "$work/err")"
fi
case ",$tools," in
  *,echo,*) case ",$tools," in
    *,read_lines,*) ok "tool list through the bridge: $tools" ;;
    *) ko "tool list has no read_lines" "$line" ;;
  esac ;;
  *) ko "tool list has no echo" "$line" "$out" ;;
esac
if printf '%s\n' "$line" | grep -q "^server tools command $acp mcp-shim socket $work/acp-bridge-[^/]*/[^ ]* tools "; then
  ok "declaration rewritten into $acp mcp-shim SOCKET TOKEN"
else
  ko "declaration not rewritten as expected" "$line"
fi
if [ -n "$sock" ] && leftovers "$sock"; then
  ok "no mcp-shim left, bridge directory removed"
else
  ko "leftovers after the run (socket '$sock')" "${left:-no socket in the output}"
fi

# 2. An awkward message (quotes, backslash, non-ASCII, tab) survives both
# SDKs' JSON and the conductor's relay unchanged.
msg=$(printf 'quote " back\\ slash \303\274ber\ttab')
run "$msg" "$acp proxy tools" "node $agent"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qxF "$msg"; then
  ok "awkward message echoed unchanged"
else
  ko "awkward message" "exit $rc" "want: $msg" "$out" "$(cat "$work/err")"
fi
sock=$(sock_of tools)
if [ -n "$sock" ] && leftovers "$sock"; then
  ok "no leftovers after the second run"
else
  ko "leftovers after the second run" "${left:-no socket in the output}"
fi

# 3. Two servers from two proxies: the agent's MCP client uses both.
run "two" "$acp proxy tools --name t1" "$acp proxy tools --name t2" "node $agent"
n=$(printf '%s\n' "$out" | grep -cx 'two')
if [ $rc -eq 0 ] && [ "$n" = 2 ] && [ -n "$(sock_of t1)" ] && [ -n "$(sock_of t2)" ]; then
  ok "two servers from two proxies, both echoed"
else
  ko "two servers" "exit $rc (echoes: $n)" "$out" "$(cat "$work/err")"
fi
s1=$(sock_of t1)
if [ -n "$s1" ] && leftovers "$s1"; then
  ok "no leftovers after two servers"
else
  ko "leftovers after two servers" "${left:-no socket in the output}"
fi

# 4. Expected failure: with --mcp-bridge off the declaration stays
# {"type":"acp"}, which the ACP SDK 2.4.0 does not know: it refuses
# session/new with "Invalid params" (the agent never sees it), so no echo.
# (Without --quiet: the client reports the failed session/new on stderr.)
out=$(timeout 60 "$acp" client --cwd "$work" -p "hello bridge" -- \
  "$acp" conductor agent --mcp-bridge off "$acp proxy tools" "node $agent" 2>"$work/err")
rc=$?
if [ $rc -ne 0 ] && grep -q 'session/new failed: Invalid params' "$work/err" &&
  ! printf '%s\n' "$out" | grep -qx 'hello bridge'; then
  ok "--mcp-bridge off: the SDK agent refuses the acp declaration, no echo (exit $rc)"
else
  ko "--mcp-bridge off did not fail as expected" "exit $rc" "$out" "$(cat "$work/err")"
fi

# 5. Expected failure: no proxy, no MCP server: the agent says so.
run "hello bridge" "node $agent"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 'error: no stdio MCP server' &&
  ! printf '%s\n' "$out" | grep -qx 'hello bridge'; then
  ok "no proxy: the agent reports no stdio MCP server"
else
  ko "no proxy" "exit $rc" "$out" "$(cat "$work/err")"
fi

# 6. HTTP bridging (--mcp-bridge http): the agent advertises
# mcpCapabilities.http; the declaration becomes an http server on 127.0.0.1
# with a bearer token, and the MCP SDK's StreamableHTTPClientTransport
# talks to the conductor's `acp mcp http-bridge` helper.
run "hello http" --mcp-bridge http "$acp proxy tools" "node $agent --http"
line=$(printf '%s\n' "$out" | grep '^server tools ')
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qx 'hello http' &&
  printf '%s\n' "$line" | grep -Eq '^server tools http http://127\.0\.0\.1:[0-9]+/mcp auth bearer tools echo,read_lines$'; then
  ok "MCP SDK StreamableHTTP client -> acp mcp http-bridge -> conductor -> tools proxy: echo 'hello http'"
else
  ko "HTTP-bridged echo" "exit $rc" "$out" "$(cat "$work/err")"
fi
run "$msg" --mcp-bridge http "$acp proxy tools" "node $agent --http"
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -qxF "$msg"; then
  ok "awkward message echoed unchanged over HTTP"
else
  ko "awkward message over HTTP" "exit $rc" "want: $msg" "$out" "$(cat "$work/err")"
fi
i=0
while [ $i -lt 50 ] && pgrep -f "http-bridge --socket $work" >/dev/null 2>&1; do
  sleep 0.1
  i=$((i + 1))
done
if ! pgrep -f "http-bridge --socket $work" >/dev/null 2>&1 &&
  [ -z "$(ls -d "$work"/acp-bridge-* 2>/dev/null)" ]; then
  ok "no http-bridge helper left, bridge directory removed"
else
  ko "leftovers after HTTP bridging" "$(pgrep -a -f "http-bridge --socket $work")"
fi

finish
