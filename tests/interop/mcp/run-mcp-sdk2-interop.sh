#!/bin/sh
# MCP 2026-07-28 interop: the MCP TypeScript SDK v2 client
# (@modelcontextprotocol/client 2.4.0, pinned in tests/interop/mcp/
# package.json, installed by tools/install-mcp-peers.sh) calls our server,
# `acp mcp serve --everything`, over stdio and Streamable HTTP with the
# protocol version pinned to 2026-07-28 (sdk2_client.mjs): lists tools,
# calls tools, reads a resource, gets a prompt, and runs multi round-trip
# tools and a prompt (input_required results the SDK fulfils and retries). The server listens on
# 127.0.0.1 and is stopped by pid. Exit 0 when all passed, 1 on a failure,
# 77 (skipped, reason printed) when a prerequisite is missing (node/npm,
# the pinned peers, the acp program or `acp mcp serve`).
set -eu
SCRIPT=run-mcp-sdk2-interop
. "$(cd "$(dirname "$0")/../../conformance" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

find_acp || skip "the acp program is not built (set ACP_BIN)"
"$ACP" mcp serve --help >/dev/null 2>&1 || skip "acp has no 'mcp serve' command yet"
install_mcp_peers interop
[ -f "$MCP_INTEROP/@modelcontextprotocol/client/dist/index.mjs" ] ||
    skip "@modelcontextprotocol/client is not installed"
export MCP_SDK_DIR="$MCP_INTEROP"

work=$(mktemp -d "${TMPDIR:-/tmp}/acp-mcp-sdk2.XXXXXX")
server_pid=""
cleanup() { stop_pid "$server_pid"; rm -rf "$work"; }
trap cleanup EXIT INT TERM

fail=0
if node "$here/sdk2_client.mjs" stdio "$ACP" mcp serve --stdio --everything >"$work/stdio.log" 2>&1; then
    say "ok   SDK v2 client -> acp mcp serve --stdio ($(tail -n 1 "$work/stdio.log"))"
else
    cat "$work/stdio.log"; say "FAIL SDK v2 client -> acp mcp serve --stdio"; fail=1
fi

port=$(free_port)
"$ACP" mcp serve --everything --http "127.0.0.1:$port" >"$work/http-server.log" 2>&1 &
server_pid=$!
if wait_port "$port" "$server_pid"; then
    if node "$here/sdk2_client.mjs" http "http://127.0.0.1:$port/mcp" >"$work/http.log" 2>&1; then
        say "ok   SDK v2 client -> acp mcp serve --http ($(tail -n 1 "$work/http.log"))"
    else
        cat "$work/http.log"; say "FAIL SDK v2 client -> acp mcp serve --http"; fail=1
    fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/http-server.log"; say "FAIL the server died"; fail=1; }
else
    cat "$work/http-server.log"; say "FAIL acp mcp serve --http did not start"; fail=1
fi
stop_pid "$server_pid"; server_pid=""
[ $fail -eq 0 ] || exit 1
say "ok"
