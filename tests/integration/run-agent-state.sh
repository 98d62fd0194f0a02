#!/bin/sh
# run-agent-state.sh - `acp agent --state-dir`: sessions survive a SIGKILL
# and a restart (list, load replaying the history with its plan and tool
# calls, resume, mode and config values, MCP servers), ids are unique
# across processes, a partial state file answers -32603 for its session
# only, unknown ids stay -32002. The checks are in agent_state/drive.py.
#
# Env: ACP_BIN (default build/acp). Exit: 0 passed, 1 failed, 77 skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 is needed by the driver"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p /tmp/acp-state-test
timeout 120 python3 "$here/agent_state/drive.py" "$acp" "$work/state"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: $rc check(s) failed (status $rc)"; exit 1; }
echo "all passed"
