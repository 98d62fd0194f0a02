#!/bin/sh
# MCP interop against the pinned third-party peers (tests/interop/mcp/
# package.json, installed by tools/install-mcp-peers.sh):
#   A. the MCP TypeScript SDK client (sdk_client.mjs) calls our server,
#      `acp mcp serve --everything`, over stdio, Streamable HTTP and legacy
#      HTTP+SSE;
#   B. our client (`acp mcp tools|call|read|get`) talks to the reference
#      @modelcontextprotocol/server-everything over stdio, Streamable HTTP
#      and legacy HTTP+SSE: list tools, call one with progress, read a
#      resource, get a prompt.
# Every server listens on 127.0.0.1 (server-everything through the
# listen_loopback.cjs preload) and is stopped by pid. Exit 0 when all
# passed, 1 on a failure, 77 (skipped, reason printed) when a prerequisite
# is missing (node/npm, the pinned peers, the acp program or `acp mcp`).
set -eu
SCRIPT=run-mcp-interop
. "$(cd "$(dirname "$0")/../../conformance" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

find_acp || skip "the acp program is not built (set ACP_BIN)"
"$ACP" mcp serve --help >/dev/null 2>&1 || skip "acp has no 'mcp serve' command yet"
"$ACP" mcp tools --help >/dev/null 2>&1 || skip "acp has no 'mcp tools' command yet"
install_mcp_peers interop
SE="$MCP_INTEROP/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$SE" ] || skip "server-everything is not installed ($SE)"
export MCP_SDK_DIR="$MCP_INTEROP"

work=$(mktemp -d "${TMPDIR:-/tmp}/acp-mcp-interop.XXXXXX")
pids=""
cleanup() { for p in $pids; do stop_pid "$p"; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM

pass=0
fail=0
ok() { pass=$((pass + 1)); say "ok   $*"; }
bad() { fail=$((fail + 1)); say "FAIL $*"; }

# start_bg LOG PORT CMD... : start a server listening on PORT, wait for it.
start_bg() {
    log=$1; port=$2; shift 2
    "$@" >"$log" 2>&1 &
    bg_pid=$!
    pids="$pids $bg_pid"
    wait_port "$port" "$bg_pid" || { cat "$log"; return 1; }
}

# ---- A. SDK client -> our server ------------------------------------------
if node "$here/sdk_client.mjs" stdio "$ACP" mcp serve --stdio --everything >"$work/a-stdio.log" 2>&1; then
    ok "SDK client -> acp mcp serve --stdio ($(tail -n 1 "$work/a-stdio.log"))"
else
    cat "$work/a-stdio.log"; bad "SDK client -> acp mcp serve --stdio"
fi

port=$(free_port)
if start_bg "$work/acp-http.log" "$port" "$ACP" mcp serve --everything --http "127.0.0.1:$port"; then
    acp_http_pid=$bg_pid
    for t in "http http://127.0.0.1:$port/mcp" "sse http://127.0.0.1:$port/sse"; do
        set -- $t
        if node "$here/sdk_client.mjs" "$1" "$2" >"$work/a-$1.log" 2>&1; then
            ok "SDK client -> acp mcp serve --http ($1: $(tail -n 1 "$work/a-$1.log"))"
        else
            cat "$work/a-$1.log"; bad "SDK client -> acp mcp serve --http ($1)"
        fi
    done
    kill -0 "$acp_http_pid" 2>/dev/null || { cat "$work/acp-http.log"; bad "acp mcp serve --http died"; }
    stop_pid "$acp_http_pid"
else
    bad "acp mcp serve --http did not start"
fi

# ---- B. our client -> server-everything -----------------------------------
# expect NAME NEEDLE OUTFILE CMD... : run CMD, pass when it exits 0 and its
# stdout contains NEEDLE.
expect() {
    name=$1; needle=$2; outf=$3; shift 3
    if "$@" >"$outf" 2>"$outf.err" && grep -q -- "$needle" "$outf"; then
        ok "$name"
    else
        say "stdout:"; cat "$outf"; say "stderr:"; cat "$outf.err"
        bad "$name"
    fi
}

# client_suite LABEL TARGET-ARGS... : the four operations through one
# transport. TARGET-ARGS is "--url URL" or "--stdio CMD ARGS... --".
client_suite() {
    label=$1; shift
    expect "acp mcp tools ($label)" "trigger-long-running-operation" "$work/b-$label-tools" \
        "$ACP" mcp tools "$@"
    expect "acp mcp call with progress ($label)" "Long running operation completed" "$work/b-$label-call" \
        "$ACP" mcp call "$@" trigger-long-running-operation duration=1 steps=3
    if grep -qi "progress\|3/3\|[0-9]/3" "$work/b-$label-call.err"; then
        ok "progress on stderr ($label)"
    else
        say "stderr:"; cat "$work/b-$label-call.err"; bad "progress on stderr ($label)"
    fi
    expect "acp mcp read ($label)" "Resource 1" "$work/b-$label-read" \
        "$ACP" mcp read "$@" demo://resource/dynamic/text/1
    expect "acp mcp get ($label)" "This is a simple prompt without arguments." "$work/b-$label-get" \
        "$ACP" mcp get "$@" simple-prompt
}

# stdio: for tools the command ends the line; call/read/get need "--".
expect "acp mcp tools (stdio)" "trigger-long-running-operation" "$work/b-stdio-tools0" \
    "$ACP" mcp tools --stdio node "$SE" stdio
client_suite stdio --stdio node "$SE" stdio --

port=$(free_port)
if start_bg "$work/se-http.log" "$port" env PORT="$port" node --require "$here/listen_loopback.cjs" "$SE" streamableHttp; then
    client_suite streamable --url "http://127.0.0.1:$port/mcp"
    stop_pid "$bg_pid"
else
    bad "server-everything streamableHttp did not start"
fi

port=$(free_port)
if start_bg "$work/se-sse.log" "$port" env PORT="$port" node --require "$here/listen_loopback.cjs" "$SE" sse; then
    client_suite legacy-sse --url "http://127.0.0.1:$port/sse"
    stop_pid "$bg_pid"
else
    bad "server-everything sse did not start"
fi

say "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
