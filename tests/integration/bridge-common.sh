# Sourced by run-mcp-bridge.sh and run-mcp-bridge-http.sh (set NAME
# first): the acp program, a private temporary directory (also TMPDIR, so
# the conductor's bridge sockets land in it), ok/ko counting, cleanup of the
# chain in $cpid, and the ACP and MCP messages both send.
set -u
# The reference agent numbers sessions sess_1, sess_2... (acp agent --help)
export ACP_AGENT_SEQUENTIAL_IDS=1
ACP=${1:-${ACP_BIN:-acp}}
T=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
export TMPDIR="$T"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; [ -n "${2:-}" ] && echo "$2" | head -30; }
cpid=

cleanup() {
  exec 3>&- 2>/dev/null
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
NEWS='{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}'
MCPINIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
MCPINITED='{"jsonrpc":"2.0","method":"notifications/initialized"}'
call() { # call ID MESSAGE
  printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"message":"%s"}}}' "$1" "$2"
}
