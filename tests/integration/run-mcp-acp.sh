#!/bin/sh
# MCP over ACP through real processes: the `tools` example proxy offers an
# MCP server over ACP, `acp agent --mcp-acp native` consumes it, under the
# conductor. Usage: run-mcp-acp.sh [path/to/acp]
set -eu
ACP=${1:-${ACP_BIN:-acp}}
out=$(printf '' | timeout 30 "$ACP" client -p '/mcp-tools
/mcp-call tools echo {"message":"hi"}' -- "$ACP" conductor agent \
  "$ACP proxy tools" "$ACP agent --mcp-acp native" 2>&1)
echo "$out" | grep -q 'tools (acp): echo read_lines' ||
  { echo "FAIL: /mcp-tools: $out"; exit 1; }
echo "$out" | grep -qx 'hi' || { echo "FAIL: /mcp-call echo: $out"; exit 1; }
out=$(timeout 30 "$ACP" client -p '/mcp-call tools read_lines {"path":"/etc/passwd"}' \
  -- "$ACP" conductor agent "$ACP proxy tools" "$ACP agent" 2>&1)
echo "$out" | grep -q 'outside the session cwd' ||
  { echo "FAIL: read_lines outside cwd: $out"; exit 1; }
echo "ok: mcp-over-acp through acp conductor"
