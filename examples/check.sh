#!/bin/sh
# Runs every example against its partner; each run checks its answer.
# Usage: check.sh DIR [ACP]   DIR holds the built examples; ACP is the acp
# program (for the conductor of the proxy example; default: acp in PATH).
set -eu
dir=$1
acp=${2:-acp}
pid=""
url="$dir/mcp_http_server.url"
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$url"' EXIT
run() { echo "+ $*"; "$@"; }

run "$dir/echo_client" "$dir/echo_agent"
run env ECHO_EXPECT='echo: [tagged] hello' \
  "$dir/echo_client" "$acp" conductor agent "$dir/tag_proxy" "$dir/echo_agent"
run "$dir/mcp_client" --stdio "$dir/mcp_stdio_server"

rm -f "$url"
"$dir/mcp_http_server" >"$url" &
pid=$!
i=0
while [ ! -s "$url" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
run "$dir/mcp_client" "$(cat "$url")"
kill "$pid"
wait "$pid"
pid=""

# A stdio MCP server needs no HTTP stack.
if ldd "$dir/mcp_stdio_server" | grep -Eq 'libcurl|libmicrohttpd'; then
  echo "FAIL: the stdio MCP server links the HTTP stack"
  exit 1
fi
echo "examples: every run gave the expected answer"
