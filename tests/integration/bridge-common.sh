# Sourced by run-mcp-bridge.sh and run-mcp-bridge-http.sh (set NAME
# first): the acp program, a private temporary directory (also TMPDIR, so
# the conductor's bridge sockets land in it), ok/ko counting, cleanup of the
# chain in $cpid, and the ACP and MCP messages both send.
#
# Cleanup stops the conductor in $cpid with SIGTERM and waits for it (20 s,
# then SIGKILL and a failure), then checks that no process the test started
# is left: every one carries ACP_BRIDGE_TEST_TAG in its environment (an
# orphan is no descendant of ours any more, but it keeps its environment),
# so any process still holding the tag 20 s later fails the script, is
# listed and is killed. Only then is the directory removed.
set -u
# The reference agent numbers sessions sess_1, sess_2... (acp agent --help)
export ACP_AGENT_SEQUENTIAL_IDS=1
ACP=${1:-${ACP_BIN:-acp}}
T=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
export TMPDIR="$T"
ACP_BRIDGE_TEST_TAG=$T
export ACP_BRIDGE_TEST_TAG
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; [ -n "${2:-}" ] && echo "$2" | head -30; }
cpid=

# The pids of the processes with our tag, but this shell, into $T/left
# (the search runs without the tag, so that it does not find itself; a
# file, not $(...), whose subshell would carry the tag).
tagged() {
  env -u ACP_BRIDGE_TEST_TAG sh -c 'grep -lsaF "ACP_BRIDGE_TEST_TAG=$1" /proc/[0-9]*/environ |
    sed "s,^/proc/\([0-9]*\)/environ\$,\1," | grep -vx "$2"' sh "$T" "$$" >"$T/left"
}
cleanup() {
  st=$?
  exec 3>&- 2>/dev/null
  if [ -n "$cpid" ]; then
    kill "$cpid" 2>/dev/null
    i=0
    while [ $i -lt 200 ] && kill -0 "$cpid" 2>/dev/null; do
      sleep 0.1
      i=$((i + 1))
    done
    if kill -0 "$cpid" 2>/dev/null; then
      echo "FAIL: the conductor (pid $cpid) did not exit within 20 s of SIGTERM"
      kill -KILL "$cpid" 2>/dev/null
      st=1
    fi
    wait "$cpid" 2>/dev/null
  fi
  i=0
  while tagged && [ -s "$T/left" ] && [ $i -lt 200 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  if [ -s "$T/left" ]; then
    echo "FAIL: processes of the test left running 20 s after its end:"
    while read -r p; do ps -o pid=,ppid=,pgid=,args= -p "$p"; done <"$T/left"
    while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$T/left"
    st=1
  fi
  rm -rf "$T"
  exit $st
}
trap cleanup EXIT

INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
NEWS='{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}'
MCPINIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
MCPINITED='{"jsonrpc":"2.0","method":"notifications/initialized"}'
call() { # call ID MESSAGE
  printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"message":"%s"}}}' "$1" "$2"
}
